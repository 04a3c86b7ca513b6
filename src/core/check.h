// Assertions that stay on in release builds: a broken invariant is a bug and aborts the process
// with the failed condition and its location (DESIGN rule 3).
#pragma once

namespace agentpay {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line);
}  // namespace agentpay

#define AGENTPAY_CHECK(condition)                                  \
  do {                                                             \
    if (!(condition)) ::agentpay::CheckFailed(#condition, __FILE__, __LINE__); \
  } while (false)
