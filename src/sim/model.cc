// The rules of MODEL.md as a small discrete-event loop over fixed arrays: the client is sequential,
// so at most kMaxAttempts attempts, operations and keys exist, and a run allocates nothing itself.
#include "sim/model.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "core/check.h"

namespace agentpay::sim {
namespace {

constexpr std::array<int64_t, 8> kJitterPercent = {50, 100, 25, 75, 10, 90, 40, 60};
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

enum class Response : uint8_t { kNone, kSuccess, k503, k400 };

struct AttemptState {
  int64_t sent_ms;
  int64_t arrival_ms;  // of its one response in transit; kNever when none is
  int32_t key;
  int32_t operation;  // started, attached to or replayed; 0 for none
  Response response;
  bool awaiting_commit;
};

struct OperationState {
  int64_t commit_ms;
  int32_t key;
  int32_t first_attempt;  // the one that started it; attached attempts come later
};

class Model {
 public:
  Model(const SimParams& params, std::vector<SimEvent>* events) : p_(params), events_(events) {}
  void Run(SimRun* run);

 private:
  // Operations start at strictly increasing times (sends do) and all last service_ms, so they
  // commit in the order they started: everything before next_commit_ has committed.
  bool Committed(int operation) const { return operation < next_commit_; }
  int KeyOf(int attempt) const { return p_.retry_key == RetryKey::kStable ? 1 : attempt; }
  void Emit(int64_t at_ms, Actor actor, EventKind kind, int attempt, int operation, int key) {
    if (events_ != nullptr) events_->push_back({at_ms, actor, kind, attempt, operation, key});
  }
  void Commit(int64_t t);
  void Arrive(int64_t t, int attempt);
  void Timeout(int64_t t);
  void Fail(int64_t t);
  void Finish(int64_t t, ClientOutcome outcome, EventKind kind);
  void Send(int64_t t);
  void Handle(int64_t t, int attempt);
  void Start(int64_t t, int attempt);
  void Respond(int64_t t, int attempt, Response response, int operation);

  const SimParams& p_;
  std::vector<SimEvent>* events_;
  SimResult result_;
  // Only entries up to sent_ / result_.server_operations are ever read; each is written first.
  std::array<AttemptState, kMaxAttempts + 1> attempts_;
  std::array<OperationState, kMaxAttempts + 1> operations_;
  std::array<int32_t, kMaxAttempts + 1> key_operation_;  // dedup: the operation holding a key
  int sent_ = 0;                                         // the current attempt
  int next_commit_ = 1;
  // Responses on their way, in the order they arrive. Every response takes the same 50 ms and is
  // sent as time advances, so arrival order is sending order; at one instant the commit answers
  // its attempts in ascending order before any later send, whose attempt is the newest. So the
  // queue needs no sorting, and each attempt enters it at most once.
  std::array<int32_t, kMaxAttempts> transit_;
  int transit_head_ = 0;
  int transit_tail_ = 0;
  bool waiting_ = false;  // the current attempt waits for its response, before its deadline
  int64_t next_send_ms_ = 0;
  int64_t client_done_ms_ = 0;
};

void Model::Run(SimRun* run) {
  int64_t last_ms = 0;
  for (;;) {
    int64_t commit_ms =
        next_commit_ <= result_.server_operations ? operations_[next_commit_].commit_ms : kNever;
    int arrival_attempt = transit_head_ < transit_tail_ ? transit_[transit_head_] : 0;
    int64_t arrival_ms = arrival_attempt != 0 ? attempts_[arrival_attempt].arrival_ms : kNever;
    int64_t timeout_ms = waiting_ ? attempts_[sent_].sent_ms + p_.timeout_ms : kNever;
    int64_t t = std::min({commit_ms, arrival_ms, timeout_ms, next_send_ms_});
    if (t == kNever) break;
    last_ms = t;
    // Rule 8: commits, then response arrivals, then timeouts, then sends. An event caused at t
    // (a commit when service_ms is 0, a send when the delay is 0) joins the same instant.
    if (commit_ms == t) {
      Commit(t);
    } else if (arrival_ms == t) {
      Arrive(t, arrival_attempt);
    } else if (timeout_ms == t) {
      Timeout(t);
    } else {
      Send(t);
    }
  }
  // The client always ends: each attempt either gets its response in time or times out.
  AGENTPAY_CHECK(sent_ >= 1 && !waiting_ && next_send_ms_ == kNever);
  run->result = result_;
  run->client_done_ms = client_done_ms_;
  run->end_ms = last_ms;
}

void Model::Commit(int64_t t) {
  int operation = next_commit_++;
  int key = operations_[operation].key;
  ++result_.effects;
  Emit(t, Actor::kServer, EventKind::kCommit, 0, operation, key);
  for (int a = operations_[operation].first_attempt; a <= sent_; ++a) {
    AttemptState& attempt = attempts_[a];
    if (!attempt.awaiting_commit || attempt.operation != operation) continue;
    attempt.awaiting_commit = false;
    Emit(t, Actor::kServer, EventKind::kRespondSuccess, a, operation, key);
    if (p_.fault == Fault::kLostResponse && operation == 1) {  // rule 3
      Emit(t, Actor::kNetwork, EventKind::kResponseLost, a, operation, key);
    } else {
      Respond(t, a, Response::kSuccess, operation);
    }
  }
}

void Model::Arrive(int64_t t, int a) {
  AttemptState& attempt = attempts_[a];
  attempt.arrival_ms = kNever;
  ++transit_head_;
  // Each attempt gets at most one response, and the client moves on from an attempt only when
  // that response came or the deadline passed: any response not for the waiting attempt is late.
  if (!waiting_ || a != sent_) {
    ++result_.late_acks;
    Emit(t, Actor::kClient, EventKind::kLateAck, a, attempt.operation, attempt.key);
    return;
  }
  waiting_ = false;
  switch (attempt.response) {
    case Response::kSuccess:
      Emit(t, Actor::kClient, EventKind::kAck, a, attempt.operation, attempt.key);
      Finish(t, ClientOutcome::kSuccess, EventKind::kSuccess);
      return;
    case Response::k503:
      Emit(t, Actor::kClient, EventKind::kReceive503, a, 0, attempt.key);
      Fail(t);
      return;
    case Response::k400:
      Emit(t, Actor::kClient, EventKind::kReceive400, a, 0, attempt.key);
      Finish(t, ClientOutcome::kRejected, EventKind::kRejected);
      return;
    case Response::kNone:
      break;
  }
  AGENTPAY_CHECK(false && "an arrival without a response");
}

void Model::Timeout(int64_t t) {
  waiting_ = false;
  Emit(t, Actor::kClient, EventKind::kTimeout, sent_, 0, attempts_[sent_].key);
  Fail(t);
}

// Rule 5: a 503 or a timeout at t.
void Model::Fail(int64_t t) {
  if (sent_ < p_.max_attempts) {
    next_send_ms_ = t + RetryDelayMs(p_, sent_);
    Emit(t, Actor::kClient, EventKind::kRetryScheduled, sent_ + 1, 0, KeyOf(sent_ + 1));
  } else {
    Finish(t, ClientOutcome::kExhausted, EventKind::kExhausted);
  }
}

void Model::Finish(int64_t t, ClientOutcome outcome, EventKind kind) {
  result_.client_outcome = outcome;
  result_.reconciliation_flag = outcome == ClientOutcome::kExhausted;
  client_done_ms_ = t;
  Emit(t, Actor::kClient, kind, sent_, 0, 0);
}

void Model::Send(int64_t t) {
  next_send_ms_ = kNever;
  int a = ++sent_;
  int key = KeyOf(a);
  attempts_[a] = AttemptState{t, kNever, key, 0, Response::kNone, false};
  if (a == key) key_operation_[key] = 0;  // the first use of this key
  waiting_ = true;
  result_.attempts = a;
  Emit(t, Actor::kClient, EventKind::kSend, a, 0, key);
  Handle(t, a);
}

// Rule 2, in its order.
void Model::Handle(int64_t t, int a) {
  int key = attempts_[a].key;
  if (p_.fault == Fault::kTransient503 && a == 1) {
    Emit(t, Actor::kServer, EventKind::kRespond503, a, 0, key);
    Respond(t, a, Response::k503, 0);
    return;
  }
  if (p_.fault == Fault::kRejected400) {
    Emit(t, Actor::kServer, EventKind::kRespond400, a, 0, key);
    Respond(t, a, Response::k400, 0);
    return;
  }
  int held_by = p_.dedup ? key_operation_[key] : 0;
  if (held_by != 0 && !Committed(held_by)) {
    attempts_[a].operation = held_by;
    attempts_[a].awaiting_commit = true;
    Emit(t, Actor::kServer, EventKind::kAttach, a, held_by, key);
    return;
  }
  if (held_by != 0 && t < operations_[held_by].commit_ms + p_.retention_ms) {
    Emit(t, Actor::kServer, EventKind::kReplay, a, held_by, key);
    Respond(t, a, Response::kSuccess, held_by);
    return;
  }
  if (held_by != 0) {
    Emit(t, Actor::kServer, EventKind::kForget, a, held_by, key);
    key_operation_[key] = 0;
  }
  Start(t, a);
}

void Model::Start(int64_t t, int a) {
  int operation = ++result_.server_operations;
  int key = attempts_[a].key;
  operations_[operation] = OperationState{t + p_.service_ms, key, a};
  if (p_.dedup) key_operation_[key] = operation;
  attempts_[a].operation = operation;
  attempts_[a].awaiting_commit = true;
  Emit(t, Actor::kServer, EventKind::kServerStart, a, operation, key);
}

void Model::Respond(int64_t t, int a, Response response, int operation) {
  AttemptState& attempt = attempts_[a];
  attempt.arrival_ms = t + kResponseLatencyMs;
  attempt.response = response;
  attempt.operation = operation;
  if (transit_tail_ > transit_head_) {  // the ordering argument above, checked
    const AttemptState& before = attempts_[transit_[transit_tail_ - 1]];
    AGENTPAY_CHECK(before.arrival_ms < attempt.arrival_ms ||
                   (before.arrival_ms == attempt.arrival_ms && transit_[transit_tail_ - 1] < a));
  }
  transit_[transit_tail_++] = a;
}

Status OutOfRange(const char* name, int64_t low, int64_t high, int64_t value) {
  return Status::Error(ErrorCode::kInvalidArgument,
                       std::string(name) + " must be between " + std::to_string(low) + " and " +
                           std::to_string(high) + ", got " + std::to_string(value));
}

}  // namespace

Status ValidateSimParams(const SimParams& p) {
  if (p.service_ms < 0 || p.service_ms > kMaxTimeMs) {
    return OutOfRange("service_ms", 0, kMaxTimeMs, p.service_ms);
  }
  if (p.timeout_ms < 1 || p.timeout_ms > kMaxTimeMs) {
    return OutOfRange("timeout_ms", 1, kMaxTimeMs, p.timeout_ms);
  }
  if (p.max_attempts < 1 || p.max_attempts > kMaxAttempts) {
    return OutOfRange("max_attempts", 1, kMaxAttempts, p.max_attempts);
  }
  if (p.initial_delay_ms < 0 || p.initial_delay_ms > kMaxTimeMs) {
    return OutOfRange("initial_delay_ms", 0, kMaxTimeMs, p.initial_delay_ms);
  }
  if (p.retention_ms < 0 || p.retention_ms > kMaxTimeMs) {
    return OutOfRange("retention_ms", 0, kMaxTimeMs, p.retention_ms);
  }
  return Status::Ok();
}

Result<SimRun> Simulate(const SimParams& params, EventRecording recording) {
  Status valid = ValidateSimParams(params);
  if (!valid.ok()) return valid;
  SimRun run;
  // Per attempt at most: send, forget, start, respond, lost or late, ack, timeout, retry; + commit.
  if (recording == EventRecording::kRecord) run.events.reserve(10 * params.max_attempts + 2);
  SimulateInto(params, recording, &run);
  return run;
}

void SimulateInto(const SimParams& params, EventRecording recording, SimRun* run) {
  AGENTPAY_CHECK(ValidateSimParams(params).ok());
  run->params = params;
  run->events.clear();
  Model model(params, recording == EventRecording::kRecord ? &run->events : nullptr);
  model.Run(run);
}

int64_t RetryDelayMs(const SimParams& params, int failed_attempt) {
  AGENTPAY_CHECK(failed_attempt >= 1);
  // Doubling stops at the cap, so no power of two is ever computed that could overflow.
  int64_t delay_ms = params.initial_delay_ms;
  for (int i = 1; i < failed_attempt && delay_ms < kMaxDelayMs; ++i) delay_ms *= 2;
  delay_ms = std::min(delay_ms, kMaxDelayMs);
  if (params.jitter) delay_ms = delay_ms * kJitterPercent[(failed_attempt - 1) % 8] / 100;
  return delay_ms;
}

std::string_view FaultName(Fault fault) {
  switch (fault) {
    case Fault::kNone:
      return "none";
    case Fault::kLostResponse:
      return "lost_response";
    case Fault::kTransient503:
      return "transient_503";
    case Fault::kRejected400:
      return "rejected_400";
  }
  return "?";
}

std::string_view RetryKeyName(RetryKey key) { return key == RetryKey::kStable ? "stable" : "new"; }

std::string_view ClientOutcomeName(ClientOutcome outcome) {
  switch (outcome) {
    case ClientOutcome::kSuccess:
      return "success";
    case ClientOutcome::kRejected:
      return "rejected";
    case ClientOutcome::kExhausted:
      return "exhausted";
  }
  return "?";
}

std::string_view ActorName(Actor actor) {
  switch (actor) {
    case Actor::kClient:
      return "client";
    case Actor::kServer:
      return "server";
    case Actor::kNetwork:
      return "network";
  }
  return "?";
}

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kSend:
      return "send";
    case EventKind::kAck:
      return "ack";
    case EventKind::kReceive503:
      return "receive_503";
    case EventKind::kReceive400:
      return "receive_400";
    case EventKind::kLateAck:
      return "late_ack";
    case EventKind::kTimeout:
      return "timeout";
    case EventKind::kRetryScheduled:
      return "retry_scheduled";
    case EventKind::kSuccess:
      return "success";
    case EventKind::kRejected:
      return "rejected";
    case EventKind::kExhausted:
      return "exhausted";
    case EventKind::kServerStart:
      return "server_start";
    case EventKind::kAttach:
      return "attach";
    case EventKind::kReplay:
      return "replay";
    case EventKind::kForget:
      return "forget";
    case EventKind::kRespond503:
      return "respond_503";
    case EventKind::kRespond400:
      return "respond_400";
    case EventKind::kCommit:
      return "commit";
    case EventKind::kRespondSuccess:
      return "respond_success";
    case EventKind::kResponseLost:
      return "response_lost";
  }
  return "?";
}

std::optional<Fault> ParseFault(std::string_view text) {
  for (Fault f : {Fault::kNone, Fault::kLostResponse, Fault::kTransient503, Fault::kRejected400}) {
    if (text == FaultName(f)) return f;
  }
  return std::nullopt;
}

std::optional<RetryKey> ParseRetryKey(std::string_view text) {
  for (RetryKey k : {RetryKey::kStable, RetryKey::kNew}) {
    if (text == RetryKeyName(k)) return k;
  }
  return std::nullopt;
}

}  // namespace agentpay::sim
