// The paid upstream as the gateway sees it: an interface, so the simulator can replace the network.
#pragma once

#include <functional>
#include <memory>

#include "core/operation.h"
#include "gateway/config.h"
#include "http/client.h"
#include "http/message.h"

namespace agentpay {

using UpstreamDone = std::function<void(UpstreamOutcome)>;

class Upstream {
 public:
  virtual ~Upstream() = default;
  // Forwards `request` to the route's upstream for operation `operation_id`; `done` reports what
  // happened, from any thread, within the route's timeout. Must not block the caller.
  virtual void CallAsync(const RouteConfig& route, std::shared_ptr<const HttpRequest> request,
                         const std::string& operation_id, UpstreamDone done) = 0;
};

class HttpUpstream final : public Upstream {
 public:
  // An https upstream's certificate must chain to `trust` (null: the system's CA store).
  HttpUpstream(uint64_t max_response_bytes, std::shared_ptr<const TlsTrust> trust)
      : max_response_bytes_(max_response_bytes), trust_(std::move(trust)) {}
  void CallAsync(const RouteConfig& route, std::shared_ptr<const HttpRequest> request,
                 const std::string& operation_id, UpstreamDone done) override;

 private:
  uint64_t max_response_bytes_;
  std::shared_ptr<const TlsTrust> trust_;
  AsyncHttpClient client_;
};

// What the gateway makes of a client answer (or failure) from the upstream.
UpstreamOutcome ToUpstreamOutcome(ClientResponse response);

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
