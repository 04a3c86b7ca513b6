// Checked money arithmetic; see money.h.
#include "core/money.h"

namespace agentpay {

std::optional<int64_t> ParseAmount(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    int digit = c - '0';
    if (value > (kMaxAmount - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<int64_t> AddAmounts(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

std::optional<int64_t> SubtractAmounts(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || b > a) return std::nullopt;
  return a - b;
}

}  // namespace agentpay
