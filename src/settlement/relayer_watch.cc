// See relayer_watch.h.
#include "settlement/relayer_watch.h"

namespace agentpay {

RelayerWatch::RelayerWatch(Settler& settler) : settler_(settler) {
  reading_.relayer = settler_.RelayerHex();
}

void RelayerWatch::Refresh(int64_t now_ms) {
  auto balance = settler_.chain().NativeBalance(settler_.relayer());
  Result<uint64_t> mined = balance.ok() ? settler_.chain().MinedNonce(settler_.relayer())
                                        : Result<uint64_t>(balance.status());
  std::lock_guard lock(mutex_);
  if (!mined.ok()) {
    reading_.error = mined.status().message();
    return;
  }
  reading_.balance_wei = *balance;
  reading_.charges_gas = balance->has_value();
  reading_.mined_nonce = *mined;
  reading_.read_ms = now_ms;
  reading_.error.clear();
}

RelayerReading RelayerWatch::Latest() const {
  std::lock_guard lock(mutex_);
  return reading_;
}

}  // namespace agentpay
