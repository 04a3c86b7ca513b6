// Reading 402 challenges and refusals; see challenge.h. Untrusted input: every field is checked for
// its type and range, and nothing here throws.
#include "client/challenge.h"

#include "core/json_depth.h"
#include "core/money.h"
#include "x402/base64.h"

namespace agentpay::client {
namespace {

using Json = nlohmann::json;

// Longest challenge read (header or body); a real one is under 1 KiB.
constexpr size_t kMaxChallengeBytes = 64 * 1024;
constexpr int kMaxChallengeDepth = 32;

std::optional<Json> ParseJsonObject(std::string_view text) {
  if (text.size() > kMaxChallengeBytes || !JsonNestingWithin(text, kMaxChallengeDepth)) {
    return std::nullopt;
  }
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return parsed;
}

const Json* Member(const Json& object, const char* name) {
  auto found = object.find(name);
  return found == object.end() ? nullptr : &*found;
}

std::optional<std::string> StringMember(const Json& object, const char* name) {
  const Json* value = Member(object, name);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

std::optional<Offer> Refuse(std::string* why, std::string text) {
  *why = std::move(text);
  return std::nullopt;
}

// One accepts[] entry; nullopt with *why set when it is not an offer this client can pay.
std::optional<Offer> ReadOffer(const Json& entry, x402::Version version, std::string* why) {
  if (!entry.is_object()) return Refuse(why, "an accepts entry is not an object");
  if (StringMember(entry, "scheme").value_or("") != "exact") {
    return Refuse(why, "no `exact` scheme offered");
  }
  Offer offer;
  offer.version = version;
  offer.network = StringMember(entry, "network").value_or("");
  auto chain_id = x402::ChainIdForNetwork(offer.network);
  if (!chain_id) return Refuse(why, "unknown network '" + offer.network + "'");
  offer.chain_id = *chain_id;
  const char* amount_field = version == x402::Version::kV2 ? "amount" : "maxAmountRequired";
  auto amount = ParseAmount(StringMember(entry, amount_field).value_or(""));
  if (!amount || *amount <= 0) {
    return Refuse(why, std::string(amount_field) + " is not a positive amount");
  }
  offer.amount = *amount;
  auto asset = chain::ParseAddress(StringMember(entry, "asset").value_or(""));
  auto pay_to = chain::ParseAddress(StringMember(entry, "payTo").value_or(""));
  if (!asset.ok() || !pay_to.ok()) return Refuse(why, "asset or payTo is not an address");
  offer.asset = *asset;
  offer.pay_to = *pay_to;
  const Json* timeout = Member(entry, "maxTimeoutSeconds");
  if (timeout == nullptr || !timeout->is_number_integer() || timeout->get<int64_t>() <= 0 ||
      timeout->get<int64_t>() > 365 * 24 * 3600) {
    return Refuse(why, "maxTimeoutSeconds is not a positive whole number");
  }
  offer.max_timeout_seconds = timeout->get<int64_t>();
  const Json* extra = Member(entry, "extra");
  if (extra == nullptr || !extra->is_object() || !StringMember(*extra, "name") ||
      !StringMember(*extra, "version")) {
    return Refuse(why, "extra.name / extra.version (the token's EIP-712 domain) missing");
  }
  offer.asset_name = *StringMember(*extra, "name");
  offer.asset_version = *StringMember(*extra, "version");
  if (version == x402::Version::kV2) offer.accepted = entry;
  return offer;
}

std::optional<Offer> FirstOffer(const Json& root, x402::Version version,
                                const std::optional<chain::Address>& asset, std::string* why) {
  const Json* accepts = Member(root, "accepts");
  if (accepts == nullptr || !accepts->is_array() || accepts->empty()) {
    *why = "no accepts list";
    return std::nullopt;
  }
  for (const Json& entry : *accepts) {
    std::optional<Offer> offer = ReadOffer(entry, version, why);
    if (!offer) continue;
    if (asset && offer->asset != *asset) {
      *why = "no offer in asset " + chain::ToLowerHex(*asset);
      continue;
    }
    return offer;
  }
  return std::nullopt;
}

std::optional<Json> DecodeHeaderJson(const ClientResponse& response) {
  auto header = response.Header(x402::kPaymentRequiredHeader);
  if (!header || header->size() > kMaxChallengeBytes) return std::nullopt;
  auto text = x402::Base64Decode(*header);
  if (!text.ok()) return std::nullopt;
  return ParseJsonObject(*text);
}

bool VersionIs(const Json& root, int version) {
  const Json* value = Member(root, "x402Version");
  return value != nullptr && value->is_number_integer() && value->get<int64_t>() == version;
}

}  // namespace

Result<Challenge> ParseChallenge(const ClientResponse& response,
                                 const std::optional<chain::Address>& asset) {
  Challenge challenge;
  std::string why_v2 = "no PAYMENT-REQUIRED header", why_v1 = "no x402 v1 body";
  if (std::optional<Json> v2 = DecodeHeaderJson(response); v2 && VersionIs(*v2, 2)) {
    challenge.v2 = FirstOffer(*v2, x402::Version::kV2, asset, &why_v2);
    if (challenge.v2) {
      const Json* resource = Member(*v2, "resource");
      if (resource != nullptr && resource->is_object()) challenge.v2->resource = *resource;
    }
    challenge.error = StringMember(*v2, "error").value_or("");
  }
  if (std::optional<Json> v1 = ParseJsonObject(response.body); v1 && VersionIs(*v1, 1)) {
    challenge.v1 = FirstOffer(*v1, x402::Version::kV1, asset, &why_v1);
    if (challenge.error.empty()) challenge.error = StringMember(*v1, "error").value_or("");
  }
  if (!challenge.v2 && !challenge.v1) {
    return Status::Error("no_offer", "the 402 offers no payment this client can make (v2: " +
                                         why_v2 + "; v1: " + why_v1 + ")");
  }
  return challenge;
}

Result<Offer> ChooseOffer(const Challenge& challenge, int version) {
  if (version == 2 || (version == 0 && challenge.v2)) {
    if (challenge.v2) return *challenge.v2;
    return Status::Error("no_offer", "the server offers no x402 v2 payment");
  }
  if (challenge.v1) return *challenge.v1;
  return Status::Error("no_offer", "the server offers no x402 v1 payment");
}

std::string RefusalReason(const ClientResponse& response) {
  if (std::optional<Json> v2 = DecodeHeaderJson(response)) {
    std::string error = StringMember(*v2, "error").value_or("");
    if (!error.empty()) return error;
  }
  if (std::optional<Json> body = ParseJsonObject(response.body)) {
    for (const char* field : {"code", "error", "errorReason", "invalidReason"}) {
      std::string value = StringMember(*body, field).value_or("");
      if (!value.empty()) return value;
    }
  }
  return "";
}

std::optional<x402::SettleResponse> SettlementOf(const ClientResponse& response) {
  for (std::string_view name : {x402::kPaymentResponseHeader, x402::kXPaymentResponseHeader}) {
    if (auto header = response.Header(name)) {
      auto decoded = x402::DecodeSettleResponseHeader(*header);
      if (decoded.ok()) return *decoded;
    }
  }
  return std::nullopt;
}

}  // namespace agentpay::client
