// The request/effect model of ../shared/MODEL.md: one client, one intended effect, followed across
// attempts, timeouts, retries, late responses, deduplication and committed server effects. Exact,
// deterministic and integer: no I/O, no clock, no randomness (the "jitter" is the fixed sequence
// J).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace agentpay::sim {

enum class Fault { kNone, kLostResponse, kTransient503, kRejected400 };
enum class RetryKey { kStable, kNew };
enum class ClientOutcome { kSuccess, kRejected, kExhausted };

// Bounds beyond MODEL.md's own ranges: they keep every run small and every sum far from overflow.
inline constexpr int kMaxAttempts = 100;
inline constexpr int64_t kMaxTimeMs = 86'400'000;  // one day, for every time parameter
inline constexpr int64_t kResponseLatencyMs = 50;  // rule 1
inline constexpr int64_t kMaxDelayMs = 8000;       // rule 6

// The defaults are those of `agentpay sim`: a healthy call under a well-configured policy.
struct SimParams {
  Fault fault = Fault::kNone;
  int64_t service_ms = 200;         // [0, kMaxTimeMs]
  int64_t timeout_ms = 1000;        // [1, kMaxTimeMs]
  int max_attempts = 3;             // [1, kMaxAttempts]
  int64_t initial_delay_ms = 1000;  // [0, kMaxTimeMs]
  bool jitter = false;
  bool dedup = true;
  RetryKey retry_key = RetryKey::kStable;
  int64_t retention_ms = kMaxTimeMs;  // [0, kMaxTimeMs]; ignored when dedup is off
  bool operator==(const SimParams&) const = default;
};

// Who acts in an event.
enum class Actor : uint8_t { kClient, kServer, kNetwork };

// What happens. The JSON name of each kind is given; "a" = attempt, "o" = operation, "k" = key.
enum class EventKind : uint8_t {
  // client
  kSend,            // "send" (a, k): attempt a is sent; the server handles it at the same instant
  kAck,             // "ack" (a, o, k): a success arrives in time
  kReceive503,      // "receive_503" (a, k): a 503 arrives in time: a retryable failure
  kReceive400,      // "receive_400" (a, k): a 400 arrives in time
  kLateAck,         // "late_ack" (a, o?, k): a response for an attempt no longer waited for
  kTimeout,         // "timeout" (a, k): the deadline of attempt a passes without a response
  kRetryScheduled,  // "retry_scheduled" (a, k): attempt a (the next one) will be sent after the
                    // delay
  kSuccess,         // "success" (a): the client stops; these three kinds name the client_outcome,
  kRejected,        // "rejected" (a)   and a is the attempt that ended it
  kExhausted,  // "exhausted" (a): the last attempt failed; the intent is kept for reconciliation
  // server
  kServerStart,     // "server_start" (a, o, k): a new operation starts for attempt a
  kAttach,          // "attach" (a, o, k): attempt a attaches to operation o, in flight
  kReplay,          // "replay" (a, o, k): the stored success of committed operation o is answered
  kForget,          // "forget" (a, o, k): k, committed by o, is past retention; forgotten first
  kRespond503,      // "respond_503" (a, k): no operation starts
  kRespond400,      // "respond_400" (a, k): no operation starts
  kCommit,          // "commit" (o, k): operation o adds its effect
  kRespondSuccess,  // "respond_success" (a, o, k): at a commit, one per attempt answered by it
  // network
  kResponseLost,  // "response_lost" (a, o, k): a response sent at the first operation's commit
};

// One event. attempt, operation and key count from 1; 0 means "not part of this event".
// Keys are named "k<key>" outside: stable → k1 for all; new → k1, k2, … (the key of attempt i is
// ki).
struct SimEvent {
  int64_t at_ms = 0;
  Actor actor = Actor::kClient;
  EventKind kind = EventKind::kSend;
  int32_t attempt = 0;
  int32_t operation = 0;
  int32_t key = 0;
  bool operator==(const SimEvent&) const = default;
};

struct SimResult {
  ClientOutcome client_outcome = ClientOutcome::kExhausted;
  int attempts = 0;           // sends
  int server_operations = 0;  // operations started
  int effects = 0;            // commits
  int intended = 1;
  int late_acks = 0;
  bool reconciliation_flag = false;  // exactly when client_outcome is kExhausted
  bool operator==(const SimResult&) const = default;
};

struct SimRun {
  SimParams params;
  std::vector<SimEvent> events;  // in the order of rule 8; empty when not recorded
  SimResult result;
  int64_t client_done_ms = 0;  // when the client stopped
  int64_t end_ms = 0;          // the last event (rule 9: server work outlives the client)
};

enum class EventRecording { kRecord, kSkip };

// An invalid_argument Status naming the first parameter out of range, else Ok.
Status ValidateSimParams(const SimParams& params);

// Runs the model. Fails only on invalid parameters.
Result<SimRun> Simulate(const SimParams& params,
                        EventRecording recording = EventRecording::kRecord);

// The same, for sweeps: reuses run->events' capacity and allocates nothing when not recording.
// Precondition: ValidateSimParams(params).ok().
void SimulateInto(const SimParams& params, EventRecording recording, SimRun* run);

// Rule 6: the wait after attempt `failed_attempt` (≥ 1) failed.
int64_t RetryDelayMs(const SimParams& params, int failed_attempt);

std::string_view FaultName(Fault fault);
std::string_view RetryKeyName(RetryKey key);
std::string_view ClientOutcomeName(ClientOutcome outcome);
std::string_view ActorName(Actor actor);
std::string_view EventKindName(EventKind kind);
// The value of a name (FaultName, RetryKeyName); nullopt for any other text.
std::optional<Fault> ParseFault(std::string_view text);
std::optional<RetryKey> ParseRetryKey(std::string_view text);

}  // namespace agentpay::sim
