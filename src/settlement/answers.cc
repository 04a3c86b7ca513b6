// See answers.h.
#include "settlement/answers.h"

#include "core/problem.h"

namespace agentpay {

namespace {
// The body http's ProblemResponse sends (core's one writer of problem JSON), kept for replay.
StoredResponse Problem(int status, ProblemCode code, const std::string& detail,
                       const std::string& operation_id) {
  return StoredResponse{status, "application/problem+json",
                        ProblemJson(status, code, detail, operation_id)};
}

// An open alert of `kind` with a fresh id.
Alert NewAlert(Random& random, const std::string& operation_id, const char* kind,
               const std::string& reason, int64_t now_ms) {
  return Alert{
      "alert_" + RandomHex(random, 16), operation_id, kind, reason, now_ms, std::nullopt, "", ""};
}
}  // namespace

StoredResponse SettlementFailedResponse(const std::string& operation_id) {
  return Problem(409, ProblemCode::kSettlementFailed,
                 "the authorization's nonce was spent by another transaction, so this payment "
                 "was not settled by the gateway; the payer may still have paid: an operator "
                 "reviews it (alert raised). Do not sign again for this request",
                 operation_id);
}

StoredResponse SettlementVoidResponse(const std::string& operation_id) {
  return Problem(402, ProblemCode::kSettlementVoid,
                 "the authorization expired unused on chain; nothing was charged; pay again",
                 operation_id);
}

StoredResponse ExpiredUnsubmittedResponse(const std::string& operation_id) {
  return Problem(402, ProblemCode::kPaymentRequired,
                 "the authorization expired before it was settled; nothing was charged; pay again",
                 operation_id);
}

Alert SettlementFailedAlert(Random& random, const std::string& operation_id,
                            const std::string& reason, int64_t now_ms) {
  return NewAlert(random, operation_id, "settlement_failed", reason, now_ms);
}

Alert UnpaidAfterPossibleWorkAlert(Random& random, const std::string& operation_id,
                                   const std::string& reason, int64_t now_ms) {
  return NewAlert(random, operation_id, "unpaid_after_possible_work", reason, now_ms);
}

Alert SettlementLostAfterDeliveryAlert(Random& random, const std::string& operation_id,
                                       const std::string& reason, int64_t now_ms) {
  return NewAlert(random, operation_id, "settlement_lost_after_delivery", reason, now_ms);
}

}  // namespace agentpay
