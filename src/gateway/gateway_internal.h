// Definitions shared by the gateway's translation units; not part of its interface.
#pragma once

#include "gateway/gateway.h"

namespace agentpay {

struct Gateway::PaidRequest {
  const HttpRequest& request;
  const RouteConfig& route;
  std::string account_id;
  std::string key;
  std::string fingerprint;
  std::string principal() const { return "account:" + account_id; }
};

struct Gateway::Begin {
  BeginKind kind = BeginKind::kProceed;
  Operation op;  // the operation as committed (proceed) or as found (replay, attach)
};

// A store failure as an HTTP answer: overload is 503 with Retry-After, anything else 503 too: the
// decision did not commit, so the client may retry with the same key.
HttpResponse StoreProblem(const Status& status);

}  // namespace agentpay
