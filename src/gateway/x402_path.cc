// The x402 payment path's driver: the machine's effects (core/x402_payment.h), the broadcast
// and the receipt wait; see x402_path.h.
#include "gateway/x402_path.h"

#include <algorithm>

#include "core/check.h"
#include "core/mutants.h"
#include "core/receipt_wait.h"
#include "gateway/answers.h"
#include "gateway/x402_path_state.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

using x402::Failure;

constexpr size_t kMaxQueuedChainCalls = 4096;

}  // namespace

X402Path::X402Path(const GatewayContext& context, Settler& settler, const X402Offers& offers,
                   Executor* chain_calls)
    : ctx_(context),
      settler_(settler),
      offers_(offers),
      own_pool_(chain_calls != nullptr ? nullptr
                                       : std::make_unique<WorkerPool>(context.config.chain_threads,
                                                                      kMaxQueuedChainCalls)),
      chain_calls_(chain_calls != nullptr ? *chain_calls : *own_pool_) {}

X402Path::~X402Path() {
  if (own_pool_) own_pool_->Stop();
}

void X402Path::OnChain(std::function<void()> call, std::function<void()> refused) {
  if (!chain_calls_.TrySubmit(std::move(call))) refused();
}

void X402Path::Pay(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                   Respond respond) {
  auto p = std::make_shared<Payment>();
  p->request = std::move(request);
  p->route = &route;
  p->respond = std::move(respond);
  if (auto refused = Prepare(*p)) return Reply(p, std::move(*refused));
  p->machine.deferred_failure = p->deferred != Failure::kNone;
  Advance(std::move(p), X402Started{});
}

// One step of the payment's machine (core/x402_payment.h), then its effect. Each effect ends by
// feeding what happened back here, from whichever thread it finished on.
void X402Path::Advance(PaymentPtr p, const X402Event& event) {
  X402Transition t = Step(p->machine, event);
  p->machine = t.next;
  switch (t.effect.kind) {
    case X402EffectKind::kLook:
      return Look(std::move(p));
    case X402EffectKind::kDecide:
      return Decide(std::move(p));
    case X402EffectKind::kPreflight:
      return Preflight(std::move(p), t.effect.take_payer_token);
    case X402EffectKind::kAskChain:
      return AskChainForProof(std::move(p));
    case X402EffectKind::kCallUpstream:
      return CallUpstream(std::move(p));
    case X402EffectKind::kReadInputs:
      return ReadInputs(std::move(p));
    case X402EffectKind::kSign:
      return Sign(std::move(p));
    case X402EffectKind::kFinish:
      return FinishCall(std::move(p), t.effect.as_failed_call);
    case X402EffectKind::kSettle:
      return Settle(std::move(p));
    case X402EffectKind::kRecord:
      return Record(std::move(p), t.effect.record);
    case X402EffectKind::kAttach: {
      // A seller's settle still in flight when the wait ends is answered as a settle
      // (settlement_pending with its transaction), not with the gateway's 202.
      AnswerStillPending still_pending;
      if (p->sold) {
        still_pending = [this, p](const Operation& op, const std::string&) {
          return SellerState(*p, op);
        };
      }
      return ctx_.attachments.Attach(
          p->op,
          [this, p](const Operation& op) -> std::optional<HttpResponse> {
            if (op.fulfillment == Fulfillment::kInProgress) return std::nullopt;
            return StateAnswer(*p, op, true);
          },
          p->respond, std::move(still_pending));
    }
    case X402EffectKind::kReply:
      if (t.effect.answer == X402Answer::kRefusePublic) ctx_.metrics.CountProofRefused();
      return Reply(p, AnswerFor(*p, t.effect.answer));
  }
  AGENTPAY_CHECK(false);
}

// The usual first look at a new payment finds neither its key nor its authorization stored: it
// needs the chain's preflight and changes nothing, which a read tells without a decision of the
// writer's. The decision after the preflight reads all of it again. The read may wait on the
// database: off this thread (an I/O thread), and back with what it saw.
void X402Path::Look(PaymentPtr p) {
  auto needs_preflight = std::make_shared<bool>(false);
  ctx_.store.ReadAsync(
      ctx_.readers,
      [this, p, needs_preflight](Transaction& tx) -> Status {
        auto record = FindPayerKey(tx, *p);
        if (!record.ok()) return record.status();
        if (record->has_value()) return Status::Ok();
        auto without = WithoutPreflight(tx, *p);
        if (!without.ok()) return without.status();
        *needs_preflight = without->kind == X402Arrival::kNeedsPreflight;
        return Status::Ok();
      },
      [this, p, needs_preflight](Status read) {
        // No reader free: the arrival decision reads it all itself.
        if (read.error() == ErrorCode::kStoreOverloaded) {
          return Advance(p, X402Looked{ReadResult::kOverloaded, false});
        }
        if (!read.ok()) {
          p->problem = std::move(read);
          return Advance(p, X402Looked{ReadResult::kFailed, false});
        }
        if (*needs_preflight) p->begin_kind = X402Arrival::kNeedsPreflight;
        Advance(p, X402Looked{ReadResult::kOk, *needs_preflight});
      },
      ReadWait::kUnsynced);
}

// One arrival decision (DecideX402Arrival).
void X402Path::Decide(PaymentPtr p) {
  ctx_.store.WriteAsync(
      [this, p](Transaction& tx) -> Status {
        auto begin = DecideX402Arrival(tx, *p);
        if (!begin.ok()) return begin.status();
        const bool rolls_back = begin->RollsBack();
        p->op = std::move(begin->op);
        p->payment = std::move(begin->payment);
        p->begin_kind = begin->kind;
        return rolls_back ? Rollback() : Status::Ok();
      },
      [this, p](Status status) {
        // A reservation is only for the request that creates the operation: any other lets go
        // of its hold now, not when its answer (an attach may wait long) is done with the
        // payment, which may be after the gateway is gone (MALLOC_PERTURB_ caught that as a
        // crash on a freed mutex).
        if (p->begin_kind != X402Arrival::kProceed) p->reservation.reset();
        if (!status.ok() && !IsRollback(status)) {
          p->problem = std::move(status);
          return Advance(p, X402Decided{CommitResult::kFailed});
        }
        // A new operation paid by the authorization this request reserved: the reservation is
        // its own now, until the settlement is decided (Release).
        if (p->begin_kind == X402Arrival::kProceed && p->reservation) {
          p->reservation->KeepIfStored(p->payment.authorization);
        }
        Advance(p, X402Decided{CommitResult::kOk, p->begin_kind,
                               p->op.settlement == Settlement::kSubmitted});
      });
}

// A new operation: what the token says of the payment, read before anything is stored; then the
// arrival is decided once more (a concurrent request with the same key may have spent this very
// nonce meanwhile, and then this one attaches or replays instead of a 402). Asked again
// (kReadAgain): another gateway's settlement or reservation of this payer came between, and the
// epoch and the balance are read anew.
void X402Path::Preflight(PaymentPtr p, bool take_payer_token) {
  p->inputs.reset();
  p->cover.reset();
  OnChain(
      [this, p, take_payer_token] {
        // The store's reservations of the payer (every gateway's) and its epoch, read before the
        // chain: the decision compares them with what it finds then (DecideNew).
        const int64_t now_ms = ctx_.clock.NowMs();
        PayerReservationState stored;
        Status read = ctx_.store.ReadUnsynced([&](Transaction& tx) -> Status {
          auto state = tx.ReadPayerReservations(settler_.Network(), settler_.AssetHex(),
                                                p->presented.authorization.from,
                                                now_ms / 1000 - ctx_.config.expiry_buffer_seconds);
          if (!state.ok()) return state.status();
          stored = *state;
          return Status::Ok();
        });
        if (!read.ok()) {
          p->problem = std::move(read);
          return Advance(p, X402Preflighted{X402Preflight::kStoreFailed});
        }
        auto preflight =
            settler_.Check(p->payload.authorization, p->payload.signature, now_ms, stored.reserved);
        if (!preflight.ok()) {
          p->chain_detail = preflight.status().message();
          return Advance(p,
                         X402Preflighted{preflight.status().error() == ErrorCode::kChainFeesTooHigh
                                             ? X402Preflight::kFeesTooHigh
                                             : X402Preflight::kChainUnavailable});
        }
        if (preflight->limited != Settler::Limited::kNo) {
          p->limited = std::move(*preflight);
          return Advance(p, X402Preflighted{X402Preflight::kPayerLimited});
        }
        if (preflight->failure != Failure::kNone) {
          p->preflight_failure = std::move(*preflight);
          return Advance(p, X402Preflighted{X402Preflight::kRefused});
        }
        // The payer's bucket only for an authorization the chain calls fresh, which only the
        // payer can make: re-sending its public ones (or junk in its name) cannot drain it.
        if (take_payer_token) {
          if (auto retry_after_s = ctx_.rate_limiters.payer.Take(p->presented.authorization.from,
                                                                 ctx_.timers.MonotonicMs())) {
            p->payer_retry_after_s = *retry_after_s;
            return Advance(p, X402Preflighted{X402Preflight::kPayerRateLimited});
          }
        }
        p->inputs = preflight->inputs;
        p->reservation = std::move(preflight->hold);
        p->cover = Payment::Cover{stored.epoch, preflight->covered, preflight->covered_is_balance};
        Advance(p, X402Preflighted{X402Preflight::kCovered});
      },
      [this, p] { Advance(p, X402Preflighted{X402Preflight::kQueueFull}); });
}

// The key found an operation paid with another authorization: whether this one is fresh (never
// used on chain) decides whether it proves the payer (core/payer_proof.h). Nothing is stored.
void X402Path::AskChainForProof(PaymentPtr p) {
  OnChain(
      [this, p] {
        auto used = settler_.AuthorizationUsed(p->payload.authorization);
        if (!used.ok()) {
          p->chain_detail = used.status().message();
          return Advance(p, X402ChainAnswered{X402ChainAsk::kFailed});
        }
        p->presented_on_chain = *used ? PayerProofFacts::Chain::kUsed
                                      : PayerProofFacts::Chain::kUnused;
        Advance(p, X402ChainAnswered{X402ChainAsk::kAnswered});
      },
      [this, p] { Advance(p, X402ChainAnswered{X402ChainAsk::kQueueFull}); });
}

void X402Path::WriteClaimed(const Operation& held, Operation next, std::optional<TraceEvent> event,
                            std::function<Status(Transaction&)> also,
                            std::function<void(Result<bool>)> done) {
  auto claimed = std::make_shared<bool>(false);
  ctx_.store.WriteAsync(
      [claimed, next = std::move(next), event = std::move(event), also = std::move(also),
       attempts = held.attempts](Transaction& tx) -> Status {
        auto updated = tx.UpdateClaimedOperation(next, attempts);
        if (!updated.ok()) return updated.status();
        *claimed = *updated;
        if (!*claimed) return Status::Ok();
        if (also) {
          if (Status s = also(tx); !s.ok()) return s;
        }
        return event ? tx.AppendEvent(*event) : Status::Ok();
      },
      [this, claimed, id = held.id, done = std::move(done)](Status status) {
        ctx_.attachments.Completed(id);
        if (!status.ok()) return done(std::move(status));
        done(*claimed);
      });
}

// What a claimed decision's completion (WriteClaimed) tells the machine; a store error is kept
// for the answer.
CommitResult X402Path::CommitOf(Payment& p, const Result<bool>& claimed) {
  if (!claimed.ok()) {
    p.problem = claimed.status();
    return CommitResult::kFailed;
  }
  return *claimed ? CommitResult::kOk : CommitResult::kClaimLost;
}

void X402Path::CallUpstream(PaymentPtr p) {
  p->upstream_started_ms = ctx_.timers.MonotonicMs();
  if (p->sold) {
    // A seller's settle has nothing upstream: the upstream is called once the settlement is
    // settled (X3), and what it delivers is the settle answer, stored as the operation's answer.
    AGENTPAY_CHECK(p->op.settlement == Settlement::kSettled);
    HttpResponse answer = SellerState(*p, p->op);
    return OnUpstreamAnswered(p, UpstreamOutcome{UpstreamKind::kResponded, answer.status,
                                                 "application/json", std::move(answer.body), ""});
  }
  ctx_.upstream.CallAsync(*p->route, p->request, p->op.id, [this, p](UpstreamOutcome outcome) {
    OnUpstreamAnswered(p, std::move(outcome));
  });
}

// X9–X14: the upstream call of an attempt whose settlement is settled or none.
void X402Path::OnUpstreamAnswered(PaymentPtr p, UpstreamOutcome outcome) {
  ctx_.metrics.CountUpstream(ctx_.timers.MonotonicMs() - p->upstream_started_ms,
                             outcome.kind == UpstreamKind::kResponded);
  p->completed_ms = ctx_.clock.NowMs();
  p->completion = CompleteX402Call(p->op, outcome, p->completed_ms, ctx_.config.retention_ms);
  p->outcome = std::move(outcome);
  Advance(p, X402UpstreamAnswered{p->completion->submit_settlement});
}

// X13 (settle=after, the upstream delivered): what the relayer's transaction needs from the chain,
// read before the decision that signs it.
void X402Path::ReadInputs(PaymentPtr p) {
  auto authorization = AuthorizationOf(p->payment);
  auto signature = SignatureOf(p->payment);
  if (!authorization.ok() || !signature.ok()) {
    p->problem = authorization.ok() ? signature.status() : authorization.status();
    return Advance(p, X402InputsRead{X402Inputs::kStoredBroken});
  }
  OnChain(
      [this, p, authorization = std::move(*authorization), signature = std::move(*signature)] {
        auto inputs = settler_.ReadTxInputs(authorization, signature, ctx_.clock.NowMs());
        if (!inputs.ok()) {
          p->chain_detail = inputs.status().message();
          return Advance(p, X402InputsRead{X402Inputs::kUnavailable});
        }
        p->signing_inputs = std::move(*inputs);
        Advance(p, X402InputsRead{X402Inputs::kRead});
      },
      [this, p] {
        p->chain_detail = "too many x402 payments are waiting on the chain";
        Advance(p, X402InputsRead{X402Inputs::kUnavailable});
      });
}

// X13: sign and store the transaction with the call's completion, in one decision (the relayer
// nonce is taken there); then settle. The upstream's answer is delivered once the money moved.
void X402Path::Sign(PaymentPtr p) {
  auto payment = std::make_shared<X402PaymentRecord>();
  const int64_t now = p->completed_ms;
  WriteClaimed(
      p->op, p->completion->next, std::nullopt,
      [this, payment, presented = p->payment, inputs = *p->signing_inputs, now,
       status = p->outcome.status, attempt = p->op.attempts,
       amount = p->op.amount](Transaction& tx) {
        auto signed_payment = SignAndStore(tx, presented, inputs, now);
        if (!signed_payment.ok()) return signed_payment.status();
        *payment = std::move(*signed_payment);
        return tx.AppendEvent(
            {payment->operation_id, now, TraceActor::kGateway, "settlement_submitted",
             "upstream answered " + std::to_string(status) + "; transaction " + payment->tx_hash,
             TraceFacts()
                 .Attempt(attempt)
                 .Amount(amount)
                 .HttpStatus(status)
                 .TxHash(payment->tx_hash)
                 .Reason("settle_after_upstream")});
      },
      [this, p, payment](Result<bool> claimed) {
        const CommitResult commit = CommitOf(*p, claimed);
        if (commit == CommitResult::kOk) {
          p->op = p->completion->next;
          p->payment = std::move(*payment);
          p->upstream_2xx = p->outcome;
        }
        Advance(p, X402Committed{commit});
      });
}

// The end of an upstream call that needs no settlement now: delivered, refused or kept (X9–X12,
// X14). `as_failed_call`: the settlement due could not be signed; not settled, so not delivered,
// and the attempt ends as a failed call that a retry settles.
void X402Path::FinishCall(PaymentPtr p, bool as_failed_call) {
  const int64_t now = p->completed_ms;
  if (as_failed_call) {
    p->outcome =
        UpstreamOutcome{UpstreamKind::kFailed, 0, "", "",
                        "the chain refused or could not be asked to settle: " + p->chain_detail};
    p->completion = CompleteX402Call(p->op, p->outcome, now, ctx_.config.retention_ms);
    AGENTPAY_CHECK(!p->completion->submit_settlement);
  }
  const UpstreamOutcome& outcome = p->outcome;
  const bool keep = p->completion->verdict == Verdict::kKeep;
  std::optional<TraceEvent> kept;
  if (keep) {
    kept = TraceEvent{p->op.id,
                      now,
                      TraceActor::kUpstream,
                      "fulfillment_pending",
                      outcome.kind == UpstreamKind::kResponded
                          ? "upstream answered " + std::to_string(outcome.status)
                          : "upstream " + outcome.detail,
                      TraceFacts()
                          .Attempt(p->op.attempts)
                          .HttpStatus(outcome.status)
                          .TxHash(p->payment.tx_hash)
                          .Reason(UpstreamReasonCode(outcome))};
  }
  p->finished = p->completion->next;
  WriteClaimed(p->op, p->completion->next, std::move(kept), {}, [this, p](Result<bool> claimed) {
    const CommitResult commit = CommitOf(*p, claimed);
    // X14: the authorization will never be submitted.
    if (commit == CommitResult::kOk && IsFinal(p->finished) &&
        p->finished.settlement == Settlement::kNone) {
      settler_.reservations().Release(p->payment.authorization);
    }
    Advance(p, X402Committed{commit});
  });
}

// Broadcasts the stored transaction, then polls for its receipt up to the receipt timeout. The
// payments settled within --settle-batch-window-ms of each other go to the node together, in
// relayer nonce order, in one request (Settler::Broadcast), and with --settle-batch-max above 1
// share transactions, signed then (SignGathered). How long the first one waits for company: a
// payment waits at most this much longer for its receipt, where a block takes a second or more
// on a public chain. On a node that mines on demand (Anvil) the transactions gathered share a
// block; x402 payments through the gateway on Anvil, 16 clients: 223/s alone, 347/s gathered for
// 5 ms, 364/s for 10 ms (bench/README.md): a node holds a transaction whose nonce is past
// one it has not seen yet in a queue of its own, while one that arrives after those below it is
// ready at once (and, where the node mines on demand, shares their block).
void X402Path::Settle(PaymentPtr p) {
  AGENTPAY_CHECK(p->op.settlement == Settlement::kSubmitted);
  bool first;
  {
    std::lock_guard lock(gathered_mutex_);
    gathered_.push_back(std::move(p));
    first = gathered_.size() == 1;
  }
  if (first) {
    ctx_.timers.After(ctx_.config.settle_batch_window_ms, [this] {
      {
        std::lock_guard lock(gathered_mutex_);
        gather_ended_ = true;
        // The broadcast on its way sends these when it is done.
        if (broadcasting_) return;
        broadcasting_ = true;
      }
      BroadcastGathered();
    });
  }
}

// Precondition: broadcasting_ was set for this call.
void X402Path::BroadcastGathered() {
  std::vector<PaymentPtr> batch;
  {
    std::lock_guard lock(gathered_mutex_);
    batch.swap(gathered_);
    gather_ended_ = false;
  }
  // The next broadcast, once this one is done: the payments gathered meanwhile whose wait for
  // company is over.
  auto next = [this] {
    {
      std::lock_guard lock(gathered_mutex_);
      if (!gather_ended_) {
        broadcasting_ = false;
        return;
      }
    }
    BroadcastGathered();
  };
  const bool all_signed = std::all_of(batch.begin(), batch.end(),
                                      [](const PaymentPtr& p) { return p->payment.submitted(); });
  if (all_signed) return SendGathered(std::move(batch), std::move(next));
  SignGathered(std::move(batch), std::move(next));
}

void X402Path::SignGathered(std::vector<PaymentPtr> batch, std::function<void()> next) {
  // Which of `batch` the decision signed, by index (the rest were signed before, or could not be).
  auto signed_records = std::make_shared<std::vector<std::optional<X402PaymentRecord>>>();
  const size_t most = std::max<size_t>(ctx_.config.settle_batch_max, 1);
  ctx_.store.WriteAsync(
      [this, batch, signed_records, most](Transaction& tx) -> Status {
        signed_records->assign(batch.size(), std::nullopt);
        const int64_t now = ctx_.clock.NowMs();
        // The members: unsigned, their operation and payment as the arrival decision left them.
        std::vector<size_t> members;
        for (size_t i = 0; i < batch.size(); ++i) {
          const Payment& p = *batch[i];
          if (p.payment.submitted() || !p.inputs) continue;
          auto op = tx.FindOperation(p.op.id);
          if (!op.ok()) return op.status();
          auto stored = tx.FindX402Payment(p.op.id);
          if (!stored.ok()) return stored.status();
          if (!op->has_value() || **op != p.op || !stored->has_value() || (*stored)->submitted()) {
            continue;  // moved on without this attempt (the reconciler's now)
          }
          members.push_back(i);
        }
        for (size_t begin = 0; begin < members.size(); begin += most) {
          const size_t end = std::min(members.size(), begin + most);
          std::vector<X402PaymentRecord> records;
          std::vector<TxInputs> inputs;
          for (size_t k = begin; k < end; ++k) {
            records.push_back(batch[members[k]]->payment);
            inputs.push_back(*batch[members[k]]->inputs);
          }
          const TxInputs together = Settler::Together(inputs);
          auto nonce = settler_.TakeNonce(tx, together.pending_nonce);
          if (!nonce.ok()) return nonce.status();
          auto signed_batch = settler_.SignTogether(std::move(records), together, *nonce, now);
          if (!signed_batch.ok()) return signed_batch.status();
          const size_t size = signed_batch->size();
          for (size_t k = begin; k < end; ++k) {
            X402PaymentRecord& record = (*signed_batch)[k - begin];
            if (Status s = tx.UpdateX402Payment(record); !s.ok()) return s;
            const Operation& op = batch[members[k]]->op;
            std::string detail = "transaction " + record.tx_hash + ", relayer nonce " +
                                 std::to_string(record.relayer_nonce);
            if (size > 1) detail += ", one of " + std::to_string(size) + " payments it settles";
            if (Status s = tx.AppendEvent({op.id, now, TraceActor::kGateway, "settlement_submitted",
                                           std::move(detail),
                                           TraceFacts()
                                               .Attempt(op.attempts)
                                               .Amount(op.amount)
                                               .TxHash(record.tx_hash)
                                               .Reason("settle_before_upstream")});
                !s.ok()) {
              return s;
            }
            (*signed_records)[members[k]] = std::move(record);
          }
        }
        return Status::Ok();
      },
      // A copy of `batch` (not moved: the decision above holds it too, and the order the two
      // lambdas are built in is unspecified).
      [this, batch, signed_records, next = std::move(next)](Status status) mutable {
        std::vector<PaymentPtr> send;
        for (size_t i = 0; i < batch.size(); ++i) {
          PaymentPtr& p = batch[i];
          if (p->payment.submitted()) {
            send.push_back(std::move(p));
          } else if (status.ok() && (*signed_records)[i]) {
            p->payment = std::move(*(*signed_records)[i]);
            send.push_back(std::move(p));
          } else {
            // Not signed: nothing of it can be on chain. Unknown, not failed: the reconciler
            // signs it alone while it can still be paid (reconciler.cc LookAtUnsigned).
            OnReceiptDecided(std::move(p), std::nullopt);
          }
        }
        if (send.empty()) return next();
        SendGathered(std::move(send), std::move(next));
      });
}

void X402Path::SendGathered(std::vector<PaymentPtr> batch, std::function<void()> next) {
  std::stable_sort(batch.begin(), batch.end(), [](const PaymentPtr& a, const PaymentPtr& b) {
    return a->payment.relayer_nonce < b->payment.relayer_nonce;
  });
  OnChain(
      [this, batch, next] {
        // Each transaction once: a batch's members share theirs.
        std::vector<const X402PaymentRecord*> records;
        std::vector<size_t> sent_as(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) {
          if (records.empty() || records.back()->tx_hash != batch[i]->payment.tx_hash) {
            records.push_back(&batch[i]->payment);
          }
          sent_as[i] = records.size() - 1;
        }
        std::vector<Status> sent = settler_.Broadcast(records);
        int64_t first_look;
        {
          std::lock_guard lock(polls_mutex_);
          first_look = polls_.FirstLookMs();
        }
        const int64_t now = ctx_.timers.MonotonicMs();
        for (size_t i = 0; i < batch.size(); ++i) {
          const PaymentPtr& p = batch[i];
          if (!sent[sent_as[i]].ok()) {
            // Unknown, not failed: the node may have it anyway. The reconciler re-sends the bytes.
            ctx_.metrics.CountSettlement(SettlementEvent::kBroadcastError);
          }
          p->sent_ms = now;
          p->receipt_deadline_ms = p->sent_ms + ctx_.config.receipt_timeout_ms;
          SchedulePoll(p, std::min(first_look, ctx_.config.receipt_timeout_ms));
        }
        next();
      },
      // Not even broadcast: unknown all the same, and the reconciler sends the stored bytes.
      [this, batch, next] {
        for (const PaymentPtr& p : batch) OnReceiptDecided(p, std::nullopt);
        next();
      });
}

// One look at the receipt (on the chain pool, one RPC call); then decided, or the next look after a
// pause learned from the receipts seen before (core/receipt_polls.h), until the deadline. A full
// observation (Settler::Observe) only when the receipt is there, or at the deadline: it tells a
// failed settlement (the nonce spent by another transaction) from one still pending, and counts the
// confirmations of one that paid us (fewer than --confirmations: the looks go on until the
// deadline).
void X402Path::PollReceipt(PaymentPtr p) {
  const int64_t now = ctx_.timers.MonotonicMs();
  const bool last = now >= p->receipt_deadline_ms;
  auto receipt = settler_.LookForReceipt(p->payment);
  ReceiptSeen seen = ReceiptSeen::kLookFailed;
  if (receipt.ok()) {
    seen = receipt->view == ReceiptView::kNone                  ? ReceiptSeen::kNone
           : receipt->view == ReceiptView::kSuccessWithTransfer ? ReceiptSeen::kPaidUs
                                                                : ReceiptSeen::kMinedOtherwise;
  }
  if (seen == ReceiptSeen::kPaidUs || seen == ReceiptSeen::kMinedOtherwise) {
    std::lock_guard lock(polls_mutex_);
    polls_.Found(p->last_empty_look_ms, now - p->sent_ms);
  } else if (seen == ReceiptSeen::kNone) {
    ++p->empty_looks;
    p->last_empty_look_ms = now - p->sent_ms;
  }
  ReceiptStep step = AfterReceiptLook(seen, last);
  std::optional<Reconciliation> reconciled;
  if (step == ReceiptStep::kObserve) {
    auto observed = settler_.Observe(p->payment, *receipt);
    if (observed.ok()) {
      reconciled = Reconcile(Settlement::kSubmitted, ToSettlementRecord(p->payment), *observed,
                             ctx_.config.expiry_buffer_seconds, settler_.config().confirmations);
    }
    step = AfterReceiptObservation(
        seen, reconciled ? std::optional(reconciled->action) : std::nullopt, last);
    if (step == ReceiptStep::kSettled) {
      // The receipt's block, for the reconciler's watch for reorganisations.
      p->payment = AsSettled(p->payment, *observed, ctx_.clock.NowMs());
    }
  }
  switch (step) {
    case ReceiptStep::kSettled:
    case ReceiptStep::kFailed:
      return OnReceiptDecided(std::move(p), std::move(reconciled));
    case ReceiptStep::kUnknown:
      return OnReceiptDecided(std::move(p), std::nullopt);
    case ReceiptStep::kLookAgain:
      break;
    case ReceiptStep::kObserve:
      AGENTPAY_CHECK(false);  // AfterReceiptObservation never asks for another full look
  }
  int64_t gap;
  {
    std::lock_guard lock(polls_mutex_);
    gap = polls_.NextGapMs(std::max(p->empty_looks, 1));
  }
  SchedulePoll(std::move(p), std::min(gap, p->receipt_deadline_ms - now));
}

void X402Path::SchedulePoll(PaymentPtr p, int64_t delay_ms) {
  p->poll_delay_ms = delay_ms;
  ctx_.timers.After(delay_ms, [this, p] {
    OnChain([this, p] { PollReceipt(p); },
            [this, p] {
              // The pool is full: this look is skipped; the next one, or the deadline, decides.
              const int64_t now = ctx_.timers.MonotonicMs();
              if (now >= p->receipt_deadline_ms) return OnReceiptDecided(p, std::nullopt);
              SchedulePoll(p, std::min(std::max(p->poll_delay_ms, ReceiptPolls::kMinGapMs),
                                       p->receipt_deadline_ms - now));
            });
  });
}

// How the receipt wait ended: settled or failed (Reconcile's decision), or unknown (nullopt).
void X402Path::OnReceiptDecided(PaymentPtr p, std::optional<Reconciliation> decided) {
  X402Receipt receipt = !decided                                           ? X402Receipt::kUnknown
                        : decided->action == ReconcileAction::kMarkSettled ? X402Receipt::kSettled
                                                                           : X402Receipt::kFailed;
  p->decided = std::move(decided);
  Advance(std::move(p), X402ReceiptDecided{receipt});
}

// One decision writes what the receipt wait found: settled (then the upstream is called, or its
// 2xx delivered on settle=after), failed (an alert), or unknown (the reconciler's from now on).
void X402Path::Record(PaymentPtr p, X402Record record) {
  const int64_t now = ctx_.clock.NowMs();
  const Operation& op = p->op;
  const std::string& tx_hash = p->payment.tx_hash;
  // Settled (the chain balance shows it now) or failed (the money did not move through us): the
  // payer's reservation goes. Unknown keeps it: the authorization may still be used.
  if (p->decided) settler_.reservations().Release(p->payment.authorization);
  auto committed = [this, p](Result<bool> claimed) {
    Advance(p, X402Committed{CommitOf(*p, claimed)});
  };
  switch (record) {
    case X402Record::kSettledThenCall:
    case X402Record::kSettledThenDeliver: {
      ctx_.metrics.CountSettlement(SettlementEvent::kSettled);
      p->settled = MarkSettled(op, now);
      TraceEvent event{
          op.id,
          now,
          TraceActor::kChain,
          "settled",
          "receipt of " + tx_hash + " in block " + std::to_string(p->payment.settled_block),
          TraceFacts()
              .Attempt(op.attempts)
              .Amount(op.amount)
              .TxHash(tx_hash)
              .Block(p->payment.settled_block)};
      auto record_block = [payment = p->payment](Transaction& tx) {
        return tx.UpdateX402Payment(payment);
      };
      if (record == X402Record::kSettledThenDeliver) {
        // X3 then X10: the upstream's answer is delivered now that the money moved.
        X402Completion done =
            CompleteX402Call(p->settled, *p->upstream_2xx, now, ctx_.config.retention_ms);
        p->finished = done.next;
        return WriteClaimed(op, std::move(done.next), std::move(event), record_block, committed);
      }
      p->finished =
          BeginX402Call(p->settled, now, p->route->timeout_ms + kLeaseMarginMs, ctx_.instance_id);
      return WriteClaimed(op, p->finished, std::move(event), record_block,
                          [this, p](Result<bool> claimed) {
                            const CommitResult commit = CommitOf(*p, claimed);
                            if (commit == CommitResult::kOk) p->op = p->finished;
                            Advance(p, X402Committed{commit});
                          });
    }
    case X402Record::kFailed: {  // our transaction did not move the money, yet the nonce is spent
      ctx_.metrics.CountSettlement(SettlementEvent::kFailed);
      p->finished = MarkFailed(op, now, SettlementFailedResponse(op.id), ctx_.config.retention_ms);
      TraceEvent event{
          op.id,
          now,
          TraceActor::kChain,
          "settlement_failed",
          p->decided->reason,
          TraceFacts().Attempt(op.attempts).TxHash(tx_hash).Reason("settlement_failed")};
      Alert alert = SettlementFailedAlert(ctx_.random, op.id, p->decided->reason, now);
      return WriteClaimed(
          op, p->finished, std::move(event),
          [alert](Transaction& tx) { return tx.InsertAlert(alert); }, committed);
    }
    case X402Record::kUnknown: {
      ctx_.metrics.CountSettlement(SettlementEvent::kUnknown);
      p->finished = MarkUnknown(op, now);
      if (MutantActive(
              Mutant::kVoidAtReceiptDeadline)) {  // no receipt in time taken for no payment
        settler_.reservations().Release(p->payment.authorization);
        p->finished = MarkVoid(p->finished, now, SettlementVoidResponse(op.id));
      }
      TraceEvent event{op.id,
                       now,
                       TraceActor::kGateway,
                       "settlement_unknown",
                       tx_hash.empty()
                           ? "its batch's transaction was not signed; the reconciler signs it "
                             "alone while the authorization can still be paid"
                           : "no receipt for " + tx_hash + " within " +
                                 std::to_string(ctx_.config.receipt_timeout_ms) + " ms",
                       TraceFacts().Attempt(op.attempts).TxHash(tx_hash).Reason("receipt_timeout")};
      return WriteClaimed(op, p->finished, std::move(event), {}, committed);
    }
    case X402Record::kNone:
      break;
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
