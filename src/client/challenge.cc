// Reading 402 challenges and refusals; see challenge.h. Untrusted input: every field is checked for
// its type and range, and nothing here throws.
#include "client/challenge.h"

#include <algorithm>
#include <optional>

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

// Appends the `exact` EVM offers of a challenge's accepts list (at most kMaxOffersPerVersion); sets
// *why when none was kept.
void ReadOffers(const Json& root, x402::Version version, std::vector<Offer>* offers,
                std::string* why) {
  const Json* accepts = Member(root, "accepts");
  if (accepts == nullptr || !accepts->is_array() || accepts->empty()) {
    *why = "no accepts list";
    return;
  }
  size_t kept = 0;
  for (const Json& entry : *accepts) {
    if (kept == kMaxOffersPerVersion) break;
    std::optional<Offer> offer = ReadOffer(entry, version, why);
    if (!offer) continue;
    offers->push_back(std::move(*offer));
    ++kept;
  }
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

Result<Challenge> ParseChallenge(const ClientResponse& response) {
  Challenge challenge;
  std::string why_v2 = "no PAYMENT-REQUIRED header", why_v1 = "no x402 v1 body";
  if (std::optional<Json> v2 = DecodeHeaderJson(response); v2 && VersionIs(*v2, 2)) {
    const size_t before = challenge.offers.size();
    ReadOffers(*v2, x402::Version::kV2, &challenge.offers, &why_v2);
    const Json* resource = Member(*v2, "resource");
    if (resource != nullptr && resource->is_object()) {
      for (size_t i = before; i < challenge.offers.size(); ++i) {
        challenge.offers[i].resource = *resource;
      }
    }
    challenge.error = StringMember(*v2, "error").value_or("");
  }
  if (std::optional<Json> v1 = ParseJsonObject(response.body); v1 && VersionIs(*v1, 1)) {
    ReadOffers(*v1, x402::Version::kV1, &challenge.offers, &why_v1);
    if (challenge.error.empty()) challenge.error = StringMember(*v1, "error").value_or("");
  }
  if (challenge.offers.empty()) {
    return Status::Error(
        ErrorCode::kNoOffer,
        "the 402 offers no payment this client can make (v2: " + why_v2 + "; v1: " + why_v1 + ")");
  }
  return challenge;
}

bool NetworkFitsVersion(const Offer& offer) {
  const bool caip2 = offer.network == x402::V2Network(offer.chain_id);
  return offer.version == x402::Version::kV2 ? caip2 : !caip2;
}

namespace {

std::string VersionWords(x402::Version version) {
  return version == x402::Version::kV2 ? "x402 v2" : "x402 v1";
}

// "x402 v1 on eip155:1337 in 0x… for 10000 to 0x…", with why it cannot be signed when it cannot.
std::string DescribeOffer(const Offer& offer, bool signing) {
  std::string text = (signing ? VersionWords(offer.version) + " on " : "a price on ") +
                     offer.network + " in " + chain::ToLowerHex(offer.asset) + " for " +
                     std::to_string(offer.amount) + " to " + chain::ToLowerHex(offer.pay_to);
  if (signing && !NetworkFitsVersion(offer)) {
    text += offer.version == x402::Version::kV2 ? " (not an eip155:<chain id> network)"
                                                : " (not an x402 v1 network name)";
  }
  return text;
}

std::string DescribeOffers(const std::vector<Offer>& offers, bool signing) {
  constexpr size_t kNamed = 4;  // keeps the refusal one readable line
  std::string text;
  for (size_t i = 0; i < offers.size() && i < kNamed; ++i) {
    if (i > 0) text += ", ";
    text += DescribeOffer(offers[i], signing);
  }
  if (offers.size() > kNamed) text += " and " + std::to_string(offers.size() - kNamed) + " more";
  return text;
}

// ", asset 0x… or 0x… (--asset)", or ", any asset" when `addresses` is empty.
std::string DescribeAddresses(const std::vector<chain::Address>& addresses, const char* what,
                              const char* flag) {
  if (addresses.empty()) return std::string(", any ") + what;
  std::string text = std::string(", ") + what;
  for (size_t i = 0; i < addresses.size(); ++i) {
    text += (i == 0 ? " " : " or ") + chain::ToLowerHex(addresses[i]);
  }
  return text + " (" + flag + ")";
}

std::string DescribeAllowance(const Allowance& allowance, bool signing) {
  std::string text;
  if (signing) {
    text = allowance.x402_version == 0
               ? "x402 v2 or v1"
               : "x402 v" + std::to_string(allowance.x402_version) + " (--x402-version)";
  } else {
    text = "a wallet payment";
  }
  if (allowance.chain_ids.empty()) {
    text += ", any network";
  } else {
    text += ", network";
    for (size_t i = 0; i < allowance.chain_ids.size(); ++i) {
      text += (i == 0 ? " " : " or ") + x402::V2Network(allowance.chain_ids[i]);
    }
    text += " (--network)";
  }
  if (allowance.rpc_chain_id) {
    text += ", the chain of --chain-rpc (" + x402::V2Network(*allowance.rpc_chain_id) + ")";
  }
  text += DescribeAddresses(allowance.assets, "asset", "--asset");
  if (allowance.budget.state != BudgetAssetState::kUnbound) {
    text += ", the budget file's asset: " +
            (allowance.budget.state == BudgetAssetState::kBound
                 ? allowance.budget.asset.address + " on " +
                       x402::V2Network(allowance.budget.asset.chain_id)
                 : std::string("none (an older file with payments in several assets)"));
  }
  if (signing) text += DescribeAddresses(allowance.payees, "payee", "--payee");
  text += ", at most " + std::to_string(allowance.max_amount) + " (--max-amount)";
  return text;
}

bool Contains(const std::vector<chain::Address>& list, const chain::Address& address) {
  return std::find(list.begin(), list.end(), address) != list.end();
}

// Why v1 cannot pay where the server is: the offered chains x402 v1 has no name for.
std::string V1Hint(const std::vector<Offer>& offers) {
  std::string chains;
  for (const Offer& offer : offers) {
    if (x402::V1NetworkName(offer.chain_id)) continue;
    const std::string id = std::to_string(offer.chain_id);
    if (chains.find(id) != std::string::npos) continue;
    chains += (chains.empty() ? "" : ", ") + id;
  }
  if (chains.empty()) return "";
  return "; x402 v1 has no network name for chain " + chains + ", pay there with x402 v2";
}

}  // namespace

Result<Offer> ChooseOffer(const Challenge& challenge, const Allowance& allowance, bool signing) {
  struct Stage {
    ErrorCode code;
    bool signing_only;
    bool (*allows)(const Offer&, const Allowance&);
  };
  // In this order; the refusal names the first stage that left no offer.
  static constexpr Stage kStages[] = {
      {ErrorCode::kX402VersionNotUsable, true,
       [](const Offer& o, const Allowance& a) {
         return a.x402_version == 0 || static_cast<int>(o.version) == a.x402_version;
       }},
      {ErrorCode::kX402VersionNotUsable, true,
       [](const Offer& o, const Allowance&) { return NetworkFitsVersion(o); }},
      {ErrorCode::kNetworkNotAllowed, false,
       [](const Offer& o, const Allowance& a) {
         return a.chain_ids.empty() ||
                std::find(a.chain_ids.begin(), a.chain_ids.end(), o.chain_id) != a.chain_ids.end();
       }},
      {ErrorCode::kChainRpcMismatch, false,
       [](const Offer& o, const Allowance& a) {
         return !a.rpc_chain_id || *a.rpc_chain_id == o.chain_id;
       }},
      {ErrorCode::kAssetNotAllowed, false,
       [](const Offer& o, const Allowance& a) {
         return a.assets.empty() || Contains(a.assets, o.asset);
       }},
      {ErrorCode::kBudgetAssetMismatch, false,
       [](const Offer& o, const Allowance& a) {
         const BudgetAssetVerdict v =
             DecideBudgetAsset(a.budget, o.chain_id, chain::ToLowerHex(o.asset));
         return v == BudgetAssetVerdict::kSame || v == BudgetAssetVerdict::kBind;
       }},
      {ErrorCode::kPayeeNotAllowed, true,
       [](const Offer& o, const Allowance& a) {
         return a.payees.empty() || Contains(a.payees, o.pay_to);
       }},
      {ErrorCode::kAmountAboveMax, false,
       [](const Offer& o, const Allowance& a) { return o.amount <= a.max_amount; }},
  };
  std::vector<const Offer*> left;
  for (const Offer& offer : challenge.offers) left.push_back(&offer);
  std::optional<ErrorCode> refusal;  // of the first stage that left no offer
  auto apply = [&](const Stage& stage) {
    std::vector<const Offer*> next;
    for (const Offer* offer : left) {
      if (stage.allows(*offer, allowance)) next.push_back(offer);
    }
    if (next.empty() && !refusal) refusal = stage.code;
    left = std::move(next);
  };
  for (const Stage& stage : kStages) {
    if (signing || !stage.signing_only) apply(stage);
  }
  // Offers keep the server's order, v2 first: the first one left is v2 whenever v2 is allowed.
  if (!left.empty()) return *left.front();
  std::string message = "refused before paying: the server offers " +
                        DescribeOffers(challenge.offers, signing) +
                        "; allowed: " + DescribeAllowance(allowance, signing);
  if (signing && allowance.x402_version == 1) message += V1Hint(challenge.offers);
  // No refusal: the challenge was empty (ParseChallenge never returns one).
  return Status::Error(refusal.value_or(ErrorCode::kNoOffer),
                       message + "; nothing was reserved, signed or sent");
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
