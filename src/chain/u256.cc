// U256 arithmetic and text forms. Only what payments need: parse and print (decimal for x402
// amounts, hex quantities for JSON-RPC), compare, add/subtract with overflow checks, and the
// big-endian word encoding of ABI and RLP. No multiplication or division is exposed.
#include <algorithm>

#include "chain/bytes.h"
#include "core/hex.h"

namespace agentpay::chain {
namespace {

__extension__ using Uint128 = unsigned __int128;

// The largest value has 78 decimal digits and 64 hex digits.
constexpr size_t kMaxDecimalDigits = 78;
constexpr size_t kMaxHexDigits = 64;

// value = value * factor + addend; false when the result does not fit in 256 bits.
bool MultiplyAdd(std::array<uint64_t, 4>& limbs, uint64_t factor, uint64_t addend) {
  Uint128 carry = addend;
  for (uint64_t& limb : limbs) {
    const Uint128 product = static_cast<Uint128>(limb) * factor + carry;
    limb = static_cast<uint64_t>(product);
    carry = product >> 64;
  }
  return carry == 0;
}

// value /= divisor; returns the remainder. Precondition: divisor != 0.
uint64_t DivideSmall(std::array<uint64_t, 4>& limbs, uint64_t divisor) {
  Uint128 remainder = 0;
  for (size_t i = limbs.size(); i-- > 0;) {
    const Uint128 current = (remainder << 64) | limbs[i];
    limbs[i] = static_cast<uint64_t>(current / divisor);
    remainder = current % divisor;
  }
  return static_cast<uint64_t>(remainder);
}

}  // namespace

U256 U256::FromBigEndian(std::span<const uint8_t, 32> bytes) {
  U256 value;
  for (size_t i = 0; i < 32; ++i) {
    const size_t limb = 3 - i / 8;
    value.limbs_[limb] = (value.limbs_[limb] << 8) | bytes[i];
  }
  return value;
}

std::array<uint8_t, 32> U256::ToBigEndian() const {
  std::array<uint8_t, 32> bytes{};
  for (size_t i = 0; i < 32; ++i) {
    const size_t limb = 3 - i / 8;
    const size_t shift = 8 * (7 - i % 8);
    bytes[i] = static_cast<uint8_t>(limbs_[limb] >> shift);
  }
  return bytes;
}

Bytes U256::ToMinimalBigEndian() const {
  const std::array<uint8_t, 32> word = ToBigEndian();
  const auto first = std::find_if(word.begin(), word.end(), [](uint8_t b) { return b != 0; });
  return Bytes(first, word.end());
}

std::string U256::ToDecimal() const {
  if (IsZero()) return "0";
  std::array<uint64_t, 4> rest = limbs_;
  std::string digits;
  while (rest != std::array<uint64_t, 4>{}) {
    digits.push_back(static_cast<char>('0' + DivideSmall(rest, 10)));
  }
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::string U256::ToHexQuantity() const {
  const std::string padded = Hex(ToBigEndian());  // "0x" + 64 digits
  const size_t first = padded.find_first_not_of('0', 2);
  if (first == std::string::npos) return "0x0";
  return "0x" + padded.substr(first);
}

bool U256::FitsInt64() const {
  return limbs_[1] == 0 && limbs_[2] == 0 && limbs_[3] == 0 &&
         limbs_[0] <= static_cast<uint64_t>(INT64_MAX);
}

int64_t U256::ToInt64() const {
  AGENTPAY_CHECK(FitsInt64());
  return static_cast<int64_t>(limbs_[0]);
}

std::optional<U256> U256::CheckedAdd(const U256& a, const U256& b) {
  U256 sum;
  uint64_t carry = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Uint128 limb = static_cast<Uint128>(a.limbs_[i]) + b.limbs_[i] + carry;
    sum.limbs_[i] = static_cast<uint64_t>(limb);
    carry = static_cast<uint64_t>(limb >> 64);
  }
  if (carry != 0) return std::nullopt;
  return sum;
}

std::optional<U256> U256::CheckedSub(const U256& a, const U256& b) {
  if (a < b) return std::nullopt;
  U256 difference;
  uint64_t borrow = 0;
  for (size_t i = 0; i < 4; ++i) {
    const uint64_t subtrahend = b.limbs_[i] + borrow;
    // borrow again when b's limb plus the borrow wrapped or exceeds a's limb
    const bool wrapped = subtrahend < borrow;
    difference.limbs_[i] = a.limbs_[i] - subtrahend;
    borrow = (wrapped || a.limbs_[i] < subtrahend) ? 1 : 0;
  }
  return difference;
}

std::strong_ordering operator<=>(const U256& a, const U256& b) {
  for (size_t i = 4; i-- > 0;) {
    if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] <=> b.limbs_[i];
  }
  return std::strong_ordering::equal;
}

std::optional<U256> ParseU256Decimal(std::string_view text) {
  if (text.empty() || text.size() > kMaxDecimalDigits) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  std::array<uint64_t, 4> limbs{};
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (!MultiplyAdd(limbs, 10, static_cast<uint64_t>(c - '0'))) return std::nullopt;
  }
  return U256::FromLimbs(limbs);
}

std::optional<U256> ParseU256Hex(std::string_view text) {
  if (text.size() < 3 || text[0] != '0' || text[1] != 'x') return std::nullopt;
  const std::string_view digits = text.substr(2);
  if (digits.size() > kMaxHexDigits) return std::nullopt;
  std::array<uint64_t, 4> limbs{};
  for (char c : digits) {
    const int nibble = HexDigitValue(c);
    if (nibble < 0) return std::nullopt;
    if (!MultiplyAdd(limbs, 16, static_cast<uint64_t>(nibble))) return std::nullopt;
  }
  return U256::FromLimbs(limbs);
}

}  // namespace agentpay::chain
