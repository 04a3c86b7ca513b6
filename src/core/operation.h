// One paid operation and its three tracked states (CONTRACT §3): intent, settlement, fulfillment.
// The transitions are pure functions from (operation, input, now) to the next operation; the shell
// persists what they return, together with the ledger moves they name, in one transaction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wallet.h"

namespace agentpay {

enum class Intent { kAccepted, kRejected };
enum class Settlement { kNone, kHeld, kSubmitted, kUnknown, kSettled, kReleased, kVoid, kFailed };
enum class Fulfillment { kNotStarted, kInProgress, kSucceeded, kPendingRetry, kRejected };

std::string_view IntentName(Intent value);
std::string_view SettlementName(Settlement value);
std::string_view FulfillmentName(Fulfillment value);
std::optional<Intent> ParseIntent(std::string_view text);
std::optional<Settlement> ParseSettlement(std::string_view text);
std::optional<Fulfillment> ParseFulfillment(std::string_view text);

// The answer the gateway gave once an operation finished; replayed verbatim for a retried key.
struct StoredResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  bool operator==(const StoredResponse&) const = default;
};

struct Operation {
  std::string id;
  std::string principal;        // "account:<id>" for the wallet, "payer:<address>" for x402
  std::string idempotency_key;
  std::string fingerprint;      // hex SHA-256 of the request (see FingerprintMaterial in idempotency.h)
  std::string route;            // the route prefix it was paid on
  int64_t amount = 0;
  Intent intent = Intent::kAccepted;
  Settlement settlement = Settlement::kNone;
  Fulfillment fulfillment = Fulfillment::kNotStarted;
  std::optional<int64_t> hold_expires_ms;
  int64_t lease_expires_ms = 0;  // while in_progress: after this, the attempt is presumed dead
  // The gateway process instance whose attempt took the latest claim (the one that set
  // lease_expires_ms); it decides the claim's fate only while in_progress: crash recovery takes a
  // claim over only when this instance is no longer alive (Store::InstanceAlive) or the lease has
  // expired. Empty on rows written before claims were recorded.
  std::string claimed_by;
  int32_t attempts = 0;          // upstream calls started
  std::optional<StoredResponse> response;  // set once fulfillment is final
  // Set once final: the stored result (and the key's memory of it) lasts until then.
  std::optional<int64_t> retained_until_ms;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  bool operator==(const Operation&) const = default;
};

// Final fulfillment: the stored response is the answer for every later retry of the key.
bool IsFinal(const Operation& op);

struct WalletOperationParams {
  std::string id, principal, idempotency_key, fingerprint, route;
  int64_t amount = 0;
  int64_t hold_ttl_ms = 0;
  int64_t lease_ms = 0;
  std::string claimant;  // the instance id of the gateway process taking the claim
};

// The fields every new operation starts with: who, which key and request, which route and price,
// intent accepted, created now. Precondition: amount > 0.
Operation NewAcceptedOperation(const std::string& id, const std::string& principal,
                               const std::string& idempotency_key, const std::string& fingerprint,
                               const std::string& route, int64_t amount, int64_t now_ms);

// A new wallet operation whose hold is placed and whose first upstream call starts now.
Operation NewWalletOperation(const WalletOperationParams& params, int64_t now_ms);

// A retry of a kept (or swept) operation: claims the next upstream attempt for the gateway process
// `claimant` (its instance id). `needs_hold` tells the shell to place a new hold because the
// previous one was released by the sweeper.
struct Resumption {
  Operation next;
  bool needs_hold = false;
};
Resumption ResumeWalletOperation(const Operation& op, int64_t now_ms, int64_t hold_ttl_ms,
                                 int64_t lease_ms, const std::string& claimant);

// What the upstream did, as the gateway saw it.
enum class UpstreamKind {
  kResponded,  // a complete HTTP response
  kTimeout,    // no complete answer within the route's timeout
  kFailed,     // connection refused, reset, closed without an answer, or an unreadable response
};
struct UpstreamOutcome {
  UpstreamKind kind = UpstreamKind::kFailed;
  int status = 0;
  std::string content_type;
  std::string body;
  std::string detail;
};
// The stable reason code of an upstream outcome in a trace: "upstream_2xx" … "upstream_5xx",
// "upstream_timeout" or "upstream_unreachable".
std::string UpstreamReasonCode(const UpstreamOutcome& outcome);

// Wallet rule (CONTRACT §4): capture on 2xx (and 1xx/3xx, a delivered answer), release on 4xx, keep
// on 5xx, timeout or failure, where the upstream may have done the work.
enum class Verdict { kCapture, kRelease, kKeep };
Verdict ClassifyUpstream(const UpstreamOutcome& outcome);
std::string_view VerdictName(Verdict verdict);

struct Completion {
  Verdict verdict;
  Operation next;
  std::optional<MoveKind> move;  // the ledger move to apply with the transition, if any
};
// Precondition: op.fulfillment == kInProgress and op.settlement == kHeld.
Completion CompleteWalletOperation(const Operation& op, const UpstreamOutcome& outcome,
                                   int64_t now_ms, int64_t retention_ms);

// Crash recovery (T12): an upstream call that was in progress when its gateway process died may
// have been executed: the hold (or settlement) is kept and the operation waits for a retry
// (fulfillment pending_retry). Only a dead attempt is taken over: its lease has expired, or its
// claimant instance is gone (`claimant_alive` false: the shell asked the store,
// Store::InstanceAlive), or it names no claimant (a row from before claims were recorded). The
// claim of a live process is left alone: nullopt. Several gateway processes may share one store
// (issue 4), so a process that starts must never take over the calls another one is still making.
// Precondition: op.fulfillment == kInProgress.
std::optional<Operation> RecoverInterrupted(const Operation& op, int64_t now_ms,
                                            bool claimant_alive);

// Hold expiry (CONTRACT §4): once an unfinished operation's hold passes its expiry and no attempt
// holds a live claim, the hold is released. The upstream may have done the work (a 5xx, a timeout,
// a crash mid-call), so every such release raises an alert for the admin. A later retry with the
// same key places a new hold (ResumeWalletOperation). Returns nullopt when nothing is to be done.
struct HoldExpiry {
  Operation next;
  std::string reason;  // for the alert
};
std::optional<HoldExpiry> ExpireHold(const Operation& op, int64_t now_ms);

// The wallet account id of a principal "account:<id>", or nullopt for other principals.
std::optional<std::string> WalletAccountOf(std::string_view principal);

struct Alert {
  std::string id;
  std::string operation_id;
  std::string kind;  // "hold_expired_after_possible_work", "settlement_failed"
  std::string detail;
  int64_t created_ms = 0;
  std::optional<int64_t> resolved_ms;  // set once an admin resolved it (core/resolution.h)
  std::string resolution;              // the outcome's name, "" while open
  std::string note;                    // the admin's note, "" while open
  bool operator==(const Alert&) const = default;
};

// The structured facts of a trace event, beside its text, so that a page or a script reads them
// without parsing the detail. Each is unset (0, nullopt, "" or -1) where it does not apply.
struct TraceFacts {
  int32_t attempt = 0;            // the operation's attempt the event belongs to (1-based)
  std::optional<int64_t> amount;  // money held, moved or asked for, in the price's unit
  int32_t http_status = 0;        // the HTTP status answered, replayed or received
  std::string tx_hash;            // the chain transaction
  int64_t block = -1;             // the block holding it
  std::string reason;             // a stable snake_case code: why (see docs/protocol.md)
  bool operator==(const TraceFacts&) const = default;

  // TraceFacts().Attempt(2).Amount(500): named, in any order, the others left unset.
  TraceFacts& Attempt(int32_t v) { return attempt = v, *this; }
  TraceFacts& Amount(int64_t v) { return amount = v, *this; }
  TraceFacts& HttpStatus(int32_t v) { return http_status = v, *this; }
  TraceFacts& TxHash(std::string v) { return tx_hash = std::move(v), *this; }
  TraceFacts& Block(int64_t v) { return block = v, *this; }
  TraceFacts& Reason(std::string v) { return reason = std::move(v), *this; }
};

// Who a trace event says acted. Its name is what the store keeps and every trace (JSON, console,
// inspector, docs) shows.
enum class TraceActor { kClient, kGateway, kUpstream, kLedger, kChain, kWorker, kAdmin };
inline constexpr std::array<TraceActor, 7> kTraceActors{
    TraceActor::kClient, TraceActor::kGateway, TraceActor::kUpstream, TraceActor::kLedger,
    TraceActor::kChain,  TraceActor::kWorker,  TraceActor::kAdmin};
// "client", "gateway", "upstream", "ledger", "chain", "worker", "admin".
std::string_view TraceActorName(TraceActor actor);
// The actor of a stored name; nullopt for any other text (a store reports it as corrupt).
std::optional<TraceActor> ParseTraceActor(std::string_view text);

struct TraceEvent {
  TraceEvent() = default;
  TraceEvent(std::string operation_id_, int64_t at_ms_, TraceActor actor_, std::string kind_,
             std::string detail_, TraceFacts facts_ = {})
      : operation_id(std::move(operation_id_)),
        at_ms(at_ms_),
        actor(std::move(actor_)),
        kind(std::move(kind_)),
        detail(std::move(detail_)),
        facts(std::move(facts_)) {}
  std::string operation_id;
  int64_t at_ms = 0;
  TraceActor actor = TraceActor::kGateway;
  // What happened, in snake_case. Text, not an enum, on purpose (issue 37): it is the name of a
  // posting (MoveKindName), of a reconciler's action (ReconcileActionName), of an event row
  // (docs/protocol.md) or, in the simulator's trace, of a world event (a client's "timeout");
  // and older databases keep rows of kinds no binary writes any more ("hold_placed",
  // "upstream_result"), whose traces must still read.
  std::string kind;
  std::string detail;
  TraceFacts facts;
  bool operator==(const TraceEvent&) const = default;
};

// The payment trace of an operation, oldest first: its arrival, every ledger posting, the events
// recorded on unusual transitions (kept holds, resumptions, recovery, expiry, repeated arrivals)
// and its final answer. The common path writes no event rows: postings and the operation already
// tell it. Within one millisecond the order is causal: the arrival; a resumption (it places or
// reuses the hold); the postings; the other events; the answer; replays (they repeat the answer).
std::vector<TraceEvent> BuildTrace(const Operation& op, const std::vector<PostingRecord>& postings,
                                   const std::vector<TraceEvent>& events);

}  // namespace agentpay
