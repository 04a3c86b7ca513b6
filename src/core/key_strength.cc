// The key-strength estimate; see key_strength.h.
#include "core/key_strength.h"

#include <cmath>
#include <cstdlib>

namespace agentpay {

namespace {

// The length of the shortest unit the key is a repetition of (the whole key if none).
size_t Period(std::string_view key) {
  for (size_t period = 1; period < key.size(); ++period) {
    bool repeats = true;
    for (size_t i = period; i < key.size() && repeats; ++i) repeats = key[i] == key[i - period];
    if (repeats) return period;
  }
  return key.size();
}

int AlphabetSize(std::string_view key) {
  bool digit = false, lower = false, upper = false, other = false;
  for (char c : key) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c >= 'a' && c <= 'z') {
      lower = true;
    } else if (c >= 'A' && c <= 'Z') {
      upper = true;
    } else {
      other = true;
    }
  }
  return (digit ? 10 : 0) + (lower ? 26 : 0) + (upper ? 26 : 0) + (other ? 33 : 0);
}

}  // namespace

int64_t EstimateKeyBits(std::string_view key) {
  if (key.empty()) return 0;
  const std::string_view unit = key.substr(0, Period(key));
  int64_t counted = 0;
  for (size_t i = 0; i < unit.size(); ++i) {
    if (i > 0 && std::abs(static_cast<int>(static_cast<unsigned char>(unit[i])) -
                          static_cast<int>(static_cast<unsigned char>(unit[i - 1]))) <= 1) {
      continue;  // a repeat or a step of a sequence
    }
    ++counted;
  }
  // Whole bits, rounded down: the estimate never claims more than the shape gives.
  return static_cast<int64_t>(std::floor(static_cast<double>(counted) *
                                         std::log2(static_cast<double>(AlphabetSize(unit)))));
}

}  // namespace agentpay
