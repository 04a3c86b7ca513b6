// Forwarding a paid request to its upstream; see upstream.h.
#include "gateway/upstream.h"

#include <array>
#include <chrono>

#include "http/client.h"

namespace agentpay {

std::string UpstreamIdempotencyKey(const std::string& operation_id) {
  return "agentpay-" + operation_id;
}

bool ForwardedHeader(std::string_view name) {
  static constexpr std::array<std::string_view, 16> kDropped = {
      "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
      "transfer-encoding", "upgrade", "host", "content-length", "expect", "authorization",
      "payment-signature", "x-payment", "idempotency-key", "proxy-connection"};
  for (std::string_view dropped : kDropped) {
    if (HeaderNameEquals(name, dropped)) return false;
  }
  return true;
}

ClientRequest BuildUpstreamRequest(const RouteConfig& route, const HttpRequest& request,
                                   const std::string& operation_id) {
  ClientRequest forward;
  forward.method = request.method;
  forward.target = route.upstream.base_path + request.target;
  for (const auto& header : request.headers) {
    if (ForwardedHeader(header.name)) forward.headers.push_back(header);
  }
  forward.headers.push_back({"Idempotency-Key", UpstreamIdempotencyKey(operation_id)});
  forward.body = request.body;
  return forward;
}

UpstreamOutcome HttpUpstream::Call(const RouteConfig& route, const HttpRequest& request,
                                   const std::string& operation_id) {
  ClientRequest forward = BuildUpstreamRequest(route, request, operation_id);
  ClientOptions options;
  options.timeout_ms = route.timeout_ms;
  options.max_response_bytes = max_response_bytes_;
  ClientResponse response = SendHttp(route.upstream, forward, options);

  UpstreamOutcome outcome;
  switch (response.error) {
    case ClientError::kNone:
      outcome.kind = UpstreamKind::kResponded;
      outcome.status = response.status;
      outcome.content_type = std::string(response.Header("Content-Type").value_or(""));
      outcome.body = std::move(response.body);
      return outcome;
    case ClientError::kTimeout:
      outcome.kind = UpstreamKind::kTimeout;
      break;
    case ClientError::kConnect:
    case ClientError::kClosed:
    case ClientError::kProtocol:
    case ClientError::kTooLarge:
      outcome.kind = UpstreamKind::kFailed;
      break;
  }
  outcome.detail = std::string(ClientErrorName(response.error)) + ": " + response.detail;
  return outcome;
}

}  // namespace agentpay
