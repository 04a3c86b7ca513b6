// The answers about an operation; see answers.h.
#include "gateway/answers.h"

#include "core/check.h"

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

HttpResponse TakenOverAnswer(const Operation& op) {
  return PendingAnswer(op, 202, ProblemCode::kOperationInProgress,
                       "a later attempt for this key took over; poll the operation", false);
}

HttpResponse RetryLater(ProblemCode code, const std::string& detail) {
  HttpResponse response = ProblemResponse(503, code, detail);
  response.SetHeader("Retry-After", "1");
  return response;
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

HttpResponse StoreProblem(const Status& status) {
  return RetryLater(status.error() == ErrorCode::kStoreOverloaded ? ProblemCode::kLimitExceeded
                                                                  : ProblemCode::kStoreUnavailable,
                    // The store's own text stays out: a database's errors name hosts, ports and
                    // rows, and this body goes to anyone.
                    "the decision was not recorded (" + std::string(status.code()) +
                        "); retry with the same Idempotency-Key");
}

}  // namespace agentpay
