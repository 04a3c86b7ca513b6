// RLP against the examples of the Ethereum wiki / Yellow Paper, including both length forms at
// the 55/56-byte boundary. Whole transactions are compared with viem in viem_vectors_test.cc.
// The decoder must round-trip the encoder and refuse every non-canonical or overrunning input.
#include "chain/rlp.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::HexBytes;

Bytes Text(std::string_view text) { return Bytes(text.begin(), text.end()); }

Bytes Of(std::span<const uint8_t> span) { return Bytes(span.begin(), span.end()); }

void ExpectInvalid(std::string_view hex) {
  const Bytes data = HexBytes(hex);
  Result<RlpItem> item = RlpDecode(data);
  ASSERT_FALSE(item.ok()) << hex;
  EXPECT_EQ(item.status().code(), "invalid_rlp") << hex;
}

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

TEST(RlpDecode, RoundTripsStrings) {
  const std::vector<Bytes> samples = {Bytes{},         Bytes{0x00},       Bytes{0x7f},
                                      Bytes{0x80},     Text("dog"),       Bytes(55, 0xaa),
                                      Bytes(56, 0xbb), Bytes(1024, 0xcc), Bytes(70000, 0xdd)};
  for (const Bytes& sample : samples) {
    const Bytes encoded = RlpEncodeBytes(sample);
    Result<RlpItem> item = RlpDecode(encoded);
    ASSERT_TRUE(item.ok()) << sample.size() << ": " << item.status().ToString();
    EXPECT_FALSE(item->is_list);
    EXPECT_EQ(Of(item->payload), sample);
    EXPECT_EQ(Of(item->encoded), encoded);
  }
}

TEST(RlpDecode, RoundTripsIntegers) {
  const std::vector<U256> samples = {U256(0),    U256(1),
                                     U256(127),  U256(128),
                                     U256(1024), U256::FromLimbs({~0ull, ~0ull, ~0ull, ~0ull})};
  for (const U256& sample : samples) {
    const Bytes encoded = RlpEncodeUint(sample);
    Result<RlpItem> item = RlpDecode(encoded);
    ASSERT_TRUE(item.ok()) << sample.ToDecimal();
    Result<U256> value = RlpDecodeUint(*item);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, sample);
  }
}

TEST(RlpDecode, ListsOneLevelAtATime) {
  const Bytes empty = RlpEncodeList({});
  const Bytes one = RlpEncodeList({empty});
  const Bytes three = RlpEncodeList({empty, one, RlpEncodeList({empty, one})});
  Result<RlpItem> list = RlpDecode(three);
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(list->is_list);
  Result<std::vector<RlpItem>> items = RlpListItems(*list, 16);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ(Of((*items)[1].encoded), one);
  Result<std::vector<RlpItem>> inner = RlpListItems((*items)[2], 16);
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(inner->size(), 2u);

  const Bytes cat_dog = RlpEncodeList({RlpEncodeBytes(Text("cat")), RlpEncodeBytes(Text("dog"))});
  Result<RlpItem> pair = RlpDecode(cat_dog);
  ASSERT_TRUE(pair.ok());
  Result<std::vector<RlpItem>> words = RlpListItems(*pair, 16);
  ASSERT_TRUE(words.ok());
  ASSERT_EQ(words->size(), 2u);
  EXPECT_EQ(Of((*words)[0].payload), Text("cat"));
  EXPECT_FALSE(RlpListItems(*pair, 1).ok());         // more items than allowed
  EXPECT_FALSE(RlpListItems((*words)[0], 16).ok());  // a string is not a list

  const Bytes long_list = RlpEncodeList({RlpEncodeBytes(Bytes(60, 1))});
  Result<RlpItem> decoded_long = RlpDecode(long_list);
  ASSERT_TRUE(decoded_long.ok());
  EXPECT_EQ(decoded_long->payload.size(), 62u);
}

TEST(RlpDecode, RefusesTruncatedAndOverrunningInput) {
  ExpectInvalid("0x");                      // nothing
  ExpectInvalid("0x83646f");                // string of 3, 2 present
  ExpectInvalid("0xb8");                    // long form, length missing
  ExpectInvalid("0xb90400aa");              // claims 1024 bytes
  ExpectInvalid("0xc883636174");            // list of 8, 5 present
  ExpectInvalid("0xbfffffffffffffffff");    // 2^64 - 1 bytes
  ExpectInvalid("0xffffffffffffffffff00");  // list of 2^64 - 1 bytes
  ExpectInvalid("0xbf7fffffffffffffff");    // 2^63 - 1 bytes
  ExpectInvalid("0x83646f6700");            // a trailing byte
  ExpectInvalid("0x0000");                  // two items
}

TEST(RlpDecode, ListItemOverrunningItsListIsRefused) {
  // [ "\x83" ‖ "ab" ]: the list payload is 3 bytes, the item inside claims 3 bytes of payload.
  const Bytes data = HexBytes("0xc3836162");
  Result<RlpItem> list = RlpDecode(data);
  ASSERT_TRUE(list.ok());  // the list itself is well delimited
  Result<std::vector<RlpItem>> items = RlpListItems(*list, 16);
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(items.status().code(), "invalid_rlp");
}

TEST(RlpDecode, RefusesNonCanonicalForms) {
  ExpectInvalid("0x8100");                            // 0x00 must encode as itself
  ExpectInvalid("0x817f");                            // 0x7f too
  ExpectInvalid("0xb801aa");                          // long form for a 1-byte string
  ExpectInvalid("0xb837" + std::string(110, 'a'));    // long form for 55 bytes
  ExpectInvalid("0xb90038" + std::string(112, 'a'));  // length with a leading zero
  ExpectInvalid("0xf800");                            // long list form for an empty list
  const Bytes eighty = HexBytes("0x8180");            // 0x80 needs its prefix
  EXPECT_TRUE(RlpDecode(eighty).ok());
}

TEST(RlpDecode, IntegersMustBeMinimalAndFitIn256Bits) {
  const auto decode_uint = [](std::string_view hex) {
    const Bytes data = HexBytes(hex);
    Result<RlpItem> item = RlpDecode(data);
    EXPECT_TRUE(item.ok()) << hex;
    return item.ok() ? RlpDecodeUint(*item) : Result<U256>(item.status());
  };
  EXPECT_EQ(*decode_uint("0x80"), U256(0));
  EXPECT_EQ(*decode_uint("0x820400"), U256(1024));
  EXPECT_FALSE(decode_uint("0x820001").ok());                     // leading zero
  EXPECT_FALSE(decode_uint("0xa1" + std::string(66, '1')).ok());  // 33 bytes
  EXPECT_FALSE(decode_uint("0xc0").ok());                         // a list
}

}  // namespace
}  // namespace agentpay::chain
