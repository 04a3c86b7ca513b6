// RLP against the examples of the Ethereum wiki / Yellow Paper, including both length forms at
// the 55/56-byte boundary. Whole transactions are compared with viem in viem_vectors_test.cc.
#include "chain/rlp.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace agentpay::chain {
namespace {

Bytes Text(std::string_view text) { return Bytes(text.begin(), text.end()); }

TEST(Rlp, ByteStrings) {
  EXPECT_EQ(Hex(RlpEncodeBytes(Text("dog"))), "0x83646f67");
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes{})), "0x80");
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes{0x00})), "0x00");
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes{0x7f})), "0x7f");
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes{0x80})), "0x8180");
  const Bytes lorem = Text("Lorem ipsum dolor sit amet, consectetur adipisicing elit");
  ASSERT_EQ(lorem.size(), 56u);
  EXPECT_EQ(Hex(RlpEncodeBytes(lorem)), "0xb838" + Hex(lorem).substr(2));
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes(55, 0xaa))).substr(0, 4), "0xb7");
  EXPECT_EQ(Hex(RlpEncodeBytes(Bytes(1024, 0xaa))).substr(0, 8), "0xb90400");
}

TEST(Rlp, Integers) {
  EXPECT_EQ(Hex(RlpEncodeUint(U256(0))), "0x80");
  EXPECT_EQ(Hex(RlpEncodeUint(U256(15))), "0x0f");
  EXPECT_EQ(Hex(RlpEncodeUint(U256(127))), "0x7f");
  EXPECT_EQ(Hex(RlpEncodeUint(U256(128))), "0x8180");
  EXPECT_EQ(Hex(RlpEncodeUint(U256(1024))), "0x820400");
  EXPECT_EQ(Hex(RlpEncodeUint(U256::FromLimbs({0, 0, 0, 1ull << 63}))),
            "0xa080" + std::string(62, '0'));
}

TEST(Rlp, Lists) {
  EXPECT_EQ(Hex(RlpEncodeList({})), "0xc0");
  EXPECT_EQ(Hex(RlpEncodeList({RlpEncodeBytes(Text("cat")), RlpEncodeBytes(Text("dog"))})),
            "0xc88363617483646f67");
  // The set-theoretical representation of three: [ [], [[]], [ [], [[]] ] ].
  const Bytes empty = RlpEncodeList({});
  const Bytes one = RlpEncodeList({empty});
  EXPECT_EQ(Hex(RlpEncodeList({empty, one, RlpEncodeList({empty, one})})), "0xc7c0c1c0c3c0c1c0");
  const Bytes long_list = RlpEncodeList({RlpEncodeBytes(Bytes(60, 1))});
  EXPECT_EQ(Hex(long_list).substr(0, 8), "0xf83eb8");  // 62-byte payload: long list form
}

}  // namespace
}  // namespace agentpay::chain
