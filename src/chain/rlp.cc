// RLP per the Yellow Paper, appendix B. Lengths are at most 2^64 - 1 here, far beyond any
// transaction AgentPay builds (those are bounded in transaction.cc).
#include "chain/rlp.h"

namespace agentpay::chain {
namespace {

// Short form: offset + length (length ≤ 55). Long form: offset + 55 + size of the big-endian
// length, then that length.
Bytes LengthPrefix(size_t length, uint8_t offset) {
  if (length <= 55) return {static_cast<uint8_t>(offset + length)};
  const Bytes length_bytes = U256(static_cast<uint64_t>(length)).ToMinimalBigEndian();
  Bytes prefix = {static_cast<uint8_t>(offset + 55 + length_bytes.size())};
  prefix.insert(prefix.end(), length_bytes.begin(), length_bytes.end());
  return prefix;
}

}  // namespace

Bytes RlpEncodeBytes(std::span<const uint8_t> data) {
  if (data.size() == 1 && data[0] < 0x80) return {data[0]};
  Bytes encoded = LengthPrefix(data.size(), 0x80);
  encoded.insert(encoded.end(), data.begin(), data.end());
  return encoded;
}

Bytes RlpEncodeUint(const U256& value) { return RlpEncodeBytes(value.ToMinimalBigEndian()); }

Bytes RlpEncodeList(const std::vector<Bytes>& encoded_items) {
  size_t payload_size = 0;
  for (const Bytes& item : encoded_items) payload_size += item.size();
  Bytes encoded = LengthPrefix(payload_size, 0xc0);
  encoded.reserve(encoded.size() + payload_size);
  for (const Bytes& item : encoded_items) encoded.insert(encoded.end(), item.begin(), item.end());
  return encoded;
}

}  // namespace agentpay::chain
