// Retry timing for the agent client: exponential backoff with jitter, bounded by a cap, a server's
// Retry-After and the caller's deadline. Pure: the random draw and the time left come in as values.
#pragma once

#include <cstdint>
#include <optional>

namespace agentpay {

struct BackoffPolicy {
  int64_t initial_delay_ms = 200;  // the first retry waits between half of this and all of it
  int64_t max_delay_ms = 5000;     // no single wait is longer (before Retry-After)
};

// The wait before retry number `retry` (1 for the first retry): base = min(max, initial *
// 2^(retry-1)), then "equal jitter": base/2 plus a uniform draw in [0, base/2] taken from
// random_bits, so that clients that failed together do not retry together, yet every wait keeps
// half its backoff. Preconditions: retry >= 1, 0 <= initial_delay_ms <= max_delay_ms.
int64_t BackoffDelayMs(const BackoffPolicy& policy, int retry, uint32_t random_bits);

// The wait actually taken: at least the server's Retry-After when it sent one, and never beyond the
// time left before the deadline (0 when none is left). Precondition: backoff_ms >= 0.
int64_t RetryDelayMs(int64_t backoff_ms, std::optional<int64_t> retry_after_ms,
                     int64_t remaining_ms);

}  // namespace agentpay
