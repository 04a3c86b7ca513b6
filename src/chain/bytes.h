// Value types shared by the EVM layer: byte strings, 32-byte hashes, 20-byte addresses and the
// 256-bit unsigned integer that Solidity's uint256 needs. Parsers here are strict and bounded,
// because their input comes from the network (x402 payloads, JSON-RPC answers, configuration).
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace agentpay::chain {

using Bytes = std::vector<uint8_t>;
using Hash32 = std::array<uint8_t, 32>;

// The largest byte string ParseHex accepts: above any transaction or calldata we build or read.
inline constexpr size_t kMaxHexBytes = 1 << 20;
// Passed to ParseHex as expected_size when any length (up to kMaxHexBytes) is fine.
inline constexpr size_t kAnySize = static_cast<size_t>(-1);

struct Address {
  std::array<uint8_t, 20> bytes{};
  friend bool operator==(const Address&, const Address&) = default;
  friend auto operator<=>(const Address&, const Address&) = default;
};

// "0x" + lowercase hex of `data` ("0x" for empty input).
std::string Hex(std::span<const uint8_t> data);

// Strict hex: "0x" prefix (lowercase x), an even number of hex digits of either case, nothing else.
// expected_size is the exact byte count wanted, or kAnySize. Errors: code "invalid_hex".
Result<Bytes> ParseHex(std::string_view text, size_t expected_size = kAnySize);
// ParseHex with exactly 32 bytes.
Result<Hash32> ParseHash32(std::string_view text);

// "0x" + 40 hex digits; any case is accepted and the EIP-55 checksum is NOT enforced, because
// clients echo addresses as given (NOTES.md). Errors: code "invalid_address".
Result<Address> ParseAddress(std::string_view text);
// True when text is a well-formed address whose letters are all lower, all upper, or exactly the
// EIP-55 mixed-case spelling; use it where a mixed-case typo should be caught (configuration).
bool HasValidChecksum(std::string_view text);
std::string ToChecksumHex(const Address& address);  // EIP-55, e.g. "0x5aAeb6…BeAed"
std::string ToLowerHex(const Address& address);     // "0x" + 40 lowercase hex digits

// Unsigned 256-bit integer: the EVM word. Limbs are little-endian (limb[0] least significant).
class U256 {
 public:
  constexpr U256() = default;
  constexpr U256(uint64_t value) : limbs_{value, 0, 0, 0} {}  // NOLINT: implicit widening is safe
  static U256 FromBigEndian(std::span<const uint8_t, 32> bytes);
  // limbs[0] is the least significant 64 bits.
  static constexpr U256 FromLimbs(const std::array<uint64_t, 4>& limbs) {
    U256 value;
    value.limbs_ = limbs;
    return value;
  }

  std::array<uint8_t, 32> ToBigEndian() const;
  // Big-endian without leading zero bytes (empty for zero): RLP's integer encoding.
  Bytes ToMinimalBigEndian() const;
  std::string ToDecimal() const;
  std::string ToHexQuantity() const;  // JSON-RPC quantity: "0x0", "0x1a"; no leading zeros
  bool IsZero() const { return limbs_ == std::array<uint64_t, 4>{}; }
  bool FitsInt64() const;
  // Precondition: FitsInt64().
  int64_t ToInt64() const;
  uint64_t Limb(size_t index) const { return limbs_.at(index); }

  // nullopt on overflow (a + b > 2^256 - 1) or underflow (a < b).
  static std::optional<U256> CheckedAdd(const U256& a, const U256& b);
  static std::optional<U256> CheckedSub(const U256& a, const U256& b);

  friend bool operator==(const U256&, const U256&) = default;
  friend std::strong_ordering operator<=>(const U256& a, const U256& b);

 private:
  std::array<uint64_t, 4> limbs_{};
};

// Canonical decimal: digits only, no sign, no leading zeros except "0" itself, at most 2^256 - 1.
std::optional<U256> ParseU256Decimal(std::string_view text);
// JSON-RPC quantity "0x…": 1 to 64 hex digits of either case; leading zeros tolerated on input.
std::optional<U256> ParseU256Hex(std::string_view text);

}  // namespace agentpay::chain
