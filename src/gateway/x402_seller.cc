// The x402 path for a seller's settle and verify through the facilitator (gateway/facilitator.h):
// the entry points and the settle answers; the course itself is the path's own (x402_path.cc).
#include <algorithm>

#include "core/check.h"
#include "gateway/answers.h"
#include "gateway/x402_path_state.h"

namespace agentpay {
namespace {

using x402::Failure;

// A seller's settle has nothing upstream; its operation's lease covers the receipt wait and the
// decisions around it.
constexpr int64_t kSellerCallMs = 1000;
// The route label a seller's settle is recorded under (never a route prefix, which starts '/').
constexpr char kSellerRoute[] = "facilitator";

// A settle's or a verify's answer: the state now, never to be cached.
HttpResponse JsonAnswer(int status, std::string body) {
  HttpResponse response = JsonResponse(status, std::move(body));
  response.SetHeader("Cache-Control", "no-store");
  return response;
}

std::string PayerOf(const x402::PaymentPayload& payload) {
  return chain::ToChecksumHex(payload.authorization.from);
}

}  // namespace

void X402Path::SettleForSeller(x402::FacilitatorRequest call, Respond respond) {
  auto p = std::make_shared<Payment>();
  p->respond = std::move(respond);
  p->version = call.version;
  p->payload = std::move(call.payload);
  auto offer = offers_.ForSeller(call.requirements);
  if (!offer.requirements) {
    return Reply(
        p, JsonAnswer(200, x402::SettleBody({false, offer.refused, "", offers_.Network(p->version),
                                             PayerOf(p->payload)},
                                            offer.detail)));
  }
  p->sold = std::move(*offer.requirements);
  p->seller_route.prefix = kSellerRoute;
  p->seller_route.price = p->sold->amount.ToInt64();
  p->seller_route.timeout_ms = kSellerCallMs;
  p->seller_route.settle = SettleTiming::kBefore;
  p->route = &p->seller_route;
  if (auto refused = PrepareForSeller(*p)) return Reply(p, std::move(*refused));
  p->machine.deferred_failure = p->deferred != Failure::kNone;
  Advance(std::move(p), X402Started{});
}

void X402Path::VerifyForSeller(x402::FacilitatorRequest call, Respond respond) {
  const std::string payer = PayerOf(call.payload);
  auto invalid = [&](std::string reason, std::string message) {
    respond(
        JsonAnswer(200, x402::VerifyBody({false, std::move(reason), std::move(message), payer})));
  };
  auto offer = offers_.ForSeller(call.requirements);
  if (!offer.requirements) return invalid(offer.refused, offer.detail);
  const int64_t now_ms = ctx_.clock.NowMs();
  const Failure failure = x402::VerifyExact(call.payload, *offer.requirements, now_ms / 1000);
  if (failure != Failure::kNone) {
    return invalid(std::string(x402::ReasonCode(failure, call.version)),
                   "the payment does not match the requirement");
  }
  auto payload = std::make_shared<x402::PaymentPayload>(std::move(call.payload));
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  OnChain(
      [this, payload, shared_respond, payer, version = call.version] {
        // The hold the check takes is let go with it: a verify reserves nothing.
        auto checked =
            settler_.Check(payload->authorization, payload->signature, ctx_.clock.NowMs());
        if (!checked.ok()) {
          return (*shared_respond)(RetryLater(ProblemCode::kChainUnavailable,
                                              "the chain could not be asked about this payment (" +
                                                  checked.status().message() + "); retry later"));
        }
        x402::VerifyAnswer answer{checked->failure == Failure::kNone, "", "", payer};
        if (!answer.valid) {
          answer.invalid_reason = x402::ReasonCode(checked->failure, version);
          answer.invalid_message = "the token refuses this authorization" +
                                   (checked->detail.empty() ? "" : ": " + checked->detail);
        }
        (*shared_respond)(JsonAnswer(200, x402::VerifyBody(answer)));
      },
      [shared_respond] {
        (*shared_respond)(RetryLater(ProblemCode::kLimitExceeded,
                                     "too many x402 payments are waiting on the chain"));
      });
}

void X402Path::SettlementForSeller(std::string payer, std::string nonce,
                                   std::vector<chain::Address> payees, Respond respond) {
  struct Found {
    std::optional<X402PaymentRecord> payment;
    std::optional<Operation> op;
  };
  auto found = std::make_shared<Found>();
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  ctx_.store.ReadAsync(
      ctx_.readers,
      [found, payer, nonce](Transaction& tx) -> Status {
        auto payment = tx.FindX402PaymentByAuthorization(payer, nonce);
        if (!payment.ok()) return payment.status();
        found->payment = std::move(*payment);
        if (!found->payment) return Status::Ok();
        auto op = tx.FindOperation(found->payment->operation_id);
        if (!op.ok()) return op.status();
        found->op = std::move(*op);
        return Status::Ok();
      },
      [this, found, shared_respond, payees = std::move(payees)](Status read) {
        if (!read.ok()) return (*shared_respond)(StoreProblem(read));
        // A settle's own operation only: an authorization that paid one of the gateway's routes
        // to the same payee is not a settlement this facilitator was asked for.
        const bool theirs = found->payment && found->op && found->op->route == kSellerRoute && [&] {
          auto payee = chain::ParseAddress(found->payment->pay_to);
          return payee.ok() && std::find(payees.begin(), payees.end(), *payee) != payees.end();
        }();
        if (!theirs) {
          return (*shared_respond)(ProblemResponse(
              404, ProblemCode::kNotFound, "no settlement of this authorization for this seller"));
        }
        Payment x;
        x.version = found->payment->x402_version == 1 ? x402::Version::kV1 : x402::Version::kV2;
        auto from = chain::ParseAddress(found->payment->authorization.from);
        if (from.ok()) x.payload.authorization.from = *from;
        x.payment = std::move(*found->payment);
        (*shared_respond)(SellerState(x, *found->op));
      });
}

HttpResponse X402Path::SellerState(const Payment& x, const Operation& op) const {
  x402::SettleResponse settle;
  settle.network = offers_.Network(x.version);
  settle.payer = PayerOf(x.payload);
  settle.transaction = x.payment.tx_hash;
  switch (op.settlement) {
    case Settlement::kSettled:
      settle.success = true;
      break;
    case Settlement::kSubmitted:
    case Settlement::kUnknown:
      settle.error_reason = "settlement_pending";
      return JsonAnswer(
          200, x402::SettleBody(settle, x.payment.submitted()
                                            ? "broadcast, not yet confirmed; it is never sent "
                                              "twice: ask again with the same payment"
                                            : "waiting for its batch's transaction; it is never "
                                              "sent twice: ask again with the same payment"));
    case Settlement::kVoid:
      settle.error_reason = "settlement_void";
      return JsonAnswer(
          200, x402::SettleBody(settle, "the authorization expired unused: nothing was paid"));
    case Settlement::kFailed:
      settle.error_reason = "settlement_failed";
      return JsonAnswer(200, x402::SettleBody(settle,
                                              "the authorization's nonce was spent without this "
                                              "payment: nothing was paid through it"));
    case Settlement::kNone:
    case Settlement::kHeld:
    case Settlement::kReleased:
      settle.error_reason = "unexpected_settle_error";
      return JsonAnswer(500, x402::SettleBody(settle, "the operation is not an x402 settlement"));
  }
  return JsonAnswer(200, x402::SettleBody(settle));
}

HttpResponse X402Path::SellerRefusal(const Payment& x, std::string_view reason,
                                     std::string_view detail) const {
  return JsonAnswer(200, x402::SettleBody({false, std::string(reason), "",
                                           offers_.Network(x.version), PayerOf(x.payload)},
                                          detail));
}

}  // namespace agentpay
