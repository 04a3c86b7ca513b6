// What the operator console shows of the relayer (docs/console.md): the gas it has left and how far
// the chain has mined its transactions. A background worker reads it from the chain at most once
// per interval (three calls: eth_getBalance, eth_getTransactionCount latest and pending); an
// admin request only reads the last reading, so a console left open all day costs the node
// nothing more. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "chain/bytes.h"
#include "settlement/settler.h"

namespace agentpay {

struct RelayerReading {
  std::string relayer;  // lower-case 0x hex
  // The relayer's native balance in wei; nullopt before the first reading, and from a chain that
  // charges no gas (then `charges_gas` is false).
  std::optional<chain::U256> balance_wei;
  bool charges_gas = true;
  std::optional<uint64_t> mined_nonce;    // its transactions the chain has mined
  std::optional<uint64_t> pending_nonce;  // the same, counting those the node holds unmined
  int64_t read_ms = 0;                  // when the last reading succeeded (0: never)
  std::string error;                    // why the last attempt failed ("" when it did not)
};

class RelayerWatch {
 public:
  // `settler` outlives the watch.
  explicit RelayerWatch(Settler& settler);

  // Reads the chain now (the caller paces it); on failure the last good values stay and `error`
  // says why.
  void Refresh(int64_t now_ms);
  RelayerReading Latest() const;

 private:
  Settler& settler_;
  mutable std::mutex mutex_;
  RelayerReading reading_;
};

}  // namespace agentpay
