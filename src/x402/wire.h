// The x402 wire format, v1 and v2, for the EVM `exact` scheme (EIP-3009): what the gateway sends in
// a 402 (PAYMENT-REQUIRED header, v1 JSON body), what it reads from PAYMENT-SIGNATURE / X-PAYMENT,
// and the PAYMENT-RESPONSE / X-PAYMENT-RESPONSE it answers with. Field names follow @x402/core 2.27
// and x402 1.2.0; src/x402/README.md records where this module is stricter than they are.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chain/bytes.h"
#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "core/result.h"

namespace agentpay::x402 {

using chain::Address;
using chain::Signature;
using chain::TransferAuthorization;
using chain::U256;

enum class Version { kV1 = 1, kV2 = 2 };

// HTTP header names, per version.
inline constexpr std::string_view kPaymentRequiredHeader = "PAYMENT-REQUIRED";  // v2 only
inline constexpr std::string_view kPaymentSignatureHeader = "PAYMENT-SIGNATURE";
inline constexpr std::string_view kPaymentResponseHeader = "PAYMENT-RESPONSE";
inline constexpr std::string_view kXPaymentHeader = "X-PAYMENT";
inline constexpr std::string_view kXPaymentResponseHeader = "X-PAYMENT-RESPONSE";
constexpr std::string_view PaymentHeaderName(Version version) {
  return version == Version::kV2 ? kPaymentSignatureHeader : kXPaymentHeader;
}
constexpr std::string_view PaymentResponseHeaderName(Version version) {
  return version == Version::kV2 ? kPaymentResponseHeader : kXPaymentResponseHeader;
}

// Longest PAYMENT-SIGNATURE / X-PAYMENT value accepted (the official clients send about 1.3 KiB).
inline constexpr size_t kMaxPaymentHeaderBytes = 16 * 1024;
// Deepest JSON nesting accepted in a payment header (a real payload nests 3 to 6 levels).
inline constexpr int kMaxJsonDepth = 64;
// The payment-identifier extension's id: 16 to 128 characters of [A-Za-z0-9_-].
inline constexpr size_t kPaymentIdMinLength = 16;
inline constexpr size_t kPaymentIdMaxLength = 128;

// One way to pay, as the gateway offers it. The wire names of the network are derived from
// chain_id (V2Network, V1NetworkName); `network` is only carried for logs and traces, and neither
// the encoders nor VerifyExact read it.
struct Requirements {
  std::string scheme = "exact";
  uint64_t chain_id = 0;
  std::string network;  // "eip155:<id>" for v2, the v1 name for v1; informational
  U256 amount;          // atomic units, exact (x402 v2 "amount", v1 "maxAmountRequired")
  Address asset;        // the EIP-3009 token, also the EIP-712 verifyingContract
  Address pay_to;
  int64_t max_timeout_seconds = 60;
  std::string asset_name,
      asset_version;         // EIP-712 domain name/version, sent as extra{name,version}
  std::string resource_url;  // absolute URL; x402 1.2.0 clients reject a v1 body without one
  std::string description, mime_type;
  // The EIP-712 domain separator of (asset_name, asset_version, chain_id, asset), for a caller that
  // keeps one Requirements per configured chain and computes it once:
  //   requirements.domain_separator = x402::DomainSeparatorOf(requirements);  (verify.h)
  // When set it must match those four fields (reset it when changing them: a stale value checks
  // signatures against another domain). When empty, VerifyExact computes it, and remembers the
  // last one per thread, so callers that build Requirements per request need not set it.
  std::optional<chain::Hash32> domain_separator;
};

// --- network names ----------------------------------------------------------------------------
// "eip155:<chain_id>" (CAIP-2).
std::string V2Network(uint64_t chain_id);
// The v1 name a v1 client (x402 1.2.0) accepts for chain_id, e.g. 84532 → "base-sepolia"; nullopt
// for a chain that client's fixed list does not know (a local chain id such as 31337).
std::optional<std::string> V1NetworkName(uint64_t chain_id);
// Both forms: "eip155:<decimal chain id>" (no sign, no leading zeros, at most 2^53 − 1, not 0) and
// the v1 names (the x402 1.2.0 list plus the later names @x402/evm's v1 table knows).
std::optional<uint64_t> ChainIdForNetwork(std::string_view network);

// --- 402 challenge ----------------------------------------------------------------------------
// The PAYMENT-REQUIRED header: padded base64 of {x402Version: 2, error?, resource: {url,
// description?, mimeType?}, accepts: [{scheme, network, amount, asset, payTo, maxTimeoutSeconds,
// extra: {name, version}}]}. resource comes from the first entry. Empty strings are omitted.
// Precondition: !requirements.empty().
std::string EncodePaymentRequiredHeader(const std::vector<Requirements>& requirements,
                                        std::string_view error);
// What the v1 body does with a requirement whose chain x402 v1 has no name for (V1NetworkName).
enum class UnnamedV1Chain {
  // Left out: a v1 client rejects the whole challenge on a name it does not know, so accepts may
  // be empty. What x402 v1 allows.
  kLeaveOut,
  // Kept, named "eip155:<id>" (a name no v1 client accepts). Only for the gateway's v1 body, whose
  // tests pin an accepts entry on every chain (see src/x402/README.md, "v1 body").
  kNameCaip2,
};
// The v1 402 body: {x402Version: 1, error, accepts: [{scheme, network, maxAmountRequired, asset,
// payTo, resource, description, mimeType, maxTimeoutSeconds, extra: {name, version}}]}, network
// the v1 name of the chain (`unnamed` says what happens without one). No outputSchema: x402-fetch
// crashes on `outputSchema: null`.
nlohmann::json PaymentRequiredV1Body(const std::vector<Requirements>& requirements,
                                     std::string_view error,
                                     UnnamedV1Chain unnamed = UnnamedV1Chain::kLeaveOut);

// --- payment payload --------------------------------------------------------------------------
struct PaymentPayload {
  Version version = Version::kV2;
  std::string scheme;                // v2: accepted.scheme; v1: scheme
  std::string network;               // v2: accepted.network; v1: network
  std::optional<uint64_t> chain_id;  // network in the form its version uses; nullopt if unknown
  TransferAuthorization authorization;
  Signature signature;
  std::optional<nlohmann::json> accepted;         // v2: the requirement the client echoed, verbatim
  std::optional<std::string> payment_identifier;  // v2 extensions["payment-identifier"].info.id
};

// Decodes a PAYMENT-SIGNATURE (version kV2) or X-PAYMENT (kV1) header value. Never throws; every
// failure is code "malformed_payment" with a message naming the field and the rule broken:
// longer than kMaxPaymentHeaderBytes, not strict standard padded base64, not JSON or nested deeper
// than kMaxJsonDepth, not an object, x402Version not the header's version, a required field
// missing or of the wrong JSON type, addresses not 0x+40 hex, nonce not 32 bytes, signature not
// 65 bytes, value/validAfter/validBefore not canonical decimal strings below 2^256, a Permit2
// payload (not supported), or a malformed payment-identifier id.
Result<PaymentPayload> DecodePaymentHeader(std::string_view value, Version version);

// The same checks on the payload's JSON text itself, as a facilitator request carries it
// (x402/facilitator.h): everything after the base64, the errors naming "paymentPayload".
Result<PaymentPayload> DecodePaymentJson(std::string_view json_text, Version version);

// One payment requirement as a seller sends it to a facilitator (the v2 accepts[] entry; v1's,
// with maxAmountRequired, resource, description, mimeType). Never throws; every failure is
// "malformed_payment" naming the field: scheme, network (the version's form, a network it knows),
// amount (a canonical decimal string), asset and payTo (0x + 40 hex), maxTimeoutSeconds (a
// positive whole number); extra.name and extra.version, when present, strings.
Result<Requirements> DecodeRequirements(std::string_view json_text, Version version);

// The v2 accepts[] entry for one requirement (also what a v2 client echoes as `accepted`).
nlohmann::json AcceptedEntry(const Requirements& requirements);

// The header value a client would send for `payload` (addresses EIP-55, numbers decimal strings,
// the payment-identifier extension when set). For tests and fuzzer seeds; DecodePaymentHeader
// inverts it. Precondition: a v2 payload carries `accepted`.
std::string EncodePaymentHeader(const PaymentPayload& payload);

// --- settlement response ----------------------------------------------------------------------
struct SettleResponse {
  bool success = false;
  std::string error_reason;  // omitted when empty
  std::string transaction;   // tx hash, "" when none
  std::string network;       // the network string of the version answered
  std::string payer;         // omitted when empty
  friend bool operator==(const SettleResponse&, const SettleResponse&) = default;
};

// PAYMENT-RESPONSE (v2) and X-PAYMENT-RESPONSE (v1) share this shape: padded base64 of
// {success, errorReason?, transaction, network, payer?}.
std::string EncodeSettleResponseHeader(const SettleResponse& response);
// Inverse of EncodeSettleResponseHeader, for tests and the agent client. Errors:
// "malformed_payment".
Result<SettleResponse> DecodeSettleResponseHeader(std::string_view value);

}  // namespace agentpay::x402
