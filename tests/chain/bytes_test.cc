// Hex, address (EIP-55) and U256 parsing: published vectors, and malformed input that must be
// refused with a clear code rather than repaired or crashed on.
#include "chain/bytes.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::Decimal;

TEST(Hex, RoundTrips) {
  EXPECT_EQ(Hex(Bytes{}), "0x");
  EXPECT_EQ(Hex(Bytes{0x00, 0xab, 0xFF}), "0x00abff");
  Result<Bytes> bytes = ParseHex("0x00AbfF");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, (Bytes{0x00, 0xab, 0xff}));
  EXPECT_TRUE(ParseHex("0x").ok());
  EXPECT_TRUE(ParseHex("0x", 0).ok());
}

TEST(Hex, RejectsMalformed) {
  for (const char* bad : {"", "0", "x0", "00ab", "0X00", "0x0", "0xabc", "0xgg", "0x 0", " 0x00",
                          "0x00 ", "0x-1", "0x\xc3\xa9"}) {
    Result<Bytes> bytes = ParseHex(bad);
    ASSERT_FALSE(bytes.ok()) << bad;
    EXPECT_EQ(bytes.status().code(), "invalid_hex") << bad;
    EXPECT_FALSE(bytes.status().message().empty());
  }
  EXPECT_EQ(ParseHex("0x0011", 3).status().code(), "invalid_hex");
  EXPECT_EQ(ParseHex("0x0011", 1).status().code(), "invalid_hex");
  EXPECT_FALSE(ParseHash32("0x" + std::string(62, '0')).ok());
  EXPECT_FALSE(ParseHash32("0x" + std::string(66, '0')).ok());
  EXPECT_TRUE(ParseHash32("0x" + std::string(64, 'F')).ok());
}

TEST(Hex, RefusesOversizedInputWithoutDecoding) {
  const std::string huge = "0x" + std::string(2 * (kMaxHexBytes + 1), 'a');
  EXPECT_EQ(ParseHex(huge).status().code(), "invalid_hex");
  EXPECT_TRUE(ParseHex("0x" + std::string(2 * kMaxHexBytes, 'a')).ok());
}

// The test addresses of EIP-55 itself.
TEST(Address, Eip55SpecVectors) {
  for (const char* spelled :
       {"0x52908400098527886E0F7030069857D2E4169EE7", "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
        "0xde709f2102306220921060314715629080e2fb77", "0x27b1fdb04752bbc536007a920d24acb045561c26",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"}) {
    Result<Address> address = ParseAddress(spelled);
    ASSERT_TRUE(address.ok()) << spelled;
    EXPECT_EQ(ToChecksumHex(*address), spelled);
    EXPECT_TRUE(HasValidChecksum(spelled)) << spelled;
  }
}

TEST(Address, AcceptsAnyCaseButChecksumCatchesTypos) {
  const Address canonical = test_util::AddressFrom("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed");
  for (const char* spelled :
       {"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"}) {
    Result<Address> address = ParseAddress(spelled);
    ASSERT_TRUE(address.ok()) << spelled;
    EXPECT_EQ(*address, canonical);
  }
  EXPECT_EQ(ToLowerHex(canonical), "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed");
  EXPECT_TRUE(HasValidChecksum("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"));
  EXPECT_FALSE(HasValidChecksum("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"));  // last letter
  EXPECT_FALSE(HasValidChecksum("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe"));
}

TEST(Address, RejectsMalformed) {
  for (const char* bad :
       {"", "0x", "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00",
        "0X5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg",
        "0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea d"}) {
    Result<Address> address = ParseAddress(bad);
    ASSERT_FALSE(address.ok()) << bad;
    EXPECT_EQ(address.status().code(), "invalid_address") << bad;
  }
}

TEST(U256, ParsesAndPrintsDecimal) {
  const char* max =
      "115792089237316195423570985008687907853269984665640564039457584007913129639935";
  for (const char* text :
       {"0", "1", "10000", "18446744073709551615", "18446744073709551616", max}) {
    std::optional<U256> value = ParseU256Decimal(text);
    ASSERT_TRUE(value.has_value()) << text;
    EXPECT_EQ(value->ToDecimal(), text);
  }
  EXPECT_EQ(ParseU256Decimal(max)->ToHexQuantity(), "0x" + std::string(64, 'f'));
}

TEST(U256, RejectsNonCanonicalDecimal) {
  for (const char* bad :
       {"", "+1", "-1", "01", "00", " 1", "1 ", "1.0", "1e3", "0x10", "abc", "1_000",
        // 2^256 and a longer run of digits
        "115792089237316195423570985008687907853269984665640564039457584007913129639936",
        "999999999999999999999999999999999999999999999999999999999999999999999999999999",
        "1000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "\xd9\xa1"}) {
    EXPECT_FALSE(ParseU256Decimal(bad).has_value()) << bad;
  }
}

TEST(U256, HexQuantities) {
  EXPECT_EQ(ParseU256Hex("0x0"), U256(0));
  EXPECT_EQ(ParseU256Hex("0x1a"), U256(26));
  EXPECT_EQ(ParseU256Hex("0x1A"), U256(26));
  EXPECT_EQ(ParseU256Hex("0x001a"), U256(26));  // tolerated on input
  EXPECT_EQ(ParseU256Hex("0x" + std::string(64, 'f'))->ToDecimal(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  for (const char* bad : {"", "0x", "0X1", "1a", "0x1g", "-0x1", "0x 1", "0x+1"}) {
    EXPECT_FALSE(ParseU256Hex(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseU256Hex("0x1" + std::string(64, '0')).has_value());  // 2^256
  EXPECT_EQ(U256(0).ToHexQuantity(), "0x0");
  EXPECT_EQ(U256(26).ToHexQuantity(), "0x1a");
  EXPECT_EQ(U256(0x100).ToHexQuantity(), "0x100");
}

TEST(U256, ComparesAndConverts) {
  EXPECT_LT(U256(5), U256(6));
  EXPECT_LT(U256(UINT64_MAX), Decimal("18446744073709551616"));
  EXPECT_GT(U256::FromLimbs({0, 0, 0, 1}),
            U256::FromLimbs({UINT64_MAX, UINT64_MAX, UINT64_MAX, 0}));
  EXPECT_TRUE(U256(static_cast<uint64_t>(INT64_MAX)).FitsInt64());
  EXPECT_EQ(U256(static_cast<uint64_t>(INT64_MAX)).ToInt64(), INT64_MAX);
  EXPECT_FALSE(U256(static_cast<uint64_t>(INT64_MAX) + 1).FitsInt64());
  EXPECT_FALSE(U256::FromLimbs({1, 0, 0, 1}).FitsInt64());
  const U256 value = Decimal("1234567890123456789012345678901234567890");
  EXPECT_EQ(U256::FromBigEndian(value.ToBigEndian()), value);
  EXPECT_EQ(U256(0x0102).ToMinimalBigEndian(), (Bytes{0x01, 0x02}));
  EXPECT_TRUE(U256(0).ToMinimalBigEndian().empty());
}

TEST(U256, CheckedArithmetic) {
  const U256 max = U256::FromLimbs({UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX});
  EXPECT_EQ(U256::CheckedAdd(U256(UINT64_MAX), U256(1)), U256::FromLimbs({0, 1, 0, 0}));
  EXPECT_FALSE(U256::CheckedAdd(max, U256(1)).has_value());
  EXPECT_EQ(U256::CheckedSub(U256::FromLimbs({0, 1, 0, 0}), U256(1)), U256(UINT64_MAX));
  EXPECT_EQ(U256::CheckedSub(max, max), U256(0));
  EXPECT_FALSE(U256::CheckedSub(U256(1), U256(2)).has_value());
  EXPECT_EQ(U256::CheckedSub(U256::FromLimbs({0, 0, 0, 1}),
                             U256::FromLimbs({UINT64_MAX, UINT64_MAX, 0, 0})),
            U256::FromLimbs({1, 0, UINT64_MAX, 0}));  // 2^192 - 2^128 + 1
}

}  // namespace
}  // namespace agentpay::chain
