// The admin listener's browser checks (http/browser_guard.h): the Host and the Origin of a request
// are compared with the listener's configuration, never with each other. A page of evil.example
// whose DNS name was pointed at the listener (DNS rebinding) sends a matching Host and Origin and
// must be refused all the same; the listener's own origins, and the operator's, are accepted.
#include "http/browser_guard.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace agentpay {
namespace {

HttpRequest Request(std::string method, std::vector<HttpHeader> headers) {
  HttpRequest request;
  request.method = std::move(method);
  request.target = "/admin/v1/accounts";
  request.headers = std::move(headers);
  return request;
}

// A browser's write from `origin`, sent to the listener by the name `host`.
HttpRequest BrowserPost(const std::string& host, const std::string& origin) {
  return Request("POST", {{"Host", host}, {"Origin", origin}, {"Sec-Fetch-Site", "same-origin"}});
}

std::unique_ptr<BrowserGuard> LoopbackGuard(uint16_t port, bool tls = false,
                                            std::vector<WebOrigin> added = {}) {
  auto guard = std::make_unique<BrowserGuard>("127.0.0.1", tls, std::move(added));
  guard->SetPort(port);
  return guard;
}

TEST(BrowserGuard, ADnsRebindingHostAndOriginPairIsRefused) {
  const auto guard = LoopbackGuard(8404);
  // Host and Origin agree with each other (the page is "same-origin" with itself): the check of
  // today's main compared one with the other and let this through.
  EXPECT_EQ(guard->Check(BrowserPost("evil.example:8404", "http://evil.example:8404")),
            BrowserCheck::kHostNotAllowed);
  // Its reads too: /metrics, the pages and the model need no token.
  EXPECT_EQ(guard->Check(Request("GET", {{"Host", "evil.example:8404"}})),
            BrowserCheck::kHostNotAllowed);
  EXPECT_EQ(guard->Check(Request("GET", {{"Host", "Evil.Example"}})),
            BrowserCheck::kHostNotAllowed);
  // A rebinding page that somehow sent an allowed Host is still refused by its Origin.
  EXPECT_EQ(guard->Check(BrowserPost("127.0.0.1:8404", "http://evil.example:8404")),
            BrowserCheck::kCrossOrigin);
  for (const char* odd :
       {"", "evil.example:0", "a@127.0.0.1:8404", "::1:8404", "127.0.0.1 :8404"}) {
    EXPECT_EQ(guard->Check(Request("GET", {{"Host", odd}})), BrowserCheck::kHostNotAllowed) << odd;
  }
}

TEST(BrowserGuard, TheListenersOwnOriginsAreAccepted) {
  const auto guard = LoopbackGuard(8404);
  for (const char* origin :
       {"http://127.0.0.1:8404", "http://localhost:8404", "http://[::1]:8404"}) {
    const std::string host = std::string(origin).substr(7);
    EXPECT_EQ(guard->Check(BrowserPost(host, origin)), BrowserCheck::kAllowed) << origin;
  }
  // Another port of the same machine is another origin (the public listener, another service).
  EXPECT_EQ(guard->Check(BrowserPost("127.0.0.1:8404", "http://127.0.0.1:8402")),
            BrowserCheck::kCrossOrigin);
  EXPECT_EQ(guard->Check(BrowserPost("127.0.0.1:8404", "https://127.0.0.1:8404")),
            BrowserCheck::kCrossOrigin)
      << "this listener does not serve https";
  EXPECT_EQ(guard->AllowedOrigins(),
            (std::vector<std::string>{"http://localhost:8404", "http://127.0.0.1:8404",
                                      "http://[::1]:8404"}));
}

TEST(BrowserGuard, AnAddedOriginIsAcceptedForHostAndWrites) {
  auto console = ParseWebOrigin("https://console.example.com");
  ASSERT_TRUE(console.ok());
  const auto guard = LoopbackGuard(8404, false, {*console});
  // Through a proxy at console.example.com: the proxy passes the browser's Host and Origin.
  EXPECT_EQ(guard->Check(BrowserPost("console.example.com", "https://console.example.com")),
            BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(Request("GET", {{"Host", "console.example.com"}})),
            BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(BrowserPost("console.example.com", "http://console.example.com")),
            BrowserCheck::kCrossOrigin)
      << "the scheme is part of the origin";
  EXPECT_EQ(guard->Check(BrowserPost("console.example.com", "https://console.example.com:8443")),
            BrowserCheck::kCrossOrigin);
  EXPECT_EQ(guard->Check(BrowserPost("other.example.com", "https://other.example.com")),
            BrowserCheck::kHostNotAllowed);
}

TEST(BrowserGuard, AnHttpsListenerAcceptsHttpsOrigins) {
  const auto guard = LoopbackGuard(8404, /*tls=*/true);
  EXPECT_EQ(guard->Check(BrowserPost("localhost:8404", "https://localhost:8404")),
            BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(BrowserPost("localhost:8404", "http://localhost:8404")),
            BrowserCheck::kCrossOrigin);
}

TEST(BrowserGuard, AListenerOnOneAddressOwnsThatAddressOnly) {
  BrowserGuard guard("10.0.0.5", false, {});
  guard.SetPort(8404);
  EXPECT_EQ(guard.Check(BrowserPost("10.0.0.5:8404", "http://10.0.0.5:8404")),
            BrowserCheck::kAllowed);
  EXPECT_EQ(guard.Check(BrowserPost("10.0.0.5:8404", "http://localhost:8404")),
            BrowserCheck::kCrossOrigin)
      << "localhost is not this listener when it does not listen on loopback";
  // A wildcard bind listens on loopback too; its other addresses must be named.
  BrowserGuard wildcard("::", false, {});
  wildcard.SetPort(8404);
  EXPECT_EQ(wildcard.Check(BrowserPost("[::1]:8404", "http://[::1]:8404")), BrowserCheck::kAllowed);
  EXPECT_EQ(wildcard.Check(BrowserPost("10.0.0.5:8404", "http://10.0.0.5:8404")),
            BrowserCheck::kCrossOrigin);
  EXPECT_EQ(wildcard.Check(BrowserPost("10.0.0.5:8404", "http://[::]:8404")),
            BrowserCheck::kCrossOrigin);
  // A DNS name the listener binds is its own name.
  BrowserGuard named("admin.internal", false, {});
  named.SetPort(8404);
  EXPECT_EQ(named.Check(BrowserPost("admin.internal:8404", "http://admin.internal:8404")),
            BrowserCheck::kAllowed);
}

TEST(BrowserGuard, CrossSiteFetchMetadataAndOpaqueOriginsAreRefused) {
  const auto guard = LoopbackGuard(8404);
  for (const char* site : {"cross-site", "same-site"}) {
    EXPECT_EQ(guard->Check(Request("POST", {{"Host", "127.0.0.1:8404"}, {"Sec-Fetch-Site", site}})),
              BrowserCheck::kCrossOrigin)
        << site;
  }
  EXPECT_EQ(guard->Check(Request("POST", {{"Host", "127.0.0.1:8404"}, {"Sec-Fetch-Site", "none"}})),
            BrowserCheck::kAllowed)
      << "typed by the user";
  for (const char* origin : {"null", "http://127.0.0.1:8404/console", "127.0.0.1:8404", ""}) {
    EXPECT_EQ(guard->Check(Request("DELETE", {{"Host", "127.0.0.1:8404"}, {"Origin", origin}})),
              BrowserCheck::kCrossOrigin)
        << origin;
  }
}

TEST(BrowserGuard, ReadsAreNotOriginCheckedAndNonBrowsersPass) {
  const auto guard = LoopbackGuard(8404);
  // A read answers only what the token allows; the browser keeps another origin from reading it.
  EXPECT_EQ(guard->Check(Request("GET", {{"Host", "127.0.0.1:8404"}, {"Origin", "http://x.test"}})),
            BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(Request("HEAD", {{"Sec-Fetch-Site", "cross-site"}})),
            BrowserCheck::kAllowed);
  // The CLI, curl and scripts send no Origin; HTTP/1.0 clients may send no Host.
  EXPECT_EQ(guard->Check(Request("POST", {{"Host", "127.0.0.1:8404"}})), BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(Request("POST", {})), BrowserCheck::kAllowed);
  EXPECT_EQ(guard->Check(Request("POST", {{"Host", "10.9.8.7"}})), BrowserCheck::kAllowed)
      << "an address cannot be re-pointed by DNS";
}

TEST(BrowserGuard, NothingOfItsOwnIsAcceptedBeforeThePortIsKnown) {
  BrowserGuard guard("127.0.0.1", false, {});
  EXPECT_EQ(guard.Check(BrowserPost("127.0.0.1:8404", "http://127.0.0.1:8404")),
            BrowserCheck::kCrossOrigin);
  EXPECT_TRUE(guard.AllowedOrigins().empty());
  guard.SetPort(8404);
  EXPECT_EQ(guard.Check(BrowserPost("127.0.0.1:8404", "http://127.0.0.1:8404")),
            BrowserCheck::kAllowed);
}

TEST(BrowserGuard, RefusalsSayWhatIsAcceptedAndARefusedRequestGoesNoFurther) {
  auto guard = std::make_shared<BrowserGuard>("127.0.0.1", false, std::vector<WebOrigin>{});
  guard->SetPort(8404);
  int reached = 0;
  AsyncHandler handler = GuardedByBrowserChecks(
      guard, [&reached](std::shared_ptr<const HttpRequest>, Respond respond) {
        ++reached;
        respond(JsonResponse(200, "{}"));
      });
  std::vector<HttpResponse> answers;
  auto send = [&](HttpRequest request) {
    handler(std::make_shared<HttpRequest>(std::move(request)),
            [&answers](HttpResponse response) { answers.push_back(std::move(response)); });
    return answers.back();
  };
  HttpResponse rebound = send(BrowserPost("evil.example:8404", "http://evil.example:8404"));
  EXPECT_EQ(rebound.status, 421);
  auto problem = nlohmann::json::parse(rebound.body);
  EXPECT_EQ(problem["code"], "host_not_allowed");
  EXPECT_NE(problem["detail"].get<std::string>().find("--admin-origin"), std::string::npos);
  HttpResponse forged = send(BrowserPost("127.0.0.1:8404", "https://evil.example"));
  EXPECT_EQ(forged.status, 403);
  problem = nlohmann::json::parse(forged.body);
  EXPECT_EQ(problem["code"], "cross_origin_refused");
  EXPECT_NE(problem["detail"].get<std::string>().find("http://127.0.0.1:8404"), std::string::npos);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(send(BrowserPost("localhost:8404", "http://localhost:8404")).status, 200);
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace agentpay
