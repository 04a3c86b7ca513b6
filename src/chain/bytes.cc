// Hex and address parsing and printing. Everything is bounded and rejects rather than repairs:
// a lenient parser here would let a malformed payment payload mean something unintended.
#include "chain/bytes.h"

#include "chain/keccak.h"
#include "core/hex.h"

namespace agentpay::chain {
namespace {

Status InvalidHex(std::string message) {
  return Status::Error(ErrorCode::kInvalidHex, std::move(message));
}

// Decodes an even-length run of hex digits (no prefix) into out; false on a non-hex character.
bool DecodeDigits(std::string_view digits, uint8_t* out) {
  for (size_t i = 0; i < digits.size(); i += 2) {
    const int high = HexDigitValue(digits[i]);
    const int low = HexDigitValue(digits[i + 1]);
    if (high < 0 || low < 0) return false;
    out[i / 2] = static_cast<uint8_t>(high * 16 + low);
  }
  return true;
}

}  // namespace

std::string Hex(std::span<const uint8_t> data) {
  std::string text = "0x";
  AppendHex(text, data.data(), data.size());
  return text;
}

Result<Bytes> ParseHex(std::string_view text, size_t expected_size) {
  if (text.size() < 2 || text[0] != '0' || text[1] != 'x') {
    return InvalidHex("hex string must start with 0x");
  }
  const std::string_view digits = text.substr(2);
  if (digits.size() % 2 != 0) return InvalidHex("hex string has an odd number of digits");
  const size_t size = digits.size() / 2;
  if (size > kMaxHexBytes)
    return InvalidHex("hex string longer than " + std::to_string(kMaxHexBytes) + " bytes");
  if (expected_size != kAnySize && size != expected_size) {
    return InvalidHex("expected " + std::to_string(expected_size) + " bytes, got " +
                      std::to_string(size));
  }
  Bytes bytes(size);
  if (!DecodeDigits(digits, bytes.data())) return InvalidHex("hex string has a non-hex character");
  return bytes;
}

Result<Hash32> ParseHash32(std::string_view text) {
  Result<Bytes> bytes = ParseHex(text, 32);
  if (!bytes.ok()) return bytes.status();
  Hash32 hash;
  std::copy(bytes->begin(), bytes->end(), hash.begin());
  return hash;
}

Result<Address> ParseAddress(std::string_view text) {
  if (text.size() != 42 || text[0] != '0' || text[1] != 'x') {
    return Status::Error(ErrorCode::kInvalidAddress,
                         "address must be 0x followed by 40 hex digits");
  }
  Address address;
  if (!DecodeDigits(text.substr(2), address.bytes.data())) {
    return Status::Error(ErrorCode::kInvalidAddress, "address has a non-hex character");
  }
  return address;
}

std::string ToLowerHex(const Address& address) { return Hex(address.bytes); }

// EIP-55: a letter is upper case when the matching nibble of keccak256(lowercase hex) is >= 8.
std::string ToChecksumHex(const Address& address) {
  std::string text = ToLowerHex(address);
  const Hash32 hash = Keccak256(std::string_view(text).substr(2));
  for (size_t i = 0; i < 40; ++i) {
    const uint8_t nibble = (i % 2 == 0) ? (hash[i / 2] >> 4) : (hash[i / 2] & 0x0f);
    char& c = text[2 + i];
    if (c >= 'a' && c <= 'f' && nibble >= 8) c = static_cast<char>(c - 'a' + 'A');
  }
  return text;
}

bool HasValidChecksum(std::string_view text) {
  Result<Address> address = ParseAddress(text);
  if (!address.ok()) return false;
  bool has_lower = false;
  bool has_upper = false;
  for (char c : text.substr(2)) {
    has_lower |= (c >= 'a' && c <= 'f');
    has_upper |= (c >= 'A' && c <= 'F');
  }
  if (!has_lower || !has_upper) return true;  // single-case spellings carry no checksum
  return ToChecksumHex(*address) == text;
}

}  // namespace agentpay::chain
