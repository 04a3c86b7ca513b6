// Operation state names and transitions; see operation.h and docs/state-machine.md.
#include "core/operation.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/check.h"
#include "core/mutants.h"

namespace agentpay {
namespace {

template <typename E, size_t N>
std::optional<E> ParseName(const std::array<std::pair<E, std::string_view>, N>& names,
                           std::string_view text) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& names, E value) {
  for (const auto& [candidate, name] : names) {
    if (candidate == value) return name;
  }
  AGENTPAY_CHECK(false);
}

constexpr std::array<std::pair<Intent, std::string_view>, 2> kIntentNames{{
    {Intent::kAccepted, "accepted"},
    {Intent::kRejected, "rejected"},
}};
constexpr std::array<std::pair<Settlement, std::string_view>, 8> kSettlementNames{{
    {Settlement::kNone, "none"},
    {Settlement::kHeld, "held"},
    {Settlement::kSubmitted, "submitted"},
    {Settlement::kUnknown, "unknown"},
    {Settlement::kSettled, "settled"},
    {Settlement::kReleased, "released"},
    {Settlement::kVoid, "void"},
    {Settlement::kFailed, "failed"},
}};
constexpr std::array<std::pair<Fulfillment, std::string_view>, 5> kFulfillmentNames{{
    {Fulfillment::kNotStarted, "not_started"},
    {Fulfillment::kInProgress, "in_progress"},
    {Fulfillment::kSucceeded, "succeeded"},
    {Fulfillment::kPendingRetry, "pending_retry"},
    {Fulfillment::kRejected, "rejected"},
}};

}  // namespace

std::string_view IntentName(Intent value) { return NameOf(kIntentNames, value); }
std::string_view SettlementName(Settlement value) { return NameOf(kSettlementNames, value); }
std::string_view FulfillmentName(Fulfillment value) { return NameOf(kFulfillmentNames, value); }
std::optional<Intent> ParseIntent(std::string_view text) { return ParseName(kIntentNames, text); }
std::optional<Settlement> ParseSettlement(std::string_view text) {
  return ParseName(kSettlementNames, text);
}
std::optional<Fulfillment> ParseFulfillment(std::string_view text) {
  return ParseName(kFulfillmentNames, text);
}

std::string_view TraceActorName(TraceActor actor) {
  switch (actor) {
    case TraceActor::kClient:
      return "client";
    case TraceActor::kGateway:
      return "gateway";
    case TraceActor::kUpstream:
      return "upstream";
    case TraceActor::kLedger:
      return "ledger";
    case TraceActor::kChain:
      return "chain";
    case TraceActor::kWorker:
      return "worker";
    case TraceActor::kAdmin:
      return "admin";
  }
  AGENTPAY_CHECK(false);
}

std::optional<TraceActor> ParseTraceActor(std::string_view text) {
  for (TraceActor actor : kTraceActors) {
    if (TraceActorName(actor) == text) return actor;
  }
  return std::nullopt;
}

bool IsFinal(const Operation& op) {
  return op.fulfillment == Fulfillment::kSucceeded || op.fulfillment == Fulfillment::kRejected;
}

Operation NewAcceptedOperation(const std::string& id, const std::string& principal,
                               const std::string& idempotency_key, const std::string& fingerprint,
                               const std::string& route, int64_t amount, int64_t now_ms) {
  AGENTPAY_CHECK(amount > 0);
  Operation op;
  op.id = id;
  op.principal = principal;
  op.idempotency_key = idempotency_key;
  op.fingerprint = fingerprint;
  op.route = route;
  op.amount = amount;
  op.intent = Intent::kAccepted;
  op.created_ms = now_ms;
  op.updated_ms = now_ms;
  return op;
}

Operation NewWalletOperation(const WalletOperationParams& params, int64_t now_ms) {
  Operation op = NewAcceptedOperation(params.id, params.principal, params.idempotency_key,
                                      params.fingerprint, params.route, params.amount, now_ms);
  op.settlement = Settlement::kHeld;
  op.fulfillment = Fulfillment::kInProgress;
  op.hold_expires_ms = now_ms + params.hold_ttl_ms;
  op.lease_expires_ms = now_ms + params.lease_ms;
  op.claimed_by = params.claimant;
  op.attempts = 1;
  return op;
}

Resumption ResumeWalletOperation(const Operation& op, int64_t now_ms, int64_t hold_ttl_ms,
                                 int64_t lease_ms, const std::string& claimant) {
  AGENTPAY_CHECK(!IsFinal(op));
  Resumption resumption{op, false};
  Operation& next = resumption.next;
  if (op.settlement != Settlement::kHeld) {
    // The sweeper released the kept hold; the retry must hold the price again before calling.
    resumption.needs_hold = true;
    next.settlement = Settlement::kHeld;
    next.hold_expires_ms = now_ms + hold_ttl_ms;
  }
  next.fulfillment = Fulfillment::kInProgress;
  next.lease_expires_ms = now_ms + lease_ms;
  next.claimed_by = claimant;
  next.attempts = op.attempts + 1;
  next.updated_ms = now_ms;
  return resumption;
}

Verdict ClassifyUpstream(const UpstreamOutcome& outcome) {
  switch (outcome.kind) {
    case UpstreamKind::kResponded:
      if (outcome.status >= 500) return Verdict::kKeep;
      if (outcome.status >= 400) return Verdict::kRelease;
      return Verdict::kCapture;
    case UpstreamKind::kTimeout:
    case UpstreamKind::kFailed:
      return Verdict::kKeep;
  }
  AGENTPAY_CHECK(false);
}

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kCapture: return "capture";
    case Verdict::kRelease: return "release";
    case Verdict::kKeep: return "keep";
  }
  AGENTPAY_CHECK(false);
}

Completion CompleteWalletOperation(const Operation& op, const UpstreamOutcome& outcome,
                                   int64_t now_ms, int64_t retention_ms) {
  AGENTPAY_CHECK(op.fulfillment == Fulfillment::kInProgress);
  AGENTPAY_CHECK(op.settlement == Settlement::kHeld);
  Completion completion{ClassifyUpstream(outcome), op, std::nullopt};
  if (outcome.kind != UpstreamKind::kResponded) {  // the wallet's mutants (core/mutants.h)
    if (MutantActive(Mutant::kTimeoutIsSuccess)) completion.verdict = Verdict::kCapture;
    if (MutantActive(Mutant::kReleaseOnTimeout)) completion.verdict = Verdict::kRelease;
  }
  Operation& next = completion.next;
  next.updated_ms = now_ms;
  next.lease_expires_ms = 0;
  // The upstream's answer is what a capture or a release stores. Only a mutant (core/mutants.h)
  // captures or releases without one; it answers as a gateway with that flaw would: 200 for a
  // timeout taken as success, 504 for a hold released on a timeout.
  const int status = outcome.kind == UpstreamKind::kResponded  ? outcome.status
                     : completion.verdict == Verdict::kCapture ? 200
                                                               : 504;
  switch (completion.verdict) {
    case Verdict::kCapture:
      completion.move = MoveKind::kCapture;
      next.settlement = Settlement::kSettled;
      next.fulfillment = Fulfillment::kSucceeded;
      next.hold_expires_ms.reset();
      next.response = StoredResponse{status, outcome.content_type, outcome.body};
      break;
    case Verdict::kRelease:
      completion.move = MoveKind::kRelease;
      next.settlement = Settlement::kReleased;
      next.fulfillment = Fulfillment::kRejected;
      next.hold_expires_ms.reset();
      next.response = StoredResponse{status, outcome.content_type, outcome.body};
      break;
    case Verdict::kKeep:
      next.fulfillment = Fulfillment::kPendingRetry;
      break;
  }
  if (IsFinal(next)) next.retained_until_ms = now_ms + retention_ms;
  return completion;
}

std::optional<HoldExpiry> ExpireHold(const Operation& op, int64_t now_ms) {
  if (op.settlement != Settlement::kHeld || !op.hold_expires_ms || now_ms < *op.hold_expires_ms ||
      IsFinal(op)) {
    return std::nullopt;
  }
  // A live attempt will capture, release or keep on its own; its claim outlives the hold.
  if (op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > now_ms) {
    return std::nullopt;
  }
  HoldExpiry expiry{op, ""};
  Operation& next = expiry.next;
  expiry.reason = op.fulfillment == Fulfillment::kInProgress
                      ? "the hold expired while attempt " + std::to_string(op.attempts) +
                            " was presumed dead (its claim lapsed mid-call)"
                      : "the hold expired after " + std::to_string(op.attempts) +
                            " upstream attempt(s) without a final answer (5xx, timeout, dropped "
                            "connection or crash)";
  expiry.reason += "; the upstream may have done the work";
  next.settlement = Settlement::kReleased;
  next.fulfillment = Fulfillment::kPendingRetry;
  next.hold_expires_ms.reset();
  next.lease_expires_ms = 0;
  next.updated_ms = now_ms;
  return expiry;
}

std::optional<std::string> WalletAccountOf(std::string_view principal) {
  constexpr std::string_view kPrefix = "account:";
  if (!principal.starts_with(kPrefix) || principal.size() == kPrefix.size()) return std::nullopt;
  return std::string(principal.substr(kPrefix.size()));
}

std::string UpstreamReasonCode(const UpstreamOutcome& outcome) {
  switch (outcome.kind) {
    case UpstreamKind::kResponded:
      return "upstream_" + std::to_string(std::clamp(outcome.status / 100, 1, 5)) + "xx";
    case UpstreamKind::kTimeout:
      return "upstream_timeout";
    case UpstreamKind::kFailed:
      return "upstream_unreachable";
  }
  AGENTPAY_CHECK(false);
}

std::vector<TraceEvent> BuildTrace(const Operation& op, const std::vector<PostingRecord>& postings,
                                   const std::vector<TraceEvent>& events) {
  std::vector<TraceEvent> trace;
  trace.push_back(
      {op.id, op.created_ms, TraceActor::kClient, "request",
       "key " + op.idempotency_key + ", " + std::to_string(op.amount) + " on route " + op.route,
       TraceFacts().Attempt(1).Amount(op.amount)});
  for (const auto& posting : postings) {
    const std::string kind(MoveKindName(posting.kind));
    trace.push_back({op.id, posting.at_ms, TraceActor::kLedger, kind,
                     kind + " " + std::to_string(posting.amount) + ": " + posting.debit + " -> " +
                         posting.credit,
                     TraceFacts().Amount(posting.amount)});
  }
  trace.insert(trace.end(), events.begin(), events.end());
  if (op.response) {
    // The answer's time is not stored: the operation's last change, or its first replay if that is
    // earlier (a later change, such as a settlement the reconciler saw or a resolution, moves
    // updated_ms; a replay can only follow the answer).
    int64_t answered_ms = op.updated_ms;
    for (const TraceEvent& e : events) {
      if (e.actor == TraceActor::kClient && e.kind == "replayed")
        answered_ms = std::min(answered_ms, e.at_ms);
    }
    trace.push_back({op.id, answered_ms, TraceActor::kUpstream, "response",
                     "answered " + std::to_string(op.response->status) + "; fulfillment " +
                         std::string(FulfillmentName(op.fulfillment)),
                     TraceFacts().Attempt(op.attempts).HttpStatus(op.response->status)});
  }
  // Stable, and at equal times causal (operation.h); the rows of one table keep their order.
  auto rank = [](const TraceEvent& e) {
    if (e.actor == TraceActor::kClient && e.kind == "request") return 0;
    if (e.kind == "retry_resumed") return 1;
    if (e.actor == TraceActor::kLedger) return 2;
    if (e.actor == TraceActor::kUpstream && e.kind == "response") return 4;
    if (e.actor == TraceActor::kClient && e.kind == "replayed") return 5;
    return 3;
  };
  std::stable_sort(trace.begin(), trace.end(), [&](const TraceEvent& a, const TraceEvent& b) {
    return a.at_ms != b.at_ms ? a.at_ms < b.at_ms : rank(a) < rank(b);
  });
  return trace;
}

std::optional<Operation> RecoverInterrupted(const Operation& op, int64_t now_ms,
                                            bool claimant_alive) {
  AGENTPAY_CHECK(op.fulfillment == Fulfillment::kInProgress);
  const bool lease_live = op.lease_expires_ms > now_ms;
  if (lease_live && !op.claimed_by.empty() && claimant_alive) return std::nullopt;
  Operation next = op;
  next.fulfillment = Fulfillment::kPendingRetry;
  next.lease_expires_ms = 0;
  next.updated_ms = now_ms;
  return next;
}

}  // namespace agentpay
