// See relayer_watch.h.
#include "settlement/relayer_watch.h"

namespace agentpay {

RelayerWatch::RelayerWatch(Settler& settler) : settler_(settler) {
  reading_.relayer = settler_.RelayerHex();
}

void RelayerWatch::Refresh(int64_t now_ms) {
  chain::Chain& chain = settler_.chain();
  auto balance = chain.NativeBalance(settler_.relayer());
  Result<uint64_t> mined =
      balance.ok() ? chain.MinedNonce(settler_.relayer()) : Result<uint64_t>(balance.status());
  Result<uint64_t> pending =
      mined.ok() ? chain.PendingNonce(settler_.relayer()) : Result<uint64_t>(mined.status());
  std::lock_guard lock(mutex_);
  if (!pending.ok()) {
    reading_.error = pending.status().message();
    return;
  }
  reading_.balance_wei = *balance;
  reading_.charges_gas = balance->has_value();
  reading_.mined_nonce = *mined;
  reading_.pending_nonce = *pending;
  reading_.read_ms = now_ms;
  reading_.error.clear();
}

RelayerReading RelayerWatch::Latest() const {
  std::lock_guard lock(mutex_);
  return reading_;
}

}  // namespace agentpay
