// The paid upstream as the gateway sees it: an interface, so the simulator can replace the network.
#pragma once

#include "core/operation.h"
#include "gateway/config.h"
#include "http/client.h"
#include "http/message.h"

namespace agentpay {

class Upstream {
 public:
  virtual ~Upstream() = default;
  // Forwards `request` to the route's upstream for operation `operation_id` and reports what happened.
  // Blocks for at most the route's timeout.
  virtual UpstreamOutcome Call(const RouteConfig& route, const HttpRequest& request,
                               const std::string& operation_id) = 0;
};

class HttpUpstream final : public Upstream {
 public:
  explicit HttpUpstream(uint64_t max_response_bytes) : max_response_bytes_(max_response_bytes) {}
  UpstreamOutcome Call(const RouteConfig& route, const HttpRequest& request,
                       const std::string& operation_id) override;

 private:
  uint64_t max_response_bytes_;
};

// The idempotency key the gateway sends upstream for an operation: stable across its retries,
// and not the operation id itself.
std::string UpstreamIdempotencyKey(const std::string& operation_id);

// The request sent upstream: the client's method, target (under the upstream's base path), body and
// forwarded headers, plus the gateway's own Idempotency-Key for the operation.
ClientRequest BuildUpstreamRequest(const RouteConfig& route, const HttpRequest& request,
                                   const std::string& operation_id);

// Whether a client header is forwarded upstream (not hop-by-hop, not a credential or payment).
bool ForwardedHeader(std::string_view name);

}  // namespace agentpay
