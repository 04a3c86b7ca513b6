// The reconciler's look; see reconciler_look.h for its tables (RQ1–RQ3, RL1–RL9).
#include "core/reconciler_look.h"

#include "core/check.h"

namespace agentpay {

bool AsksForReplacement(const ChainObservation& seen, bool held_at_next_nonce, int64_t age_ms,
                        int64_t replace_after_ms, int64_t now_s, int64_t valid_before_s) {
  return seen.receipt == ReceiptView::kNone && !seen.nonce_used &&
         (held_at_next_nonce || age_ms >= replace_after_ms) &&  // RQ1, RQ2
         now_s < valid_before_s;
}

std::string_view ReconcilerOutcomeName(ReconcilerOutcome outcome) {
  switch (outcome) {
    case ReconcilerOutcome::kWait:
      return "wait";
    case ReconcilerOutcome::kReplace:
      return "replace";
    case ReconcilerOutcome::kSettle:
      return "settle";
    case ReconcilerOutcome::kRebroadcast:
      return "rebroadcast";
    case ReconcilerOutcome::kVoid:
      return "void";
    case ReconcilerOutcome::kFail:
      return "fail";
    case ReconcilerOutcome::kLostAfterDelivery:
      return "lost_after_delivery";
  }
  AGENTPAY_CHECK(false);
}

ReconcilerLook DecideReconcilerLook(const Operation& op, ReconcileAction action,
                                    const ChainObservation& seen, bool has_replacement) {
  ReconcilerLook look;
  look.action = action;
  look.mark_unknown = op.settlement == Settlement::kSubmitted;  // RL1
  // A submitted operation marked unknown is not final (MarkUnknown leaves its attempt pending).
  const bool final_op = !look.mark_unknown && IsFinal(op);
  const bool pending =
      action == ReconcileAction::kWait && seen.tx_known && seen.receipt == ReceiptView::kNone;
  if (has_replacement && (pending || action == ReconcileAction::kRebroadcast)) {  // RL2, RL3
    look.outcome = ReconcilerOutcome::kReplace;
    look.action = ReconcileAction::kWait;  // the replacement is this decision's broadcast
    look.broadcast = true;
    return look;
  }
  switch (action) {
    case ReconcileAction::kMarkSettled:  // RL4
      look.outcome = ReconcilerOutcome::kSettle;
      look.resolved = true;
      return look;
    case ReconcileAction::kRebroadcast:  // RL5
      look.outcome = ReconcilerOutcome::kRebroadcast;
      look.broadcast = true;
      return look;
    case ReconcileAction::kMarkVoid:
    case ReconcileAction::kMarkFailed: {
      const bool void_ = action == ReconcileAction::kMarkVoid;
      if (final_op) {  // RL6
        look.outcome = ReconcilerOutcome::kLostAfterDelivery;
        look.lost_as = void_ ? Settlement::kVoid : Settlement::kFailed;
      } else {  // RL7, RL8
        look.outcome = void_ ? ReconcilerOutcome::kVoid : ReconcilerOutcome::kFail;
      }
      look.broadcast = void_ && !seen.tx_known;
      look.resolved = true;
      return look;
    }
    case ReconcileAction::kWait:  // RL9
      return look;
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
