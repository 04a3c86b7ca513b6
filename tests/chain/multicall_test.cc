// aggregate3 calldata (chain/multicall.h): byte for byte what viem encodes, and strict decoding.
#include "chain/multicall.h"

#include <gtest/gtest.h>

#include "chain/abi.h"

namespace agentpay::chain {
namespace {

// viem 2.57 encodeFunctionData of aggregate3 with these three calls (tests/chain_env).
constexpr char kViem[] =
    "0x82ad56cb000000000000000000000000000000000000000000000000000000000000002000000000000000000000"
    "0000000000000000000000000000000000000000000300000000000000000000000000000000000000000000000000"
    "0000000000006000000000000000000000000000000000000000000000000000000000000001000000000000000000"
    "0000000000000000000000000000000000000000000001c0000000000000000000000000036cbd53842c5426634e79"
    "29541ec2318f3dcf7e0000000000000000000000000000000000000000000000000000000000000001000000000000"
    "0000000000000000000000000000000000000000000000000060000000000000000000000000000000000000000000"
    "0000000000000000000002123400000000000000000000000000000000000000000000000000000000000000000000"
    "00000000000000003c44cdddb6a900fa2b585dd299e03d12fa4293bc00000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000600000"
    "000000000000000000000000000000000000000000000000000000000028ababababababababababababababababab"
    "ababababababababababababababababababababababab000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000001000000000000000000000000000000"
    "0000000000000000000000000000000001000000000000000000000000000000000000000000000000000000000000"
    "00600000000000000000000000000000000000000000000000000000000000000000";

std::vector<Call3> Calls() {
  return {{*ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e"), true, {0x12, 0x34}},
          {*ParseAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"), false, Bytes(40, 0xab)},
          {*ParseAddress("0x0000000000000000000000000000000000000001"), true, {}}};
}

TEST(Aggregate3, EncodesAsViemDoes) {
  EXPECT_EQ(Hex(EncodeAggregate3(Calls())), kViem);
  EXPECT_EQ(FunctionSelector(kAggregate3Signature), (Selector{0x82, 0xad, 0x56, 0xcb}));
}

TEST(Aggregate3, DecodesWhatItEncodes) {
  auto decoded = DecodeAggregate3(*ParseHex(kViem));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, Calls());
  for (size_t n : {size_t{1}, kMaxAggregate3Calls}) {
    std::vector<Call3> many(n, Calls()[1]);
    EXPECT_EQ(DecodeAggregate3(EncodeAggregate3(many)), many) << n;
  }
}

TEST(Aggregate3, RefusesAnythingNotCanonical) {
  const Bytes good = *ParseHex(kViem);
  EXPECT_FALSE(DecodeAggregate3({}).has_value());
  Bytes wrong_selector = good;
  wrong_selector[0] ^= 1;
  EXPECT_FALSE(DecodeAggregate3(wrong_selector).has_value());
  for (size_t cut = 0; cut < good.size(); cut += 7) {  // every truncation
    EXPECT_FALSE(DecodeAggregate3(std::span(good).first(cut)).has_value()) << cut;
  }
  Bytes trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(DecodeAggregate3(trailing).has_value());
  // The first call's encoding starts after the selector, the array's offset and count words and
  // the three element offsets: target word, allowFailure word, bytes offset, length, data.
  constexpr size_t kFirst = 4 + 32 * 5;
  Bytes dirty_bool = good;
  dirty_bool[kFirst + 63] = 2;  // allowFailure = 2
  EXPECT_FALSE(DecodeAggregate3(dirty_bool).has_value());
  Bytes dirty_address = good;
  dirty_address[kFirst] = 1;  // an upper byte of the target word
  EXPECT_FALSE(DecodeAggregate3(dirty_address).has_value());
  Bytes dirty_padding = good;
  dirty_padding[kFirst + 128 + 2] = 1;  // after 0x1234, inside its padding
  Bytes offset = good;
  offset[4 + 32 * 2 + 31] += 32;  // the first element's offset, no longer canonical
  EXPECT_FALSE(DecodeAggregate3(offset).has_value());
  EXPECT_FALSE(DecodeAggregate3(dirty_padding).has_value());
  std::vector<Call3> too_many(kMaxAggregate3Calls, Calls()[2]);
  Bytes encoded = EncodeAggregate3(too_many);
  encoded[4 + 32 + 31] = static_cast<uint8_t>(kMaxAggregate3Calls + 1);  // the count word
  EXPECT_FALSE(DecodeAggregate3(encoded).has_value());
}

}  // namespace
}  // namespace agentpay::chain
