// Hex text both ways: one hex digit's value, which every parser of hex text (percent-escapes, JSON
// \u escapes, chain quantities and bytes) shares, and the one writer of lower-case hex (ids, digests,
// chain bytes).
#pragma once

#include <cstddef>
#include <string>

namespace agentpay {

// 0–15 for '0'–'9', 'a'–'f' and 'A'–'F'; -1 for anything else.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends two lower-case hex digits per byte of data[0, size) to `out`, no prefix.
void AppendHex(std::string& out, const unsigned char* data, size_t size);
// Lower-case hex of data[0, size), two digits per byte, no prefix: {0x00, 0x0f} is "000f".
std::string ToHex(const unsigned char* data, size_t size);

}  // namespace agentpay
