// RLP per the Yellow Paper, appendix B. Lengths are at most 2^64 - 1 here, far beyond any
// transaction AgentPay builds (those are bounded in transaction.cc). The decoder never reads past
// its input, whatever the length prefixes claim.
#include "chain/rlp.h"

#include <algorithm>
#include <string>

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

Status Invalid(const std::string& what) { return Status::Error(ErrorCode::kInvalidRlp, what); }

// The big-endian length of a long form: 1 to 8 bytes, no leading zero, above 55.
Result<uint64_t> LongLength(std::span<const uint8_t> bytes) {
  if (bytes.empty() || bytes[0] == 0) return Invalid("length has a leading zero byte");
  uint64_t length = 0;
  for (uint8_t byte : bytes) length = (length << 8) | byte;
  if (length <= 55) return Invalid("long form used for a length of 55 or less");
  return length;
}

// The item at the start of data: how long its prefix is, how long its payload is.
struct Header {
  bool is_list = false;
  size_t prefix_size = 0;
  uint64_t payload_size = 0;
};

Result<Header> ReadHeader(std::span<const uint8_t> data) {
  if (data.empty()) return Invalid("unexpected end of input");
  const uint8_t first = data[0];
  if (first < 0x80) return Header{false, 0, 1};
  if (first <= 0xb7 || (first >= 0xc0 && first <= 0xf7)) {
    const bool is_list = first >= 0xc0;
    return Header{is_list, 1, static_cast<uint64_t>(first - (is_list ? 0xc0 : 0x80))};
  }
  const bool is_list = first >= 0xf8;
  const size_t length_size = first - (is_list ? 0xf7 : 0xb7);  // 1 to 8
  if (data.size() < 1 + length_size) return Invalid("truncated length");
  Result<uint64_t> length = LongLength(data.subspan(1, length_size));
  if (!length.ok()) return length.status();
  return Header{is_list, 1 + length_size, *length};
}

// Decodes the first item of data; *consumed receives its encoded size.
Result<RlpItem> DecodeFirst(std::span<const uint8_t> data, size_t* consumed) {
  Result<Header> header = ReadHeader(data);
  if (!header.ok()) return header.status();
  if (header->payload_size > data.size() - header->prefix_size) {
    return Invalid("item of " + std::to_string(header->payload_size) + " bytes overruns the input");
  }
  const size_t payload_size = static_cast<size_t>(header->payload_size);
  RlpItem item;
  item.is_list = header->is_list;
  item.payload = data.subspan(header->prefix_size, payload_size);
  item.encoded = data.subspan(0, header->prefix_size + payload_size);
  if (!item.is_list && header->prefix_size == 1 && payload_size == 1 && item.payload[0] < 0x80) {
    return Invalid("single byte below 0x80 must encode as itself");
  }
  *consumed = item.encoded.size();
  return item;
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

Result<RlpItem> RlpDecode(std::span<const uint8_t> data) {
  size_t consumed = 0;
  Result<RlpItem> item = DecodeFirst(data, &consumed);
  if (!item.ok()) return item.status();
  if (consumed != data.size()) {
    return Invalid(std::to_string(data.size() - consumed) + " bytes after the item");
  }
  return item;
}

Result<std::vector<RlpItem>> RlpListItems(const RlpItem& list, size_t max_items) {
  if (!list.is_list) return Invalid("expected a list, got a string");
  std::vector<RlpItem> items;
  std::span<const uint8_t> rest = list.payload;
  while (!rest.empty()) {
    if (items.size() == max_items) {
      return Invalid("list has more than " + std::to_string(max_items) + " items");
    }
    size_t consumed = 0;
    Result<RlpItem> item = DecodeFirst(rest, &consumed);
    if (!item.ok()) return item.status();
    items.push_back(*item);
    rest = rest.subspan(consumed);
  }
  return items;
}

Result<U256> RlpDecodeUint(const RlpItem& item) {
  if (item.is_list) return Invalid("expected an integer, got a list");
  if (item.payload.size() > 32) return Invalid("integer wider than 256 bits");
  if (!item.payload.empty() && item.payload[0] == 0) return Invalid("integer has a leading zero");
  std::array<uint8_t, 32> word{};
  std::copy(item.payload.begin(), item.payload.end(), word.end() - item.payload.size());
  return U256::FromBigEndian(word);
}

}  // namespace agentpay::chain
