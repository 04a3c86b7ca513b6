// libFuzzer target for the x402 payment headers: each input is tried as a header value as sent
// (base64 layer) and as the JSON inside one (field layer), for both versions; whatever decodes is
// verified against fixed requirements and must survive an encode/decode round trip unchanged.
// Differential too: the strict JsonTape reader must accept exactly the JSON that nlohmann (behind
// the depth guard) accepts and rebuild the same value, and the decoders must give the verdicts and
// values of their nlohmann-based predecessors (reference_decoder.cc).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/json_depth.h"
#include "reference_decoder.h"
#include "x402/base64.h"
#include "x402/json_tape.h"
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

// Whether the JSON inside header `value` has a NUL byte. nlohmann takes a NUL as the end of the
// input, so the old decoders accepted a document followed by a NUL and anything at all; JsonTape
// (like JSON.parse in the reference implementation) refuses that. Everywhere else they agree.
bool JsonHasNul(std::string_view value) {
  agentpay::Result<std::string> text = Base64Decode(value);
  return text.ok() && text->find('\0') != std::string::npos;
}

// The new decoder never accepts what the old one refused; it refuses what the old one accepted
// only for the NUL quirk above; when both accept, they agree on every field.
void CheckSameAsReference(const agentpay::Result<PaymentPayload>& payload,
                          const agentpay::Result<PaymentPayload>& reference, bool nul_quirk) {
  Require(payload.ok() == reference.ok() || (nul_quirk && !payload.ok()),
          "payment verdict equals the nlohmann decoder's");
  if (!payload.ok() || !reference.ok()) return;
  Require(payload->version == reference->version, "reference: version");
  Require(payload->scheme == reference->scheme, "reference: scheme");
  Require(payload->network == reference->network, "reference: network");
  Require(payload->chain_id == reference->chain_id, "reference: chain id");
  Require(payload->authorization == reference->authorization, "reference: authorization");
  Require(payload->signature == reference->signature, "reference: signature");
  Require(payload->accepted.has_value() == reference->accepted.has_value() &&
              (!payload->accepted || (*payload->accepted == *reference->accepted &&
                                      payload->accepted->dump() == reference->accepted->dump())),
          "reference: accepted");
  Require(payload->payment_identifier == reference->payment_identifier, "reference: identifier");
}

void TryHeader(std::string_view value) {
  const bool nul_quirk = JsonHasNul(value);
  for (Version version : {Version::kV1, Version::kV2}) {
    agentpay::Result<PaymentPayload> payload = DecodePaymentHeader(value, version);
    CheckSameAsReference(payload, reference::DecodePaymentHeader(value, version), nul_quirk);
    if (payload.ok()) {
      CheckDecodedPayload(*payload, version);
    } else {
      Require(payload.status().code() == "malformed_payment", "error code is malformed_payment");
    }
  }
  agentpay::Result<SettleResponse> response = DecodeSettleResponseHeader(value);
  agentpay::Result<SettleResponse> old_response = reference::DecodeSettleResponseHeader(value);
  Require(response.ok() == old_response.ok() || (nul_quirk && !response.ok()),
          "settle response verdict equals the nlohmann decoder's");
  Require(!response.ok() || !old_response.ok() || *response == *old_response,
          "settle response equals the nlohmann decoder's");
  if (response.ok()) {
    Require(*DecodeSettleResponseHeader(EncodeSettleResponseHeader(*response)) == *response,
            "settle response round trip");
  }
}

// JsonTape accepts `text` exactly when nlohmann does (within the depth limit) and rebuilds the
// same value, numbers of the same kind included (dump() tells 1 from 1.0). nlohmann stops at a NUL
// byte (see JsonHasNul): JsonTape refuses any text with one, and agrees with nlohmann on the rest.
void CheckJsonTape(std::string_view text) {
  JsonTape tape;
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    Require(tape.Parse(text, kMaxJsonDepth) != JsonError::kNone, "JsonTape refuses a NUL byte");
    text = text.substr(0, nul);
  }
  const JsonError error = tape.Parse(text, kMaxJsonDepth);
  const bool shallow = agentpay::JsonNestingWithin(text, kMaxJsonDepth);
  const nlohmann::json expected =
      shallow ? nlohmann::json::parse(text.begin(), text.end(), nullptr, false)
              : nlohmann::json(nlohmann::json::value_t::discarded);
  const bool nlohmann_accepts = shallow && !expected.is_discarded();
  Require((error == JsonError::kNone) == nlohmann_accepts, "JsonTape accepts what nlohmann does");
  Require(error != JsonError::kTooDeep || !shallow, "JsonTape depth limit is the guard's");
  if (error != JsonError::kNone) return;
  const nlohmann::json rebuilt = tape.ToJson(JsonTape::root());
  Require(rebuilt == expected, "JsonTape rebuilds nlohmann's value");
  const auto dump = [](const nlohmann::json& json) {
    return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  Require(dump(rebuilt) == dump(expected), "JsonTape keeps nlohmann's number kinds");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // Base64 layer: one accepted spelling per value, the same verdict and bytes as before.
  agentpay::Result<std::string> decoded = Base64Decode(input);
  agentpay::Result<std::string> old_decoded = reference::Base64Decode(input);
  Require(decoded.ok() == old_decoded.ok() && (!decoded.ok() || *decoded == *old_decoded),
          "base64 equals the old decoder");
  if (decoded.ok()) Require(Base64Encode(*decoded) == input, "base64 is canonical");
  if (input.size() <= kMaxPaymentHeaderBytes) CheckJsonTape(input);
  TryHeader(input);
  // Field layer: the input as the JSON a header carries.
  TryHeader(Base64Encode(input));
  return 0;
}
