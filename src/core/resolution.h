// Admin resolutions of alerts (CONTRACT §3 `POST /admin/v1/operations/{id}/resolve`): the outcomes
// an operator may record and the pure decision on a resolve request. What each outcome does to money
// is in docs/wallet-ledger.md §6; the shell applies it in the same decision as the resolution.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/operation.h"

namespace agentpay {

// delivered: the work reached the buyer; the recorded charge stands. refunded: whatever the buyer
// was charged for the operation goes back (wallet: a `refund` move). written_off: the work the
// upstream may have done goes unpaid. no_action: nothing to correct. None changes the operation's
// states: a later retry of its key is decided as before.
enum class ResolutionOutcome { kDelivered, kRefunded, kWrittenOff, kNoAction };

std::string_view ResolutionOutcomeName(ResolutionOutcome outcome);
std::optional<ResolutionOutcome> ParseResolutionOutcome(std::string_view text);

inline constexpr size_t kMaxResolutionNoteLength = 1000;

enum class ResolveDecision {
  kResolve,   // open alerts: resolve every one of them now
  kReplay,    // none open, and the latest resolution has this outcome and note: answer it again
  kConflict,  // none open, resolved with another outcome or note: 409 already_resolved
  kNoAlerts,  // the operation never had an alert: 409 no_alerts
};
std::string_view ResolveDecisionName(ResolveDecision decision);

// `alerts` are all of one operation's alerts.
ResolveDecision DecideResolve(const std::vector<Alert>& alerts, ResolutionOutcome outcome,
                              std::string_view note);

// The most recently resolved alert (latest resolved_ms, then greatest id), or nullptr.
const Alert* LatestResolution(const std::vector<Alert>& alerts);

// `alert` resolved now. Precondition: it is open.
Alert ResolveAlert(const Alert& alert, ResolutionOutcome outcome, const std::string& note,
                   int64_t now_ms);

// What a `refunded` resolution returns to a wallet: the operation's captures less its earlier
// refunds, from its postings (never negative).
int64_t RefundableAmount(const std::vector<PostingRecord>& postings);

}  // namespace agentpay
