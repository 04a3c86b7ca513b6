// ABI head/tail encoding written out for fixed call shapes; a general ABI codec would be more code
// to trust than these few functions, each checked against viem's output in tests.
#include "chain/abi.h"

#include <algorithm>

#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

class CallWriter {
 public:
  explicit CallWriter(std::string_view signature) {
    const Selector selector = FunctionSelector(signature);
    bytes_.assign(selector.begin(), selector.end());
  }
  void Word(std::span<const uint8_t, 32> word) {
    bytes_.insert(bytes_.end(), word.begin(), word.end());
  }
  void Uint(const U256& value) { Word(value.ToBigEndian()); }
  void AddressWord(const Address& address) {
    bytes_.insert(bytes_.end(), 12, 0);
    bytes_.insert(bytes_.end(), address.bytes.begin(), address.bytes.end());
  }
  // Dynamic `bytes` tail: length word, then the data right-padded with zeros to a word boundary.
  void BytesTail(std::span<const uint8_t> data) {
    Uint(U256(data.size()));
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    bytes_.insert(bytes_.end(), (32 - data.size() % 32) % 32, 0);
  }
  Bytes Take() { return std::move(bytes_); }

 private:
  Bytes bytes_;
};

void WriteAuthorization(CallWriter& writer, const TransferAuthorization& authorization) {
  writer.AddressWord(authorization.from);
  writer.AddressWord(authorization.to);
  writer.Uint(authorization.value);
  writer.Uint(authorization.valid_after);
  writer.Uint(authorization.valid_before);
  writer.Word(authorization.nonce);
}

Result<std::array<uint8_t, 32>> SingleWord(std::span<const uint8_t> data) {
  if (data.size() != 32) {
    return Status::Error(ErrorCode::kInvalidAbi, "expected one 32-byte word, got " +
                                                     std::to_string(data.size()) + " bytes");
  }
  std::array<uint8_t, 32> word;
  std::copy(data.begin(), data.end(), word.begin());
  return word;
}

// An indexed address topic: 12 zero bytes then the address. Dirty padding means a different
// event shape (or a non-compliant token), so it is refused rather than truncated.
Result<Address> AddressFromTopic(const Hash32& topic) {
  if (!std::all_of(topic.begin(), topic.begin() + 12, [](uint8_t b) { return b == 0; })) {
    return Status::Error(ErrorCode::kInvalidAbi, "address topic has non-zero padding");
  }
  Address address;
  std::copy(topic.begin() + 12, topic.end(), address.bytes.begin());
  return address;
}

}  // namespace

Selector FunctionSelector(std::string_view signature) {
  const Hash32 hash = Keccak256(signature);
  return {hash[0], hash[1], hash[2], hash[3]};
}

Bytes EncodeTransferWithAuthorizationVrs(const TransferAuthorization& authorization,
                                         const Signature& signature) {
  CallWriter writer(kTransferWithAuthorizationVrsSignature);
  WriteAuthorization(writer, authorization);
  writer.Uint(U256(signature.v()));
  writer.Word(std::span<const uint8_t>(signature.bytes).subspan<0, 32>());
  writer.Word(std::span<const uint8_t>(signature.bytes).subspan<32, 32>());
  return writer.Take();
}

Bytes EncodeTransferWithAuthorizationBytes(const TransferAuthorization& authorization,
                                           const Signature& signature) {
  CallWriter writer(kTransferWithAuthorizationBytesSignature);
  WriteAuthorization(writer, authorization);
  // Head: six static words plus the offset word itself; the tail starts right after them.
  constexpr uint64_t kTailOffset = 7 * 32;
  writer.Uint(U256(kTailOffset));
  writer.BytesTail(signature.bytes);
  return writer.Take();
}

Bytes EncodeAuthorizationState(const Address& authorizer, const Hash32& nonce) {
  CallWriter writer(kAuthorizationStateSignature);
  writer.AddressWord(authorizer);
  writer.Word(nonce);
  return writer.Take();
}

Bytes EncodeBalanceOf(const Address& owner) {
  CallWriter writer(kBalanceOfSignature);
  writer.AddressWord(owner);
  return writer.Take();
}

Result<bool> DecodeBool(std::span<const uint8_t> data) {
  Result<std::array<uint8_t, 32>> word = SingleWord(data);
  if (!word.ok()) return word.status();
  const U256 value = U256::FromBigEndian(*word);
  if (value > U256(1)) return Status::Error(ErrorCode::kInvalidAbi, "bool word is neither 0 nor 1");
  return value == U256(1);
}

Result<U256> DecodeUint256(std::span<const uint8_t> data) {
  Result<std::array<uint8_t, 32>> word = SingleWord(data);
  if (!word.ok()) return word.status();
  return U256::FromBigEndian(*word);
}

Hash32 TransferEventTopic() {
  static const Hash32 topic = Keccak256(kTransferEventSignature);
  return topic;
}

Result<TransferEvent> DecodeTransferEvent(std::span<const Hash32> topics,
                                          std::span<const uint8_t> data) {
  if (topics.empty() || topics[0] != TransferEventTopic()) {
    return Status::Error(ErrorCode::kNotTransferEvent,
                         "topic0 is not Transfer(address,address,uint256)");
  }
  if (topics.size() != 3) {
    return Status::Error(ErrorCode::kInvalidAbi,
                         "ERC-20 Transfer has 3 topics, got " + std::to_string(topics.size()));
  }
  Result<Address> from = AddressFromTopic(topics[1]);
  if (!from.ok()) return from.status();
  Result<Address> to = AddressFromTopic(topics[2]);
  if (!to.ok()) return to.status();
  Result<U256> value = DecodeUint256(data);
  if (!value.ok()) return value.status();
  return TransferEvent{*from, *to, *value};
}

}  // namespace agentpay::chain
