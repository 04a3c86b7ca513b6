// Backoff of the agent client (core/retry_policy.h): exponential, capped, jittered within
// [base/2, base], Retry-After as a floor and the deadline as a ceiling.
#include "core/retry_policy.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

namespace agentpay {
namespace {

TEST(RetryPolicyTest, DoublesFromTheInitialDelayUpToTheCap) {
  BackoffPolicy policy{200, 5000};
  const uint32_t max_bits = std::numeric_limits<uint32_t>::max();
  // The upper end of the jitter is the base itself: 200, 400, 800, ... capped at 5000.
  int64_t expected[] = {200, 400, 800, 1600, 3200, 5000, 5000};
  for (int retry = 1; retry <= 7; ++retry) {
    int64_t base = expected[retry - 1];
    int64_t low = BackoffDelayMs(policy, retry, 0);
    int64_t high = BackoffDelayMs(policy, retry, max_bits);
    EXPECT_EQ(low, base / 2) << retry;
    EXPECT_LE(high, base) << retry;
    EXPECT_GE(high, base / 2) << retry;
  }
  EXPECT_EQ(BackoffDelayMs(policy, 1000, 0), 2500);  // no overflow, still capped
}

TEST(RetryPolicyTest, JitterSpreadsClientsApart) {
  BackoffPolicy policy{1000, 1000};
  std::set<int64_t> seen;
  for (uint32_t bits = 0; bits < 2000; bits += 7) {
    int64_t delay = BackoffDelayMs(policy, 1, bits * 2654435761u);
    EXPECT_GE(delay, 500);
    EXPECT_LE(delay, 1000);
    seen.insert(delay);
  }
  EXPECT_GT(seen.size(), 100u);
}

TEST(RetryPolicyTest, RetryAfterIsAFloorAndTheDeadlineACeiling) {
  EXPECT_EQ(RetryDelayMs(300, std::nullopt, 10000), 300);
  EXPECT_EQ(RetryDelayMs(300, 2000, 10000), 2000);
  EXPECT_EQ(RetryDelayMs(3000, 2000, 10000), 3000);
  EXPECT_EQ(RetryDelayMs(3000, std::nullopt, 1200), 1200);
  EXPECT_EQ(RetryDelayMs(3000, 5000, 1200), 1200);
  EXPECT_EQ(RetryDelayMs(3000, std::nullopt, -5), 0);
}

}  // namespace
}  // namespace agentpay
