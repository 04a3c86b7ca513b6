// Recursive Length Prefix, the serialisation of Ethereum transactions: the encoder that signing
// uses, and a strict, bounded decoder for the raw transactions the built-in devnet receives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "chain/bytes.h"
#include "core/result.h"

namespace agentpay::chain {

// A byte string: a single byte below 0x80 is itself; otherwise a length prefix and the bytes.
Bytes RlpEncodeBytes(std::span<const uint8_t> data);
// An integer: its minimal big-endian bytes (zero is the empty string, 0x80).
Bytes RlpEncodeUint(const U256& value);
// A list of already-encoded items (each the output of an RlpEncode* function).
Bytes RlpEncodeList(const std::vector<Bytes>& encoded_items);

// One decoded item. Both spans point into the caller's input, which must outlive the item.
struct RlpItem {
  bool is_list = false;
  std::span<const uint8_t> payload;  // a string's bytes, or a list's concatenated encoded items
  std::span<const uint8_t> encoded;  // the whole item: prefix and payload
};

// The decoder accepts only canonical encodings (as geth does): a single byte below 0x80 must be
// itself, the long forms only for lengths above 55, and no leading zero bytes in lengths.
// Errors: code "invalid_rlp".
//
// Decodes the single item that spans all of `data` (trailing bytes are an error).
Result<RlpItem> RlpDecode(std::span<const uint8_t> data);
// The item would point into a temporary that dies at the end of the call's full expression.
Result<RlpItem> RlpDecode(Bytes&& data) = delete;
// The items of a list, one level deep; a list with more than max_items items is an error.
Result<std::vector<RlpItem>> RlpListItems(const RlpItem& list, size_t max_items);
// A string holding a canonical integer: at most 32 bytes, no leading zero byte (zero is empty).
Result<U256> RlpDecodeUint(const RlpItem& item);

}  // namespace agentpay::chain
