// libFuzzer target for the x402 payment headers: each input is tried as a header value as sent
// (base64 layer) and as the JSON inside one (field layer), for both versions; whatever decodes is
// verified against fixed requirements and must survive an encode/decode round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "x402/base64.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace {

using namespace agentpay::x402;

// A property broken: report through libFuzzer's crash path with a readable reason.
void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "payment_header_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

const Requirements& FixedRequirements() {
  static const Requirements requirements = [] {
    Requirements r;
    r.chain_id = 84532;
    r.network = V2Network(84532);
    r.amount = U256(10000);
    r.asset = *agentpay::chain::ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e");
    r.pay_to = *agentpay::chain::ParseAddress("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
    r.asset_name = "USDC";
    r.asset_version = "2";
    r.resource_url = "https://gateway.example/paid";
    return r;
  }();
  return requirements;
}

void CheckDecodedPayload(const PaymentPayload& payload, Version version) {
  Require(payload.version == version, "decoded version is the header's");
  Require(version == Version::kV1 || payload.accepted.has_value(), "v2 keeps accepted");
  const Failure failure = VerifyExact(payload, FixedRequirements(), 1740672100, 6);
  Require(failure == Failure::kNone || !ReasonCode(failure, version).empty(), "reason code");
  const std::string again = EncodePaymentHeader(payload);
  if (again.size() > kMaxPaymentHeaderBytes) return;  // a large echo may not fit twice
  agentpay::Result<PaymentPayload> round = DecodePaymentHeader(again, version);
  Require(round.ok(), "re-encoded payload decodes");
  Require(round->authorization == payload.authorization, "authorization round trip");
  Require(round->signature == payload.signature, "signature round trip");
  Require(round->network == payload.network && round->chain_id == payload.chain_id, "network");
  Require(round->payment_identifier == payload.payment_identifier, "payment identifier");
}

void TryHeader(std::string_view value) {
  for (Version version : {Version::kV1, Version::kV2}) {
    agentpay::Result<PaymentPayload> payload = DecodePaymentHeader(value, version);
    if (payload.ok()) {
      CheckDecodedPayload(*payload, version);
    } else {
      Require(payload.status().code() == "malformed_payment", "error code is malformed_payment");
    }
  }
  agentpay::Result<SettleResponse> response = DecodeSettleResponseHeader(value);
  if (response.ok()) {
    Require(*DecodeSettleResponseHeader(EncodeSettleResponseHeader(*response)) == *response,
            "settle response round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // Base64 layer: one accepted spelling per value.
  agentpay::Result<std::string> decoded = Base64Decode(input);
  if (decoded.ok()) Require(Base64Encode(*decoded) == input, "base64 is canonical");
  TryHeader(input);
  // Field layer: the input as the JSON a header carries.
  TryHeader(Base64Encode(input));
  return 0;
}
