// The x402 request's wait for its receipt; see receipt_wait.h for the table (RW1–RW10).
#include "core/receipt_wait.h"

#include "core/check.h"

namespace agentpay {

std::string_view ReceiptStepName(ReceiptStep step) {
  switch (step) {
    case ReceiptStep::kObserve:
      return "observe";
    case ReceiptStep::kLookAgain:
      return "look_again";
    case ReceiptStep::kSettled:
      return "settled";
    case ReceiptStep::kFailed:
      return "failed";
    case ReceiptStep::kUnknown:
      return "unknown";
  }
  AGENTPAY_CHECK(false);
}

ReceiptStep AfterReceiptLook(ReceiptSeen seen, bool deadline_passed) {
  switch (seen) {
    case ReceiptSeen::kLookFailed:  // RW1, RW2
      return deadline_passed ? ReceiptStep::kUnknown : ReceiptStep::kLookAgain;
    case ReceiptSeen::kNone:  // RW3, RW4
      return deadline_passed ? ReceiptStep::kObserve : ReceiptStep::kLookAgain;
    case ReceiptSeen::kPaidUs:
    case ReceiptSeen::kMinedOtherwise:
      return ReceiptStep::kObserve;  // RW5
  }
  AGENTPAY_CHECK(false);
}

ReceiptStep AfterReceiptObservation(ReceiptSeen seen, std::optional<ReconcileAction> reconciled,
                                    bool deadline_passed) {
  // Only a look that saw something, or the last one, is followed by a full look.
  AGENTPAY_CHECK(seen != ReceiptSeen::kLookFailed);
  if (reconciled == ReconcileAction::kMarkSettled) return ReceiptStep::kSettled;  // RW6
  if (reconciled == ReconcileAction::kMarkFailed) return ReceiptStep::kFailed;    // RW7
  if (seen == ReceiptSeen::kMinedOtherwise) return ReceiptStep::kUnknown;         // RW8
  return deadline_passed ? ReceiptStep::kUnknown : ReceiptStep::kLookAgain;       // RW9, RW10
}

}  // namespace agentpay
