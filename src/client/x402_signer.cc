// EIP-3009 signing for x402 payments; see x402_signer.h.
#include "client/x402_signer.h"

#include "core/check.h"
#include "x402/base64.h"

namespace agentpay::client {

std::string PaymentHeaderFor(int x402_version) {
  return std::string(
      x402::PaymentHeaderName(x402_version == 1 ? x402::Version::kV1 : x402::Version::kV2));
}

Result<SignedPayment> SignPayment(const Offer& offer, const chain::PrivateKey& key, int64_t now_s,
                                  Random& random) {
  AGENTPAY_CHECK(now_s > 600 && offer.amount > 0 && offer.max_timeout_seconds > 0);
  chain::TransferAuthorization authorization;
  authorization.from = chain::AddressOf(key);
  authorization.to = offer.pay_to;
  authorization.value = chain::U256(static_cast<uint64_t>(offer.amount));
  authorization.valid_after =
      chain::U256(static_cast<uint64_t>(offer.version == x402::Version::kV2 ? 0 : now_s - 600));
  authorization.valid_before =
      chain::U256(static_cast<uint64_t>(now_s + offer.max_timeout_seconds));
  random.Fill(authorization.nonce.data(), authorization.nonce.size());
  const chain::Hash32 domain =
      chain::DomainSeparator(offer.asset_name, offer.asset_version, offer.chain_id, offer.asset);
  auto signature = chain::SignDigest(chain::Eip3009Digest(domain, authorization), key);
  if (!signature.ok()) return signature.status();

  x402::PaymentPayload payload;
  payload.version = offer.version;
  payload.scheme = "exact";
  payload.network = offer.network;
  payload.chain_id = offer.chain_id;
  payload.authorization = authorization;
  payload.signature = *signature;
  if (offer.version == x402::Version::kV2) payload.accepted = offer.accepted;
  std::string value = x402::EncodePaymentHeader(payload);
  if (offer.version == x402::Version::kV2 && offer.resource) {
    // The official v2 client echoes the challenge's resource; servers may log or match it.
    auto text = x402::Base64Decode(value);
    AGENTPAY_CHECK(text.ok());  // we just encoded it
    nlohmann::json root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    AGENTPAY_CHECK(root.is_object());
    root["resource"] = *offer.resource;
    value = x402::Base64Encode(root.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return SignedPayment{std::string(x402::PaymentHeaderName(offer.version)), std::move(value),
                       authorization};
}

}  // namespace agentpay::client
