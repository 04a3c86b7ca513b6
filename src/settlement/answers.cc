// See answers.h.
#include "settlement/answers.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "http/problem_code.h"

namespace agentpay {

namespace {
StoredResponse Problem(int status, ProblemCode code, const std::string& detail,
                       const std::string& operation_id) {
  const std::string_view name = ProblemCodeName(code);
  nlohmann::json body = {{"type", "urn:agentpay:problem:" + std::string(name)},
                         {"title", status == 402 ? "Payment Required" : "Conflict"},
                         {"status", status},
                         {"code", name},
                         {"detail", detail},
                         {"operation_id", operation_id}};
  return StoredResponse{status, "application/problem+json", body.dump()};
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

Alert SettlementFailedAlert(Random& random, const std::string& operation_id,
                            const std::string& reason, int64_t now_ms) {
  return Alert{"alert_" + RandomHex(random, 16), operation_id, "settlement_failed", reason, now_ms,
               std::nullopt, "", ""};
}

}  // namespace agentpay
