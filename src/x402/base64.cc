// Standard padded base64, written out because it is twenty lines and no kept dependency exposes a
// strict decoder (OpenSSL's EVP_DecodeBlock accepts whitespace and trailing garbage).
#include "x402/base64.h"

#include <array>
#include <cstdint>

namespace agentpay::x402 {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Sextet value of each byte, or -1 when the byte is not in the standard alphabet.
constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  for (int8_t& entry : table) entry = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kDecodeTable = MakeDecodeTable();

Status Invalid(std::string message) {
  return Status::Error(ErrorCode::kInvalidBase64, std::move(message));
}

}  // namespace

std::string Base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const uint32_t group = (static_cast<uint32_t>(static_cast<uint8_t>(data[i])) << 16) |
                           (static_cast<uint32_t>(static_cast<uint8_t>(data[i + 1])) << 8) |
                           static_cast<uint32_t>(static_cast<uint8_t>(data[i + 2]));
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(group >> shift) & 63]);
  }
  const size_t rest = data.size() - i;
  if (rest > 0) {
    uint32_t group = static_cast<uint32_t>(static_cast<uint8_t>(data[i])) << 16;
    if (rest == 2) group |= static_cast<uint32_t>(static_cast<uint8_t>(data[i + 1])) << 8;
    out.push_back(kAlphabet[(group >> 18) & 63]);
    out.push_back(kAlphabet[(group >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(group >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// The refusal for the first character of `text` outside the alphabet. Precondition: there is one
// among the first `data_chars`.
Status InvalidCharacter(std::string_view text, size_t data_chars) {
  size_t i = 0;
  while (i < data_chars && kDecodeTable[static_cast<uint8_t>(text[i])] >= 0) ++i;
  AGENTPAY_CHECK(i < data_chars);
  if (text[i] == '-' || text[i] == '_') return Invalid("URL-safe base64 is not accepted");
  if (text[i] == '=') return Invalid("'=' padding inside the text");
  return Invalid("character at offset " + std::to_string(i) + " is not standard base64");
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Invalid("length " + std::to_string(text.size()) +
                   " is not a multiple of 4 (padding missing or extra characters)");
  }
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  const size_t data_chars = text.size() - padding;
  // Sized once and written in place; a bad character is looked for only after the loop, through
  // `bad`, which collects the sign bits of every table entry (-1 marks a byte not in the alphabet).
  std::string out(text.size() / 4 * 3 - padding, '\0');
  const auto* in = reinterpret_cast<const uint8_t*>(text.data());
  char* write = out.data();
  int32_t bad = 0;
  const size_t full_groups = data_chars / 4;
  for (size_t group = 0; group < full_groups; ++group, in += 4, write += 3) {
    const int32_t a = kDecodeTable[in[0]], b = kDecodeTable[in[1]], c = kDecodeTable[in[2]],
                  d = kDecodeTable[in[3]];
    bad |= a | b | c | d;
    const uint32_t bits = (static_cast<uint32_t>(a) << 18) | (static_cast<uint32_t>(b) << 12) |
                          (static_cast<uint32_t>(c) << 6) | static_cast<uint32_t>(d);
    write[0] = static_cast<char>((bits >> 16) & 0xff);
    write[1] = static_cast<char>((bits >> 8) & 0xff);
    write[2] = static_cast<char>(bits & 0xff);
  }
  // The last group when padded: 2 (padding 2) or 3 (padding 1) data characters.
  uint32_t bits = 0;
  for (size_t i = 0; i < (padding == 0 ? 0 : 4 - padding); ++i) {
    const int32_t value = kDecodeTable[in[i]];
    bad |= value;
    bits = (bits << 6) | static_cast<uint32_t>(value);
  }
  if (bad < 0) return InvalidCharacter(text, data_chars);
  if (padding == 2) {  // 2 sextets: 12 bits, 8 used
    if ((bits & 0x0f) != 0) return Invalid("non-zero bits under the padding");
    write[0] = static_cast<char>((bits >> 4) & 0xff);
  } else if (padding == 1) {  // 3 sextets: 18 bits, 16 used
    if ((bits & 0x03) != 0) return Invalid("non-zero bits under the padding");
    write[0] = static_cast<char>((bits >> 10) & 0xff);
    write[1] = static_cast<char>((bits >> 2) & 0xff);
  }
  return out;
}

}  // namespace agentpay::x402
