// See browser_guard.h.
#include "http/browser_guard.h"

#include "core/check.h"

namespace agentpay {
namespace {

// How a browser may name a listener of this machine's loopback interface.
constexpr std::string_view kLoopbackNames[] = {"localhost", "127.0.0.1", "[::1]"};

std::string Joined(const std::vector<std::string>& texts) {
  std::string joined;
  for (const std::string& text : texts) joined += (joined.empty() ? "" : ", ") + text;
  return joined;
}

}  // namespace

BrowserGuard::BrowserGuard(std::string bound_host, bool tls, std::vector<WebOrigin> added)
    : tls_(tls), added_(std::move(added)) {
  // ParseListenAddress gives IPv6 without brackets; the origins compare with them.
  if (bound_host.find(':') != std::string::npos && !bound_host.starts_with('[')) {
    bound_host = "[" + bound_host + "]";
  }
  bound_host_ = HostOfHeader(bound_host).value_or(bound_host);
}

BrowserCheck BrowserGuard::Check(const HttpRequest& request) const {
  if (!HostAllowed(request)) return BrowserCheck::kHostNotAllowed;
  if (!OriginAllowed(request)) return BrowserCheck::kCrossOrigin;
  return BrowserCheck::kAllowed;
}

// A DNS name is what a rebinding attacker controls: an IP address or localhost in the Host header
// means the page itself was loaded from an address, which no one can re-point.
bool BrowserGuard::HostAllowed(const HttpRequest& request) const {
  auto value = request.Header("Host");
  if (!value) return true;
  auto host = HostOfHeader(*value);
  if (!host) return false;
  if (IsIpAddressHost(*host) || *host == "localhost" || *host == bound_host_) return true;
  for (const WebOrigin& origin : added_) {
    if (origin.host == *host) return true;
  }
  return false;
}

bool BrowserGuard::OriginAllowed(const HttpRequest& request) const {
  if (request.method == "GET" || request.method == "HEAD") return true;
  if (auto site = request.Header("Sec-Fetch-Site")) {
    if (*site != "same-origin" && *site != "none") return false;
  }
  auto value = request.Header("Origin");
  if (!value) return true;
  auto origin = ParseWebOrigin(*value);  // "null" (an opaque origin) does not parse: refused
  if (!origin.ok()) return false;
  for (const WebOrigin& added : added_) {
    if (added == *origin) return true;
  }
  for (const WebOrigin& own : OwnOrigins(port_.load())) {
    if (own == *origin) return true;
  }
  return false;
}

std::vector<WebOrigin> BrowserGuard::OwnOrigins(uint16_t port) const {
  std::vector<WebOrigin> own;
  if (port == 0) return own;
  // A wildcard bind listens on loopback too; its other addresses are the operator's to name.
  if (IsLoopbackAddress(bound_host_) || IsWildcardAddress(bound_host_)) {
    for (std::string_view name : kLoopbackNames) own.push_back({tls_, std::string(name), port});
    if (IsLoopbackAddress(bound_host_) && bound_host_ != "127.0.0.1" && bound_host_ != "[::1]") {
      own.push_back({tls_, bound_host_, port});  // 127.0.0.2 and the like
    }
    return own;
  }
  own.push_back({tls_, bound_host_, port});
  return own;
}

std::vector<std::string> BrowserGuard::AllowedOrigins() const {
  std::vector<std::string> allowed;
  for (const WebOrigin& origin : OwnOrigins(port_.load())) allowed.push_back(origin.Serialize());
  for (const WebOrigin& origin : added_) allowed.push_back(origin.Serialize());
  return allowed;
}

HttpResponse BrowserGuard::Refusal(BrowserCheck check) const {
  switch (check) {
    case BrowserCheck::kHostNotAllowed: {
      std::vector<std::string> names = {"IP addresses", "localhost"};
      if (!IsIpAddressHost(bound_host_) && bound_host_ != "localhost") names.push_back(bound_host_);
      for (const WebOrigin& origin : added_) names.push_back(origin.host);
      return ProblemResponse(
          421, ProblemCode::kHostNotAllowed,
          "this admin listener answers to " + Joined(names) +
              "; the Host of this request names it otherwise (a DNS name pointed here by someone "
              "else?). To reach it by another name, start the gateway with --admin-origin "
              "http(s)://NAME[:PORT]");
    }
    case BrowserCheck::kCrossOrigin: {
      const std::vector<std::string> allowed = AllowedOrigins();
      return ProblemResponse(
          403, ProblemCode::kCrossOriginRefused,
          "a state-changing admin call from a browser page of another origin is refused; this "
          "listener accepts them from " +
              (allowed.empty() ? std::string("no origin yet") : Joined(allowed)) +
              " (add another with --admin-origin)");
    }
    case BrowserCheck::kAllowed:
      break;
  }
  AGENTPAY_CHECK(false && "Refusal of an allowed request");
  return {};
}

AsyncHandler GuardedByBrowserChecks(std::shared_ptr<const BrowserGuard> guard, AsyncHandler inner) {
  AGENTPAY_CHECK(guard != nullptr && inner != nullptr);
  return [guard = std::move(guard), inner = std::move(inner)](
             std::shared_ptr<const HttpRequest> request, Respond respond) {
    const BrowserCheck check = guard->Check(*request);
    switch (check) {
      case BrowserCheck::kAllowed:
        return inner(std::move(request), std::move(respond));
      case BrowserCheck::kHostNotAllowed:
      case BrowserCheck::kCrossOrigin:
        return respond(guard->Refusal(check));
    }
  };
}

}  // namespace agentpay
