// See events.h.
#include "settlement/events.h"

namespace agentpay {

std::string_view SettlementEventName(SettlementEvent event) {
  switch (event) {
    case SettlementEvent::kSettled: return "settled";
    case SettlementEvent::kUnknown: return "unknown";
    case SettlementEvent::kFailed: return "failed";
    case SettlementEvent::kBroadcastError: return "broadcast_error";
    case SettlementEvent::kReconcilerRuns: return "reconciler_run";
    case SettlementEvent::kReconcilerErrors: return "reconciler_error";
    case SettlementEvent::kReconciledSettled: return "reconciled_settled";
    case SettlementEvent::kRebroadcast: return "rebroadcast";
    case SettlementEvent::kVoid: return "void";
    case SettlementEvent::kReconciledFailed: return "reconciled_failed";
    case SettlementEvent::kGapFilled: return "relayer_gap_filled";
    case SettlementEvent::kGapNoop:
      return "relayer_gap_noop";
    case SettlementEvent::kReplaced:
      return "replaced";
    case SettlementEvent::kReorganised:
      return "reorganised";
    case SettlementEvent::kCount: break;
  }
  return "?";
}

}  // namespace agentpay
