// libFuzzer target for the facilitator's request bodies (src/x402/facilitator.cc: what a seller's
// POST /verify and POST /settle carry, read after its key was checked). Whatever parses is verified
// against a fixed requirement as this facilitator settles it, and its answers' JSON is built; a
// refusal is malformed_payment with a message. Nothing may crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "x402/facilitator.h"
#include "x402/verify.h"

namespace {

using namespace agentpay;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "facilitator_body_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = x402::ParseFacilitatorRequest(body);
  if (!parsed.ok()) {
    Require(parsed.status().error() == ErrorCode::kMalformedPayment,
            "a refusal is malformed_payment");
    Require(!parsed.status().message().empty(), "a refusal says why");
    return 0;
  }
  Require(size <= x402::kMaxFacilitatorBodyBytes, "nothing past the size limit parses");
  const x402::Requirements& r = parsed->requirements;
  Require(r.chain_id != 0, "a parsed requirement names a known chain");
  Require(r.max_timeout_seconds > 0, "a positive maxTimeoutSeconds");
  // The requirement as the facilitator would settle it: the seller's amount and payee on a fixed
  // chain, asset and domain.
  x402::Requirements settled;
  settled.chain_id = 84532;
  settled.network = x402::V2Network(84532);
  settled.asset = *chain::ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e");
  settled.asset_name = "USDC";
  settled.asset_version = "2";
  settled.amount = r.amount;
  settled.pay_to = r.pay_to;
  settled.max_timeout_seconds = 60;
  const x402::Failure failure = x402::VerifyExact(parsed->payload, settled, 1'800'000'000);
  const std::string payer = chain::ToChecksumHex(parsed->payload.authorization.from);
  const std::string verify =
      x402::VerifyBody({failure == x402::Failure::kNone,
                        std::string(x402::ReasonCode(failure, parsed->version)), "", payer});
  Require(nlohmann::json::accept(verify), "the verify answer is JSON");
  const std::string settle =
      x402::SettleBody({false, "settlement_pending", "0x00", r.network, payer}, r.description);
  Require(nlohmann::json::accept(settle), "the settle answer is JSON");
  return 0;
}
