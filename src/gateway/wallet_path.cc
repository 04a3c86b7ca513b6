// The wallet payment path; see wallet_path.h. Replays and mismatches are answered from a read
// snapshot without touching the writer.
#include "gateway/wallet_path.h"

#include "core/check.h"
#include "core/idempotency.h"
#include "gateway/answers.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"

namespace agentpay {

namespace {
// Past this many queued decisions, a replay's trace record is skipped (the replay is still counted
// in /metrics): recording history must not delay a payment.
constexpr uint64_t kMaxQueueForArrivalRecords = 64;
}  // namespace
// One paid request on its way through the path; shared by the path's callbacks.
struct WalletPath::PaidRequest {
  std::shared_ptr<const HttpRequest> request;
  const RouteConfig* route = nullptr;
  Respond respond;
  std::string account_id;
  std::string key;
  bool key_generated = false;  // no Idempotency-Key came: nobody can ask for this one again
  std::string fingerprint;
  WalletPayment payment;  // where the state machine is
  // The operation answered about: as the look found it (begin.op), then as the begin decision
  // committed or found it.
  Begin begin;
  // What the look found of a repeated arrival answered from it (RecordLookedArrival).
  std::optional<KeyRecord> looked_record;
  // The answer cache's entry the arrival was answered from (W20, W21).
  std::shared_ptr<AnswerCache::Entry> cached;
  ArrivalOutcome looked_arrival = ArrivalOutcome::kNew;
  int64_t looked_ms = 0;
  Status failure;              // the store's error behind kStoreProblem and kOutcomeUnrecorded
  uint64_t attempt_token = 0;  // begin.op's attempt is in WalletPath::attempts_ (0: not)
  std::optional<UpstreamOutcome> outcome;
  std::optional<Completion> completion;
  int64_t upstream_started_ms = 0;  // Timers::MonotonicMs
  std::string principal() const { return "account:" + account_id; }
};

void WalletPath::Pay(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                     std::optional<std::string> account_known, Respond respond) {
  if (account_known) {
    return Authenticated(std::move(request), route, std::move(respond),
                         ApiKeys::Lookup(std::move(account_known)));
  }
  // A key not remembered is read on the readers' pool: this is an I/O thread.
  auto later = [this, request, route = &route, respond](ApiKeys::Lookup account) {
    Authenticated(request, *route, respond, std::move(account));
  };
  auto account = api_keys_.AuthenticateOrDefer(*request, ctx_.readers, std::move(later));
  if (account) Authenticated(std::move(request), route, std::move(respond), std::move(*account));
}

void WalletPath::Authenticated(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                               Respond respond, ApiKeys::Lookup account) {
  if (auto refused = ApiKeys::Refusal(account)) return respond(std::move(*refused));
  // Only a known account's bucket: a bad key cannot drain anyone's (the client address's can).
  if (auto retry_after_s = ctx_.rate_limiters.account.Take(**account, ctx_.timers.MonotonicMs())) {
    return respond(TooManyRequests(*retry_after_s, "account"));
  }
  auto paid = std::make_shared<PaidRequest>();
  paid->request = request;
  paid->route = &route;
  paid->respond = std::move(respond);
  paid->account_id = **account;
  auto key = request->Header("Idempotency-Key");
  if (key) {
    if (!ValidIdempotencyKey(*key)) {
      return paid->respond(
          ProblemResponse(400, ProblemCode::kInvalidIdempotencyKey,
                          "Idempotency-Key must be 1-255 visible ASCII characters"));
    }
    paid->key = std::string(*key);
  } else if (route.require_idempotency_key) {
    return paid->respond(ProblemResponse(400, ProblemCode::kIdempotencyKeyRequired,
                                         "this route requires an Idempotency-Key header"));
  } else {
    // Without a key every request is a new business action.
    paid->key = "auto:" + RandomHex(ctx_.random, 16);
    paid->key_generated = true;
  }
  paid->fingerprint =
      Sha256Hex(FingerprintMaterial(request->method, request->Path(), request->Query(),
                                    request->Header("Content-Type").value_or(""), request->body));
  WalletStarted started{ctx_.store.ReadsAreRemote() || ctx_.answer_cache.enabled(), std::nullopt};
  if (ctx_.answer_cache.enabled()) {
    const int64_t now = ctx_.clock.NowMs();
    if (auto entry = ctx_.answer_cache.Find(paid->principal(), paid->key, now)) {
      // The same decision a look would make, on what a look would find (answer_cache.h).
      started.cached = DecideArrival(&entry->record, &entry->op, paid->fingerprint, now,
                                     attempts_.ViewOf(entry->op))
                           .outcome;
      paid->looked_ms = now;
      paid->looked_arrival = *started.cached;
      paid->begin.op = entry->op;
      paid->cached = std::move(entry);
    }
  }
  Advance(std::move(paid), started);
}

void WalletPath::Advance(std::shared_ptr<PaidRequest> paid, const WalletEvent& event) {
  const WalletTransition step = Step(paid->payment, event);
  paid->payment = step.next;
  const WalletEffect& effect = step.effect;
  switch (effect.kind) {
    case WalletEffectKind::kLook:
      return Look(std::move(paid));
    case WalletEffectKind::kBegin:
      return QueueBegin(std::move(paid), effect.presume_new);
    case WalletEffectKind::kCallUpstream:
      return CallUpstream(std::move(paid));
    case WalletEffectKind::kFinish:
      return Finish(std::move(paid));
    case WalletEffectKind::kAttach:
      return ctx_.attachments.Attach(paid->begin.op, WalletAnswerWhenDone,
                                     std::move(paid->respond));
    case WalletEffectKind::kReply:
      if (effect.record_arrival) RecordLookedArrival(*paid);
      return paid->respond(Answer(*paid, effect.answer));
    case WalletEffectKind::kReplyWhenDurable: {
      HttpResponse answer = Answer(*paid, effect.answer);
      if (effect.record_arrival) RecordLookedArrival(*paid);
      ctx_.store.WhenDurable([this, paid, answer = std::move(answer)]() mutable {
        // What the look found is durable now: a final operation is kept for the next replay.
        ctx_.answer_cache.Remember(paid->begin.op, paid->looked_record->arrivals_recorded,
                                   ctx_.clock.NowMs());
        paid->respond(std::move(answer));
      });
      return;
    }
  }
  AGENTPAY_CHECK(false);
}

void WalletPath::Look(std::shared_ptr<PaidRequest> paid) {
  struct Found {
    std::optional<KeyRecord> record;
    std::optional<Operation> existing;
  };
  auto found = std::make_shared<Found>();
  ctx_.store.ReadAsync(
      ctx_.readers,
      [paid, found](Transaction& tx) {
        auto record = tx.FindKey(paid->principal(), paid->key);
        if (!record.ok()) return record.status();
        found->record = std::move(*record);
        if (!found->record) return Status::Ok();
        auto op = tx.FindOperation(found->record->operation_id);
        if (!op.ok()) return op.status();
        found->existing = std::move(*op);
        return Status::Ok();
      },
      [this, paid, found](Status read) {
        if (read.error() == ErrorCode::kStoreOverloaded) {
          return Advance(paid, WalletLooked{ReadResult::kOverloaded, std::nullopt});
        }
        if (!read.ok()) {
          paid->failure = std::move(read);
          return Advance(paid, WalletLooked{ReadResult::kFailed, std::nullopt});
        }
        WalletLooked looked{ReadResult::kOk, std::nullopt};
        if (found->record && found->existing) {
          paid->looked_ms = ctx_.clock.NowMs();
          looked.arrival = DecideArrival(&*found->record, &*found->existing, paid->fingerprint,
                                         paid->looked_ms, attempts_.ViewOf(*found->existing))
                               .outcome;
          paid->looked_arrival = *looked.arrival;
          paid->looked_record = std::move(found->record);
          paid->begin.op = std::move(*found->existing);
        } else if (found->record) {
          // A key whose operation the read did not see (pruned between the two lookups): the
          // writer decides it as it is (W8).
          looked.operation_gone = true;
        }
        Advance(paid, looked);
      },
      ReadWait::kUnsynced);
}

void WalletPath::RecordLookedArrival(const PaidRequest& paid) {
  ctx_.metrics.CountArrival(paid.looked_arrival);
  AGENTPAY_CHECK(paid.looked_record.has_value() || paid.cached != nullptr);
  if (ctx_.store.Stats().write_queue_depth >= kMaxQueueForArrivalRecords) return;
  std::optional<KeyRecord> record = paid.looked_record;
  if (paid.cached) record = paid.cached->TakeArrivalRecord();  // nullopt: the trace has its fill
  if (!record) return;
  auto event = ArrivalEvent(*record, paid.begin.op, paid.looked_arrival, paid.looked_ms);
  if (!event) return;
  ctx_.store.WriteAsync([record = std::move(*record), event = std::move(*event)](
                            Transaction& tx) { return tx.RecordArrival(record, event).status(); },
                        [](Status) {});
}

void WalletPath::QueueBegin(std::shared_ptr<PaidRequest> paid, bool presume_new) {
  ctx_.store.WriteAsync(
      [this, paid, presume_new](Transaction& tx) -> Status {
        paid->begin = {};
        auto begin = DecideBegin(tx, *paid, presume_new);
        if (!begin.ok()) return begin.status();
        paid->begin = std::move(*begin);
        // In hand before the claim commits: no decision sees the claim without it.
        if (paid->begin.kind == BeginOutcome::kProceed) TakeAttempt(*paid);
        // Nothing of a refused payment stays: the key and the operation go with the hold.
        return paid->begin.kind == BeginOutcome::kInsufficientFunds ? Rollback() : Status::Ok();
      },
      [this, paid, presume_new](Status status) {
        // Not begun, whatever the decision did before its batch said so (a claim that committed
        // anyway, its answer lost, is nobody's now: a retry here takes it over).
        if (!status.ok()) DropAttempt(*paid);
        if (status.ok() || IsRollback(status)) {
          if (paid->begin.new_key) ctx_.metrics.CountArrival(ArrivalOutcome::kNew);
          if (status.ok() && (paid->begin.kind == BeginOutcome::kReplay ||
                              paid->begin.kind == BeginOutcome::kMismatch)) {
            // Found final by a decision now durable: kept for the next replay.
            ctx_.answer_cache.Remember(paid->begin.op, 0, ctx_.clock.NowMs());
          }
          return Advance(paid, WalletBegun{CommitResult::kOk, paid->begin.kind});
        }
        // The key was there (a retry, or a concurrent request reserved it after the read that
        // found it absent): looked at, then decided against the key as it is.
        if (presume_new && status.error() == ErrorCode::kStoreKeyTaken) {
          return Advance(paid, WalletBegun{CommitResult::kKeyTaken, {}});
        }
        paid->failure = std::move(status);
        Advance(paid, WalletBegun{CommitResult::kFailed, {}});
      });
}

void WalletPath::CallUpstream(std::shared_ptr<PaidRequest> paid) {
  paid->upstream_started_ms = ctx_.timers.MonotonicMs();
  ctx_.upstream.CallAsync(
      *paid->route, paid->request, paid->begin.op.id, [this, paid](UpstreamOutcome outcome) {
        ctx_.metrics.CountUpstream(ctx_.timers.MonotonicMs() - paid->upstream_started_ms,
                                   outcome.kind == UpstreamKind::kResponded);
        paid->outcome = std::move(outcome);
        Advance(paid, WalletUpstreamAnswered{});
      });
}

void WalletPath::Finish(std::shared_ptr<PaidRequest> paid) {
  ctx_.store.WriteAsync(
      [this, paid](Transaction& tx) -> Status {
        paid->completion.reset();
        auto completion = DecideFinish(tx, *paid, *paid->outcome);
        if (!completion.ok()) return completion.status();
        paid->completion = std::move(*completion);
        return Status::Ok();
      },
      [this, paid](Status status) {
        // Recorded or not, this attempt is over: not recorded, a retry here takes it over.
        DropAttempt(*paid);
        ctx_.attachments.Completed(paid->begin.op.id);
        if (status.ok()) {
          // Durable: a final answer (capture, release) is kept for the replays to come (none come
          // for a key the gateway made up).
          if (!paid->key_generated) {
            ctx_.answer_cache.Remember(paid->completion->next, 0, ctx_.clock.NowMs());
          }
          return Advance(paid, WalletFinished{CommitResult::kOk});
        }
        // A later attempt took the claim over (the lease ran out, or recovery): nothing written.
        if (status.error() == ErrorCode::kStoreClaimLost) {
          return Advance(paid, WalletFinished{CommitResult::kClaimLost});
        }
        paid->failure = std::move(status);
        Advance(paid, WalletFinished{CommitResult::kFailed});
      });
}

Result<WalletPath::Begin> WalletPath::DecideBegin(Transaction& tx, const PaidRequest& paid,
                                                  bool key_presumed_new) {
  const std::string principal = paid.principal();
  const int64_t lease_ms = paid.route->timeout_ms + kLeaseMarginMs;
  const int64_t now = ctx_.clock.NowMs();
  const std::string op_id = NewOperationId(ctx_.random, now);
  KeyRecord reservation{principal, paid.key, op_id, paid.fingerprint, now};
  if (key_presumed_new) {
    // The usual case costs no wait on the database: a key taken fails the decision with
    // store_key_taken (QueueBegin's callback looks at it, then decides again).
    if (Status reserved = tx.ReserveNewKey(reservation); !reserved.ok()) return reserved;
    return BeginNew(tx, paid, op_id, now, lease_ms);
  }
  auto inserted = tx.InsertKey(reservation);
  if (!inserted.ok()) return inserted.status();
  if (!*inserted) {
    auto decided = DecideExistingKey(tx, paid, now, lease_ms);
    if (!decided.ok() || decided->has_value()) {
      if (!decided.ok()) return decided.status();
      return std::move(**decided);
    }
    // The key was past its retention: forgotten, then reserved again for a new operation.
    if (Status deleted = tx.DeleteKey(principal, paid.key); !deleted.ok()) return deleted;
    inserted = tx.InsertKey(reservation);
    if (!inserted.ok()) return inserted.status();
    AGENTPAY_CHECK(*inserted);
    auto begun = BeginNew(tx, paid, op_id, now, lease_ms);
    if (begun.ok()) begun->new_key = false;  // counted as the arrival it is (DecideExistingKey)
    return begun;
  }
  return BeginNew(tx, paid, op_id, now, lease_ms);
}

Result<WalletPath::Begin> WalletPath::BeginNew(Transaction& tx, const PaidRequest& paid,
                                               const std::string& op_id, int64_t now,
                                               int64_t lease_ms) {
  const std::string principal = paid.principal();
  Operation op =
      NewWalletOperation({op_id, principal, paid.key, paid.fingerprint, paid.route->prefix,
                          paid.route->price, ctx_.config.hold_ttl_ms, lease_ms, ctx_.instance_id},
                         now);
  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
  auto moved = tx.Move(paid.account_id, MoveKind::kHold, op.amount, op.id, now);
  if (!moved.ok()) return moved.status();
  if (*moved != MoveOutcome::kOk) return Begin{BeginOutcome::kInsufficientFunds, {}, true};
  return Begin{BeginOutcome::kProceed, std::move(op), true};
}

Result<std::optional<WalletPath::Begin>> WalletPath::DecideExistingKey(Transaction& tx,
                                                                       const PaidRequest& paid,
                                                                       int64_t now,
                                                                       int64_t lease_ms) {
  auto record = tx.FindKey(paid.principal(), paid.key);
  if (!record.ok()) return record.status();
  AGENTPAY_CHECK(record->has_value());
  auto op = tx.FindOperation((*record)->operation_id);
  if (!op.ok()) return op.status();
  if (!op->has_value()) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "key without operation " + (*record)->operation_id);
  }
  const ClaimView claim = attempts_.ViewOf(**op);
  Arrival arrival = DecideArrival(&**record, &**op, paid.fingerprint, now, claim);
  ctx_.metrics.CountArrival(arrival.outcome);
  if (Status s = RecordRepeatedArrival(tx, **record, **op, arrival.outcome, now); !s.ok()) return s;
  switch (arrival.outcome) {
    case ArrivalOutcome::kReplay:
      return std::optional<Begin>(Begin{BeginOutcome::kReplay, **op});
    case ArrivalOutcome::kMismatch:
      return std::optional<Begin>(Begin{BeginOutcome::kMismatch, **op});
    case ArrivalOutcome::kAttach:
      return std::optional<Begin>(Begin{BeginOutcome::kAttach, **op});
    case ArrivalOutcome::kNew:
      AGENTPAY_CHECK(arrival.forget_existing);
      return std::optional<Begin>();
    case ArrivalOutcome::kResume:
      break;
  }
  Resumption resumption =
      ResumeWalletOperation(**op, now, ctx_.config.hold_ttl_ms, lease_ms, ctx_.instance_id);
  if (resumption.needs_hold) {
    auto moved =
        tx.Move(paid.account_id, MoveKind::kHold, resumption.next.amount, resumption.next.id, now);
    if (!moved.ok()) return moved.status();
    if (*moved != MoveOutcome::kOk) {
      return std::optional<Begin>(Begin{BeginOutcome::kInsufficientFunds, **op});
    }
  }
  if (Status s = tx.UpdateOperation(resumption.next); !s.ok()) return s;
  Status appended =
      tx.AppendEvent({resumption.next.id, now, TraceActor::kGateway, "retry_resumed",
                      "attempt " + std::to_string(resumption.next.attempts) +
                          (resumption.needs_hold ? ", new hold placed" : ", hold reused") +
                          (claim == ClaimView::kEndedHere && (*op)->lease_expires_ms > now
                               ? " (attempt " + std::to_string((*op)->attempts) +
                                     " ended on this gateway without its outcome recorded)"
                               : ""),
                      TraceFacts()
                          .Attempt(resumption.next.attempts)
                          .Amount(resumption.next.amount)
                          .Reason(resumption.needs_hold ? "new_hold" : "hold_reused")});
  if (!appended.ok()) return appended;
  return std::optional<Begin>(Begin{BeginOutcome::kProceed, std::move(resumption.next)});
}

Result<Completion> WalletPath::DecideFinish(Transaction& tx, const PaidRequest& paid,
                                            const UpstreamOutcome& outcome) {
  const Operation& op = paid.begin.op;
  const int64_t now = ctx_.clock.NowMs();
  // While this attempt holds the claim (in progress, same attempt number) nobody else changes the
  // operation, so it is still exactly what the begin decision wrote. Only the claim holder may
  // finish it: the write is a compare-and-set, and a lost claim (a later attempt took over after
  // the lease ran out, or recovery) leaves everything as it is.
  Completion completion = CompleteWalletOperation(op, outcome, now, ctx_.config.retention_ms);
  if (Status claimed = tx.UpdateClaimedOperationOrFail(completion.next, op.attempts);
      !claimed.ok()) {
    return claimed;
  }
  if (completion.move) {
    auto moved = tx.Move(paid.account_id, *completion.move, op.amount, op.id, now);
    if (!moved.ok()) return moved.status();
    // The hold is ours and covers the amount: a move refused here is a store that does not hold
    // what the claim says, and nothing of it is written.
    if (*moved != MoveOutcome::kOk) {
      return Status::Error(ErrorCode::kStoreCorrupt,
                           "operation " + op.id + ": its hold does not cover its amount");
    }
  }
  if (completion.verdict == Verdict::kKeep) {
    std::string detail = outcome.kind == UpstreamKind::kResponded
                             ? "upstream answered " + std::to_string(outcome.status)
                             : "upstream " + outcome.detail;
    Status appended =
        tx.AppendEvent({op.id, now, TraceActor::kUpstream, "hold_kept",
                        detail + "; hold kept after attempt " + std::to_string(op.attempts),
                        TraceFacts()
                            .Attempt(op.attempts)
                            .Amount(op.amount)
                            .HttpStatus(outcome.status)
                            .Reason(UpstreamReasonCode(outcome))});
    if (!appended.ok()) return appended;
  }
  return completion;  // postings tell the rest
}

HttpResponse WalletPath::Answer(const PaidRequest& paid, WalletAnswer answer) {
  const Operation& op = paid.begin.op;
  switch (answer) {
    case WalletAnswer::kReplay:
      return StoredAnswer(op, true);
    case WalletAnswer::kMismatch:
      return MismatchAnswer(op);
    case WalletAnswer::kInsufficientFunds:
      return ProblemResponse(402, ProblemCode::kInsufficientFunds,
                             "the account's available balance is below the price of " +
                                 std::to_string(paid.route->price));
    case WalletAnswer::kStoreProblem:
      return StoreProblem(paid.failure);
    case WalletAnswer::kTakenOver:
      return TakenOverAnswer(op);
    case WalletAnswer::kOutcomeUnrecorded: {
      HttpResponse response = ProblemResponse(
          503, ProblemCode::kStoreUnavailable,
          "the upstream was called but its outcome could not be recorded (" +
              std::string(paid.failure.code()) +
              "); the hold stays until a retry with the same Idempotency-Key completes it, "
              "without a second charge",
          op.id);
      response.SetHeader("Retry-After", "1");
      response.SetHeader("Location", "/v1/operations/" + op.id);
      return WithOperation(std::move(response), op.id, false);
    }
    case WalletAnswer::kVerdict:
      break;
    case WalletAnswer::kNone:
      AGENTPAY_CHECK(false);  // not a reply
  }
  AGENTPAY_CHECK(paid.completion.has_value() && paid.outcome.has_value());
  const Completion& completion = *paid.completion;
  const UpstreamOutcome& outcome = *paid.outcome;
  ctx_.metrics.CountVerdict(completion.verdict);
  switch (completion.verdict) {
    case Verdict::kCapture:
    case Verdict::kRelease:
      return StoredAnswer(completion.next, false);
    case Verdict::kKeep: {
      bool timeout = outcome.kind == UpstreamKind::kTimeout;
      std::string what = outcome.kind == UpstreamKind::kResponded
                             ? "the upstream answered " + std::to_string(outcome.status)
                             : "the upstream call failed (" + outcome.detail + ")";
      return PendingAnswer(completion.next, timeout ? 504 : 502, ProblemCode::kFulfillmentPending,
                           what +
                               "; the hold is kept and a retry with the same "
                               "Idempotency-Key is not charged again",
                           false);
    }
  }
  AGENTPAY_CHECK(false);
}

void WalletPath::TakeAttempt(PaidRequest& paid) {
  paid.attempt_token = attempts_.Take(paid.begin.op);
}

void WalletPath::DropAttempt(PaidRequest& paid) {
  if (paid.attempt_token == 0) return;
  attempts_.Drop(paid.begin.op.id, paid.attempt_token);
  paid.attempt_token = 0;
}

}  // namespace agentpay
