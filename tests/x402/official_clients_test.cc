// Headers produced by the OFFICIAL x402 clients (@x402/fetch 2.27 for v2, x402 1.2.0 for v1) for a
// challenge from our own encoder, stored in tests/x402/fixtures by make_fixtures.py: they must
// decode and verify at the moment they were signed, and the challenge must still be what we send.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fixture_requirements.h"
#include "spec_examples.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace agentpay::x402 {
namespace {

using nlohmann::json;

json LoadFixture(Version version) {
  const std::string path = std::string(AGENTPAY_X402_FIXTURES_DIR) + "/official_v" +
                           std::to_string(static_cast<int>(version)) + ".json";
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  std::stringstream text;
  text << file.rdbuf();
  json fixture = json::parse(text.str(), nullptr, false);
  EXPECT_TRUE(fixture.is_object()) << path;
  return fixture;
}

class OfficialClients : public testing::TestWithParam<Version> {};

TEST_P(OfficialClients, ChallengeIsStillWhatWeSend) {
  const json fixture = LoadFixture(GetParam());
  const std::vector<Requirements> requirements = {fixtures::OfficialClientRequirements()};
  // If this fails the encoder changed: rerun tests/x402/make_fixtures.py and review the diff.
  if (GetParam() == Version::kV2) {
    EXPECT_EQ(spec::JsonOf(fixture["challenge"].get<std::string>()),
              spec::JsonOf(EncodePaymentRequiredHeader(requirements, "payment required")));
  } else {
    EXPECT_EQ(fixture["challenge"], PaymentRequiredV1Body(requirements, "payment required"));
  }
}

TEST_P(OfficialClients, HeaderDecodesAndVerifiesInsideItsWindow) {
  const Version version = GetParam();
  const json fixture = LoadFixture(version);
  ASSERT_EQ(fixture["header"], PaymentHeaderName(version));
  const Requirements requirements = fixtures::OfficialClientRequirements();
  Result<PaymentPayload> payload =
      DecodePaymentHeader(fixture["value"].get<std::string>(), version);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  const TransferAuthorization& authorization = payload->authorization;
  EXPECT_EQ(authorization.from, spec::AddressOf(fixture["signer"].get<std::string>()));
  EXPECT_EQ(authorization.to, requirements.pay_to);
  EXPECT_EQ(authorization.value, requirements.amount);
  EXPECT_EQ(payload->chain_id, requirements.chain_id);

  const int64_t now = fixture["now"].get<int64_t>();
  ASSERT_TRUE(authorization.valid_before.FitsInt64());
  const int64_t valid_before = authorization.valid_before.ToInt64();
  // The clients sign validBefore = their now + maxTimeoutSeconds; v2 validAfter = 0, v1 now − 600.
  EXPECT_NEAR(static_cast<double>(valid_before - now), 300.0, 5.0);
  if (version == Version::kV2) {
    EXPECT_TRUE(authorization.valid_after.IsZero());
    EXPECT_EQ(*payload->accepted, AcceptedEntry(requirements));
  } else {
    EXPECT_NEAR(static_cast<double>(authorization.valid_after.ToInt64() - now), -600.0, 5.0);
  }

  EXPECT_EQ(VerifyExact(*payload, requirements, now), Failure::kNone);
  EXPECT_EQ(VerifyExact(*payload, requirements, valid_before - 5), Failure::kValidBeforeTooSoon);
  // AgentPay's cap (stricter than the reference, which has none): the official client signs
  // validBefore = now + maxTimeoutSeconds, within the cap from its own clock until
  // kValidBeforeSkewSeconds before it; a gateway clock further behind refuses it.
  const int64_t cap_edge = valid_before - requirements.max_timeout_seconds - kValidBeforeSkewSeconds;
  EXPECT_EQ(VerifyExact(*payload, requirements, cap_edge), Failure::kNone);
  EXPECT_EQ(VerifyExact(*payload, requirements, cap_edge - 1), Failure::kValidBeforeTooLate);
  Requirements other_name = requirements;
  other_name.asset_name = "USD Coin";
  EXPECT_EQ(VerifyExact(*payload, other_name, now), Failure::kInvalidSignature);

  // Our re-encoding of their payload decodes to the same authorization.
  Result<PaymentPayload> again = DecodePaymentHeader(EncodePaymentHeader(*payload), version);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->authorization, authorization);
  EXPECT_EQ(again->signature, payload->signature);
}

INSTANTIATE_TEST_SUITE_P(Versions, OfficialClients, testing::Values(Version::kV1, Version::kV2),
                         [](const testing::TestParamInfo<Version>& info) {
                           return info.param == Version::kV1 ? std::string("V1")
                                                             : std::string("V2");
                         });

}  // namespace
}  // namespace agentpay::x402
