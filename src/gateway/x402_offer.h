// What the gateway asks of an x402 payer on each paid route, computed once at start, and the 402
// challenge built from it by src/x402's encoders. The payment path verifies against the very same
// requirements, so what is advertised and what is accepted cannot drift apart.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/config.h"
#include "http/message.h"
#include "x402/wire.h"

namespace agentpay {

class X402Offers {
 public:
  // Preconditions: config.chain.asset and config.chain.pay_to are 0x addresses; route prefixes
  // are unique (the config guarantees it), so requirements are found by prefix; `public_url` is a
  // base URL (GatewayConfig::public_url).
  X402Offers(const ChainConfig& chain, const std::vector<RouteConfig>& routes,
             std::string public_url);

  // The requirements of one of the routes given at construction (resource_url empty: only it
  // depends on the request), with their EIP-712 domain separator already computed.
  const x402::Requirements& For(const RouteConfig& route) const;
  // What every route's requirements share: chain, asset, domain, payee of the configuration, cap.
  const x402::Requirements& Common() const { return common_; }
  // The network of a settle response (PAYMENT-RESPONSE / X-PAYMENT-RESPONSE) of `version`.
  const std::string& Network(x402::Version version) const;

  // What the facilitator settles for a seller's requirement (gateway/facilitator.h): the seller's
  // amount and payee, on this gateway's chain and asset, signed for this gateway's EIP-712 domain
  // and within its validBefore cap (its max_timeout_seconds, whatever the seller advertised).
  // Refused, with an x402 reason: a scheme other than exact (unsupported_scheme), another chain
  // (invalid_network), another asset, another domain name or version, or an amount of 0 or past
  // 2^63 (invalid_payment_requirements).
  struct SellerOffer {
    std::optional<x402::Requirements> requirements;
    std::string refused;  // the x402 reason, when requirements is empty
    std::string detail;
  };
  SellerOffer ForSeller(const x402::Requirements& seller) const;

  // The absolute URL of `target` (a normalised origin-form target): the public URL, then the
  // target. Never the request's Host: a client names the gateway as it likes, and the challenge it
  // is shown (and echoes when it pays) must not say what the client chose (docs/threat-model.md).
  std::string ResourceUrl(std::string_view target) const;
  // Replaces the public URL: for a listener whose port is known only once bound. Thread-safe.
  void SetPublicUrl(std::string public_url);

  // The 402 challenge (code payment_required) of `route` at `target`: X402Challenge's answer for
  // For(route) at ResourceUrl(target), which depends on nothing else, so it is built once and
  // copied after: kMaxRememberedChallenges (route, target) pairs of targets up to
  // kMaxRememberedTarget bytes are kept (a longer target's is built each time), all forgotten
  // when that many are (a client naming new targets costs what building costs) or when the public
  // URL changes. Thread-safe; built outside the lock.
  HttpResponse PaymentRequired(const RouteConfig& route, std::string_view target) const;
  static constexpr size_t kMaxRememberedChallenges = 1024;
  static constexpr size_t kMaxRememberedTarget = 256;

 private:
  x402::Requirements common_;  // chain, asset, domain and cap; no amount, payee of the config
  std::unordered_map<std::string, x402::Requirements> by_prefix_;
  std::string v2_network_, v1_network_;
  std::atomic<std::shared_ptr<const std::string>> public_url_;
  struct Remembered {
    std::mutex mu;
    std::shared_ptr<const std::string> public_url;  // the URL the challenges were built for
    std::unordered_map<std::string, HttpResponse> by_route_and_target;
  };
  mutable Remembered challenges_;
};

// The 402 challenge for `requirements` at `resource_url`: the PAYMENT-REQUIRED header and the v1
// body exactly as x402::EncodePaymentRequiredHeader and x402::PaymentRequiredV1Body build them, the
// body also being the problem document of `code` (RFC 9457). `error` in both is "payment required"
// for code payment_required, else the code (an x402 reason).
HttpResponse X402Challenge(const x402::Requirements& requirements, std::string resource_url,
                           std::string_view code, std::string_view detail);

// The 402 challenge of `route` for a request whose normalised target `target` names the resource
// under the public URL (X402Offers::ResourceUrl); the usual one (payment_required, no detail)
// remembered (X402Offers::PaymentRequired).
HttpResponse RouteChallenge(const X402Offers& offers, std::string_view target,
                            const RouteConfig& route, std::string_view code = "payment_required",
                            std::string_view detail = "");

}  // namespace agentpay
