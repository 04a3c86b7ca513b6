// Idempotency records (CONTRACT §3): one record per (principal, key) names one business action.
// The decision on a request's arrival is pure; the shell reserves keys with a unique constraint
// (insert, never check-then-insert) and calls DecideArrival only when the insert found a record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/operation.h"

namespace agentpay {

inline constexpr size_t kMaxIdempotencyKeyLength = 255;

// 1–255 visible ASCII characters (0x21–0x7E).
bool ValidIdempotencyKey(std::string_view key);

struct KeyRecord {
  std::string principal;
  std::string key;
  std::string operation_id;
  std::string fingerprint;
  int64_t created_ms = 0;
  // How many repeated arrivals (replays, attaches, refused mismatches) the key's trace records.
  int32_t arrivals_recorded = 0;
  bool operator==(const KeyRecord&) const = default;
};

// A key's trace records its first repeated arrivals, each with its time; later ones are counted in
// /metrics only, so that a client repeating one key forever cannot grow the trace without bound.
inline constexpr int32_t kMaxRecordedArrivals = 8;

enum class ArrivalOutcome {
  kNew,       // no live record: start a new operation (forgetting an expired record first)
  kReplay,    // same request, operation final: answer with the stored response
  kMismatch,  // same key, different request: 422, nothing changes
  kAttach,    // same request, an attempt is in flight: wait for it
  kResume,    // same request, not final and nothing in flight (kept hold, crash): start the next attempt
};
std::string_view ArrivalOutcomeName(ArrivalOutcome outcome);

struct Arrival {
  ArrivalOutcome outcome;
  bool forget_existing = false;  // the record is past its retention and must be deleted first
};

// What the deciding process knows of an attempt in progress besides its lease.
enum class ClaimView {
  kLease,  // only the lease: until it expires the attempt may still be running somewhere
  // The claim names this process, and this process's attempt of it has ended without recording
  // its outcome (the database lost the answer to its decision, or could not record its
  // completion): nobody runs it, whatever the lease says (WalletPath's attempts in hand).
  kEndedHere,
};

// The decision on a repeated arrival:
//   record absent                                   -> kNew
//   past retention (whatever the request)           -> kNew, forget the record first
//   another request (fingerprint differs)           -> kMismatch
//   operation final                                 -> kReplay
//   in progress, lease live, ClaimView::kLease      -> kAttach
//   in progress, lease live, ClaimView::kEndedHere  -> kResume
//   anything else (lease expired, kept, recovered)  -> kResume
// Precondition: `op` is the record's operation when `record` is present.
Arrival DecideArrival(const KeyRecord* record, const Operation* op, std::string_view fingerprint,
                      int64_t now_ms, ClaimView claim);

// The trace event of a repeated arrival answered without a new attempt: a replay of the final
// answer, an attach to the attempt in flight, or a refused mismatch (422). Nullopt for the other
// outcomes (their decisions write their own events) and once the key recorded
// kMaxRecordedArrivals.
std::optional<TraceEvent> ArrivalEvent(const KeyRecord& record, const Operation& op,
                                       ArrivalOutcome outcome, int64_t now_ms);

// Until when a result that became final at `final_ms` is kept (and its key remembered).
int64_t RetainedUntil(int64_t final_ms, int64_t retention_ms);

// Retention pruning (workers/pruner.h): a result may be forgotten, with its key, once the operation
// is final and its retention has passed: the same moment DecideArrival starts treating the key as
// new. An operation that is not final is never pruned.
bool ShouldPruneResult(const Operation& op, int64_t now_ms);

// The canonical bytes hashed into a request fingerprint: method, path, query, content type and body,
// each length-prefixed so that no two different requests share material. Payment and authorization
// headers are deliberately not part of it.
std::string FingerprintMaterial(std::string_view method, std::string_view path,
                                std::string_view query, std::string_view content_type,
                                std::string_view body);

}  // namespace agentpay
