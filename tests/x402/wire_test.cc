// The x402 wire format: the specification's published base64 examples decode to their documented
// fields, our encoders produce what the spec shows, round trips hold, and every malformed header
// (bad base64, bad JSON, wrong types, bad numbers, oversize) is refused as malformed_payment.
#include "x402/wire.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/json_depth.h"
#include "spec_examples.h"
#include "x402/json_tape.h"

namespace agentpay::x402 {
namespace {

using nlohmann::json;
using spec::AddressOf;
using spec::JsonOf;
using spec::Mutated;

PaymentPayload Decoded(std::string_view header, Version version) {
  Result<PaymentPayload> payload = DecodePaymentHeader(header, version);
  EXPECT_TRUE(payload.ok()) << payload.status().ToString();
  return payload.ok() ? *payload : PaymentPayload{};
}

void ExpectSpecAuthorization(const PaymentPayload& payload) {
  const TransferAuthorization& authorization = payload.authorization;
  EXPECT_EQ(authorization.from, AddressOf(spec::kPayer));
  EXPECT_EQ(authorization.to, AddressOf(spec::kPayTo));
  EXPECT_EQ(authorization.value, U256(10000));
  EXPECT_EQ(authorization.valid_after, U256(spec::kValidAfter));
  EXPECT_EQ(authorization.valid_before, U256(spec::kValidBefore));
  EXPECT_EQ(chain::Hex(authorization.nonce), spec::kNonce);
  EXPECT_EQ(chain::Hex(payload.signature.bytes), spec::kSignature);
}

TEST(Wire, SpecPaymentSignatureExampleDecodes) {
  const PaymentPayload payload = Decoded(spec::kPaymentSignature, Version::kV2);
  EXPECT_EQ(payload.version, Version::kV2);
  EXPECT_EQ(payload.scheme, "exact");
  EXPECT_EQ(payload.network, "eip155:84532");
  EXPECT_EQ(payload.chain_id, 84532u);
  ExpectSpecAuthorization(payload);
  ASSERT_TRUE(payload.accepted.has_value());
  EXPECT_EQ(*payload.accepted, JsonOf(spec::kPaymentRequired)["accepts"][0]);
  EXPECT_FALSE(payload.payment_identifier.has_value());
}

TEST(Wire, SpecXPaymentExampleDecodes) {
  const PaymentPayload payload = Decoded(spec::kXPayment, Version::kV1);
  EXPECT_EQ(payload.version, Version::kV1);
  EXPECT_EQ(payload.scheme, "exact");
  EXPECT_EQ(payload.network, "base-sepolia");
  EXPECT_EQ(payload.chain_id, 84532u);
  ExpectSpecAuthorization(payload);
  EXPECT_FALSE(payload.accepted.has_value());
}

TEST(Wire, EncodesTheSpecPaymentRequiredExample) {
  const std::string header = EncodePaymentRequiredHeader({spec::SpecRequirements()},
                                                         "PAYMENT-SIGNATURE header is required");
  EXPECT_EQ(JsonOf(header), JsonOf(spec::kPaymentRequired));
  EXPECT_EQ(header.size() % 4, 0u);
  // The spec's accepts[0] is what a v2 client echoes as `accepted`.
  EXPECT_EQ(AcceptedEntry(spec::SpecRequirements()), JsonOf(spec::kPaymentRequired)["accepts"][0]);
}

TEST(Wire, PaymentRequiredOmitsEmptyOptionalFields) {
  Requirements plain = spec::SpecRequirements();
  plain.description.clear();
  plain.mime_type.clear();
  Requirements second = spec::SpecRequirements();
  second.chain_id = 8453;
  second.amount = U256(20000);
  const json decoded = JsonOf(EncodePaymentRequiredHeader({plain, second}, ""));
  EXPECT_FALSE(decoded.contains("error"));
  EXPECT_EQ(decoded["resource"], (json{{"url", "https://api.example.com/premium-data"}}));
  ASSERT_EQ(decoded["accepts"].size(), 2u);
  EXPECT_EQ(decoded["accepts"][1]["network"], "eip155:8453");
  EXPECT_EQ(decoded["accepts"][1]["amount"], "20000");
}

TEST(Wire, V1BodyIsTheSpecShapeWithoutOutputSchema) {
  Requirements local = spec::SpecRequirements();
  local.chain_id = 31337;  // no v1 name: left out
  const json body = PaymentRequiredV1Body({spec::SpecRequirements(), local}, "X-PAYMENT required");
  const json expected = {
      {"x402Version", 1},
      {"error", "X-PAYMENT required"},
      {"accepts",
       {{{"scheme", "exact"},
         {"network", "base-sepolia"},
         {"maxAmountRequired", "10000"},
         {"asset", spec::kAsset},
         {"payTo", spec::kPayTo},
         {"resource", "https://api.example.com/premium-data"},
         {"description", "Access to premium market data"},
         {"mimeType", "application/json"},
         {"maxTimeoutSeconds", 60},
         {"extra", {{"name", "USDC"}, {"version", "2"}}}}}},
  };
  EXPECT_EQ(body, expected);
  EXPECT_FALSE(body["accepts"][0].contains("outputSchema"));
  Requirements bare = spec::SpecRequirements();
  bare.mime_type.clear();  // x402 1.2.0 requires the field, even empty
  EXPECT_EQ(PaymentRequiredV1Body({bare}, "")["accepts"][0]["mimeType"], "");
}

TEST(Wire, V1BodyCanNameAnUnnamedChainInCaip2Form) {
  Requirements local = spec::SpecRequirements();
  local.chain_id = 1337;
  const json kept = PaymentRequiredV1Body({spec::SpecRequirements(), local}, "X-PAYMENT required",
                                          UnnamedV1Chain::kNameCaip2);
  ASSERT_EQ(kept["accepts"].size(), 2u);
  EXPECT_EQ(kept["accepts"][0]["network"], "base-sepolia");  // a chain with a v1 name keeps it
  EXPECT_EQ(kept["accepts"][1]["network"], "eip155:1337");
  json named_only = kept;
  named_only["accepts"].erase(1);
  EXPECT_EQ(named_only,
            PaymentRequiredV1Body({spec::SpecRequirements(), local}, "X-PAYMENT required"));
}

TEST(Wire, NetworkNames) {
  EXPECT_EQ(V2Network(84532), "eip155:84532");
  EXPECT_EQ(V1NetworkName(84532), "base-sepolia");
  EXPECT_EQ(V1NetworkName(8453), "base");
  EXPECT_EQ(V1NetworkName(137), "polygon");
  EXPECT_EQ(V1NetworkName(43113), "avalanche-fuji");
  EXPECT_EQ(V1NetworkName(324705682), "skale-base-sepolia");
  EXPECT_EQ(V1NetworkName(31337), std::nullopt);  // Anvil's default: no v1 name
  EXPECT_EQ(V1NetworkName(1), std::nullopt);      // not in x402 1.2.0's list
  EXPECT_EQ(ChainIdForNetwork("eip155:84532"), 84532u);
  EXPECT_EQ(ChainIdForNetwork("eip155:9007199254740991"), 9007199254740991u);
  EXPECT_EQ(ChainIdForNetwork("base-sepolia"), 84532u);
  EXPECT_EQ(ChainIdForNetwork("ethereum"), 1u);  // @x402/evm's later v1 names are understood
  for (std::string_view bad :
       {"eip155:", "eip155:0", "eip155:084532", "eip155:+1", "eip155:-1", "eip155:1a",
        "eip155:9007199254740992", "eip155:99999999999999999999", "EIP155:1", "solana:devnet",
        "Base-Sepolia", "base-sepolia ", ""}) {
    EXPECT_EQ(ChainIdForNetwork(bad), std::nullopt) << bad;
  }
}

TEST(Wire, PaymentHeaderRoundTrips) {
  PaymentPayload v2 = Decoded(spec::kPaymentSignature, Version::kV2);
  v2.payment_identifier = "pay_0123456789abcdef-_XYZ";
  const PaymentPayload again = Decoded(EncodePaymentHeader(v2), Version::kV2);
  EXPECT_EQ(again.authorization, v2.authorization);
  EXPECT_EQ(again.signature, v2.signature);
  EXPECT_EQ(again.accepted, v2.accepted);
  EXPECT_EQ(again.payment_identifier, v2.payment_identifier);
  EXPECT_EQ(again.network, v2.network);

  const PaymentPayload v1 = Decoded(spec::kXPayment, Version::kV1);
  const std::string header = EncodePaymentHeader(v1);
  EXPECT_EQ(JsonOf(header), JsonOf(spec::kXPayment));
  const PaymentPayload v1_again = Decoded(header, Version::kV1);
  EXPECT_EQ(v1_again.authorization, v1.authorization);
  EXPECT_EQ(v1_again.network, "base-sepolia");
}

TEST(Wire, ReadsThePaymentIdentifierExtension) {
  const std::string id(128, 'a');
  const std::string header = Mutated(spec::kPaymentSignature, [&](json& j) {
    j["extensions"]["payment-identifier"] = {{"info", {{"required", true}, {"id", id}}}};
  });
  EXPECT_EQ(Decoded(header, Version::kV2).payment_identifier, id);
  // Declared by the server and echoed without an id: no identifier, not an error.
  const std::string echoed = Mutated(spec::kPaymentSignature, [](json& j) {
    j["extensions"] = {{"payment-identifier", {{"info", {{"required", false}}}}}, {"other", 1}};
  });
  EXPECT_EQ(Decoded(echoed, Version::kV2).payment_identifier, std::nullopt);
  const std::string null_extensions =
      Mutated(spec::kPaymentSignature, [](json& j) { j["extensions"] = nullptr; });
  EXPECT_EQ(Decoded(null_extensions, Version::kV2).payment_identifier, std::nullopt);
}

TEST(Wire, ToleratesWhatTheSchemaAllows) {
  // Unknown fields, a null resource, lowercase or uppercase hex, an unknown network (the verifier
  // then reports the mismatch): all decode.
  const std::string header = Mutated(spec::kPaymentSignature, [](json& j) {
    j["future"] = {{"x", 1}};
    j["resource"] = nullptr;
    j["accepted"]["network"] = "eip155:1";
    j["accepted"]["extra"]["assetTransferMethod"] = "eip3009";
    j["payload"]["authorization"]["from"] = "0x857B06519E91E3A54538791BDBB0E22373E36B66";
    j["payload"]["authorization"]["to"] = "0x209693bc6afc0c5328ba36faf03c514ef312287c";
  });
  const PaymentPayload payload = Decoded(header, Version::kV2);
  EXPECT_EQ(payload.chain_id, 1u);
  EXPECT_EQ(payload.authorization.from, AddressOf(spec::kPayer));
  const std::string unknown_v1 =
      Mutated(spec::kXPayment, [](json& j) { j["network"] = "mars-testnet"; });
  EXPECT_EQ(Decoded(unknown_v1, Version::kV1).chain_id, std::nullopt);
}

TEST(Wire, SettleResponseSpecExamplesDecode) {
  const SettleResponse success = {
      true, "", "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef",
      "eip155:84532", std::string(spec::kPayer)};
  const SettleResponse failure = {false, "insufficient_funds", "", "eip155:84532",
                                  std::string(spec::kPayer)};
  Result<SettleResponse> decoded = DecodeSettleResponseHeader(spec::kPaymentResponseSuccess);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, success);
  decoded = DecodeSettleResponseHeader(spec::kPaymentResponseFailure);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, failure);
  // Our encoder writes the same JSON the spec shows.
  EXPECT_EQ(JsonOf(EncodeSettleResponseHeader(success)), JsonOf(spec::kPaymentResponseSuccess));
  EXPECT_EQ(JsonOf(EncodeSettleResponseHeader(failure)), JsonOf(spec::kPaymentResponseFailure));
}

TEST(Wire, XPaymentResponseHasTheSameShape) {
  SettleResponse success = {true, "",
                            "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef",
                            "base-sepolia", std::string(spec::kPayer)};
  EXPECT_EQ(JsonOf(EncodeSettleResponseHeader(success)), JsonOf(spec::kXPaymentResponseSuccess));
  SettleResponse failure = {false, "insufficient_funds", "", "base-sepolia",
                            std::string(spec::kPayer)};
  EXPECT_EQ(JsonOf(EncodeSettleResponseHeader(failure)), JsonOf(spec::kXPaymentResponseFailure));
  EXPECT_EQ(*DecodeSettleResponseHeader(spec::kXPaymentResponseFailure), failure);
  SettleResponse no_payer = {false, "settlement_pending", "0xabc", "eip155:84532", ""};
  const json encoded = JsonOf(EncodeSettleResponseHeader(no_payer));
  EXPECT_FALSE(encoded.contains("payer"));
  EXPECT_EQ(*DecodeSettleResponseHeader(EncodeSettleResponseHeader(no_payer)), no_payer);
}

TEST(Wire, SettleResponseDecoderRefusesBadShapes) {
  for (const json& bad :
       {json::array(), json{{"success", "true"}, {"transaction", ""}, {"network", "x"}},
        json{{"success", true}, {"network", "x"}},
        json{{"success", true}, {"transaction", ""}, {"network", "x"}, {"payer", 1}}}) {
    EXPECT_EQ(DecodeSettleResponseHeader(Base64Encode(bad.dump())).status().code(),
              "malformed_payment")
        << bad;
  }
  EXPECT_FALSE(DecodeSettleResponseHeader("e30").ok());
}

// --- malformed inputs ------------------------------------------------------------------------

void ExpectMalformed(std::string_view header, Version version, std::string_view why) {
  Result<PaymentPayload> payload = DecodePaymentHeader(header, version);
  ASSERT_FALSE(payload.ok()) << why;
  EXPECT_EQ(payload.status().code(), "malformed_payment") << why;
  EXPECT_FALSE(payload.status().message().empty()) << why;
}

void ExpectMalformedV2(const std::function<void(json&)>& mutate, std::string_view why) {
  ExpectMalformed(Mutated(spec::kPaymentSignature, mutate), Version::kV2, why);
}

TEST(WireMalformed, Base64) {
  // A header whose base64 contains '+' and '/', then spelled with the URL-safe alphabet.
  const std::string standard = Mutated(spec::kPaymentSignature, [](json& j) {
    j["resource"]["description"] = "?~?>~?>~?~>>>~~~?>?~";
  });
  ASSERT_TRUE(DecodePaymentHeader(standard, Version::kV2).ok());
  std::string url_safe = standard;
  std::replace(url_safe.begin(), url_safe.end(), '+', '-');
  std::replace(url_safe.begin(), url_safe.end(), '/', '_');
  ASSERT_NE(url_safe, standard);
  ExpectMalformed(url_safe, Version::kV2, "URL-safe alphabet");
  EXPECT_NE(DecodePaymentHeader(url_safe, Version::kV2).status().message().find("URL-safe"),
            std::string::npos);

  std::string unpadded(spec::kXPayment);
  ASSERT_EQ(unpadded.substr(unpadded.size() - 2), "==");
  unpadded.resize(unpadded.size() - 2);
  ExpectMalformed(unpadded, Version::kV1, "missing padding");
  ExpectMalformed(std::string(spec::kXPayment) + "\n", Version::kV1, "trailing newline");
  ExpectMalformed(" " + std::string(spec::kXPayment), Version::kV1, "leading space");
  ExpectMalformed("", Version::kV2, "empty");
}

TEST(WireMalformed, NotAJsonObject) {
  ExpectMalformed(Base64Encode("not json"), Version::kV2, "not JSON");
  ExpectMalformed(Base64Encode("[1,2,3]"), Version::kV2, "JSON array");
  ExpectMalformed(Base64Encode("\"text\""), Version::kV2, "JSON string");
  ExpectMalformed(Base64Encode("{\"x402Version\":2"), Version::kV2, "truncated JSON");
  ExpectMalformed(Base64Encode("{\"x402Version\":2,\"a\":\"\xff\xfe\"}"), Version::kV2,
                  "invalid UTF-8");
  ExpectMalformed(Base64Encode(std::string(1000, '[') + std::string(1000, ']')), Version::kV2,
                  "deep nesting");
  ExpectMalformedV2(
      [](json& j) {
        json deep = 1;
        for (int i = 0; i < 100; ++i) deep = json::array({deep});
        j["extensions"]["deep"] = deep;
      },
      "deep nesting inside an extension");
}

TEST(WireMalformed, VersionMustMatchTheHeader) {
  ExpectMalformed(spec::kXPayment, Version::kV2, "v1 payload in PAYMENT-SIGNATURE");
  ExpectMalformed(spec::kPaymentSignature, Version::kV1, "v2 payload in X-PAYMENT");
  ExpectMalformedV2([](json& j) { j["x402Version"] = "2"; }, "version as string");
  ExpectMalformedV2([](json& j) { j["x402Version"] = 2.5; }, "version as float");
  ExpectMalformedV2([](json& j) { j.erase("x402Version"); }, "version missing");
  ExpectMalformedV2([](json& j) { j["x402Version"] = 3; }, "version 3");
}

TEST(WireMalformed, WrongTypesAndMissingFields) {
  ExpectMalformedV2([](json& j) { j.erase("accepted"); }, "no accepted");
  ExpectMalformedV2([](json& j) { j["accepted"] = "exact"; }, "accepted string");
  ExpectMalformedV2([](json& j) { j["accepted"]["scheme"] = ""; }, "empty scheme");
  ExpectMalformedV2([](json& j) { j["accepted"]["network"] = 84532; }, "network number");
  ExpectMalformedV2([](json& j) { j["accepted"]["amount"] = 10000; }, "amount number");
  ExpectMalformedV2([](json& j) { j["accepted"].erase("payTo"); }, "no payTo");
  ExpectMalformedV2([](json& j) { j["accepted"]["maxTimeoutSeconds"] = 0; }, "timeout 0");
  ExpectMalformedV2([](json& j) { j["accepted"]["maxTimeoutSeconds"] = "60"; }, "timeout string");
  ExpectMalformedV2([](json& j) { j["accepted"]["extra"] = "USDC"; }, "extra string");
  ExpectMalformedV2([](json& j) { j["resource"] = "https://x"; }, "resource string");
  ExpectMalformedV2([](json& j) { j["extensions"] = json::array(); }, "extensions array");
  ExpectMalformedV2([](json& j) { j.erase("payload"); }, "no payload");
  ExpectMalformedV2([](json& j) { j["payload"] = json::array(); }, "payload array");
  ExpectMalformedV2([](json& j) { j["payload"]["authorization"] = json::array(); },
                    "authorization array");
  ExpectMalformedV2([](json& j) { j["payload"].erase("signature"); }, "no signature");
  ExpectMalformedV2([](json& j) { j["payload"]["signature"] = 1; }, "signature number");
  ExpectMalformedV2([](json& j) { j["payload"]["authorization"]["value"] = 10000; },
                    "value as JSON number");
  ExpectMalformedV2([](json& j) { j["payload"]["authorization"]["validBefore"] = 1740672154; },
                    "validBefore as JSON number");
  ExpectMalformedV2([](json& j) { j["payload"]["authorization"]["from"] = 1; }, "from number");
  ExpectMalformedV2([](json& j) { j["payload"]["authorization"].erase("nonce"); }, "no nonce");
  ExpectMalformed(Mutated(spec::kXPayment, [](json& j) { j.erase("network"); }), Version::kV1,
                  "v1 without network");
  ExpectMalformed(Mutated(spec::kXPayment, [](json& j) { j["scheme"] = nullptr; }), Version::kV1,
                  "v1 null scheme");
}

TEST(WireMalformed, AddressesNonceAndSignature) {
  auto set = [](const char* key, std::string value) {
    return [key, value](json& j) { j["payload"]["authorization"][key] = value; };
  };
  ExpectMalformedV2(set("from", "0x857b06519E91e3A54538791bDbb0E22373e36b6"), "39-digit address");
  ExpectMalformedV2(set("to", "209693Bc6afc0C5328bA36FaF03C514EF312287C"), "address without 0x");
  ExpectMalformedV2(set("to", "0x209693Bc6afc0C5328bA36FaF03C514EF312287G"), "address non-hex");
  ExpectMalformedV2(set("nonce", std::string(spec::kNonce.substr(0, 64))), "31-byte nonce");
  ExpectMalformedV2(set("nonce", std::string(spec::kNonce) + "00"), "33-byte nonce");
  ExpectMalformedV2(set("nonce", "0X" + std::string(spec::kNonce.substr(2))), "0X prefix");
  ExpectMalformedV2(
      [](json& j) { j["payload"]["signature"] = std::string(spec::kSignature.substr(0, 130)); },
      "64-byte signature");
  ExpectMalformedV2(
      [](json& j) { j["payload"]["signature"] = std::string(spec::kSignature) + "00"; },
      "66-byte signature (ERC-6492 wrappers are longer still)");
  ExpectMalformedV2(
      [](json& j) {
        j["payload"] = {{"signature", spec::kSignature},
                        {"permit2Authorization", {{"from", spec::kPayer}}}};
      },
      "Permit2 payload");
}

TEST(WireMalformed, NumbersAreCanonicalDecimalStrings) {
  const std::string two_to_256 =
      "115792089237316195423570985008687907853269984665640564039457584007913129639936";
  for (const std::string& bad :
       {std::string("1e6"), std::string("-1"), std::string("0x10"), two_to_256,
        std::string("10000.0"), std::string("010000"), std::string(" 10000"), std::string("10000 "),
        std::string(""), std::string("+10000"), std::string("1_000"), std::string("NaN")}) {
    for (const char* key : {"value", "validAfter", "validBefore"}) {
      ExpectMalformedV2([&](json& j) { j["payload"]["authorization"][key] = bad; },
                        std::string(key) + "=" + bad);
    }
  }
  // The largest uint256 is still a number (the verifier then refuses the amount).
  const std::string max = two_to_256.substr(0, two_to_256.size() - 1) + "5";
  const std::string header = Mutated(
      spec::kPaymentSignature, [&](json& j) { j["payload"]["authorization"]["value"] = max; });
  ASSERT_TRUE(DecodePaymentHeader(header, Version::kV2).ok());
}

TEST(WireMalformed, PaymentIdentifier) {
  auto with_id = [](json id) {
    return [id](json& j) { j["extensions"]["payment-identifier"]["info"]["id"] = id; };
  };
  ExpectMalformedV2(with_id(std::string(200, 'a')), "200-char id");
  ExpectMalformedV2(with_id(std::string(129, 'a')), "129-char id");
  ExpectMalformedV2(with_id(std::string(15, 'a')), "15-char id");
  ExpectMalformedV2(with_id("pay_0123456789abc!"), "id with '!'");
  ExpectMalformedV2(with_id("pay_0123456789abc def"), "id with a space");
  ExpectMalformedV2(with_id(12345678901234567), "id as number");
  ExpectMalformedV2([](json& j) { j["extensions"]["payment-identifier"] = "pay_0123456789abcdef"; },
                    "extension as string");
  ExpectMalformedV2([](json& j) { j["extensions"]["payment-identifier"] = json::object(); },
                    "extension without info");
  EXPECT_TRUE(DecodePaymentHeader(Mutated(spec::kPaymentSignature, with_id(std::string(16, '-'))),
                                  Version::kV2)
                  .ok());
}

TEST(WireMalformed, SizeLimit) {
  ExpectMalformed(std::string(100 * 1024, 'A'), Version::kV2, "100 KiB header");
  // A well-formed payload just over the limit is refused for its size alone.
  std::string big;
  for (size_t pad = 12000; big.size() <= kMaxPaymentHeaderBytes; pad += 500) {
    big = Mutated(spec::kPaymentSignature, [&](json& j) { j["padding"] = std::string(pad, 'x'); });
  }
  ExpectMalformed(big, Version::kV2, "just over the limit");
  EXPECT_NE(DecodePaymentHeader(big, Version::kV2).status().message().find("limit"),
            std::string::npos);
  const std::string under =
      Mutated(spec::kPaymentSignature, [](json& j) { j["padding"] = std::string(11000, 'x'); });
  ASSERT_LE(under.size(), kMaxPaymentHeaderBytes);
  EXPECT_TRUE(DecodePaymentHeader(under, Version::kV2).ok());
}

// --- the strict JSON reader behind DecodePaymentHeader -----------------------------------------

// nlohmann's verdict and value, behind the same depth guard the decoder used to run.
json Nlohmann(std::string_view text) {
  if (!JsonNestingWithin(text, kMaxJsonDepth)) return json(json::value_t::discarded);
  return json::parse(text.begin(), text.end(), nullptr, false);
}

TEST(JsonTape, AcceptsAndRebuildsWhatNlohmannDoes) {
  for (std::string_view text : {
           R"({})",
           R"([])",
           R"("")",
           R"(0)",
           R"(-0)",
           R"(true)",
           R"(null)",
           " \t\r\n[ 1 , 2 ]\n",
           R"({"a":[1,-0,1.5e3,-2E-2,0.0e999,1e-400,1E+2,18446744073709551615]})",
           R"({"u64":18446744073709551616,"i64":-9223372036854775808,"low":-9223372036854775809})",
           R"({"e":"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r\u0000x","k\u0065y":1})",
           "{\"utf8\":\"\xc3\xa9\xe2\x82\xac\xef\xbf\xbf\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\x7f\"}",
           "\xef\xbb\xbf{\"bom\":1}",  // nlohmann skips a leading byte order mark
           R"({"dup":1,"dup":[2],"dup":{"x":3}})",
           R"(1.7976931348623157e308)",
       }) {
    const json expected = Nlohmann(text);
    ASSERT_FALSE(expected.is_discarded()) << text;
    JsonTape tape;
    ASSERT_EQ(tape.Parse(text, kMaxJsonDepth), JsonError::kNone) << text;
    const json rebuilt = tape.ToJson(JsonTape::root());
    EXPECT_EQ(rebuilt, expected) << text;
    EXPECT_EQ(rebuilt.dump(), expected.dump()) << text;  // number kinds too: 1 is not 1.0
  }
}

TEST(JsonTape, RefusesWhatNlohmannRefuses) {
  for (std::string_view text : {
           "",
           " ",
           "01",
           "1.",
           ".5",
           "-",
           "+1",
           "1e",
           "1e+",
           "0x10",
           "NaN",
           "Infinity",
           "tru",
           "nul",
           "[1,]",
           "[,1]",
           "{\"a\":1,}",
           "{\"a\" 1}",
           "{a:1}",
           "{'a':1}",
           "[1 2]",
           "{} {}",
           "{} x",
           "[\"\x01\"]",
           "[\"\t\"]",
           "\"\\x\"",
           "\"\\u12\"",
           "\"\\ud800\"",
           "\"\\udc00\"",
           "\"\\ud800\\u0041\"",
           "\"\xc0\xaf\"",
           "\"\xed\xa0\x80\"",
           "\"\xf4\x90\x80\x80\"",
           "\"\xe2\x82\"",
           "\"\x80\"",
           "\"abc",
           "1e309",
           "-1e309",
           "[1e400]",
           "\xef\xbb{}",
           "/*c*/{}",
           "\xef\xbb\xbf\xef\xbb\xbf{}",
       }) {
    EXPECT_TRUE(Nlohmann(text).is_discarded()) << text;
    JsonTape tape;
    EXPECT_EQ(tape.Parse(text, kMaxJsonDepth), JsonError::kSyntax) << text;
  }
}

TEST(JsonTape, RefusesANulByteThatNlohmannTakesForTheEnd) {
  // nlohmann stops reading at a NUL, so it accepted a document with anything after one; the
  // reference implementation's JSON.parse does not, and neither does JsonTape.
  const std::string text("{\"x402Version\":2}\0garbage", 25);
  EXPECT_FALSE(Nlohmann(text).is_discarded());
  JsonTape tape;
  EXPECT_EQ(tape.Parse(text, kMaxJsonDepth), JsonError::kSyntax);
  const std::string header = Base64Encode(JsonOf(spec::kPaymentSignature).dump() + '\0');
  ExpectMalformed(header, Version::kV2, "NUL after the document");
}

TEST(JsonTape, NestingLimitIsTheDepthGuards) {
  JsonTape tape;
  const std::string deepest = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(tape.Parse(deepest, 64), JsonError::kNone);
  const std::string too_deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_FALSE(JsonNestingWithin(too_deep, 64));
  EXPECT_EQ(tape.Parse(too_deep, 64), JsonError::kTooDeep);
  // Refused at the 65th level even when the rest of the text is never read.
  EXPECT_EQ(tape.Parse(std::string(100000, '['), 64), JsonError::kTooDeep);
  std::string objects;
  for (int i = 0; i < 64; ++i) objects += "{\"a\":";
  EXPECT_EQ(tape.Parse(objects + "1" + std::string(64, '}'), 64), JsonError::kNone);
  EXPECT_EQ(tape.Parse("[" + objects + "1" + std::string(64, '}') + "]", 64), JsonError::kTooDeep);
}

TEST(JsonTape, MemberTakesTheLastDuplicateAndUnescapesKeys) {
  JsonTape tape;
  ASSERT_EQ(tape.Parse(R"({"a":1,"b":{"a":5},"\u0061":"two","c":null})", 64), JsonError::kNone);
  const size_t a = tape.Member(JsonTape::root(), "a");
  ASSERT_NE(a, JsonTape::kNoNode);
  std::forward_list<std::string> storage;
  EXPECT_EQ(tape.String(a, storage), "two");
  EXPECT_EQ(tape.node(tape.Member(JsonTape::root(), "c")).type, JsonType::kNull);
  EXPECT_EQ(tape.Member(JsonTape::root(), "d"), JsonTape::kNoNode);
  EXPECT_EQ(tape.Token(tape.Member(tape.Member(JsonTape::root(), "b"), "a")), "5");
}

// The decoder reads the document as nlohmann did: the last of duplicate keys, escaped keys and
// values unescaped.
TEST(Wire, DuplicateAndEscapedKeysReadAsNlohmannReadsThem) {
  const std::string body = JsonOf(spec::kPaymentSignature).dump();
  ASSERT_EQ(body.substr(0, 16), R"({"accepted":{"am)");
  // x402Version 1 then 2: the later one counts.
  EXPECT_TRUE(
      DecodePaymentHeader(Base64Encode(R"({"x402Version":1,)" + body.substr(1)), Version::kV2)
          .ok());
  std::string later_wrong = body;
  later_wrong.insert(later_wrong.size() - 1, R"(,"x402Version":1)");
  ExpectMalformed(Base64Encode(later_wrong), Version::kV2, "the last x402Version is 1");
  // An escaped key names the same member; escaped values decode.
  std::string escaped = body;
  const size_t version = escaped.find(R"("x402Version")");
  ASSERT_NE(version, std::string::npos);
  escaped.replace(version, 13, R"("x402\u0056ersion")");
  const size_t network = escaped.find(R"("eip155:84532")");
  ASSERT_NE(network, std::string::npos);
  escaped.replace(network, 14, R"("eip155\u003a84532")");
  const PaymentPayload payload = Decoded(Base64Encode(escaped), Version::kV2);
  EXPECT_EQ(payload.network, "eip155:84532");
  EXPECT_EQ(payload.chain_id, 84532u);
  EXPECT_EQ((*payload.accepted)["network"], "eip155:84532");
}

TEST(Wire, AcceptedEchoIsKeptVerbatim) {
  const std::string header = Mutated(spec::kPaymentSignature, [](json& j) {
    j["accepted"]["extra"]["nested"] = {{"list", {1, -2, 2.5, "x", nullptr, true}},
                                        {"e", "\u00e9"}};
    j["accepted"]["maxTimeoutSeconds"] = 60.5;
  });
  const PaymentPayload payload = Decoded(header, Version::kV2);
  ASSERT_TRUE(payload.accepted.has_value());
  EXPECT_EQ(*payload.accepted, JsonOf(header)["accepted"]);
  EXPECT_EQ(payload.accepted->dump(), JsonOf(header)["accepted"].dump());
}

}  // namespace
}  // namespace agentpay::x402
