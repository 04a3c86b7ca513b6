// The 402 challenge as the gateway remembers it: the same bytes X402Challenge builds, for the
// route and target asked, after the public URL changes too, within its bound.
#include "gateway/x402_offer.h"

#include <gtest/gtest.h>

#include <string>

#include "core/problem.h"

namespace agentpay {
namespace {

RouteConfig Route(const std::string& prefix, int64_t price) {
  RouteConfig route;
  route.prefix = prefix;
  route.price = price;
  return route;
}

void ExpectSame(const HttpResponse& a, const HttpResponse& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.headers, b.headers);
  EXPECT_EQ(a.body, b.body);
}

TEST(X402Offers, TheRememberedChallengeIsTheOneBuiltForThatRouteAndTarget) {
  const RouteConfig cheap = Route("/", 5), dear = Route("/dear", 700);
  X402Offers offers(ChainConfig{}, {cheap, dear}, "https://pay.example");
  const char* code = "payment_required";
  const std::string long_target = "/a?" + std::string(X402Offers::kMaxRememberedTarget, 'q');
  for (int round = 0; round < 2; ++round) {  // built, then remembered (a long target: built again)
    for (const auto& [route, target] :
         {std::pair{&cheap, "/a"}, std::pair{&cheap, "/b?x=1"}, std::pair{&dear, "/dear/a"},
          std::pair{&cheap, long_target.c_str()}}) {
      SCOPED_TRACE(target);
      HttpResponse fresh = X402Challenge(offers.For(*route), offers.ResourceUrl(target), code, "");
      ExpectSame(offers.PaymentRequired(*route, target), fresh);
      ExpectSame(RouteChallenge(offers, target, *route), fresh);
    }
  }
  EXPECT_NE(offers.PaymentRequired(cheap, "/a").body, offers.PaymentRequired(cheap, "/b").body);
  EXPECT_NE(offers.PaymentRequired(cheap, "/dear/a").body,
            offers.PaymentRequired(dear, "/dear/a").body);
  // Another code or a detail is built as asked, never the remembered one.
  HttpResponse invalid = RouteChallenge(offers, "/a", cheap, "invalid_payment", "why");
  ExpectSame(invalid,
             X402Challenge(offers.For(cheap), offers.ResourceUrl("/a"), "invalid_payment", "why"));
}

TEST(X402Offers, ANewPublicUrlIsInTheNextChallenge) {
  const RouteConfig route = Route("/", 5);
  X402Offers offers(ChainConfig{}, {route}, "http://127.0.0.1:0");
  const std::string before = offers.PaymentRequired(route, "/a").body;
  EXPECT_NE(before.find("http://127.0.0.1:0/a"), std::string::npos) << before;
  offers.SetPublicUrl("https://pay.example");
  const std::string after = offers.PaymentRequired(route, "/a").body;
  EXPECT_EQ(after.find("127.0.0.1"), std::string::npos) << after;
  EXPECT_NE(after.find("https://pay.example/a"), std::string::npos) << after;
}

TEST(X402Offers, ManyTargetsAreAnsweredAlikeBeyondTheBound) {
  const RouteConfig route = Route("/", 5);
  X402Offers offers(ChainConfig{}, {route}, "https://pay.example");
  for (size_t i = 0; i < 3 * X402Offers::kMaxRememberedChallenges; ++i) {
    const std::string target = "/t" + std::to_string(i);
    HttpResponse got = offers.PaymentRequired(route, target);
    ASSERT_NE(got.body.find("https://pay.example" + target + "\""), std::string::npos) << i;
  }
}

}  // namespace
}  // namespace agentpay
