// Prints the 402 challenge AgentPay sends for the fixture requirements, as one JSON line
// {payment_required, v1_body}; tests/x402/make_fixtures.py feeds it to the official clients.
#include <iostream>

#include "fixture_requirements.h"

int main() {
  using namespace agentpay::x402;
  const std::vector<Requirements> requirements = {fixtures::OfficialClientRequirements()};
  const nlohmann::json out = {
      {"payment_required", EncodePaymentRequiredHeader(requirements, "payment required")},
      {"v1_body", PaymentRequiredV1Body(requirements, "payment required")},
  };
  std::cout << out.dump() << "\n";
  return 0;
}
