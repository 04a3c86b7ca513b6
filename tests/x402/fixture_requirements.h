// The one set of requirements the official-client fixtures were signed against, shared by the
// fixture generator and the tests so that both build the challenge the same way.
#pragma once

#include "x402/wire.h"

namespace agentpay::x402::fixtures {

// Base Sepolia USDC as the x402 spec's examples use it; amount 0.01 USDC, five minutes to pay.
inline Requirements OfficialClientRequirements() {
  Requirements requirements;
  requirements.chain_id = 84532;
  requirements.network = V2Network(84532);
  requirements.amount = U256(10000);
  requirements.asset = *chain::ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e");
  requirements.pay_to = *chain::ParseAddress("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
  requirements.max_timeout_seconds = 300;
  requirements.asset_name = "USDC";
  requirements.asset_version = "2";
  requirements.resource_url = "https://gateway.example/paid/report";
  requirements.description = "Paid report";
  requirements.mime_type = "application/json";
  return requirements;
}

}  // namespace agentpay::x402::fixtures
