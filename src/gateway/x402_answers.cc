// The x402 path's answers: each X402Answer a payment's course ends in, with PAYMENT-RESPONSE
// (v2) or X-PAYMENT-RESPONSE (v1) once a transaction exists; see x402_path.h.
#include "core/check.h"
#include "gateway/answers.h"
#include "gateway/rate_limiter.h"
#include "gateway/x402_path_state.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

using x402::Failure;

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

void X402Path::Reply(const PaymentPtr& p, HttpResponse response) const {
  p->respond(std::move(response));
}

// The reply that ends a payment's course (X402Answer), from what the course left in `x`.
HttpResponse X402Path::AnswerFor(const Payment& x, X402Answer answer) const {
  switch (answer) {
    case X402Answer::kTooManyRounds:
      return RetryLater(ProblemCode::kLimitExceeded,
                        "the key changed hands too often; retry with the same key");
    case X402Answer::kStoreProblem:
      return StoreProblem(x.problem);
    case X402Answer::kStateReplayed:
      return StateAnswer(x, x.op, true);
    case X402Answer::kClosedUnpaid:
      return StateAnswer(x, x.op, false);
    case X402Answer::kMismatch:
      if (x.sold) {
        return SellerRefusal(x, "invalid_payload",
                             "this authorization was presented with another signature");
      }
      return MismatchAnswer(x.op);
    case X402Answer::kAuthorizationTaken:
      return Challenge(x, x402::ReasonCode(Failure::kNonceAlreadyUsed, x.version),
                       "this authorization already pays for another request");
    case X402Answer::kRefusePublic:
      if (x.sold) return SellerRefusal(x, "invalid_payload", "this authorization is taken");
      return PublicAuthorizationAnswer();
    case X402Answer::kCoverKeptMoving:
      return RetryLater(ProblemCode::kLimitExceeded,
                        "the payer's other payments kept settling while its balance was read; "
                        "nothing was submitted, retry later");
    case X402Answer::kUnderfunded:
      return Challenge(x, x402::ReasonCode(Failure::kInsufficientBalance, x.version),
                       "the token refuses this authorization: the payer's other payments in "
                       "flight already reserve its balance");
    case X402Answer::kDeferredFailure:
      return Challenge(x, x402::ReasonCode(x.deferred, x.version),
                       "the payment does not match what this route asks for");
    case X402Answer::kPreflightRefused: {
      const Settler::Preflight& failed = *x.preflight_failure;
      return Challenge(x, x402::ReasonCode(failed.failure, x.version),
                       "the token refuses this authorization" +
                           (failed.detail.empty() ? "" : ": " + failed.detail));
    }
    case X402Answer::kFeesTooHigh:
      return FeesTooHigh(x.chain_detail);
    case X402Answer::kPreflightChainUnavailable:
      return RetryLater(ProblemCode::kChainUnavailable,
                        "the chain could not be asked about this payment (" + x.chain_detail +
                            "); nothing was submitted, retry later");
    case X402Answer::kPayerLimited:
      return PayerLimited(*x.limited);
    case X402Answer::kPayerRateLimited:
      return TooManyRequests(x.payer_retry_after_s, "payer");
    case X402Answer::kChainQueueFull:
      return RetryLater(ProblemCode::kLimitExceeded,
                        "too many x402 payments are waiting on the chain");
    case X402Answer::kProofChainUnavailable:
      return RetryLater(
          ProblemCode::kChainUnavailable,
          "the chain could not be asked about this payment (" + x.chain_detail + "); retry later");
    case X402Answer::kTakenOver:
      if (x.sold) return SellerState(x, x.op);
      return TakenOverAnswer(x.op);
    case X402Answer::kVerdict:
      return VerdictAnswer(x);
    case X402Answer::kDelivered:
    case X402Answer::kSettlementFailed:
      return Answer(StoredAnswer(x.finished, false), x, x.finished);
    case X402Answer::kSettledElsewhere:
      return StateAnswer(x, x.settled, false);
    case X402Answer::kSettlementUnknown:
      return StateAnswer(x, x.finished, false);
    case X402Answer::kNone:
      break;  // not a reply: the machine never asks for one (x402_payment_test's walk)
  }
  AGENTPAY_CHECK(false);
}

// The finish decision's answer: the stored answer (delivered or refused), or 502 / 504 with the
// hold kept (X11, X12).
HttpResponse X402Path::VerdictAnswer(const Payment& x) const {
  const Operation& next = x.finished;
  if (x.completion->verdict != Verdict::kKeep) return Answer(StoredAnswer(next, false), x, next);
  const UpstreamOutcome& outcome = x.outcome;
  const bool timeout = outcome.kind == UpstreamKind::kTimeout;
  std::string detail =
      (outcome.kind == UpstreamKind::kResponded
           ? "the upstream answered " + std::to_string(outcome.status)
           : "the upstream call failed (" + outcome.detail + ")") +
      (next.settlement == Settlement::kSettled
           ? "; the payment is settled and a retry with the same key is served without a new "
             "charge"
           : "; nothing was charged and a retry with the same key tries again");
  return Answer(
      PendingAnswer(next, timeout ? 504 : 502, ProblemCode::kFulfillmentPending, detail, false), x,
      next);
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
  if (p.sold) return SellerRefusal(p, code, detail);
  return RouteChallenge(offers_, p.request->target, *p.route, code, detail);
}

// The answer for an operation nobody is working on right now, from its state.
HttpResponse X402Path::StateAnswer(const Payment& x, const Operation& op, bool replayed) const {
  if (x.sold) return SellerState(x, op);
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
  if (x.sold) return SellerState(x, op);
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
