// ABI selectors against the documented constants, strict return-value decoding, and the ERC-20
// Transfer log decoder. Full calldata is compared with viem in viem_vectors_test.cc.
#include "chain/abi.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::AddressFrom;
using test_util::HashOf;
using test_util::HexBytes;

std::string SelectorHex(std::string_view signature) { return Hex(FunctionSelector(signature)); }

Hash32 AddressTopic(const Address& address) {
  Hash32 topic{};
  std::copy(address.bytes.begin(), address.bytes.end(), topic.begin() + 12);
  return topic;
}

TEST(Abi, SelectorsMatchDocumentedConstants) {
  EXPECT_EQ(SelectorHex(kTransferWithAuthorizationVrsSignature), "0xe3ee160e");
  EXPECT_EQ(SelectorHex(kTransferWithAuthorizationBytesSignature), "0xcf092995");
  EXPECT_EQ(SelectorHex(kAuthorizationStateSignature), "0xe94a0102");
  EXPECT_EQ(SelectorHex(kBalanceOfSignature), "0x70a08231");
  EXPECT_EQ(Hex(TransferEventTopic()),
            "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");
}

TEST(Abi, CallLengths) {
  const TransferAuthorization authorization;
  const Signature signature;
  EXPECT_EQ(EncodeTransferWithAuthorizationVrs(authorization, signature).size(), 4u + 9 * 32);
  // six static words, offset, length, 65 bytes padded to 96
  EXPECT_EQ(EncodeTransferWithAuthorizationBytes(authorization, signature).size(),
            4u + 8 * 32 + 96);
  EXPECT_EQ(EncodeAuthorizationState(Address{}, Hash32{}).size(), 4u + 2 * 32);
  EXPECT_EQ(EncodeBalanceOf(Address{}).size(), 4u + 32);
}

TEST(Abi, DecodesBoolStrictly) {
  const Bytes zero(32, 0);
  Bytes one(32, 0);
  one[31] = 1;
  EXPECT_EQ(DecodeBool(zero).value(), false);
  EXPECT_EQ(DecodeBool(one).value(), true);
  Bytes two = one;
  two[31] = 2;
  Bytes high = one;
  high[0] = 1;
  for (const Bytes& bad : {two, high, Bytes(31, 0), Bytes(33, 0), Bytes(64, 0), Bytes{}}) {
    Result<bool> value = DecodeBool(bad);
    ASSERT_FALSE(value.ok()) << Hex(bad);
    EXPECT_EQ(value.status().code(), "invalid_abi");
  }
}

TEST(Abi, DecodesUint256Strictly) {
  const Bytes word = HexBytes("0x00000000000000000000000000000000000000000000000000000000000f4240");
  EXPECT_EQ(DecodeUint256(word).value(), U256(1000000));
  EXPECT_EQ(DecodeUint256(Bytes(32, 0xff))->ToHexQuantity(), "0x" + std::string(64, 'f'));
  EXPECT_EQ(DecodeUint256(Bytes{}).status().code(),
            "invalid_abi");  // eth_call of a non-contract: "0x"
  EXPECT_EQ(DecodeUint256(Bytes(31, 0)).status().code(), "invalid_abi");
  EXPECT_EQ(DecodeUint256(Bytes(64, 0)).status().code(), "invalid_abi");
}

TEST(Abi, DecodesErc20TransferEvent) {
  const Address from = AddressFrom("0x857b06519E91e3A54538791bDbb0E22373e36b66");
  const Address to = AddressFrom("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
  const std::vector<Hash32> topics = {TransferEventTopic(), AddressTopic(from), AddressTopic(to)};
  const std::array<uint8_t, 32> word = U256(10000).ToBigEndian();
  const Bytes data(word.begin(), word.end());
  Result<TransferEvent> event = DecodeTransferEvent(topics, data);
  ASSERT_TRUE(event.ok()) << event.status().ToString();
  EXPECT_EQ(*event, (TransferEvent{from, to, U256(10000)}));
}

TEST(Abi, RefusesOtherLogShapes) {
  const Hash32 from = AddressTopic(AddressFrom("0x857b06519E91e3A54538791bDbb0E22373e36b66"));
  const Hash32 to = AddressTopic(AddressFrom("0x209693Bc6afc0C5328bA36FaF03C514EF312287C"));
  const Bytes value(32, 1);
  const Hash32 approval =
      HashOf("0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925");
  EXPECT_EQ(DecodeTransferEvent(std::vector<Hash32>{approval, from, to}, value).status().code(),
            "not_transfer_event");
  EXPECT_EQ(DecodeTransferEvent(std::vector<Hash32>{}, value).status().code(),
            "not_transfer_event");
  // ERC-721 Transfer: same topic0, tokenId indexed as a fourth topic, no data.
  EXPECT_EQ(
      DecodeTransferEvent(std::vector<Hash32>{TransferEventTopic(), from, to, Hash32{}}, Bytes{})
          .status()
          .code(),
      "invalid_abi");
  EXPECT_EQ(
      DecodeTransferEvent(std::vector<Hash32>{TransferEventTopic(), from}, value).status().code(),
      "invalid_abi");
  Hash32 dirty = from;
  dirty[0] = 1;
  EXPECT_EQ(DecodeTransferEvent(std::vector<Hash32>{TransferEventTopic(), dirty, to}, value)
                .status()
                .code(),
            "invalid_abi");
  EXPECT_EQ(DecodeTransferEvent(std::vector<Hash32>{TransferEventTopic(), from, to}, Bytes(31, 0))
                .status()
                .code(),
            "invalid_abi");
}

}  // namespace
}  // namespace agentpay::chain
