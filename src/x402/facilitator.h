// The x402 facilitator API on the wire (x402 v2 specification §7-8, as @x402/core's
// HTTPFacilitatorClient and x402-express 1.x speak it): the body of POST /verify and POST /settle,
// and the JSON of the answers to them and to GET /supported. Input is hostile: parsing never
// throws and every refusal names the field (code "malformed_payment").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"
#include "x402/wire.h"

namespace agentpay::x402 {

// A facilitator request body past this is refused before parsing: a real one is about 1.5 KiB.
inline constexpr size_t kMaxFacilitatorBodyBytes = 64 * 1024;

// {x402Version, paymentPayload, paymentRequirements}: the payload as a PAYMENT-SIGNATURE (v2) or
// X-PAYMENT (v1) header carries it, not base64-encoded, and the one requirement it pays.
struct FacilitatorRequest {
  Version version = Version::kV2;
  PaymentPayload payload;
  Requirements requirements;
};
// Errors ("malformed_payment"): larger than kMaxFacilitatorBodyBytes, not a JSON object,
// x402Version not 1 or 2, paymentPayload or paymentRequirements missing or not objects, or a
// payload or requirement that does not decode (DecodePaymentJson, DecodeRequirements).
Result<FacilitatorRequest> ParseFacilitatorRequest(std::string_view body);

// GET /supported: {kinds: [{x402Version: 2, scheme: "exact", network: "eip155:<id>"}, and for a
// chain x402 v1 names, {x402Version: 1, scheme: "exact", network: <v1 name>}], extensions: [],
// signers: {"eip155:*": [<signer>]}}.
std::string SupportedBody(uint64_t chain_id, const Address& signer);

// POST /verify's answer: {isValid, invalidReason?, invalidMessage?, payer?}.
struct VerifyAnswer {
  bool valid = false;
  std::string invalid_reason;   // omitted when empty
  std::string invalid_message;  // omitted when empty
  std::string payer;            // omitted when empty
};
std::string VerifyBody(const VerifyAnswer& answer);

// POST /settle's answer: {success, errorReason?, errorMessage?, payer?, transaction, network}.
// `message`: errorMessage, omitted when empty.
std::string SettleBody(const SettleResponse& response, std::string_view message = {});

}  // namespace agentpay::x402
