// Money as integer atomic units of the asset (CONTRACT §1): parsing from decimal strings and checked
// arithmetic. Never floats; negative amounts and overflow are rejected, not wrapped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentpay {

// Largest amount accepted anywhere: the int64 range, so every sum of two checked amounts is detectable.
inline constexpr int64_t kMaxAmount = INT64_MAX;

// Parses a non-negative decimal integer ("0", "100000"); no sign, no spaces, no leading zeros except "0",
// at most kMaxAmount. Returns nullopt for anything else.
std::optional<int64_t> ParseAmount(std::string_view text);

// Checked arithmetic on non-negative amounts: nullopt on overflow or a negative result.
std::optional<int64_t> AddAmounts(int64_t a, int64_t b);
std::optional<int64_t> SubtractAmounts(int64_t a, int64_t b);

inline std::string FormatAmount(int64_t amount) { return std::to_string(amount); }

}  // namespace agentpay
