// Alert resolutions; see resolution.h.
#include "core/resolution.h"

#include "core/check.h"

namespace agentpay {

std::string_view ResolutionOutcomeName(ResolutionOutcome outcome) {
  switch (outcome) {
    case ResolutionOutcome::kDelivered: return "delivered";
    case ResolutionOutcome::kRefunded: return "refunded";
    case ResolutionOutcome::kWrittenOff: return "written_off";
    case ResolutionOutcome::kNoAction: return "no_action";
  }
  AGENTPAY_CHECK(false);
}

std::optional<ResolutionOutcome> ParseResolutionOutcome(std::string_view text) {
  for (ResolutionOutcome outcome :
       {ResolutionOutcome::kDelivered, ResolutionOutcome::kRefunded, ResolutionOutcome::kWrittenOff,
        ResolutionOutcome::kNoAction}) {
    if (ResolutionOutcomeName(outcome) == text) return outcome;
  }
  return std::nullopt;
}

std::string_view ResolveDecisionName(ResolveDecision decision) {
  switch (decision) {
    case ResolveDecision::kResolve: return "resolve";
    case ResolveDecision::kReplay: return "replay";
    case ResolveDecision::kConflict: return "conflict";
    case ResolveDecision::kNoAlerts: return "no_alerts";
  }
  AGENTPAY_CHECK(false);
}

const Alert* LatestResolution(const std::vector<Alert>& alerts) {
  const Alert* latest = nullptr;
  for (const Alert& alert : alerts) {
    if (!alert.resolved_ms) continue;
    if (latest == nullptr || *alert.resolved_ms > *latest->resolved_ms ||
        (*alert.resolved_ms == *latest->resolved_ms && alert.id > latest->id)) {
      latest = &alert;
    }
  }
  return latest;
}

ResolveDecision DecideResolve(const std::vector<Alert>& alerts, ResolutionOutcome outcome,
                              std::string_view note) {
  if (alerts.empty()) return ResolveDecision::kNoAlerts;
  for (const Alert& alert : alerts) {
    if (!alert.resolved_ms) return ResolveDecision::kResolve;
  }
  const Alert* latest = LatestResolution(alerts);
  AGENTPAY_CHECK(latest != nullptr);
  if (latest->resolution == ResolutionOutcomeName(outcome) && latest->note == note) {
    return ResolveDecision::kReplay;
  }
  return ResolveDecision::kConflict;
}

Alert ResolveAlert(const Alert& alert, ResolutionOutcome outcome, const std::string& note,
                   int64_t now_ms) {
  AGENTPAY_CHECK(!alert.resolved_ms.has_value());
  Alert resolved = alert;
  resolved.resolved_ms = now_ms;
  resolved.resolution = std::string(ResolutionOutcomeName(outcome));
  resolved.note = note;
  return resolved;
}

int64_t RefundableAmount(const std::vector<PostingRecord>& postings) {
  int64_t captured = 0;
  for (const PostingRecord& posting : postings) {
    switch (posting.kind) {
      case MoveKind::kCapture:
        captured += posting.amount;
        break;
      case MoveKind::kRefund:
        captured -= posting.amount;
        break;
      case MoveKind::kDeposit:
      case MoveKind::kHold:
      case MoveKind::kRelease:
        break;
    }
  }
  AGENTPAY_CHECK(captured >= 0);  // the ledger never refunds more than an operation captured
  return captured;
}

}  // namespace agentpay
