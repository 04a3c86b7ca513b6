// The gateway's x402 requirements per route and its 402 challenge; see x402_offer.h. Nothing of
// the challenge is built here by hand: the wire shape is src/x402's, tested against the spec's
// examples and the official clients.
#include "gateway/x402_offer.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "gateway/json_views.h"
#include "x402/verify.h"

namespace agentpay {
namespace {

chain::Address AddressOf(const std::string& text) {
  auto address = chain::ParseAddress(text);
  AGENTPAY_CHECK(address.ok());  // validated by the configuration
  return *address;
}

}  // namespace

X402Offers::X402Offers(const ChainConfig& chain, const std::vector<RouteConfig>& routes,
                       std::string public_url) {
  SetPublicUrl(std::move(public_url));
  AGENTPAY_CHECK(chain.chain_id > 0);
  x402::Requirements common;
  common.chain_id = static_cast<uint64_t>(chain.chain_id);
  common.network = x402::V2Network(common.chain_id);
  common.asset = AddressOf(chain.asset);
  common.pay_to = AddressOf(chain.pay_to);
  common.asset_name = chain.asset_name;
  common.asset_version = chain.asset_version;
  common.max_timeout_seconds = chain.max_timeout_seconds;
  common.domain_separator = x402::DomainSeparatorOf(common);
  common_ = common;
  for (const RouteConfig& route : routes) {
    AGENTPAY_CHECK(route.price > 0);
    x402::Requirements requirements = common;
    requirements.amount = chain::U256(static_cast<uint64_t>(route.price));
    requirements.description = "Paid route " + route.prefix;
    const bool added = by_prefix_.emplace(route.prefix, std::move(requirements)).second;
    AGENTPAY_CHECK(added);  // prefixes are unique
  }
  v2_network_ = x402::V2Network(common.chain_id);
  // As the v1 body names it (UnnamedV1Chain::kNameCaip2). A v1 payment on a chain without a v1
  // name never verifies, so no v1 settle response carries the CAIP-2 form.
  v1_network_ = x402::V1NetworkName(common.chain_id).value_or(v2_network_);
}

const x402::Requirements& X402Offers::For(const RouteConfig& route) const {
  auto found = by_prefix_.find(route.prefix);
  AGENTPAY_CHECK(found != by_prefix_.end());  // a route of another configuration
  return found->second;
}

const std::string& X402Offers::Network(x402::Version version) const {
  return version == x402::Version::kV2 ? v2_network_ : v1_network_;
}

X402Offers::SellerOffer X402Offers::ForSeller(const x402::Requirements& seller) const {
  auto refuse = [](std::string reason, std::string detail) {
    return SellerOffer{std::nullopt, std::move(reason), std::move(detail)};
  };
  if (seller.scheme != "exact") {
    return refuse("unsupported_scheme", "only the exact scheme is settled here");
  }
  if (seller.chain_id != common_.chain_id) {
    return refuse("invalid_network", "this facilitator settles on " + common_.network + " only");
  }
  if (seller.asset != common_.asset) {
    return refuse("invalid_payment_requirements",
                  "this facilitator settles in " + chain::ToChecksumHex(common_.asset) + " only");
  }
  if ((!seller.asset_name.empty() && seller.asset_name != common_.asset_name) ||
      (!seller.asset_version.empty() && seller.asset_version != common_.asset_version)) {
    return refuse("invalid_payment_requirements", "the asset's EIP-712 domain is name \"" +
                                                      common_.asset_name + "\", version \"" +
                                                      common_.asset_version + "\"");
  }
  if (seller.amount.IsZero() || !seller.amount.FitsInt64()) {
    return refuse("invalid_payment_requirements", "the amount must be 1 to 2^63 - 1");
  }
  x402::Requirements settled = common_;
  settled.amount = seller.amount;
  settled.pay_to = seller.pay_to;
  settled.network = seller.network;
  settled.resource_url = seller.resource_url;
  return SellerOffer{std::move(settled), "", ""};
}

std::string X402Offers::ResourceUrl(std::string_view target) const {
  AGENTPAY_CHECK(target.starts_with('/'));  // origin-form, as normalised for routing
  return *public_url_.load() + std::string(target);
}

void X402Offers::SetPublicUrl(std::string public_url) {
  AGENTPAY_CHECK(!public_url.empty() && !public_url.ends_with('/'));
  public_url_.store(std::make_shared<const std::string>(std::move(public_url)));
}

HttpResponse X402Challenge(const x402::Requirements& requirements, std::string resource_url,
                           std::string_view code, std::string_view detail) {
  std::vector<x402::Requirements> offered = {requirements};
  offered.front().resource_url = std::move(resource_url);
  const std::string error = code == ProblemCodeName(ProblemCode::kPaymentRequired)
                                ? "payment required"
                                : std::string(code);
  // The gateway's v1 body has always offered its chain, named or not, and its integration tests
  // pin that (test_wallet_gateway's test_402_challenge reads accepts[0] on chain 1337).
  nlohmann::json body =
      x402::PaymentRequiredV1Body(offered, error, x402::UnnamedV1Chain::kNameCaip2);
  body["type"] = "urn:agentpay:problem:" + std::string(code);
  body["title"] = "Payment Required";
  body["status"] = 402;
  body["code"] = code;
  body["detail"] = detail.empty()
                       ? "pay with a wallet API key (Authorization: Bearer) or an x402 payment"
                       : std::string(detail);
  HttpResponse response;
  response.status = 402;
  response.body = DumpJson(body);
  response.SetHeader("Content-Type", "application/problem+json");
  response.SetHeader(x402::kPaymentRequiredHeader,
                     x402::EncodePaymentRequiredHeader(offered, error));
  return response;
}

HttpResponse X402Offers::PaymentRequired(const RouteConfig& route, std::string_view target) const {
  AGENTPAY_CHECK(target.starts_with('/'));
  auto url = public_url_.load();
  auto build = [&] {
    return X402Challenge(For(route), *url + std::string(target),
                         ProblemCodeName(ProblemCode::kPaymentRequired), "");
  };
  // A long target (a query of up to the header's size) is stored three times over (the key, the
  // body, the base64 header): at most 1,024 short ones are kept, about 2 KiB each.
  if (target.size() > kMaxRememberedTarget) return build();
  std::string key;
  key.reserve(route.prefix.size() + 1 + target.size());
  key.append(route.prefix).push_back('\0');  // a prefix is a path: it holds no NUL
  key.append(target);
  {
    std::lock_guard lock(challenges_.mu);
    if (challenges_.public_url == url) {
      if (auto found = challenges_.by_route_and_target.find(key);
          found != challenges_.by_route_and_target.end()) {
        return found->second;
      }
    }
  }
  HttpResponse built = build();
  std::lock_guard lock(challenges_.mu);
  if (challenges_.public_url != url) {
    // The first challenge for another public URL (or one changed while this was built: then
    // this one is not kept, and the next request builds it for the new URL).
    if (public_url_.load() != url) return built;
    challenges_.by_route_and_target.clear();
    challenges_.public_url = url;
  }
  if (challenges_.by_route_and_target.size() >= kMaxRememberedChallenges) {
    challenges_.by_route_and_target.clear();
  }
  challenges_.by_route_and_target.emplace(std::move(key), built);
  return built;
}

HttpResponse RouteChallenge(const X402Offers& offers, std::string_view target,
                            const RouteConfig& route, std::string_view code,
                            std::string_view detail) {
  if (code == ProblemCodeName(ProblemCode::kPaymentRequired) && detail.empty()) {
    return offers.PaymentRequired(route, target);
  }
  return X402Challenge(offers.For(route), offers.ResourceUrl(target), code, detail);
}

}  // namespace agentpay
