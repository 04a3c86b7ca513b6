// The admin listener's checks against browsers made to act for someone else (docs/threat-model.md
// T19): every request it answers passes here first. Both checks compare the request with the
// listener's configuration (its bound address, TLS and --admin-origin), never with itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/message.h"
#include "http/origin.h"
#include "http/server.h"

namespace agentpay {

enum class BrowserCheck {
  kAllowed,
  // The Host header names the listener by a DNS name it was not given: a page of evil.example whose
  // name now resolves here (DNS rebinding) would otherwise be same-origin with the listener.
  kHostNotAllowed,
  // A state-changing request (any method but GET and HEAD) that a browser sent from a page of an
  // origin other than the listener's own or one the operator added (cross-site request forgery).
  kCrossOrigin,
};

class BrowserGuard {
 public:
  // `bound_host`: the listener's address as it binds it (ParseListenAddress's host); `tls`: whether
  // it serves HTTPS; `added`: the origins the operator reaches it at besides (--admin-origin).
  BrowserGuard(std::string bound_host, bool tls, std::vector<WebOrigin> added);

  // The port the listener is bound to. Until it is known (port 0 lets the system pick), no origin
  // of the listener's own matches, so a browser's write is refused. Thread-safe.
  void SetPort(uint16_t port) { port_.store(port); }

  // A request without Host (no browser sends one so) passes the Host check, and one without Origin
  // or Sec-Fetch-Site (the CLI, curl, scripts) the origin check: only browsers are told apart.
  BrowserCheck Check(const HttpRequest& request) const;

  // The origins a browser's write is accepted from now, as a browser writes them.
  std::vector<std::string> AllowedOrigins() const;

  // The answer to a refused request (421 host_not_allowed or 403 cross_origin_refused), saying
  // what is accepted and how the operator adds a name. Precondition: `check` is not kAllowed.
  HttpResponse Refusal(BrowserCheck check) const;

 private:
  bool HostAllowed(const HttpRequest& request) const;
  bool OriginAllowed(const HttpRequest& request) const;
  // The listener's own origins at `port`: its address, and for a loopback or wildcard bind the
  // loopback names a browser may use for it (localhost, 127.0.0.1, [::1]).
  std::vector<WebOrigin> OwnOrigins(uint16_t port) const;

  std::string bound_host_;  // as WebOrigin::host has it
  bool tls_;
  std::vector<WebOrigin> added_;
  std::atomic<uint16_t> port_{0};
};

// `inner` behind `guard`: a refused request is answered by the guard and never reaches `inner`.
AsyncHandler GuardedByBrowserChecks(std::shared_ptr<const BrowserGuard> guard, AsyncHandler inner);

}  // namespace agentpay
