// Reading a 402 as the agent client: the price and the way to pay from the challenge (x402 v2
// PAYMENT-REQUIRED header, x402 v1 JSON body), and the reason a server gives for refusing a
// payment.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "chain/bytes.h"
#include "core/result.h"
#include "http/client.h"
#include "x402/wire.h"

namespace agentpay::client {

// One `exact` EVM payment option the server offers.
struct Offer {
  x402::Version version = x402::Version::kV2;
  std::string network;  // as the server spells it (echoed back in v1 payloads)
  uint64_t chain_id = 0;
  int64_t amount = 0;  // atomic units, > 0
  chain::Address asset;
  chain::Address pay_to;
  int64_t max_timeout_seconds = 0;         // > 0
  std::string asset_name, asset_version;   // the EIP-712 domain (extra.name / extra.version)
  nlohmann::json accepted;                 // v2: the accepts[] entry, echoed verbatim
  std::optional<nlohmann::json> resource;  // v2: the challenge's resource object
};

struct Challenge {
  std::optional<Offer> v2;  // from PAYMENT-REQUIRED
  std::optional<Offer> v1;  // from the body
  std::string error;        // the challenge's `error`, "" when none
};

// Reads both forms of a 402's challenge; only `exact` offers on an EVM network whose amount fits
// int64 are kept, the first of each version (or the first in `asset` when asset is given). Errors
// ("no_offer") when neither form holds one, with what was wrong in the message.
Result<Challenge> ParseChallenge(const ClientResponse& response,
                                 const std::optional<chain::Address>& asset);

// The offer to pay with: `version` 2 or 1 when asked, else v2 when offered, else v1.
// Errors: "no_offer" (the asked version is not offered).
Result<Offer> ChooseOffer(const Challenge& challenge, int version);

// Why a server refused a payment (any status): the x402 `error` of a PAYMENT-REQUIRED header, else
// the body's `code` (problem+json) or `error` (x402 v1), else "".
std::string RefusalReason(const ClientResponse& response);

// The decoded PAYMENT-RESPONSE or X-PAYMENT-RESPONSE of an answer, if any and well-formed.
std::optional<x402::SettleResponse> SettlementOf(const ClientResponse& response);

}  // namespace agentpay::client
