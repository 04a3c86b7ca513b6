// The facilitator's wire (x402/facilitator.h): request bodies as @x402/core's HTTPFacilitatorClient
// (v2) and x402-express 1.x (v1) send them, every refusal naming its field, and the answers' JSON.
#include "x402/facilitator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace agentpay::x402 {
namespace {

using nlohmann::json;

const std::string kFrom = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const std::string kTo = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const std::string kAsset = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";

json Authorization() {
  return {{"from", kFrom},
          {"to", kTo},
          {"value", "1000"},
          {"validAfter", "0"},
          {"validBefore", "1900000000"},
          {"nonce", "0x" + std::string(64, 'a')}};
}
json Signature() { return "0x" + std::string(130, 'b'); }

json V2Requirement() {
  return {{"scheme", "exact"},
          {"network", "eip155:84532"},
          {"amount", "1000"},
          {"asset", kAsset},
          {"payTo", kTo},
          {"maxTimeoutSeconds", 60},
          {"extra", {{"name", "USDC"}, {"version", "2"}}}};
}

json V2Body() {
  return {{"x402Version", 2},
          {"paymentPayload",
           {{"x402Version", 2},
            {"resource", {{"url", "https://shop.example/report"}}},
            {"accepted", V2Requirement()},
            {"payload", {{"signature", Signature()}, {"authorization", Authorization()}}}}},
          {"paymentRequirements", V2Requirement()}};
}

json V1Body() {
  json requirement = {{"scheme", "exact"},
                      {"network", "base-sepolia"},
                      {"maxAmountRequired", "1000"},
                      {"resource", "https://shop.example/report"},
                      {"description", "a report"},
                      {"mimeType", "application/json"},
                      {"payTo", kTo},
                      {"maxTimeoutSeconds", 60},
                      {"asset", kAsset},
                      {"extra", {{"name", "USDC"}, {"version", "2"}}}};
  return {{"x402Version", 1},
          {"paymentPayload",
           {{"x402Version", 1},
            {"scheme", "exact"},
            {"network", "base-sepolia"},
            {"payload", {{"signature", Signature()}, {"authorization", Authorization()}}}}},
          {"paymentRequirements", requirement}};
}

TEST(FacilitatorWire, AV2BodyAsHttpFacilitatorClientSendsIt) {
  auto parsed = ParseFacilitatorRequest(V2Body().dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->version, Version::kV2);
  EXPECT_EQ(parsed->payload.chain_id, 84532u);
  EXPECT_EQ(chain::ToChecksumHex(parsed->payload.authorization.from), kFrom);
  const Requirements& r = parsed->requirements;
  EXPECT_EQ(r.chain_id, 84532u);
  EXPECT_EQ(r.amount, chain::U256(1000));
  EXPECT_EQ(chain::ToChecksumHex(r.asset), kAsset);
  EXPECT_EQ(chain::ToChecksumHex(r.pay_to), kTo);
  EXPECT_EQ(r.max_timeout_seconds, 60);
  EXPECT_EQ(r.asset_name, "USDC");
  EXPECT_EQ(r.asset_version, "2");
}

TEST(FacilitatorWire, AV1BodyAsX402Express1SendsIt) {
  auto parsed = ParseFacilitatorRequest(V1Body().dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->version, Version::kV1);
  EXPECT_EQ(parsed->requirements.chain_id, 84532u);
  EXPECT_EQ(parsed->requirements.amount, chain::U256(1000));
  EXPECT_EQ(parsed->requirements.resource_url, "https://shop.example/report");
  EXPECT_EQ(parsed->payload.network, "base-sepolia");
}

TEST(FacilitatorWire, EveryRefusalNamesItsField) {
  auto refused = [](const std::string& body, const std::string& field) {
    auto parsed = ParseFacilitatorRequest(body);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().error(), ErrorCode::kMalformedPayment);
    EXPECT_NE(parsed.status().message().find(field), std::string::npos)
        << parsed.status().message();
  };
  refused("", "not valid JSON");
  refused("[1]", "must be a JSON object");
  refused(std::string(70 * 1024, ' '), "the limit is");
  refused(std::string(100, '[') + std::string(100, ']'), "deeper");
  json body = V2Body();
  body["x402Version"] = 3;
  refused(body.dump(), "x402Version must be 1 or 2");
  body = V2Body();
  body["x402Version"] = "2";
  refused(body.dump(), "x402Version must be 1 or 2");
  body = V2Body();
  body.erase("paymentRequirements");
  refused(body.dump(), "paymentRequirements is missing");
  body = V2Body();
  body["paymentPayload"] = "x";
  refused(body.dump(), "paymentPayload must be an object");
  body = V2Body();
  body["paymentRequirements"]["amount"] = "1e3";
  refused(body.dump(), "paymentRequirements.amount must be a decimal");
  body = V2Body();
  body["paymentRequirements"]["payTo"] = "0x12";
  refused(body.dump(), "paymentRequirements.payTo must be 0x");
  body = V2Body();
  body["paymentRequirements"]["network"] = "base-sepolia";  // a v1 name in a v2 body
  refused(body.dump(), "network base-sepolia is not a network of x402 version 2");
  body = V2Body();
  body["paymentRequirements"]["maxTimeoutSeconds"] = 0;
  refused(body.dump(), "maxTimeoutSeconds must be a positive whole number");
  body = V2Body();
  body["paymentRequirements"]["extra"]["name"] = 5;
  refused(body.dump(), "extra.name must be a string");
  body = V2Body();
  body["paymentPayload"]["payload"].erase("signature");
  refused(body.dump(), "payload.signature is missing");
  body = V2Body();
  body["paymentPayload"]["x402Version"] = 1;  // the payload's version must be the body's
  refused(body.dump(), "x402Version must be 2");
  body = V1Body();
  body["paymentRequirements"].erase("maxAmountRequired");
  refused(body.dump(), "paymentRequirements.maxAmountRequired is missing");
}

TEST(FacilitatorWire, TheAnswersAreTheSpecificationsShapes) {
  Address relayer;
  relayer.bytes[19] = 1;
  json supported = json::parse(SupportedBody(84532, relayer));
  EXPECT_EQ(supported["kinds"],
            json::parse(R"([{"x402Version":2,"scheme":"exact","network":"eip155:84532"},
                            {"x402Version":1,"scheme":"exact","network":"base-sepolia"}])"));
  EXPECT_EQ(supported["extensions"], json::array());
  EXPECT_EQ(supported["signers"]["eip155:*"][0], chain::ToChecksumHex(relayer));
  EXPECT_EQ(json::parse(SupportedBody(1337, relayer))["kinds"].size(), 1u);  // no v1 name

  EXPECT_EQ(json::parse(VerifyBody({true, "", "", kFrom})),
            json({{"isValid", true}, {"payer", kFrom}}));
  EXPECT_EQ(json::parse(VerifyBody({false, "invalid_network", "why", kFrom})),
            json({{"isValid", false},
                  {"invalidReason", "invalid_network"},
                  {"invalidMessage", "why"},
                  {"payer", kFrom}}));
  EXPECT_EQ(json::parse(SettleBody({true, "", "0xabc", "eip155:84532", kFrom})),
            json({{"success", true},
                  {"transaction", "0xabc"},
                  {"network", "eip155:84532"},
                  {"payer", kFrom}}));
  EXPECT_EQ(json::parse(
                SettleBody({false, "settlement_pending", "0xabc", "eip155:84532", ""}, "not yet")),
            json({{"success", false},
                  {"errorReason", "settlement_pending"},
                  {"errorMessage", "not yet"},
                  {"transaction", "0xabc"},
                  {"network", "eip155:84532"}}));
}

}  // namespace
}  // namespace agentpay::x402
