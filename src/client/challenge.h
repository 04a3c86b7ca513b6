// Reading a 402 as the agent client: the price and the way to pay from the challenge (x402 v2
// PAYMENT-REQUIRED header, x402 v1 JSON body), and the reason a server gives for refusing a
// payment.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chain/bytes.h"
#include "core/budget.h"
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

// Offers read per version; the rest of a longer accepts list is ignored.
inline constexpr size_t kMaxOffersPerVersion = 16;

struct Challenge {
  std::vector<Offer> offers;  // v2 (PAYMENT-REQUIRED) first, then v1 (body), each in server order
  std::string error;          // the challenge's `error`, "" when none
};

// Reads both forms of a 402's challenge; only `exact` offers on an EVM network whose amount fits
// int64 are kept, at most kMaxOffersPerVersion of each version. Errors ("no_offer") when neither
// form holds one, with what was wrong in the message.
Result<Challenge> ParseChallenge(const ClientResponse& response);

// Whether the offer names its network the way its version's payload must: "eip155:<id>" for v2,
// an x402 v1 name ("base-sepolia", …) for v1. A v1 payload cannot pay on a chain v1 has no name
// for (a local devnet): the server would refuse it with network_mismatch.
bool NetworkFitsVersion(const Offer& offer);

// What the caller allows itself to pay with (its spend controls), and what its budget file and
// --chain-rpc already fix.
struct Allowance {
  int x402_version = 0;                  // 0: v2 when usable, else v1; or exactly 1 or 2
  std::vector<uint64_t> chain_ids;       // --network; empty: any network
  std::vector<chain::Address> assets;    // --asset; empty: any asset
  std::vector<chain::Address> payees;    // --payee; empty: any payee (x402 only)
  int64_t max_amount = INT64_MAX;        // --max-amount: the most one payment may cost
  std::optional<uint64_t> rpc_chain_id;  // the chain --chain-rpc serves, when given
  BudgetAssetBinding budget;             // the budget file's asset (unbound: any)
};

// The offer to pay with: the first allowed one, v2 preferred when the version is not fixed. For an
// x402 payment (`signing`) the version must be the allowed one, the offer's network must fit it and
// its payTo must be an allowed payee; a wallet payment (which pays the gateway's account, not
// payTo) is held to network, --chain-rpc, asset, the budget's asset and the maximum amount. Errors,
// each with one line naming what was offered and what is allowed, by the first check that left no
// offer: "x402_version_not_usable" (the allowed version is not offered, or cannot name the offered
// network), "network_not_allowed", "chain_rpc_mismatch", "asset_not_allowed",
// "budget_asset_mismatch", "payee_not_allowed", "amount_above_max".
Result<Offer> ChooseOffer(const Challenge& challenge, const Allowance& allowance, bool signing);

// Why a server refused a payment (any status): the x402 `error` of a PAYMENT-REQUIRED header, else
// the body's `code` (problem+json) or `error` (x402 v1), else "".
std::string RefusalReason(const ClientResponse& response);

// The decoded PAYMENT-RESPONSE or X-PAYMENT-RESPONSE of an answer, if any and well-formed.
std::optional<x402::SettleResponse> SettlementOf(const ClientResponse& response);

}  // namespace agentpay::client
