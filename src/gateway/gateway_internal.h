// Definitions shared by the gateway's translation units; not part of its interface.
#pragma once

#include <chrono>
#include <optional>

#include "gateway/gateway.h"

namespace agentpay {

struct Gateway::Begin {
  BeginKind kind = BeginKind::kProceed;
  Operation op;  // the operation as committed (proceed) or as found (replay, attach)
};

// One paid request on its way through the pipeline; shared by the pipeline's callbacks.
struct Gateway::PaidRequest {
  std::shared_ptr<const HttpRequest> request;
  const RouteConfig* route = nullptr;
  Respond respond;
  std::string account_id;
  std::string key;
  std::string fingerprint;
  Begin begin;
  std::optional<Completion> completion;
  std::chrono::steady_clock::time_point upstream_started;
  std::string principal() const { return "account:" + account_id; }
};

// The headers every answer about an operation carries (CONTRACT §3).
HttpResponse WithOperation(HttpResponse response, const std::string& operation_id, bool replayed);
// The stored final answer of an operation. Precondition: op.response is set.
HttpResponse StoredAnswer(const Operation& op, bool replayed);
// A problem answer about an unfinished operation, with Location (and Retry-After for 202).
HttpResponse PendingAnswer(const Operation& op, int status, ProblemCode code,
                           const std::string& detail, bool replayed);
HttpResponse MismatchAnswer(const Operation& op);
// A wallet operation's answer once no attempt is in flight (final, or kept after a failure).
std::optional<HttpResponse> WalletAnswerWhenDone(const Operation& op);

// A store failure as an HTTP answer: overload is 503 with Retry-After, anything else 503 too: the
// decision did not commit, so the client may retry with the same key.
HttpResponse StoreProblem(const Status& status);

}  // namespace agentpay
