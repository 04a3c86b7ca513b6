// The x402 path's arrival: what a payment is (decoded, verified, its key named) and the arrival
// decision in one transaction (X1, X2, X6–X8, X15, X16 of core/settlement.h); see x402_path.h.
#include <algorithm>

#include "core/check.h"
#include "core/idempotency.h"
#include "core/key_strength.h"
#include "core/payer_reservations.h"
#include "gateway/answers.h"
#include "gateway/hashing.h"
#include "gateway/x402_path_state.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

using x402::Failure;

// A key the payer chose: stored as a digest bound to the payer; a secret only if it is hard
// enough to guess (`chosen` is what the payer typed, `secret` what the digest is over).
struct ChosenKey {
  std::string key, legacy_key;
  PayerProofFacts::Key kind;
};
ChosenKey DigestChosenKey(std::string_view payer, std::string_view secret, std::string_view chosen,
                          int64_t min_bits) {
  return {PayerKeyDigest(payer, secret), LegacyKeyDigest(secret),
          EstimateKeyBits(chosen) >= min_bits ? PayerProofFacts::Key::kSecret
                                              : PayerProofFacts::Key::kWeak};
}

// Failures refused before any key lookup: the signer is unproven (nothing about an existing key
// may be revealed), or the payment cannot be a retry of a stored one (a validBefore past the cap
// was refused when it was first presented too, and the cap only moves later). Refused without
// signature recovery, except kInvalidSignature itself.
bool RefusesBeforeKeyLookup(Failure failure) {
  switch (failure) {
    case Failure::kUnsupportedScheme:
    case Failure::kMissingDomain:
    case Failure::kNetworkMismatch:
    case Failure::kValidBeforeTooLate:
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

std::optional<HttpResponse> X402Path::RefuseFromHead(const HttpRequest& head,
                                                     const RouteConfig& route) const {
  Payment x;
  x.request = std::shared_ptr<const HttpRequest>(std::shared_ptr<const HttpRequest>(), &head);
  x.route = &route;
  return Prepare(x);
}

// Decodes and verifies the payment and names its key. An answer means "refused, nothing stored".
std::optional<HttpResponse> X402Path::Prepare(Payment& x) const {
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
  if (auto refused = Admit(x, offers_.For(*x.route))) return refused;
  const std::string& payer = x.presented.authorization.from;
  // The payer's secret is kept as a digest only: it is what proves the payer later.
  std::optional<ChosenKey> chosen;
  if (auto key = request.Header("Idempotency-Key")) {
    if (!ValidIdempotencyKey(*key)) {
      return ProblemResponse(400, ProblemCode::kInvalidIdempotencyKey,
                             "Idempotency-Key must be 1-255 visible ASCII characters");
    }
    chosen = DigestChosenKey(payer, *key, *key, ctx_.config.min_idempotency_key_bits);
  } else if (x.payload.payment_identifier) {
    chosen = DigestChosenKey(payer, "payment-id:" + *x.payload.payment_identifier,
                             *x.payload.payment_identifier, ctx_.config.min_idempotency_key_bits);
  } else if (x.route->require_idempotency_key) {
    return ProblemResponse(400, ProblemCode::kIdempotencyKeyRequired,
                           "this route requires an Idempotency-Key header (or the x402 "
                           "payment-identifier extension)");
  } else {
    x.key = "authorization:" + x.presented.authorization.nonce_hex;  // scoped to the payer
  }
  if (chosen) {
    x.key = std::move(chosen->key);
    x.legacy_key = std::move(chosen->legacy_key);
    x.key_kind = chosen->kind;
  }
  x.fingerprint =
      Sha256Hex(FingerprintMaterial(request.method, request.Path(), request.Query(),
                                    request.Header("Content-Type").value_or(""), request.body));
  return std::nullopt;
}

// A seller's settle (SettleForSeller): verified against the seller's requirement as this gateway
// settles it; its key is the authorization itself (one operation per authorization, whoever
// sends it and however often), apart from the gateway's own keys of the same payer.
std::optional<HttpResponse> X402Path::PrepareForSeller(Payment& x) const {
  if (auto refused = Admit(x, *x.sold)) return refused;
  x.key = "facilitator:" + x.presented.authorization.nonce_hex;  // scoped to the payer
  x.key_kind = PayerProofFacts::Key::kPayee;  // the caller proved it is the payee's seller
  // The same authorization always carries the same signature; anything else is another payment.
  x.fingerprint = Sha256Hex("facilitator\n" + x.presented.signature_hex);
  return std::nullopt;
}

// VerifyExact against `requirements`, and the presented authorization: what Prepare and
// PrepareForSeller share.
std::optional<HttpResponse> X402Path::Admit(Payment& x,
                                            const x402::Requirements& requirements) const {
  const int64_t now_s = ctx_.clock.NowMs() / 1000;
  Failure failure = x402::VerifyExact(x.payload, requirements, now_s);
  // VerifyExact stops at the first failed cheap check, before the signature: a failure kept for
  // an existing key's retry (x.deferred) needs the signer proven here first.
  if (!x402::ProvesSigner(failure) && !RefusesBeforeKeyLookup(failure) &&
      !x402::SignedByFrom(x.payload, requirements)) {
    failure = Failure::kInvalidSignature;
  }
  if (RefusesBeforeKeyLookup(failure)) {
    return Challenge(x, x402::ReasonCode(failure, x.version),
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
  x.presented.authorization =
      Authorization{payer, chain::Hex(a.nonce), valid_after.value_or(0), valid_before.value_or(0),
                    a.value.FitsInt64() ? a.value.ToInt64() : 0};
  x.presented.pay_to = chain::ToLowerHex(a.to);
  x.presented.signature_hex = chain::Hex(x.payload.signature.bytes);
  x.presented.x402_version = static_cast<int>(x.version);
  return std::nullopt;
}

// One decision: reserve the key (or find it) and act on what DecideArrival and DecideX402Resume
// say. A new operation needs the chain's preflight first, which cannot run inside a decision:
// without the payment's `inputs` the decision changes nothing and asks for it.
Result<X402Path::Begin> X402Path::DecideX402Arrival(Transaction& tx, const Payment& x) const {
  Begin begin;
  const int64_t now = ctx_.clock.NowMs();
  auto record = FindPayerKey(tx, x);
  if (!record.ok()) return record.status();
  if (record->has_value()) {
    auto op = tx.FindOperation((*record)->operation_id);
    if (!op.ok()) return op.status();
    if (!op->has_value()) {
      return Status::Error(ErrorCode::kStoreCorrupt,
                           "key without operation " + (*record)->operation_id);
    }
    // An x402 attempt's claim is left to its lease: its settlement may still be on its way to the
    // chain after the request that started it was answered.
    Arrival arrival = DecideArrival(&**record, &**op, x.fingerprint, now, ClaimView::kLease);
    ctx_.metrics.CountArrival(arrival.outcome);
    begin.op = **op;
    if (arrival.outcome != ArrivalOutcome::kNew) {
      auto payment = tx.FindX402Payment(begin.op.id);
      if (!payment.ok()) return payment.status();
      if (!payment->has_value()) {
        return Status::Error(ErrorCode::kStoreCorrupt,
                             "x402 operation without payment " + begin.op.id);
      }
      begin.payment = std::move(**payment);
      // Nothing about the operation (its answer, its id, an attach, a resumed attempt) goes to a
      // request that does not prove it comes from the payer; nothing is written before this.
      switch (DecidePayerProof(ProofFacts(x, begin.payment))) {
        case PayerProof::kProven:
          break;
        case PayerProof::kAskChain:
          begin.kind = X402Arrival::kNeedsProof;
          return begin;
        case PayerProof::kRefusePublic:
          begin.kind = X402Arrival::kRefusePublic;
          return begin;
      }
    }
    if (Status s = RecordRepeatedArrival(tx, **record, begin.op, arrival.outcome, now); !s.ok()) {
      return s;
    }
    switch (arrival.outcome) {
      case ArrivalOutcome::kReplay:
        begin.kind = X402Arrival::kReplay;
        return begin;
      case ArrivalOutcome::kMismatch:
        begin.kind = X402Arrival::kMismatch;
        return begin;
      case ArrivalOutcome::kAttach:
        begin.kind = X402Arrival::kAttach;
        return begin;
      case ArrivalOutcome::kNew:
        break;  // past retention: forgotten below
      case ArrivalOutcome::kResume: {
        const bool can_settle = AuthorizationCanSettle(begin.payment.authorization.valid_before_s,
                                                       now, x402::kDefaultValidBeforeBufferSeconds);
        switch (DecideX402Resume(begin.op, can_settle)) {
          case X402Resume::kAnswerUnknown:
            begin.kind = X402Arrival::kReplay;
            return begin;
          case X402Resume::kCallUpstream: {
            Operation next =
                BeginX402Call(begin.op, now,
                              x.route->timeout_ms + kLeaseMarginMs + ctx_.config.receipt_timeout_ms,
                              ctx_.instance_id);
            if (Status s = tx.UpdateOperation(next); !s.ok()) return s;
            begin.op = std::move(next);
            begin.kind = X402Arrival::kProceed;
            Status appended = tx.AppendEvent(
                {begin.op.id, now, TraceActor::kGateway, "retry_resumed",
                 "attempt " + std::to_string(begin.op.attempts) + ", settlement " +
                     std::string(SettlementName(begin.op.settlement)),
                 TraceFacts().Attempt(begin.op.attempts).TxHash(begin.payment.tx_hash)});
            if (!appended.ok()) return appended;
            return begin;
          }
          case X402Resume::kCloseUnpaid: {
            Operation next =
                CloseUnpaidX402Operation(begin.op, now, ExpiredUnsubmittedResponse(begin.op.id));
            if (Status s = tx.UpdateOperation(next); !s.ok()) return s;
            if (UnpaidAfterPossibleWork(begin.op)) {  // (g)
              Status alerted = tx.InsertAlert(UnpaidAfterPossibleWorkAlert(
                  ctx_.random, begin.op.id,
                  "the authorization expired before a retry could settle it, after an upstream "
                  "call that may have done the work (attempt " +
                      std::to_string(begin.op.attempts) + ")",
                  now));
              if (!alerted.ok()) return alerted;
            }
            begin.op = std::move(next);
            begin.kind = X402Arrival::kClosedUnpaid;
            return begin;
          }
        }
        AGENTPAY_CHECK(false);
      }
    }
  }
  if (!x.inputs) {
    auto without = WithoutPreflight(tx, x);
    if (!without.ok()) return without.status();
    begin.kind = without->kind;
    return begin;
  }
  if (record->has_value()) {
    if (Status s = tx.DeleteKey(x.principal, (*record)->key); !s.ok()) return s;
  }
  return DecideNew(tx, x, now);
}

// A payment whose key names no operation, before the chain's preflight: an authorization this
// gateway already holds (one read off the chain, re-sent under a new key) is refused from the
// store, so that a flood of them costs no call to the RPC node; any other needs the preflight.
// Reads only.
Result<X402Path::Begin> X402Path::WithoutPreflight(Transaction& tx, const Payment& x) {
  auto taken = tx.FindX402PaymentByAuthorization(x.presented.authorization.from,
                                                 x.presented.authorization.nonce_hex);
  if (!taken.ok()) return taken.status();
  Begin begin;
  begin.kind = taken->has_value() ? X402Arrival::kAuthorizationTaken : X402Arrival::kNeedsPreflight;
  if (taken->has_value() && x.sold) {
    // A seller's settle of an authorization stored without its key (a void one frees its key at
    // once, or the gateway's own route took it): its payee is asking, so it hears that payment's
    // state, not "already used".
    auto op = tx.FindOperation((*taken)->operation_id);
    if (!op.ok()) return op.status();
    if (op->has_value()) {
      begin.kind = X402Arrival::kReplay;
      begin.op = std::move(**op);
      begin.payment = std::move(**taken);
    }
  }
  return begin;
}

// Inside a decision: the relayer's next nonce taken, the authorization signed into the relayer's
// transaction, and the payment stored with it (X1 settling first, X13 after the upstream). The
// broadcast follows the commit.
Result<X402PaymentRecord> X402Path::SignAndStore(Transaction& tx, X402PaymentRecord payment,
                                                 const TxInputs& inputs, int64_t now) const {
  auto relayer_nonce = settler_.TakeNonce(tx, inputs.pending_nonce);
  if (!relayer_nonce.ok()) return relayer_nonce.status();
  auto signed_payment = settler_.Sign(std::move(payment), inputs, *relayer_nonce, now);
  if (!signed_payment.ok()) return signed_payment.status();
  if (Status s = tx.UpdateX402Payment(*signed_payment); !s.ok()) return s;
  return signed_payment;
}

// X1 / X2: the key, the operation and the authorization (signed into the relayer's transaction
// when settling first) commit together; the broadcast follows the commit.
Result<X402Path::Begin> X402Path::DecideNew(Transaction& tx, const Payment& x, int64_t now) const {
  const TxInputs& inputs = *x.inputs;
  AGENTPAY_CHECK(x.cover.has_value());
  Begin begin;
  // The payer's reservations in the store, every gateway's, against what the chain showed.
  const Authorization& authorization = x.presented.authorization;
  auto reservations =
      tx.ReadPayerReservations(settler_.Network(), settler_.AssetHex(), authorization.from,
                               now / 1000 - ctx_.config.expiry_buffer_seconds);
  if (!reservations.ok()) return reservations.status();
  const ClusterReserve reserve = DecideClusterReserve(
      {authorization.value, reservations->reserved, x.cover->covered, x.cover->is_balance,
       std::max<int64_t>(0, reservations->epoch - x.cover->epoch)});
  switch (reserve) {
    case ClusterReserve::kReserve:
      break;
    case ClusterReserve::kReadAgain:
      begin.kind = X402Arrival::kReadAgain;
      return begin;
    case ClusterReserve::kInsufficientBalance:
      begin.kind = X402Arrival::kUnderfunded;
      return begin;
  }
  const std::string op_id = NewOperationId(ctx_.random, now);
  auto inserted = tx.InsertKey({x.principal, x.key, op_id, x.fingerprint, now});
  if (!inserted.ok()) return inserted.status();
  AGENTPAY_CHECK(*inserted);  // the key was absent or deleted in this very decision
  ctx_.metrics.CountArrival(ArrivalOutcome::kNew);
  X402PaymentRecord payment = x.presented;
  payment.operation_id = op_id;
  auto stored = tx.InsertX402Payment(payment);
  if (!stored.ok()) return stored.status();
  if (!*stored) {
    begin.kind = X402Arrival::kAuthorizationTaken;
    return begin;
  }
  const bool settle_first = x.route->settle == SettleTiming::kBefore;
  Operation op = NewX402Operation(
      {op_id, x.principal, x.key, x.fingerprint, x.route->prefix, x.route->price,
       settle_first ? SettleOrder::kBeforeUpstream : SettleOrder::kAfterUpstream,
       ctx_.config.receipt_timeout_ms + x.route->timeout_ms + kLeaseMarginMs, ctx_.instance_id},
      now);
  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
  if (Status s = tx.InsertPayerReservation({settler_.Network(), settler_.AssetHex(),
                                            authorization.from, authorization.nonce_hex, op_id,
                                            authorization.value, authorization.valid_before_s});
      !s.ok()) {
    return s;
  }
  // Batched settlement (--settle-batch-max above 1): the payment is stored unsigned, and the
  // decision that signs the batch it joins (X402Path::SignGathered) signs and records it.
  if (settle_first && ctx_.config.settle_batch_max <= 1) {
    auto signed_payment = SignAndStore(tx, std::move(payment), inputs, now);
    if (!signed_payment.ok()) return signed_payment.status();
    payment = std::move(*signed_payment);
    Status s = tx.AppendEvent({op_id, now, TraceActor::kGateway, "settlement_submitted",
                               "transaction " + payment.tx_hash + ", relayer nonce " +
                                   std::to_string(payment.relayer_nonce),
                               TraceFacts()
                                   .Attempt(op.attempts)
                                   .Amount(op.amount)
                                   .TxHash(payment.tx_hash)
                                   .Reason("settle_before_upstream")});
    if (!s.ok()) return s;
  }
  begin.kind = X402Arrival::kProceed;
  begin.op = std::move(op);
  begin.payment = std::move(payment);
  return begin;
}

// The payer's key record: under the digest that names the payer, else (an operation begun before
// keys named their payer, still within retention) under the older digest of the key alone. Both
// are looked up under the payer's principal, so the older form never reaches another payer's.
Result<std::optional<KeyRecord>> X402Path::FindPayerKey(Transaction& tx, const Payment& x) {
  auto record = tx.FindKey(x.principal, x.key);
  if (!record.ok() || record->has_value() || x.legacy_key.empty()) return record;
  return tx.FindKey(x.principal, x.legacy_key);
}

PayerProofFacts X402Path::ProofFacts(const Payment& x, const X402PaymentRecord& stored) {
  const X402PaymentRecord& presented = x.presented;
  return {x.key_kind,
          presented.authorization.from == stored.authorization.from &&
              presented.authorization.nonce_hex == stored.authorization.nonce_hex &&
              presented.signature_hex == stored.signature_hex,
          stored.submitted(), x.deferred == Failure::kNone, x.presented_on_chain};
}

}  // namespace agentpay
