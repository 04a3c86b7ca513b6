// The x402 payment path; see x402_path.h.
#include "gateway/x402_path.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/idempotency.h"
#include "core/key_strength.h"
#include "core/mutants.h"
#include "core/payer_proof.h"
#include "core/payer_reservations.h"
#include "core/receipt_wait.h"
#include "gateway/answers.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"
#include "settlement/answers.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace agentpay {

struct X402Path::Begin {
  enum Kind {
    kProceed,             // op and payment hold the attempt's claim: run it
    kReplay,              // op is final
    kMismatch,            // same key, another request
    kAttach,              // an attempt is in flight
    kUnknown,             // settlement submitted or unknown, nothing in flight (X8)
    kClosedUnpaid,        // X16 just now: the stored 402
    kNeedsPreflight,      // a new operation: check the payment on chain first (nothing written)
    kAuthorizationTaken,  // this authorization already pays for another operation (rolled back)
    kNeedsProof,          // the key's operation exists: ask the chain about this authorization
    kRefusePublic,        // the request does not prove the payer: 409, nothing said of the op
    kReadAgain,           // the store's payer reservations moved since the chain was read
    kUnderfunded,         // the payer's reservations in the store leave no room for this one
  } kind = kProceed;
  Operation op;
  X402PaymentRecord payment;
  bool RollsBack() const {
    return kind == kNeedsPreflight || kind == kAuthorizationTaken || kind == kNeedsProof ||
           kind == kRefusePublic || kind == kReadAgain || kind == kUnderfunded;
  }
};

// One payment on its way through the path; shared by the path's callbacks.
struct X402Path::Payment {
  std::shared_ptr<const HttpRequest> request;
  const RouteConfig* route = nullptr;
  Respond respond;
  x402::Version version = x402::Version::kV2;
  x402::PaymentPayload payload;
  X402PaymentRecord presented;  // the authorization this request carries (no operation yet)
  std::string principal, key, fingerprint;
  // The digest the key had before it named the payer (hashing.h): a retry of an operation begun
  // before the upgrade is found by it. Empty for the default key.
  std::string legacy_key;
  // What `key` is for the payer proof: the default (payer, nonce), or a key the payer chose
  // (Idempotency-Key or payment-identifier), weak or secret by its estimated bits (T25).
  PayerProofFacts::Key key_kind = PayerProofFacts::Key::kDefault;
  // What the chain said of this request's authorization, when its key found an operation that
  // was paid with another one.
  PayerProofFacts::Chain presented_on_chain = PayerProofFacts::Chain::kNotAsked;
  // A failed check that does not put the payer's identity in doubt (recipient, amount, time
  // window, asset): it refuses a new operation, but a retry of an existing key is still answered.
  x402::Failure deferred = x402::Failure::kNone;

  // The arrival decisions taken so far, and what the chain said between them.
  int rounds = 0;
  Begin::Kind begin_kind = Begin::kProceed;  // what the last of them found
  std::optional<TxInputs> inputs;
  std::optional<Settler::Preflight> preflight_failure;
  std::shared_ptr<ReservationHold> reservation;  // taken by the preflight (Settler::Check)
  // With inputs: the store's epoch of the payer, read before the chain, and what the chain showed
  // the payer holds at least (core/payer_reservations.h ClusterReserveFacts).
  struct Cover {
    int64_t epoch = 0;
    int64_t covered = 0;
    bool is_balance = false;
  };
  std::optional<Cover> cover;
  int cover_reads = 0;  // preflights asked again because the store's reservations moved

  // The attempt, once this request holds the operation's claim.
  Operation op;
  X402PaymentRecord payment;
  std::optional<UpstreamOutcome> upstream_2xx;  // settle=after: the answer the settlement awaits
  int64_t upstream_started_ms = 0;              // Timers::MonotonicMs
  int64_t receipt_deadline_ms = 0;              // Timers::MonotonicMs
  int64_t sent_ms = 0;                          // Timers::MonotonicMs of the broadcast
  int empty_looks = 0;                          // looks that found no receipt
  int64_t last_empty_look_ms = -1;              // ms after the send; -1: none yet
  int64_t poll_delay_ms = 0;                    // the last delay scheduled
};

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

// A new key: preflight, then the decision. A key whose operation was paid with another
// authorization: the chain is asked about this one, then the decision. One round to spare.
// Each kReadAgain (the store's reservations of the payer moved, core/payer_reservations.h) costs
// two more: at most kMaxCoverReads preflights per request.
constexpr int kMaxBeginRounds = 8;
constexpr int kMaxCoverReads = 3;
constexpr size_t kMaxQueuedChainCalls = 4096;
// How long the first transaction signed waits for others to go to the node with it (Settle): a
// payment waits at most this much longer for its receipt, where a block takes a second or more on
// a public chain. On a node that mines on demand (Anvil) the transactions gathered share a block;
// x402 payments through the gateway on Anvil, 16 clients: 223/s alone, 347/s gathered for 5 ms,
// 364/s for 10 ms (bench/README.md).
constexpr int64_t kBroadcastGatherMs = 10;

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

// Fees move with every block; a few seconds is a few blocks on most chains.
constexpr char kFeesRetryAfterSeconds[] = "5";

// The chain's base fee is above --max-fee-per-gas: nothing was broadcast, the authorization is
// unused, and the same payment sent again settles once fees are back under the cap.
HttpResponse FeesTooHigh(const std::string& reason) {
  HttpResponse response = ProblemResponse(
      503, ProblemCode::kChainFeesTooHigh,
      reason +
          "; nothing was submitted and the authorization is unused: send the same payment "
          "again later");
  response.SetHeader("Retry-After", kFeesRetryAfterSeconds);
  return response;
}

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

void X402Path::Reply(const PaymentPtr& p, HttpResponse response) const {
  p->respond(std::move(response));
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
  Arrive(std::move(p));
}

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
  const int64_t now_s = ctx_.clock.NowMs() / 1000;
  const x402::Requirements& requirements = offers_.For(*x.route);
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

// One arrival decision; the next step follows from what it found (OnArrived).
void X402Path::Arrive(PaymentPtr p) {
  if (p->rounds++ >= kMaxBeginRounds) {
    return Reply(p, RetryLater(ProblemCode::kLimitExceeded,
                               "the key changed hands too often; retry with the same key"));
  }
  if (!p->inputs) {
    // The usual first look at a new payment finds neither its key nor its authorization stored:
    // it needs the chain's preflight and changes nothing, which a read tells without a decision
    // of the writer's. The decision after the preflight reads all of it again. The read may wait
    // on the database: off this thread (an I/O thread), and back here with what it saw.
    auto seen = std::make_shared<std::optional<Begin::Kind>>();
    ctx_.store.ReadAsync(
        ctx_.readers,
        [this, p, seen](Transaction& tx) -> Status {
          auto record = FindPayerKey(tx, *p);
          if (!record.ok()) return record.status();
          if (record->has_value()) return Status::Ok();
          auto without = WithoutPreflight(tx, *p);
          if (!without.ok()) return without.status();
          *seen = without->kind;
          return Status::Ok();
        },
        [this, p, seen](Status read) {
          // No reader free: the arrival decision reads it all itself.
          if (read.error() == ErrorCode::kStoreOverloaded) return QueueArrival(p);
          if (!read.ok()) return Reply(p, StoreProblem(read));
          if (*seen == Begin::kNeedsPreflight) {
            p->begin_kind = Begin::kNeedsPreflight;
            return OnArrived(p, Status::Ok());
          }
          QueueArrival(p);
        },
        ReadWait::kUnsynced);
    return;
  }
  QueueArrival(std::move(p));
}

void X402Path::QueueArrival(PaymentPtr p) {
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
      [this, p](Status status) { OnArrived(p, std::move(status)); });
}

void X402Path::OnArrived(PaymentPtr p, Status status) {
  // A reservation is only for the request that creates the operation: any other lets go of its
  // hold now, not when its answer (an attach may wait long) is done with the payment, which may
  // be after the gateway is gone (MALLOC_PERTURB_ caught that as a crash on a freed mutex).
  if (p->begin_kind != Begin::kProceed) p->reservation.reset();
  if (!status.ok() && !IsRollback(status)) return Reply(p, StoreProblem(status));
  switch (p->begin_kind) {
    case Begin::kProceed:
      return RunAttempt(std::move(p));
    case Begin::kReplay:
    case Begin::kUnknown:
      return Reply(p, StateAnswer(*p, p->op, true));
    case Begin::kClosedUnpaid:
      return Reply(p, StateAnswer(*p, p->op, false));
    case Begin::kMismatch:
      return Reply(p, MismatchAnswer(p->op));
    case Begin::kAttach:
      return ctx_.attachments.Attach(
          p->op,
          [this, p](const Operation& op) -> std::optional<HttpResponse> {
            if (op.fulfillment == Fulfillment::kInProgress) return std::nullopt;
            return StateAnswer(*p, op, true);
          },
          p->respond);
    case Begin::kAuthorizationTaken:
      return Reply(p, Challenge(*p, x402::ReasonCode(Failure::kNonceAlreadyUsed, p->version),
                                "this authorization already pays for another request"));
    case Begin::kRefusePublic:
      ctx_.metrics.CountProofRefused();
      return Reply(p, PublicAuthorizationAnswer());
    case Begin::kReadAgain:
      // Another gateway's settlement or reservation of this payer came between: the preflight
      // again, with the epoch and the balance read anew (a bounded number of times).
      if (p->cover_reads >= kMaxCoverReads) {
        return Reply(p, RetryLater(ProblemCode::kLimitExceeded,
                                   "the payer's other payments kept settling while its balance "
                                   "was read; nothing was submitted, retry later"));
      }
      p->inputs.reset();
      p->cover.reset();
      return Preflight(std::move(p));
    case Begin::kUnderfunded:
      return Reply(p, Challenge(*p, x402::ReasonCode(Failure::kInsufficientBalance, p->version),
                                "the token refuses this authorization: the payer's other "
                                "payments in flight already reserve its balance"));
    case Begin::kNeedsProof:
      return AskChainForProof(std::move(p));
    case Begin::kNeedsPreflight:
      if (p->deferred != Failure::kNone) {
        return Reply(p, Challenge(*p, x402::ReasonCode(p->deferred, p->version),
                                  "the payment does not match what this route asks for"));
      }
      if (p->preflight_failure) {
        const Settler::Preflight& failed = *p->preflight_failure;
        return Reply(p, Challenge(*p, x402::ReasonCode(failed.failure, p->version),
                                  "the token refuses this authorization" +
                                      (failed.detail.empty() ? "" : ": " + failed.detail)));
      }
      return Preflight(std::move(p));
  }
  AGENTPAY_CHECK(false);
}

// A new operation: what the token says of the payment, read before anything is stored; then the
// arrival is decided once more (a concurrent request with the same key may have spent this very
// nonce meanwhile, and then this one attaches or replays instead of a 402).
void X402Path::Preflight(PaymentPtr p) {
  OnChain(
      [this, p] {
        // The store's reservations of the payer (every gateway's) and its epoch, read before the
        // chain: the decision compares them with what it finds then (DecideNew).
        ++p->cover_reads;
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
        if (!read.ok()) return Reply(p, StoreProblem(read));
        auto preflight = settler_.Check(p->payload.authorization, p->payload.signature, now_ms,
                                        stored.reserved);
        if (!preflight.ok() && preflight.status().error() == ErrorCode::kChainFeesTooHigh) {
          return Reply(p, FeesTooHigh(preflight.status().message()));
        }
        if (!preflight.ok()) {
          return Reply(p, RetryLater(ProblemCode::kChainUnavailable,
                                     "the chain could not be asked about this payment (" +
                                         preflight.status().message() +
                                         "); nothing was submitted, retry later"));
        }
        if (preflight->limited != Settler::Limited::kNo) return Reply(p, PayerLimited(*preflight));
        if (preflight->failure != Failure::kNone) {
          p->preflight_failure = std::move(*preflight);
        } else {
          // The payer's bucket only for an authorization the chain calls fresh, which only the
          // payer can make: re-sending its public ones (or junk in its name) cannot drain it.
          // Once per request: a preflight asked again (kReadAgain) takes no second token.
          const std::string& payer = p->presented.authorization.from;
          if (p->cover_reads == 1) {
            if (auto retry_after_s =
                    ctx_.rate_limiters.payer.Take(payer, ctx_.timers.MonotonicMs())) {
              return Reply(p, TooManyRequests(*retry_after_s, "payer"));
            }
          }
          p->inputs = preflight->inputs;
          p->reservation = std::move(preflight->hold);
          p->cover = Payment::Cover{stored.epoch, preflight->covered,
                                    preflight->covered_is_balance};
        }
        Arrive(p);
      },
      [this, p] {
        Reply(p, RetryLater(ProblemCode::kLimitExceeded,
                            "too many x402 payments are waiting on the chain"));
      });
}

// The key found an operation paid with another authorization: whether this one is fresh (never
// used on chain) decides whether it proves the payer (core/payer_proof.h). Nothing is stored.
void X402Path::AskChainForProof(PaymentPtr p) {
  OnChain(
      [this, p] {
        auto used = settler_.AuthorizationUsed(p->payload.authorization);
        if (!used.ok()) {
          return Reply(p, RetryLater(ProblemCode::kChainUnavailable,
                                     "the chain could not be asked about this payment (" +
                                         used.status().message() + "); retry later"));
        }
        p->presented_on_chain = *used ? PayerProofFacts::Chain::kUsed
                                      : PayerProofFacts::Chain::kUnused;
        Arrive(p);
      },
      [this, p] {
        Reply(p, RetryLater(ProblemCode::kLimitExceeded,
                            "too many x402 payments are waiting on the chain"));
      });
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
          begin.kind = Begin::kNeedsProof;
          return begin;
        case PayerProof::kRefusePublic:
          begin.kind = Begin::kRefusePublic;
          return begin;
      }
    }
    if (Status s = RecordRepeatedArrival(tx, **record, begin.op, arrival.outcome, now); !s.ok()) {
      return s;
    }
    switch (arrival.outcome) {
      case ArrivalOutcome::kReplay:
        begin.kind = Begin::kReplay;
        return begin;
      case ArrivalOutcome::kMismatch:
        begin.kind = Begin::kMismatch;
        return begin;
      case ArrivalOutcome::kAttach:
        begin.kind = Begin::kAttach;
        return begin;
      case ArrivalOutcome::kNew:
        break;  // past retention: forgotten below
      case ArrivalOutcome::kResume: {
        const bool can_settle = AuthorizationCanSettle(begin.payment.authorization.valid_before_s,
                                                       now, x402::kDefaultValidBeforeBufferSeconds);
        switch (DecideX402Resume(begin.op, can_settle)) {
          case X402Resume::kAnswerUnknown:
            begin.kind = Begin::kUnknown;
            return begin;
          case X402Resume::kCallUpstream: {
            Operation next =
                BeginX402Call(begin.op, now,
                              x.route->timeout_ms + kLeaseMarginMs + ctx_.config.receipt_timeout_ms,
                              ctx_.instance_id);
            if (Status s = tx.UpdateOperation(next); !s.ok()) return s;
            begin.op = std::move(next);
            begin.kind = Begin::kProceed;
            Status appended = tx.AppendEvent(
                {begin.op.id, now, TraceActor::kGateway, "retry_resumed",
                 "attempt " + std::to_string(begin.op.attempts) + ", settlement " +
                     std::string(SettlementName(begin.op.settlement)),
                 TraceFacts().Attempt(begin.op.attempts).TxHash(begin.payment.tx_hash)});
            if (!appended.ok()) return appended;
            return begin;
          }
          case X402Resume::kCloseUnpaid: {
            Operation next = CloseUnpaidX402Operation(begin.op, now,
                                                      ExpiredUnsubmittedResponse(begin.op.id));
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
            begin.kind = Begin::kClosedUnpaid;
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
  begin.kind = taken->has_value() ? Begin::kAuthorizationTaken : Begin::kNeedsPreflight;
  return begin;
}

// X1 / X2: the key, the operation and the authorization (signed into the relayer's transaction
// when settling first) commit together; the broadcast follows the commit.
Result<X402Path::Begin> X402Path::DecideNew(Transaction& tx, const Payment& x, int64_t now) const {
  const TxInputs& inputs = *x.inputs;
  AGENTPAY_CHECK(x.cover.has_value());
  Begin begin;
  // The payer's reservations in the store, every gateway's, against what the chain showed.
  const Authorization& authorization = x.presented.authorization;
  auto reservations = tx.ReadPayerReservations(settler_.Network(), settler_.AssetHex(),
                                               authorization.from,
                                               now / 1000 - ctx_.config.expiry_buffer_seconds);
  if (!reservations.ok()) return reservations.status();
  const ClusterReserve reserve = DecideClusterReserve(
      {authorization.value, reservations->reserved, x.cover->covered, x.cover->is_balance,
       std::max<int64_t>(0, reservations->epoch - x.cover->epoch)});
  switch (reserve) {
    case ClusterReserve::kReserve:
      break;
    case ClusterReserve::kReadAgain:
      begin.kind = Begin::kReadAgain;
      return begin;
    case ClusterReserve::kInsufficientBalance:
      begin.kind = Begin::kUnderfunded;
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
    begin.kind = Begin::kAuthorizationTaken;
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
  if (settle_first) {
    auto relayer_nonce = settler_.TakeNonce(tx, inputs.pending_nonce);
    if (!relayer_nonce.ok()) return relayer_nonce.status();
    auto signed_payment = settler_.Sign(std::move(payment), inputs, *relayer_nonce, now);
    if (!signed_payment.ok()) return signed_payment.status();
    payment = std::move(*signed_payment);
    if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
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
  begin.kind = Begin::kProceed;
  begin.op = std::move(op);
  begin.payment = std::move(payment);
  return begin;
}

// An attempt holding the claim: settle first (X1), or call the upstream (X2, X9, X15).
void X402Path::RunAttempt(PaymentPtr p) {
  // A new operation paid by the authorization this request reserved: the reservation is its own
  // now, until the settlement is decided (Release).
  if (p->reservation) p->reservation->KeepIfStored(p->payment.authorization);
  if (p->op.settlement == Settlement::kSubmitted) return Settle(std::move(p));
  CallUpstream(std::move(p));
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

void X402Path::CallUpstream(PaymentPtr p) {
  p->upstream_started_ms = ctx_.timers.MonotonicMs();
  ctx_.upstream.CallAsync(*p->route, p->request, p->op.id, [this, p](UpstreamOutcome outcome) {
    OnUpstreamAnswered(p, std::move(outcome));
  });
}

// X9–X14: the upstream call of an attempt whose settlement is settled or none.
void X402Path::OnUpstreamAnswered(PaymentPtr p, UpstreamOutcome outcome) {
  ctx_.metrics.CountUpstream(ctx_.timers.MonotonicMs() - p->upstream_started_ms,
                             outcome.kind == UpstreamKind::kResponded);
  const int64_t now = ctx_.clock.NowMs();
  X402Completion completion = CompleteX402Call(p->op, outcome, now, ctx_.config.retention_ms);
  if (completion.submit_settlement) {
    return SubmitAfterUpstream(std::move(p), std::move(outcome), std::move(completion), now);
  }
  FinishCall(std::move(p), outcome, std::move(completion), now);
}

// X13 (settle=after, the upstream delivered): sign and store the transaction with the state, then
// settle; the upstream's answer is delivered once the money moved.
void X402Path::SubmitAfterUpstream(PaymentPtr p, UpstreamOutcome outcome, X402Completion completion,
                                   int64_t now) {
  auto authorization = AuthorizationOf(p->payment);
  auto signature = SignatureOf(p->payment);
  if (!authorization.ok() || !signature.ok()) {
    return Reply(p, StoreProblem(authorization.ok() ? signature.status() : authorization.status()));
  }
  // Not settled, so not delivered: the attempt ends as a failed call; a retry settles.
  auto not_settled = [this, p, now](const std::string& why) {
    UpstreamOutcome failed{UpstreamKind::kFailed, 0, "", "",
                           "the chain refused or could not be asked to settle: " + why};
    X402Completion completion = CompleteX402Call(p->op, failed, now, ctx_.config.retention_ms);
    AGENTPAY_CHECK(!completion.submit_settlement);
    FinishCall(p, failed, std::move(completion), now);
  };
  OnChain(
      [this, p, outcome = std::move(outcome), completion = std::move(completion), now,
       authorization = std::move(*authorization), signature = std::move(*signature), not_settled] {
        auto inputs = settler_.ReadTxInputs(authorization, signature, ctx_.clock.NowMs());
        if (!inputs.ok()) return not_settled(inputs.status().message());
        // Signed inside the decision (the relayer nonce is taken there); the callback takes it.
        auto payment = std::make_shared<X402PaymentRecord>();
        WriteClaimed(
            p->op, completion.next, std::nullopt,
            [this, payment, presented = p->payment, inputs = *inputs, now, status = outcome.status,
             attempt = p->op.attempts, amount = p->op.amount](Transaction& tx) {
              auto relayer_nonce = settler_.TakeNonce(tx, inputs.pending_nonce);
              if (!relayer_nonce.ok()) return relayer_nonce.status();
              auto signed_payment = settler_.Sign(presented, inputs, *relayer_nonce, now);
              if (!signed_payment.ok()) return signed_payment.status();
              *payment = std::move(*signed_payment);
              if (Status s = tx.UpdateX402Payment(*payment); !s.ok()) return s;
              return tx.AppendEvent({payment->operation_id, now, TraceActor::kGateway,
                                     "settlement_submitted",
                                     "upstream answered " + std::to_string(status) +
                                         "; transaction " + payment->tx_hash,
                                     TraceFacts()
                                         .Attempt(attempt)
                                         .Amount(amount)
                                         .HttpStatus(status)
                                         .TxHash(payment->tx_hash)
                                         .Reason("settle_after_upstream")});
            },
            [this, p, payment, next = completion.next, outcome](Result<bool> claimed) mutable {
              if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
              if (!*claimed) return Reply(p, TakenOverAnswer(p->op));
              p->op = std::move(next);
              p->payment = std::move(*payment);
              p->upstream_2xx = std::move(outcome);
              Settle(p);
            });
      },
      [not_settled] { not_settled("too many x402 payments are waiting on the chain"); });
}

// The end of an upstream call that needs no settlement now: delivered, refused or kept (X9–X12,
// X14).
void X402Path::FinishCall(PaymentPtr p, const UpstreamOutcome& outcome, X402Completion completion,
                          int64_t now) {
  const bool keep = completion.verdict == Verdict::kKeep;
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
  Operation next = completion.next;
  WriteClaimed(
      p->op, std::move(completion.next), std::move(kept), {},
      [this, p, keep, outcome, next = std::move(next)](Result<bool> claimed) {
        if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
        if (!*claimed) return Reply(p, TakenOverAnswer(p->op));
        // X14: the authorization will never be submitted.
        if (IsFinal(next) && next.settlement == Settlement::kNone) {
          settler_.reservations().Release(p->payment.authorization);
        }
        if (!keep) return Reply(p, Answer(StoredAnswer(next, false), *p, next));
        const bool timeout = outcome.kind == UpstreamKind::kTimeout;
        std::string detail =
            (outcome.kind == UpstreamKind::kResponded
                 ? "the upstream answered " + std::to_string(outcome.status)
                 : "the upstream call failed (" + outcome.detail + ")") +
            (next.settlement == Settlement::kSettled
                 ? "; the payment is settled and a retry with the same key is served without a "
                   "new charge"
                 : "; nothing was charged and a retry with the same key tries again");
        Reply(p, Answer(PendingAnswer(next, timeout ? 504 : 502, ProblemCode::kFulfillmentPending,
                                      detail, false),
                        *p, next));
      });
}

// Broadcasts the stored transaction, then polls for its receipt up to the receipt timeout. The
// transactions signed within kBroadcastGatherMs of each other go to the node together, in relayer
// nonce order, in one request (Settler::Broadcast): a node holds a transaction whose nonce is past
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
    ctx_.timers.After(kBroadcastGatherMs, [this] {
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
  std::stable_sort(batch.begin(), batch.end(), [](const PaymentPtr& a, const PaymentPtr& b) {
    return a->payment.relayer_nonce < b->payment.relayer_nonce;
  });
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
  OnChain(
      [this, batch, next] {
        std::vector<const X402PaymentRecord*> records;
        for (const PaymentPtr& p : batch) records.push_back(&p->payment);
        std::vector<Status> sent = settler_.Broadcast(records);
        int64_t first_look;
        {
          std::lock_guard lock(polls_mutex_);
          first_look = polls_.FirstLookMs();
        }
        const int64_t now = ctx_.timers.MonotonicMs();
        for (size_t i = 0; i < batch.size(); ++i) {
          const PaymentPtr& p = batch[i];
          if (!sent[i].ok()) {
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

// Settled (go on to the upstream, or finish with the upstream's 2xx on settle=after), failed, or
// unknown (202; nullopt).
void X402Path::OnReceiptDecided(PaymentPtr p, std::optional<Reconciliation> decided) {
  const int64_t now = ctx_.clock.NowMs();
  const Operation& op = p->op;
  const std::string& tx_hash = p->payment.tx_hash;
  // Settled (the chain balance shows it now) or failed (the money did not move through us): the
  // payer's reservation goes.
  if (decided) settler_.reservations().Release(p->payment.authorization);
  if (decided && decided->action == ReconcileAction::kMarkSettled) {
    ctx_.metrics.CountSettlement(SettlementEvent::kSettled);
    Operation settled = MarkSettled(op, now);
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
    if (p->upstream_2xx) {
      // X3 then X10: the upstream's answer is delivered now that the money moved.
      X402Completion done =
          CompleteX402Call(settled, *p->upstream_2xx, now, ctx_.config.retention_ms);
      Operation next = done.next;
      return WriteClaimed(op, std::move(done.next), std::move(event), record_block,
                          [this, p, settled, next = std::move(next)](Result<bool> claimed) {
                            if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
                            if (!*claimed) return Reply(p, StateAnswer(*p, settled, false));
                            Reply(p, Answer(StoredAnswer(next, false), *p, next));
                          });
    }
    Operation calling =
        BeginX402Call(settled, now, p->route->timeout_ms + kLeaseMarginMs, ctx_.instance_id);
    return WriteClaimed(op, calling, std::move(event), record_block,
                        [this, p, settled, calling](Result<bool> claimed) {
                          if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
                          if (!*claimed) return Reply(p, StateAnswer(*p, settled, false));
                          p->op = calling;
                          CallUpstream(p);
                        });
  }
  if (decided) {  // kMarkFailed: our transaction did not move the money, yet the nonce is spent
    ctx_.metrics.CountSettlement(SettlementEvent::kFailed);
    Operation failed =
        MarkFailed(op, now, SettlementFailedResponse(op.id), ctx_.config.retention_ms);
    TraceEvent event{op.id,
                     now,
                     TraceActor::kChain,
                     "settlement_failed",
                     decided->reason,
                     TraceFacts().Attempt(op.attempts).TxHash(tx_hash).Reason("settlement_failed")};
    Alert alert = SettlementFailedAlert(ctx_.random, op.id, decided->reason, now);
    return WriteClaimed(
        op, failed, std::move(event), [alert](Transaction& tx) { return tx.InsertAlert(alert); },
        [this, p, failed](Result<bool> claimed) {
          if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
          Reply(p, Answer(StoredAnswer(failed, false), *p, failed));
        });
  }
  ctx_.metrics.CountSettlement(SettlementEvent::kUnknown);
  Operation unknown = MarkUnknown(op, now);
  if (MutantActive(Mutant::kVoidAtReceiptDeadline)) {  // no receipt in time taken for no payment
    settler_.reservations().Release(p->payment.authorization);
    unknown = MarkVoid(unknown, now, SettlementVoidResponse(op.id));
  }
  TraceEvent event{op.id,
                   now,
                   TraceActor::kGateway,
                   "settlement_unknown",
                   "no receipt for " + tx_hash + " within " +
                       std::to_string(ctx_.config.receipt_timeout_ms) + " ms",
                   TraceFacts().Attempt(op.attempts).TxHash(tx_hash).Reason("receipt_timeout")};
  WriteClaimed(op, unknown, std::move(event), {}, [this, p, unknown](Result<bool> claimed) {
    if (!claimed.ok()) return Reply(p, StoreProblem(claimed.status()));
    Reply(p, StateAnswer(*p, unknown, false));
  });
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

HttpResponse X402Path::PublicAuthorizationAnswer() {
  return ProblemResponse(
      409, ProblemCode::kAuthorizationAlreadyUsed,
      "this payment authorization was already presented, and its result goes only to its payer: "
      "retry with the Idempotency-Key or payment-identifier it was first sent with, or pay with a "
      "new authorization");
}

HttpResponse X402Path::PayerLimited(const Settler::Preflight& preflight) const {
  if (preflight.limited == Settler::Limited::kPayerInFlight) {
    HttpResponse response = ProblemResponse(
        429, ProblemCode::kLimitExceeded,
        "this payer has --max-in-flight-per-payer payments in flight already; nothing was "
        "submitted and the authorization is unused: retry once one of them is decided");
    response.SetHeader("Retry-After", "1");
    return response;
  }
  // Settler::Limited::kBusy: the table of payers is full, or this payer's other payments kept
  // settling (each a release) while its balance was read, so no read could be trusted.
  return RetryLater(ProblemCode::kLimitExceeded,
                    "the payment could not be reserved against the payer's balance now (too many "
                    "payers in flight, or the balance kept changing while it was read); nothing "
                    "was submitted and the authorization is unused: retry later");
}

HttpResponse X402Path::Challenge(const Payment& p, std::string_view code,
                                 std::string_view detail) const {
  return RouteChallenge(offers_, *p.request, *p.route, code, detail);
}

// The answer for an operation nobody is working on right now, from its state.
HttpResponse X402Path::StateAnswer(const Payment& x, const Operation& op, bool replayed) const {
  if (IsFinal(op)) return Answer(StoredAnswer(op, replayed), x, op);
  switch (op.settlement) {
    case Settlement::kSubmitted:
    case Settlement::kUnknown:
      return Answer(
          PendingAnswer(op, 202, ProblemCode::kSettlementUnknown,
                        "the payment was submitted to the chain and its outcome is not known yet; "
                        "it is never submitted twice. Poll the operation, or retry with the same "
                        "key once it is settled",
                        replayed),
          x, op);
    default:
      return Answer(PendingAnswer(op, 502, ProblemCode::kFulfillmentPending,
                                  "the upstream has not delivered yet; a retry with the same "
                                  "key is not charged again",
                                  replayed),
                    x, op);
  }
}

// PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1) once a transaction exists.
HttpResponse X402Path::Answer(HttpResponse response, const Payment& x, const Operation& op) const {
  const X402PaymentRecord& payment = x.payment;
  if (!payment.submitted()) return response;
  x402::SettleResponse settle;
  settle.transaction = payment.tx_hash;
  auto payer = chain::ParseAddress(payment.authorization.from);
  settle.payer = payer.ok() ? chain::ToChecksumHex(*payer) : payment.authorization.from;
  settle.network = offers_.Network(x.version);
  switch (op.settlement) {
    case Settlement::kSettled:
      settle.success = true;
      break;
    case Settlement::kVoid:
      settle.error_reason = "settlement_void";
      break;
    case Settlement::kFailed:
      settle.error_reason = "settlement_failed";
      break;
    default:
      settle.error_reason = "settlement_pending";
      break;
  }
  response.SetHeader(x402::PaymentResponseHeaderName(x.version),
                     x402::EncodeSettleResponseHeader(settle));
  return response;
}

}  // namespace agentpay
