// The wallet payment path (CONTRACT §3–4): reserve the key and hold the price in one decision, call
// the upstream, then capture, release or keep in a second decision. Replays and mismatches are
// answered from a read snapshot without touching the writer. Nothing here blocks a thread: each
// step continues in the callback of the store decision or upstream call before it.
#include <chrono>

#include "core/check.h"
#include "gateway/gateway_internal.h"
#include "gateway/json_views.h"

namespace agentpay {
HttpResponse WithOperation(HttpResponse response, const std::string& operation_id, bool replayed) {
  response.SetHeader("AgentPay-Operation-Id", operation_id);
  response.SetHeader("Idempotent-Replayed", replayed ? "true" : "false");
  return response;
}

HttpResponse StoredAnswer(const Operation& op, bool replayed) {
  AGENTPAY_CHECK(op.response.has_value());
  HttpResponse response;
  response.status = op.response->status;
  response.body = op.response->body;
  if (!op.response->content_type.empty()) {
    response.SetHeader("Content-Type", op.response->content_type);
  }
  return WithOperation(std::move(response), op.id, replayed);
}

HttpResponse PendingAnswer(const Operation& op, int status, ProblemCode code,
                           const std::string& detail, bool replayed) {
  HttpResponse response = ProblemResponse(status, code, detail, op.id);
  response.SetHeader("Location", "/v1/operations/" + op.id);
  if (status == 202) response.SetHeader("Retry-After", "1");
  return WithOperation(std::move(response), op.id, replayed);
}

HttpResponse MismatchAnswer(const Operation& op) {
  return WithOperation(ProblemResponse(422, ProblemCode::kIdempotencyKeyMismatch,
                                       "this Idempotency-Key was used for a different request "
                                       "(method, path, query, content type or body differ)",
                                       op.id),
                       op.id, false);
}


HttpResponse StoreProblem(const Status& status) {
  HttpResponse response = ProblemResponse(
      503,
      status.error() == ErrorCode::kStoreOverloaded ? ProblemCode::kLimitExceeded
                                                    : ProblemCode::kStoreUnavailable,
      "the decision was not recorded; retry with the same Idempotency-Key (" + status.message() +
          ")");
  response.SetHeader("Retry-After", "1");
  return response;
}

void Gateway::PayWithWallet(std::shared_ptr<PaidRequest> paid) {
  // Fast path: a final operation never changes, so replays and mismatches need no write.
  std::optional<KeyRecord> record;
  std::optional<Operation> existing;
  int64_t now = clock_.NowMs();
  // Unsynced: most requests find no key and go on to the begin decision, which waits for its own
  // durability; an answer given from this snapshot waits for it first (AwaitDurable below).
  Status read = store_.ReadUnsynced([&](Transaction& tx) {
    auto found = tx.FindKey(paid->principal(), paid->key);
    if (!found.ok()) return found.status();
    record = std::move(*found);
    if (!record) return Status::Ok();
    auto op = tx.FindOperation(record->operation_id);
    if (!op.ok()) return op.status();
    existing = std::move(*op);
    return Status::Ok();
  });
  if (!read.ok()) return paid->respond(StoreProblem(read));
  if (record && existing) {
    Arrival arrival = DecideArrival(&*record, &*existing, paid->fingerprint, now);
    if (arrival.outcome == ArrivalOutcome::kReplay) {
      metrics_.CountArrival(arrival.outcome);
      store_.AwaitDurable();
      return paid->respond(StoredAnswer(*existing, true));
    }
    if (arrival.outcome == ArrivalOutcome::kMismatch) {
      metrics_.CountArrival(arrival.outcome);
      store_.AwaitDurable();
      return paid->respond(MismatchAnswer(*existing));
    }
  }
  store_.WriteAsync([this, paid](Transaction& tx) { return DecideBegin(tx, *paid); },
                    [this, paid](Status status) { OnBegun(paid, std::move(status)); });
}

void Gateway::OnBegun(std::shared_ptr<PaidRequest> paid, Status status) {
  if (!status.ok() && !IsRollback(status)) return paid->respond(StoreProblem(status));
  const Begin& begin = paid->begin;
  switch (begin.kind) {
    case BeginKind::kReplay: return paid->respond(StoredAnswer(begin.op, true));
    case BeginKind::kMismatch: return paid->respond(MismatchAnswer(begin.op));
    case BeginKind::kAttach: {
      // Waiting for the attempt in flight blocks: it runs on the blocking pool.
      bool queued = blocking_pool_.TrySubmit(
          [this, paid] { paid->respond(AwaitInFlight(paid->begin.op, WalletAnswerWhenDone)); });
      if (!queued) {
        paid->respond(PendingAnswer(begin.op, 202, ProblemCode::kOperationInProgress,
                                    "the same request is still in flight; poll the operation",
                                    true));
      }
      return;
    }
    case BeginKind::kInsufficientFunds:
      return paid->respond(
          ProblemResponse(402, ProblemCode::kInsufficientFunds,
                          "the account's available balance is below the price of " +
                              std::to_string(paid->route->price)));
    case BeginKind::kProceed:
      paid->upstream_started = std::chrono::steady_clock::now();
      upstream_.CallAsync(*paid->route, paid->request, begin.op.id,
                          [this, paid](UpstreamOutcome outcome) {
                            OnUpstreamAnswered(paid, std::move(outcome));
                          });
      return;
  }
  AGENTPAY_CHECK(false);
}

Status Gateway::DecideBegin(Transaction& tx, PaidRequest& paid) {
  Begin& begin = paid.begin;
  begin = Begin{};
  const std::string principal = paid.principal();
  const int64_t lease_ms = paid.route->timeout_ms + kLeaseMarginMs;
  const int64_t now = clock_.NowMs();
  const std::string op_id = NewOperationId(random_, now);
  KeyRecord reservation{principal, paid.key, op_id, paid.fingerprint, now};
  auto inserted = tx.InsertKey(reservation);
  if (!inserted.ok()) return inserted.status();
  if (*inserted) {
    metrics_.CountArrival(ArrivalOutcome::kNew);
  } else {
    bool start_new = false;
    Status decided = DecideExistingKey(tx, paid, now, lease_ms, &start_new);
    if (!start_new) return decided;
    // The key was past its retention: forgotten, then reserved again for a new operation.
    if (Status deleted = tx.DeleteKey(principal, paid.key); !deleted.ok()) return deleted;
    inserted = tx.InsertKey(reservation);
    if (!inserted.ok()) return inserted.status();
    AGENTPAY_CHECK(*inserted);
  }
  Operation op =
      NewWalletOperation({op_id, principal, paid.key, paid.fingerprint, paid.route->prefix,
                          paid.route->price, config_.hold_ttl_ms, lease_ms, instance_id_},
                         now);
  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
  auto moved = tx.Move(paid.account_id, MoveKind::kHold, op.amount, op.id, now);
  if (!moved.ok()) return moved.status();
  if (*moved != MoveOutcome::kOk) {
    begin.kind = BeginKind::kInsufficientFunds;
    return Rollback();
  }
  begin.kind = BeginKind::kProceed;
  begin.op = std::move(op);
  return Status::Ok();
}

Status Gateway::DecideExistingKey(Transaction& tx, PaidRequest& paid, int64_t now,
                                  int64_t lease_ms, bool* start_new) {
  Begin& begin = paid.begin;
  auto record = tx.FindKey(paid.principal(), paid.key);
  if (!record.ok()) return record.status();
  AGENTPAY_CHECK(record->has_value());
  auto op = tx.FindOperation((*record)->operation_id);
  if (!op.ok()) return op.status();
  if (!op->has_value()) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "key without operation " + (*record)->operation_id);
  }
  Arrival arrival = DecideArrival(&**record, &**op, paid.fingerprint, now);
  metrics_.CountArrival(arrival.outcome);
  begin.op = **op;
  switch (arrival.outcome) {
    case ArrivalOutcome::kReplay: begin.kind = BeginKind::kReplay; return Status::Ok();
    case ArrivalOutcome::kMismatch: begin.kind = BeginKind::kMismatch; return Status::Ok();
    case ArrivalOutcome::kAttach: begin.kind = BeginKind::kAttach; return Status::Ok();
    case ArrivalOutcome::kNew:
      AGENTPAY_CHECK(arrival.forget_existing);
      *start_new = true;
      return Status::Ok();
    case ArrivalOutcome::kResume: break;
  }
  Resumption resumption =
      ResumeWalletOperation(**op, now, config_.hold_ttl_ms, lease_ms, instance_id_);
  if (resumption.needs_hold) {
    auto moved = tx.Move(paid.account_id, MoveKind::kHold, resumption.next.amount,
                         resumption.next.id, now);
    if (!moved.ok()) return moved.status();
    if (*moved != MoveOutcome::kOk) {
      begin.kind = BeginKind::kInsufficientFunds;
      return Rollback();
    }
  }
  if (Status s = tx.UpdateOperation(resumption.next); !s.ok()) return s;
  begin.kind = BeginKind::kProceed;
  begin.op = resumption.next;
  return tx.AppendEvent({resumption.next.id, now, "gateway", "retry_resumed",
                         "attempt " + std::to_string(resumption.next.attempts) +
                             (resumption.needs_hold ? ", new hold placed" : ", hold reused")});
}

void Gateway::OnUpstreamAnswered(std::shared_ptr<PaidRequest> paid, UpstreamOutcome outcome) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - paid->upstream_started);
  metrics_.CountUpstream(elapsed.count(), outcome.kind == UpstreamKind::kResponded);
  auto shared_outcome = std::make_shared<UpstreamOutcome>(std::move(outcome));
  store_.WriteAsync(
      [this, paid, shared_outcome](Transaction& tx) {
        return DecideFinish(tx, *paid, *shared_outcome);
      },
      [this, paid, shared_outcome](Status status) {
        NotifyCompletion();
        paid->respond(FinishAnswer(*paid, *shared_outcome, status));
      });
}

Status Gateway::DecideFinish(Transaction& tx, PaidRequest& paid, const UpstreamOutcome& outcome) {
  const Operation& op = paid.begin.op;
  std::optional<Completion>& completion = paid.completion;
  completion.reset();
  const int64_t now = clock_.NowMs();
  // While this attempt holds the claim (in progress, same attempt number) nobody else changes the
  // operation, so it is still exactly what the begin decision wrote. Only the claim holder may
  // finish it: the write is a compare-and-set, and a lost claim (a later attempt took over after
  // the lease ran out, or recovery) leaves everything as it is.
  Completion next = CompleteWalletOperation(op, outcome, now, config_.retention_ms);
  auto claimed = tx.UpdateClaimedOperation(next.next, op.attempts);
  if (!claimed.ok()) return claimed.status();
  if (!*claimed) return Status::Ok();
  completion.emplace(std::move(next));
  if (completion->move) {
    auto moved = tx.Move(paid.account_id, *completion->move, op.amount, op.id, now);
    if (!moved.ok()) return moved.status();
    AGENTPAY_CHECK(*moved == MoveOutcome::kOk);  // the hold is ours and covers the amount
  }
  if (completion->verdict != Verdict::kKeep) return Status::Ok();  // postings tell the rest
  std::string detail = outcome.kind == UpstreamKind::kResponded
                           ? "upstream answered " + std::to_string(outcome.status)
                           : "upstream " + outcome.detail;
  return tx.AppendEvent({op.id, now, "upstream", "hold_kept",
                         detail + "; hold kept after attempt " + std::to_string(op.attempts)});
}

HttpResponse Gateway::FinishAnswer(const PaidRequest& paid, const UpstreamOutcome& outcome,
                                   const Status& status) {
  const Operation& op = paid.begin.op;
  const std::optional<Completion>& completion = paid.completion;
  if (!status.ok()) {
    HttpResponse response = ProblemResponse(
        503, ProblemCode::kStoreUnavailable,
        "the upstream was called but its outcome could not be recorded (" + status.message() +
            "); the hold stays until a retry with the same Idempotency-Key completes it, "
            "without a second charge",
        op.id);
    response.SetHeader("Retry-After", "1");
    response.SetHeader("Location", "/v1/operations/" + op.id);
    return WithOperation(std::move(response), op.id, false);
  }
  if (!completion) {
    return PendingAnswer(op, 202, ProblemCode::kOperationInProgress,
                         "a later attempt for this key took over; poll the operation", false);
  }
  metrics_.CountVerdict(completion->verdict);
  switch (completion->verdict) {
    case Verdict::kCapture:
    case Verdict::kRelease:
      return StoredAnswer(completion->next, false);
    case Verdict::kKeep: {
      bool timeout = outcome.kind == UpstreamKind::kTimeout;
      std::string what = outcome.kind == UpstreamKind::kResponded
                             ? "the upstream answered " + std::to_string(outcome.status)
                             : "the upstream call failed (" + outcome.detail + ")";
      return PendingAnswer(completion->next, timeout ? 504 : 502, ProblemCode::kFulfillmentPending,
                           what +
                               "; the hold is kept and a retry with the same "
                               "Idempotency-Key is not charged again",
                           false);
    }
  }
  AGENTPAY_CHECK(false);
}

std::optional<HttpResponse> WalletAnswerWhenDone(const Operation& op) {
  if (IsFinal(op)) return StoredAnswer(op, true);
  if (op.fulfillment == Fulfillment::kPendingRetry) {
    return PendingAnswer(op, 502, ProblemCode::kFulfillmentPending,
                         "the attempt in flight failed upstream; the hold is kept and a retry "
                         "with the same Idempotency-Key is not charged again",
                         true);
  }
  return std::nullopt;
}

HttpResponse Gateway::AwaitInFlight(const Operation& op, const AnswerWhenDone& answer_when_done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.attach_wait_ms);
  for (;;) {
    uint64_t seen = 0;
    {
      std::lock_guard lock(completion_mutex_);
      seen = completions_;
    }
    std::optional<Operation> current;
    Status status = store_.Read([&](Transaction& tx) {
      auto found = tx.FindOperation(op.id);
      if (!found.ok()) return found.status();
      current = std::move(*found);
      return Status::Ok();
    });
    if (!status.ok()) return StoreProblem(status);
    AGENTPAY_CHECK(current.has_value());
    if (auto answer = answer_when_done(*current)) return std::move(*answer);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Re-read at least every 100 ms: the operation may finish in another gateway process.
    std::unique_lock lock(completion_mutex_);
    completion_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)),
                              [&] { return completions_ != seen; });
  }
  metrics_.CountAttachTimeout();
  return PendingAnswer(op, 202, ProblemCode::kOperationInProgress,
                       "the same request is still in flight; poll the operation or retry later",
                       true);
}

}  // namespace agentpay
