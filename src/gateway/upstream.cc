// Forwarding a paid request to its upstream; see upstream.h.
#include "gateway/upstream.h"

#include <array>
#include <chrono>

#include "gateway/hashing.h"
#include "http/client.h"

namespace agentpay {

std::string UpstreamIdempotencyKey(const std::string& operation_id) {
  // A one-way derivation: stable across the operation's retries, but it does not reveal the
  // operation id, which is the capability to read the operation's status and payer.
  return "agentpay-" + Sha256Hex("agentpay-upstream-key:" + operation_id).substr(0, 48);
}

namespace {
// Headers a client nominated as hop-by-hop in its Connection header (RFC 9110 §7.6.1).
bool NominatedByConnection(const HttpRequest& request, std::string_view name) {
  for (const auto& header : request.headers) {
    if (!HeaderNameEquals(header.name, "Connection")) continue;
    std::string_view list = header.value;
    while (!list.empty()) {
      auto comma = list.find(',');
      std::string_view token = list.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
        token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      if (HeaderNameEquals(token, name)) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}
}  // namespace

bool ForwardedHeader(std::string_view name) {
  static constexpr std::array<std::string_view, 16> kDropped = {
      "connection",          "keep-alive", "proxy-authenticate",
      "proxy-authorization", "te",         "trailer",
      "transfer-encoding",   "upgrade",    "host",
      "content-length",      "expect",     "authorization",
      "payment-signature",   "x-payment",  "idempotency-key",
      "proxy-connection"};
  for (std::string_view dropped : kDropped) {
    if (HeaderNameEquals(name, dropped)) return false;
  }
  return true;
}

ClientRequest BuildUpstreamRequest(const RouteConfig& route, const HttpRequest& request,
                                   const std::string& operation_id) {
  ClientRequest forward;
  forward.method = request.method;
  // The target is normalised (Gateway::HandleAsync): it starts with '/' and holds no dot segment,
  // so the upstream's base path is never left.
  std::string_view base = route.upstream.base_path;
  if (base.ends_with('/')) base.remove_suffix(1);
  forward.target = std::string(base) + request.target;
  for (const auto& header : request.headers) {
    if (ForwardedHeader(header.name) && !NominatedByConnection(request, header.name)) {
      forward.headers.push_back(header);
    }
  }
  forward.headers.push_back({"Idempotency-Key", UpstreamIdempotencyKey(operation_id)});
  forward.body = request.body;
  return forward;
}

UpstreamOutcome ToUpstreamOutcome(ClientResponse response) {
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
    case ClientError::kTls:
    case ClientError::kClosed:
    case ClientError::kProtocol:
    case ClientError::kTooLarge:
      outcome.kind = UpstreamKind::kFailed;
      break;
  }
  outcome.detail = std::string(ClientErrorName(response.error)) + ": " + response.detail;
  return outcome;
}

void HttpUpstream::CallAsync(const RouteConfig& route, std::shared_ptr<const HttpRequest> request,
                             const std::string& operation_id, UpstreamDone done) {
  ClientOptions options;
  options.timeout_ms = route.timeout_ms;
  options.max_response_bytes = max_response_bytes_;
  options.trust = trust_;
  client_.Send(route.upstream, BuildUpstreamRequest(route, *request, operation_id), options,
               [done = std::move(done)](ClientResponse response) {
                 done(ToUpstreamOutcome(std::move(response)));
               });
}

}  // namespace agentpay
