// Backoff arithmetic; see retry_policy.h.
#include "core/retry_policy.h"

#include <algorithm>

#include "core/check.h"

namespace agentpay {

int64_t BackoffDelayMs(const BackoffPolicy& policy, int retry, uint32_t random_bits) {
  AGENTPAY_CHECK(retry >= 1 && policy.initial_delay_ms >= 0 &&
                 policy.initial_delay_ms <= policy.max_delay_ms);
  int64_t base = policy.initial_delay_ms;
  // Doubling stops at the cap, so the loop runs at most ~63 times and never overflows.
  for (int i = 1; i < retry && base < policy.max_delay_ms; ++i) {
    base = std::min(policy.max_delay_ms, base * 2);
  }
  const int64_t half = base / 2;
  const int64_t spread = base - half;  // [0, spread] inclusive
  // The modulo's bias is below 2^-32 relative for any delay a person would configure.
  const int64_t jitter =
      static_cast<int64_t>(static_cast<uint64_t>(random_bits) % static_cast<uint64_t>(spread + 1));
  return half + jitter;
}

int64_t RetryDelayMs(int64_t backoff_ms, std::optional<int64_t> retry_after_ms,
                     int64_t remaining_ms) {
  AGENTPAY_CHECK(backoff_ms >= 0);
  int64_t delay = backoff_ms;
  if (retry_after_ms && *retry_after_ms > delay) delay = *retry_after_ms;
  return std::clamp<int64_t>(delay, 0, std::max<int64_t>(remaining_ms, 0));
}

}  // namespace agentpay
