// The x402 payment path (CONTRACT §3, §5; the X1–X16 table of core/settlement.h): decode and
// verify the payment, reserve the key and store the authorization (and, settling before the
// upstream, the signed relayer transaction) in one decision, broadcast, wait for the receipt up to
// --receipt-timeout-ms, then call the upstream. An outcome not seen in time is `unknown`: 202 with
// Location, and the reconciler (workers/reconciler.h) decides it from the chain. It waits on the
// chain, so it runs on the gateway's blocking pool, one thread per payment in flight.
#include <chrono>
#include <future>
#include <limits>
#include <thread>

#include "core/check.h"
#include "core/idempotency.h"
#include "gateway/gateway_internal.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"
#include "settlement/answers.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace agentpay {

struct Gateway::X402Request {
  std::shared_ptr<const HttpRequest> request;
  const RouteConfig* route = nullptr;
  x402::Version version = x402::Version::kV2;
  x402::PaymentPayload payload;
  X402PaymentRecord presented;  // the authorization this request carries (no operation yet)
  std::string principal, key, fingerprint;
  // A failed check that does not put the payer's identity in doubt (recipient, amount, time
  // window, asset): it refuses a new operation, but a retry of an existing key is still answered.
  x402::Failure deferred = x402::Failure::kNone;
};

struct Gateway::X402Begin {
  enum Kind {
    kProceed,             // op and payment hold the attempt's claim: run it
    kReplay,              // op is final
    kMismatch,            // same key, another request
    kAttach,              // an attempt is in flight
    kUnknown,             // settlement submitted or unknown, nothing in flight (X8)
    kClosedUnpaid,        // X16 just now: the stored 402
    kNeedsPreflight,      // a new operation: check the payment on chain first
    kAuthorizationTaken,  // this authorization already pays for another operation
  } kind = kProceed;
  Operation op;
  X402PaymentRecord payment;
};

namespace {

using x402::Failure;

constexpr int kMaxBeginRounds = 3;

// Failures that leave the signer unproven: nothing about an existing key may be revealed.
bool RefusesBeforeKeyLookup(Failure failure) {
  switch (failure) {
    case Failure::kUnsupportedScheme:
    case Failure::kMissingDomain:
    case Failure::kNetworkMismatch:
    case Failure::kInvalidSignature:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> ToSeconds(const chain::U256& value) {
  if (!value.FitsInt64()) return std::nullopt;
  return value.ToInt64();
}

}  // namespace

HttpResponse Gateway::PayWithX402(std::shared_ptr<const HttpRequest> request,
                                  const RouteConfig& route) {
  X402Request x;
  x.request = std::move(request);
  x.route = &route;
  if (auto refused = PrepareX402(x)) return std::move(*refused);
  std::optional<TxInputs> inputs;
  std::optional<Settler::Preflight> preflight_failure;
  for (int round = 0; round < kMaxBeginRounds; ++round) {
    X402Begin begin;
    Status status = store_.Write([&](Transaction& tx) {
      return DecideX402Arrival(tx, x, inputs ? &*inputs : nullptr, begin);
    });
    if (!status.ok() && !IsRollback(status)) return StoreProblem(status);
    switch (begin.kind) {
      case X402Begin::kProceed:
        return RunX402Attempt(x, std::move(begin.op), std::move(begin.payment));
      case X402Begin::kReplay:
      case X402Begin::kUnknown:
        return X402StateAnswer(x, begin.op, begin.payment, true);
      case X402Begin::kClosedUnpaid:
        return X402StateAnswer(x, begin.op, begin.payment, false);
      case X402Begin::kMismatch:
        return MismatchAnswer(begin.op);
      case X402Begin::kAttach:
        return AwaitInFlight(begin.op, [&](const Operation& op) -> std::optional<HttpResponse> {
          if (op.fulfillment == Fulfillment::kInProgress) return std::nullopt;
          return X402StateAnswer(x, op, begin.payment, true);
        });
      case X402Begin::kAuthorizationTaken:
        return Challenge(*x.request, route, x402::ReasonCode(Failure::kNonceAlreadyUsed, x.version),
                         "this authorization already pays for another request");
      case X402Begin::kNeedsPreflight: {
        if (x.deferred != Failure::kNone) {
          return Challenge(*x.request, route, x402::ReasonCode(x.deferred, x.version),
                           "the payment does not match what this route asks for");
        }
        if (preflight_failure) {
          return Challenge(*x.request, route,
                           x402::ReasonCode(preflight_failure->failure, x.version),
                           "the token refuses this authorization" +
                               (preflight_failure->detail.empty()
                                    ? ""
                                    : ": " + preflight_failure->detail));
        }
        auto preflight = settler_->Check(x.payload.authorization, x.payload.signature);
        if (!preflight.ok()) {
          HttpResponse response = ProblemResponse(
              503, ProblemCode::kChainUnavailable,
              "the chain could not be asked about this payment (" + preflight.status().message() +
                  "); nothing was submitted, retry later");
          response.SetHeader("Retry-After", "1");
          return response;
        }
        if (preflight->failure != Failure::kNone) {
          // Decided once more before answering: a concurrent request with the same key may have
          // spent this very nonce, and then this one attaches or replays instead of a 402.
          preflight_failure = std::move(*preflight);
          continue;
        }
        inputs = preflight->inputs;
        continue;
      }
    }
    AGENTPAY_CHECK(false);
  }
  HttpResponse busy = ProblemResponse(503, ProblemCode::kLimitExceeded,
                                      "the key changed hands too often; retry with the same key");
  busy.SetHeader("Retry-After", "1");
  return busy;
}

// Decodes and verifies the payment and names its key. An answer means "refused, nothing stored".
std::optional<HttpResponse> Gateway::PrepareX402(X402Request& x) {
  const HttpRequest& request = *x.request;
  auto v2 = request.Header(x402::kPaymentSignatureHeader);
  x.version = v2 ? x402::Version::kV2 : x402::Version::kV1;
  auto header = v2 ? v2 : request.Header(x402::kXPaymentHeader);
  AGENTPAY_CHECK(header.has_value());
  auto decoded = x402::DecodePaymentHeader(*header, x.version);
  if (!decoded.ok()) {
    return ProblemResponse(400, ProblemCode::kMalformedPayment, decoded.status().message());
  }
  x.payload = std::move(*decoded);
  const int64_t now_s = clock_.NowMs() / 1000;
  Failure failure = x402::VerifyExact(x.payload, x402_offers_.For(*x.route), now_s);
  if (RefusesBeforeKeyLookup(failure)) {
    return Challenge(request, *x.route, x402::ReasonCode(failure, x.version),
                     "the payment is not valid for this route");
  }
  x.deferred = failure;
  const chain::TransferAuthorization& a = x.payload.authorization;
  auto valid_after = ToSeconds(a.valid_after);
  auto valid_before = ToSeconds(a.valid_before);
  if ((!valid_after || !valid_before) && x.deferred == Failure::kNone) {
    // A window beyond 2^63 seconds: no route asks for that, and it would not fit the store.
    x.deferred = Failure::kValidBeforeTooSoon;
  }
  const std::string payer = chain::ToLowerHex(a.from);
  x.principal = "payer:" + payer;
  x.presented.authorization = Authorization{payer, chain::Hex(a.nonce), valid_after.value_or(0),
                                            valid_before.value_or(0),
                                            a.value.FitsInt64() ? a.value.ToInt64() : 0};
  x.presented.pay_to = chain::ToLowerHex(a.to);
  x.presented.signature_hex = chain::Hex(x.payload.signature.bytes);
  x.presented.x402_version = static_cast<int>(x.version);
  if (auto key = request.Header("Idempotency-Key")) {
    if (!ValidIdempotencyKey(*key)) {
      return ProblemResponse(400, ProblemCode::kInvalidIdempotencyKey,
                             "Idempotency-Key must be 1-255 visible ASCII characters");
    }
    x.key = std::string(*key);
  } else if (x.payload.payment_identifier) {
    x.key = "payment-id:" + *x.payload.payment_identifier;
  } else if (x.route->require_idempotency_key) {
    return ProblemResponse(400, ProblemCode::kIdempotencyKeyRequired,
                           "this route requires an Idempotency-Key header (or the x402 "
                           "payment-identifier extension)");
  } else {
    x.key = "authorization:" + x.presented.authorization.nonce_hex;  // scoped to the payer
  }
  x.fingerprint = Sha256Hex(FingerprintMaterial(request.method, request.Path(), request.Query(),
                                                request.Header("Content-Type").value_or(""),
                                                request.body));
  return std::nullopt;
}

// One decision: reserve the key (or find it) and act on what DecideArrival and DecideX402Resume
// say. A new operation needs the chain's preflight first, which cannot run inside a decision:
// without `inputs` the decision changes nothing and asks for it.
Status Gateway::DecideX402Arrival(Transaction& tx, const X402Request& x, const TxInputs* inputs,
                                  X402Begin& begin) {
  begin = X402Begin{};
  const int64_t now = clock_.NowMs();
  auto record = tx.FindKey(x.principal, x.key);
  if (!record.ok()) return record.status();
  if (record->has_value()) {
    auto op = tx.FindOperation((*record)->operation_id);
    if (!op.ok()) return op.status();
    if (!op->has_value()) {
      return Status::Error(ErrorCode::kStoreCorrupt,
                           "key without operation " + (*record)->operation_id);
    }
    Arrival arrival = DecideArrival(&**record, &**op, x.fingerprint, now);
    metrics_.CountArrival(arrival.outcome);
    begin.op = **op;
    if (arrival.outcome != ArrivalOutcome::kNew && arrival.outcome != ArrivalOutcome::kMismatch) {
      auto payment = tx.FindX402Payment(begin.op.id);
      if (!payment.ok()) return payment.status();
      if (!payment->has_value()) {
        return Status::Error(ErrorCode::kStoreCorrupt,
                             "x402 operation without payment " + begin.op.id);
      }
      begin.payment = std::move(**payment);
    }
    switch (arrival.outcome) {
      case ArrivalOutcome::kReplay: begin.kind = X402Begin::kReplay; return Status::Ok();
      case ArrivalOutcome::kMismatch: begin.kind = X402Begin::kMismatch; return Status::Ok();
      case ArrivalOutcome::kAttach: begin.kind = X402Begin::kAttach; return Status::Ok();
      case ArrivalOutcome::kNew: break;  // past retention: forgotten below
      case ArrivalOutcome::kResume: {
        const int64_t now_s = now / 1000;
        bool can_settle = begin.payment.authorization.valid_before_s >
                          now_s + x402::kDefaultValidBeforeBufferSeconds;
        switch (DecideX402Resume(begin.op, can_settle)) {
          case X402Resume::kAnswerUnknown: begin.kind = X402Begin::kUnknown; return Status::Ok();
          case X402Resume::kCallUpstream: {
            Operation next = BeginX402Call(
                begin.op, now, x.route->timeout_ms + kLeaseMarginMs + config_.receipt_timeout_ms,
                instance_id_);
            if (Status s = tx.UpdateOperation(next); !s.ok()) return s;
            begin.op = std::move(next);
            begin.kind = X402Begin::kProceed;
            return tx.AppendEvent({begin.op.id, now, "gateway", "retry_resumed",
                                   "attempt " + std::to_string(begin.op.attempts) + ", settlement " +
                                       std::string(SettlementName(begin.op.settlement))});
          }
          case X402Resume::kCloseUnpaid: {
            StoredResponse unpaid{402, "application/problem+json",
                                  DumpJson({{"type", "urn:agentpay:problem:payment_required"},
                                            {"title", "Payment Required"},
                                            {"status", 402},
                                            {"code", "payment_required"},
                                            {"detail",
                                             "the authorization expired before it was settled; "
                                             "nothing was charged; pay again"},
                                            {"operation_id", begin.op.id}})};
            Operation next = CloseUnpaidX402Operation(begin.op, now, std::move(unpaid));
            if (Status s = tx.UpdateOperation(next); !s.ok()) return s;
            begin.op = std::move(next);
            begin.kind = X402Begin::kClosedUnpaid;
            return Status::Ok();
          }
        }
        AGENTPAY_CHECK(false);
      }
    }
  }
  if (inputs == nullptr) {
    begin.kind = X402Begin::kNeedsPreflight;
    return Rollback();
  }
  if (record->has_value()) {
    if (Status s = tx.DeleteKey(x.principal, x.key); !s.ok()) return s;
  }
  return DecideX402New(tx, x, *inputs, now, begin);
}

// X1 / X2: the key, the operation and the authorization (signed into the relayer's transaction
// when settling first) commit together; the broadcast follows the commit.
Status Gateway::DecideX402New(Transaction& tx, const X402Request& x, const TxInputs& inputs,
                              int64_t now, X402Begin& begin) {
  const std::string op_id = NewOperationId(random_, now);
  auto inserted = tx.InsertKey({x.principal, x.key, op_id, x.fingerprint, now});
  if (!inserted.ok()) return inserted.status();
  AGENTPAY_CHECK(*inserted);  // the key was absent or deleted in this very decision
  metrics_.CountArrival(ArrivalOutcome::kNew);
  X402PaymentRecord payment = x.presented;
  payment.operation_id = op_id;
  auto stored = tx.InsertX402Payment(payment);
  if (!stored.ok()) return stored.status();
  if (!*stored) {
    begin.kind = X402Begin::kAuthorizationTaken;
    return Rollback();
  }
  const bool settle_first = x.route->settle == SettleTiming::kBefore;
  Operation op = NewX402Operation(
      {op_id, x.principal, x.key, x.fingerprint, x.route->prefix, x.route->price,
       settle_first ? SettleOrder::kBeforeUpstream : SettleOrder::kAfterUpstream,
       config_.receipt_timeout_ms + x.route->timeout_ms + kLeaseMarginMs, instance_id_},
      now);
  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
  if (settle_first) {
    auto relayer_nonce = tx.TakeRelayerNonce(settler_->RelayerHex(), inputs.pending_nonce);
    if (!relayer_nonce.ok()) return relayer_nonce.status();
    if (Status s = settler_->Sign(payment, inputs, *relayer_nonce, now); !s.ok()) return s;
    if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
    Status s = tx.AppendEvent({op_id, now, "gateway", "settlement_submitted",
                               "transaction " + payment.tx_hash + ", relayer nonce " +
                                   std::to_string(payment.relayer_nonce)});
    if (!s.ok()) return s;
  }
  begin.kind = X402Begin::kProceed;
  begin.op = std::move(op);
  begin.payment = std::move(payment);
  return Status::Ok();
}

// An attempt holding the claim: settle first (X1), or call the upstream (X2, X9, X15).
HttpResponse Gateway::RunX402Attempt(const X402Request& x, Operation op,
                                     X402PaymentRecord payment) {
  if (op.settlement == Settlement::kSubmitted) {
    return SettleAndContinue(x, std::move(op), std::move(payment), std::nullopt);
  }
  return CallAndFinishX402(x, std::move(op), std::move(payment));
}

Result<bool> Gateway::WriteClaimed(const Operation& held, const Operation& next,
                                   const TraceEvent* event,
                                   const std::function<Status(Transaction&)>& also) {
  bool claimed = false;
  Status status = store_.Write([&](Transaction& tx) {
    auto updated = tx.UpdateClaimedOperation(next, held.attempts);
    if (!updated.ok()) return updated.status();
    claimed = *updated;
    if (!claimed) return Status::Ok();
    if (also) {
      if (Status s = also(tx); !s.ok()) return s;
    }
    return event != nullptr ? tx.AppendEvent(*event) : Status::Ok();
  });
  NotifyCompletion();
  if (!status.ok()) return status;
  return claimed;
}

UpstreamOutcome Gateway::CallUpstreamBlocking(const X402Request& x,
                                              const std::string& operation_id) {
  std::promise<UpstreamOutcome> answered;
  auto outcome = answered.get_future();
  const auto started = std::chrono::steady_clock::now();
  upstream_.CallAsync(*x.route, x.request, operation_id,
                      [&answered](UpstreamOutcome result) { answered.set_value(std::move(result)); });
  UpstreamOutcome result = outcome.get();
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  metrics_.CountUpstream(elapsed.count(), result.kind == UpstreamKind::kResponded);
  return result;
}

// X9–X14: the upstream call of an attempt whose settlement is settled or none.
HttpResponse Gateway::CallAndFinishX402(const X402Request& x, Operation op,
                                        X402PaymentRecord payment) {
  UpstreamOutcome outcome = CallUpstreamBlocking(x, op.id);
  const int64_t now = clock_.NowMs();
  X402Completion completion = CompleteX402Call(op, outcome, now, config_.retention_ms);
  if (completion.submit_settlement) {
    // X13 (settle=after, the upstream delivered): sign and store the transaction with the state.
    auto authorization = AuthorizationOf(payment);
    auto signature = SignatureOf(payment);
    if (!authorization.ok() || !signature.ok()) {
      return StoreProblem(authorization.ok() ? signature.status() : authorization.status());
    }
    auto inputs = settler_->ReadTxInputs(*authorization, *signature);
    if (!inputs.ok()) {
      // Not settled, so not delivered: the attempt ends as a failed call; a retry settles.
      outcome = UpstreamOutcome{UpstreamKind::kFailed, 0, "", "",
                                "the chain refused or could not be asked to settle: " +
                                    inputs.status().message()};
      completion = CompleteX402Call(op, outcome, now, config_.retention_ms);
      AGENTPAY_CHECK(!completion.submit_settlement);
    } else {
      auto claimed = WriteClaimed(op, completion.next, nullptr, [&](Transaction& tx) {
        auto relayer_nonce = tx.TakeRelayerNonce(settler_->RelayerHex(), inputs->pending_nonce);
        if (!relayer_nonce.ok()) return relayer_nonce.status();
        if (Status s = settler_->Sign(payment, *inputs, *relayer_nonce, now); !s.ok()) return s;
        if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
        return tx.AppendEvent({op.id, now, "gateway", "settlement_submitted",
                               "upstream answered " + std::to_string(outcome.status) +
                                   "; transaction " + payment.tx_hash});
      });
      if (!claimed.ok()) return StoreProblem(claimed.status());
      if (!*claimed) {
        return PendingAnswer(op, 202, ProblemCode::kOperationInProgress,
                             "a later attempt for this key took over; poll the operation", false);
      }
      return SettleAndContinue(x, std::move(completion.next), std::move(payment), outcome);
    }
  }
  TraceEvent kept{op.id, now, "upstream", "fulfillment_pending",
                  outcome.kind == UpstreamKind::kResponded
                      ? "upstream answered " + std::to_string(outcome.status)
                      : "upstream " + outcome.detail};
  bool keep = completion.verdict == Verdict::kKeep;
  auto claimed = WriteClaimed(op, completion.next, keep ? &kept : nullptr);
  if (!claimed.ok()) return StoreProblem(claimed.status());
  if (!*claimed) {
    return PendingAnswer(op, 202, ProblemCode::kOperationInProgress,
                         "a later attempt for this key took over; poll the operation", false);
  }
  if (!keep) return X402Answer(StoredAnswer(completion.next, false), x, completion.next, payment);
  const bool timeout = outcome.kind == UpstreamKind::kTimeout;
  std::string detail =
      (outcome.kind == UpstreamKind::kResponded
           ? "the upstream answered " + std::to_string(outcome.status)
           : "the upstream call failed (" + outcome.detail + ")") +
      (completion.next.settlement == Settlement::kSettled
           ? "; the payment is settled and a retry with the same key is served without a new "
             "charge"
           : "; nothing was charged and a retry with the same key tries again");
  return X402Answer(PendingAnswer(completion.next, timeout ? 504 : 502,
                                  ProblemCode::kFulfillmentPending, detail, false),
                    x, completion.next, payment);
}

// Broadcasts the stored transaction and waits for its receipt up to the receipt timeout; then
// settled (go on to the upstream, or finish with the upstream's 2xx on settle=after), failed, or
// unknown (202). `upstream_2xx` is the answer a settle=after attempt already has.
HttpResponse Gateway::SettleAndContinue(const X402Request& x, Operation op,
                                        X402PaymentRecord payment,
                                        const std::optional<UpstreamOutcome>& upstream_2xx) {
  AGENTPAY_CHECK(op.settlement == Settlement::kSubmitted);
  if (Status sent = settler_->Broadcast(payment); !sent.ok()) {
    // Unknown, not failed: the node may have it anyway. The reconciler re-sends the same bytes.
    metrics_.CountSettlement(SettlementEvent::kBroadcastError);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.receipt_timeout_ms);
  auto delay = std::chrono::milliseconds(20);
  std::optional<Reconciliation> decided;
  for (;;) {
    auto seen = settler_->Observe(payment);
    if (seen.ok()) {
      Reconciliation r = Reconcile(Settlement::kSubmitted, ToSettlementRecord(payment), *seen,
                                   config_.expiry_buffer_seconds);
      if (r.action == ReconcileAction::kMarkSettled || r.action == ReconcileAction::kMarkFailed) {
        decided = std::move(r);
        break;
      }
      if (seen->receipt != ReceiptView::kNone) break;  // mined without paying: the reconciler's
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, std::chrono::milliseconds(250));
  }
  const int64_t now = clock_.NowMs();
  if (decided && decided->action == ReconcileAction::kMarkSettled) {
    metrics_.CountSettlement(SettlementEvent::kSettled);
    Operation settled = MarkSettled(op, now);
    TraceEvent event{op.id, now, "chain", "settled", "receipt of " + payment.tx_hash};
    if (upstream_2xx) {
      // X3 then X10: the upstream's answer is delivered now that the money moved.
      X402Completion done = CompleteX402Call(settled, *upstream_2xx, now, config_.retention_ms);
      auto claimed = WriteClaimed(op, done.next, &event);
      if (!claimed.ok()) return StoreProblem(claimed.status());
      if (!*claimed) return X402StateAnswer(x, settled, payment, false);
      return X402Answer(StoredAnswer(done.next, false), x, done.next, payment);
    }
    Operation calling =
        BeginX402Call(settled, now, x.route->timeout_ms + kLeaseMarginMs, instance_id_);
    auto claimed = WriteClaimed(op, calling, &event);
    if (!claimed.ok()) return StoreProblem(claimed.status());
    if (!*claimed) return X402StateAnswer(x, settled, payment, false);
    return CallAndFinishX402(x, std::move(calling), std::move(payment));
  }
  if (decided) {  // kMarkFailed: our transaction did not move the money, yet the nonce is spent
    metrics_.CountSettlement(SettlementEvent::kFailed);
    Operation failed = MarkFailed(op, now, SettlementFailedResponse(op.id), config_.retention_ms);
    TraceEvent event{op.id, now, "chain", "settlement_failed", decided->reason};
    auto claimed = WriteClaimed(op, failed, &event, [&](Transaction& tx) {
      return tx.InsertAlert(SettlementFailedAlert(random_, op.id, decided->reason, now));
    });
    if (!claimed.ok()) return StoreProblem(claimed.status());
    return X402Answer(StoredAnswer(failed, false), x, failed, payment);
  }
  metrics_.CountSettlement(SettlementEvent::kUnknown);
  Operation unknown = MarkUnknown(op, now);
  TraceEvent event{op.id, now, "gateway", "settlement_unknown",
                   "no receipt for " + payment.tx_hash + " within " +
                       std::to_string(config_.receipt_timeout_ms) + " ms"};
  auto claimed = WriteClaimed(op, unknown, &event);
  if (!claimed.ok()) return StoreProblem(claimed.status());
  return X402StateAnswer(x, unknown, payment, false);
}

// The answer for an operation nobody is working on right now, from its state.
HttpResponse Gateway::X402StateAnswer(const X402Request& x, const Operation& op,
                                      const X402PaymentRecord& payment, bool replayed) const {
  if (IsFinal(op)) return X402Answer(StoredAnswer(op, replayed), x, op, payment);
  switch (op.settlement) {
    case Settlement::kSubmitted:
    case Settlement::kUnknown:
      return X402Answer(
          PendingAnswer(op, 202, ProblemCode::kSettlementUnknown,
                        "the payment was submitted to the chain and its outcome is not known yet; "
                        "it is never submitted twice. Poll the operation, or retry with the same "
                        "key once it is settled",
                        replayed),
          x, op, payment);
    default:
      return X402Answer(PendingAnswer(op, 502, ProblemCode::kFulfillmentPending,
                                      "the upstream has not delivered yet; a retry with the same "
                                      "key is not charged again",
                                      replayed),
                        x, op, payment);
  }
}

// PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1) once a transaction exists.
HttpResponse Gateway::X402Answer(HttpResponse response, const X402Request& x, const Operation& op,
                                 const X402PaymentRecord& payment) const {
  if (!payment.submitted()) return response;
  x402::SettleResponse settle;
  settle.transaction = payment.tx_hash;
  auto payer = chain::ParseAddress(payment.authorization.from);
  settle.payer = payer.ok() ? chain::ToChecksumHex(*payer) : payment.authorization.from;
  settle.network = x402_offers_.Network(x.version);
  switch (op.settlement) {
    case Settlement::kSettled: settle.success = true; break;
    case Settlement::kVoid: settle.error_reason = "settlement_void"; break;
    case Settlement::kFailed: settle.error_reason = "settlement_failed"; break;
    default: settle.error_reason = "settlement_pending"; break;
  }
  response.SetHeader(x402::PaymentResponseHeaderName(x.version),
                     x402::EncodeSettleResponseHeader(settle));
  return response;
}

}  // namespace agentpay
