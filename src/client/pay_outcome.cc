// The names of PayOutcome (include/agentpay/client.h): what `agentpay pay --json` prints as
// "outcome" and docs/agent-client.md lists, so they never change.
#include "agentpay/client.h"
#include "core/check.h"

namespace agentpay::client {

std::string_view PayOutcomeName(PayOutcome outcome) {
  switch (outcome) {
    case PayOutcome::kPaid:
      return "paid";
    case PayOutcome::kFree:
      return "free";
    case PayOutcome::kRejected:
      return "rejected";
    case PayOutcome::kUnknown:
      return "unknown";
    case PayOutcome::kPaidNotDelivered:
      return "paid_not_delivered";
    case PayOutcome::kOverBudget:
      return "over_budget";
    case PayOutcome::kRefused:
      return "refused";
    case PayOutcome::kError:
      return "error";
  }
  AGENTPAY_CHECK(false);
}

std::optional<PayOutcome> ParsePayOutcome(std::string_view text) {
  for (PayOutcome outcome : kPayOutcomes) {
    if (PayOutcomeName(outcome) == text) return outcome;
  }
  return std::nullopt;
}

}  // namespace agentpay::client
