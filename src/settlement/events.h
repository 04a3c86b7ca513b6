// x402 settlement events and the counter they go to. The gateway's own attempts and the reconciler
// (a worker) both count them; the gateway's Metrics implements the counter and renders /metrics.
#pragma once

#include <cstdint>
#include <string_view>

namespace agentpay {

// x402 settlement events, by the gateway's own attempts and by the reconciler.
enum class SettlementEvent {
  kSettled,           // receipt seen within the receipt timeout
  kUnknown,           // not seen in time: 202 settlement_unknown
  kFailed,            // nonce spent by another transaction
  kBroadcastError,    // the node refused or did not answer a broadcast
  kReconcilerRuns,    // reconciler passes
  kReconcilerErrors,  // reconciler passes (or operations) that failed on the chain or store
  kReconciledSettled,
  kRebroadcast,
  kVoid,
  kReconciledFailed,
  kGapFilled,    // a stored transaction re-sent to fill the relayer's next nonce
  kGapNoop,      // a no-op sent at a relayer nonce the node lacks and nothing stored fills
  kReplaced,     // a stuck transaction replaced at its relayer nonce with a higher fee
  kReorganised,  // a settled operation sent back: its block was reorganised away
  kCount,
};
// The event's label on /metrics.
std::string_view SettlementEventName(SettlementEvent event);

// Where settlement events are counted; passed in, so that the workers count into the gateway's
// metrics without depending on the gateway. Implementations are thread-safe.
class SettlementCounter {
 public:
  virtual ~SettlementCounter() = default;
  virtual void CountSettlement(SettlementEvent event, uint64_t count) = 0;
};

}  // namespace agentpay
