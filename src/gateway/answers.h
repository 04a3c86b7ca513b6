// The answers every payment path gives about an operation (CONTRACT §3): its headers, its stored
// final answer, the problem answers of an unfinished one, and a store failure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/operation.h"
#include "core/result.h"
#include "http/message.h"

namespace agentpay {

// The headers every answer about an operation carries.
HttpResponse WithOperation(HttpResponse response, const std::string& operation_id, bool replayed);
// The stored final answer of an operation. Precondition: op.response is set.
HttpResponse StoredAnswer(const Operation& op, bool replayed);
// A problem answer about an unfinished operation, with Location (and Retry-After for 202).
HttpResponse PendingAnswer(const Operation& op, int status, ProblemCode code,
                           const std::string& detail, bool replayed);
HttpResponse MismatchAnswer(const Operation& op);
// 202 for an attempt whose claim a later attempt for the same key took over.
HttpResponse TakenOverAnswer(const Operation& op);
// 503 with `code` and Retry-After: 1: nothing was decided, the same request may come again.
HttpResponse RetryLater(ProblemCode code, const std::string& detail);
// A wallet operation's answer once no attempt is in flight (final, or kept after a failure).
std::optional<HttpResponse> WalletAnswerWhenDone(const Operation& op);

// A store failure as an HTTP answer: overload is 503 with Retry-After, anything else 503 too: the
// decision did not commit, so the client may retry with the same key.
HttpResponse StoreProblem(const Status& status);

}  // namespace agentpay
