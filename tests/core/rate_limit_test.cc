// Token buckets (core/rate_limit.h): a table of (state, time) -> decision, refill, Retry-After, the
// clamps against overflow and a clock that goes back; and the bounded table of buckets
// (gateway/rate_limiter.h).
#include "core/rate_limit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gateway/rate_limiter.h"
#include "http/message.h"

namespace agentpay {
namespace {

struct Case {
  const char* name;
  RateLimit limit;
  TokenBucket before;
  int64_t now_ms;
  bool allowed;
  int64_t retry_after_s;
  int64_t milli_after;
};

TEST(TokenBucket, Table) {
  const Case cases[] = {
      {"full bucket allows", {10, 5}, {5000, 0}, 0, true, 0, 4000},
      {"one token left allows", {10, 5}, {1000, 0}, 0, true, 0, 0},
      {"empty bucket refuses", {10, 5}, {0, 0}, 0, false, 1, 0},
      {"999 thousandths refuse", {10, 5}, {999, 0}, 0, false, 1, 999},
      {"refills 10/s: 100 ms is one token", {10, 5}, {0, 0}, 100, true, 0, 0},
      {"refills 10/s: 99 ms is not", {10, 5}, {0, 0}, 99, false, 1, 990},
      {"refill stops at the burst", {10, 5}, {0, 0}, 1000000, true, 0, 4000},
      {"1/s: the wait is 1 s", {1, 1}, {0, 0}, 0, false, 1, 0},
      {"1 per s, half refilled: still 1 s", {1, 1}, {500, 0}, 0, false, 1, 500},
      {"rate under 1/s impossible; 1/s burst 3 after 2.5 s", {1, 3}, {0, 0}, 2500, true, 0, 1500},
      {"clock went back: no refill", {10, 5}, {0, 1000}, 500, false, 1, 0},
      {"huge gap does not overflow", {kMaxRatePerSecond, kMaxRateBurst}, {0, 0},
       INT64_MAX / 2, true, 0, kMaxRateBurst * 1000 - 1000},
      {"fast rate refills within a ms", {100000, 100}, {0, 0}, 1, true, 0, 99000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TakeDecision d = TakeToken(c.before, c.limit, c.now_ms);
    EXPECT_EQ(d.allowed, c.allowed);
    EXPECT_EQ(d.retry_after_s, c.retry_after_s);
    EXPECT_EQ(d.bucket.milli_tokens, c.milli_after);
    EXPECT_EQ(d.bucket.updated_ms, std::max(c.now_ms, c.before.updated_ms));
  }
}

TEST(TokenBucket, RetryAfterIsWholeSecondsUntilAToken) {
  // 1 token every 10 s (burst 1 means the rate 1/s); use a burst of 1 at rate 1: 1 s.
  RateLimit slow{1, 1};
  TakeDecision d = TakeToken(TokenBucket{0, 0}, slow, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 1);
  // After exactly the advertised wait a token is there.
  EXPECT_TRUE(TakeToken(d.bucket, slow, d.retry_after_s * 1000).allowed);
  // With 10/s the wait is 100 ms: rounded up to 1 s, never 0.
  EXPECT_EQ(TakeToken(TokenBucket{0, 0}, RateLimit{10, 1}, 0).retry_after_s, 1);
}

TEST(TokenBucket, BurstThenSteadyRate) {
  RateLimit limit{5, 20};
  TokenBucket bucket = FullBucket(limit, 0);
  int allowed = 0;
  for (int i = 0; i < 100; ++i) {
    TakeDecision d = TakeToken(bucket, limit, 0);
    bucket = d.bucket;
    allowed += d.allowed;
  }
  EXPECT_EQ(allowed, 20);  // the burst, all at once
  // Over the next 10 s, one request every ms: exactly 5 a second get through.
  allowed = 0;
  for (int64_t t = 1; t <= 10000; ++t) {
    TakeDecision d = TakeToken(bucket, limit, t);
    bucket = d.bucket;
    allowed += d.allowed;
  }
  EXPECT_EQ(allowed, 50);
}

TEST(TokenBucket, FullMeansForgettable) {
  RateLimit limit{10, 5};
  TokenBucket bucket = TakeToken(FullBucket(limit, 0), limit, 0).bucket;
  EXPECT_FALSE(BucketIsFull(bucket, limit, 0));
  EXPECT_FALSE(BucketIsFull(bucket, limit, 99));
  EXPECT_TRUE(BucketIsFull(bucket, limit, 100));
}

// Issue 36 item 8: tokens taken by other gateways of the cluster.
TEST(TokenBucket, DebitTokensDrainsDownToOneBurstOfDebt) {
  const RateLimit limit{10, 5};  // 10 a second, burst 5
  TokenBucket full = FullBucket(limit, 0);
  EXPECT_EQ(DebitTokens(full, limit, 0, 0).milli_tokens, 5000);
  EXPECT_EQ(DebitTokens(full, limit, 3, 0).milli_tokens, 2000);
  EXPECT_EQ(DebitTokens(full, limit, 5, 0).milli_tokens, 0);
  EXPECT_EQ(DebitTokens(full, limit, 8, 0).milli_tokens, -3000);  // in debt: waits its refill
  EXPECT_EQ(DebitTokens(full, limit, 10, 0).milli_tokens, -5000);
  EXPECT_EQ(DebitTokens(full, limit, 11, 0).milli_tokens, -5000);  // at most one burst of debt
  EXPECT_EQ(DebitTokens(full, limit, std::numeric_limits<int64_t>::max(), 0).milli_tokens, -5000);
  // Refilled to now first: 200 ms of 10/s is 2 tokens.
  TokenBucket empty{0, 0};
  TokenBucket debited = DebitTokens(empty, limit, 1, 200);
  EXPECT_EQ(debited.milli_tokens, 1000);
  EXPECT_EQ(debited.updated_ms, 200);
  // A bucket in debt refuses, and says how long: 3 tokens of debt plus one at 10/s is 400 ms.
  TakeDecision refused = TakeToken(DebitTokens(full, limit, 8, 0), limit, 0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_s, 1);
  EXPECT_FALSE(TakeToken(DebitTokens(full, limit, 8, 0), limit, 300).allowed);
  EXPECT_TRUE(TakeToken(DebitTokens(full, limit, 8, 0), limit, 400).allowed);
}

TEST(TokenBucket, UsageElsewhereIsTheTotalLessWhatWasSeenAndOurOwn) {
  EXPECT_EQ(UsageElsewhere(10, 0, 0), 10);  // a row new to us: all of it is theirs
  EXPECT_EQ(UsageElsewhere(10, 4, 0), 6);
  EXPECT_EQ(UsageElsewhere(10, 4, 6), 0);   // only ours since we looked
  EXPECT_EQ(UsageElsewhere(10, 4, 2), 4);
  EXPECT_EQ(UsageElsewhere(10, 12, 0), 0);  // seen out of order: nothing taken back
}

TEST(RateLimiter, DebitedElsewhereRefusesHere) {
  RateLimiter limiter(RateLimit{1, 3}, 100);
  limiter.TrackUsage();
  EXPECT_FALSE(limiter.Take("a", 0));
  EXPECT_FALSE(limiter.Take("b", 0));
  EXPECT_FALSE(limiter.Take("a", 0));
  auto usage = limiter.TakeUsage();
  std::sort(usage.begin(), usage.end());
  EXPECT_EQ(usage, (std::vector<std::pair<std::string, int64_t>>{{"a", 2}, {"b", 1}}));
  EXPECT_TRUE(limiter.TakeUsage().empty());  // handed over once
  // Another gateway took 5 of "a" and 3 of "c" (a key new here): both refused here now.
  limiter.Debit("a", 5, 0);
  limiter.Debit("c", 3, 0);
  EXPECT_TRUE(limiter.Take("a", 0));
  EXPECT_TRUE(limiter.Take("c", 0));
  EXPECT_FALSE(limiter.Take("b", 0));
  EXPECT_TRUE(limiter.TakeUsage() == (std::vector<std::pair<std::string, int64_t>>{{"b", 1}}));
  // A refused take is not usage; "c" refills at its rate.
  EXPECT_FALSE(limiter.Take("c", 1000));
}

TEST(RateLimiter, PerKeyAndRefill) {
  RateLimiter limiter(RateLimit{1, 2}, 100);
  EXPECT_FALSE(limiter.Take("a", 0));
  EXPECT_FALSE(limiter.Take("a", 0));
  auto refused = limiter.Take("a", 0);
  ASSERT_TRUE(refused);
  EXPECT_EQ(*refused, 1);
  EXPECT_FALSE(limiter.Take("b", 0));  // another key has its own bucket
  EXPECT_FALSE(limiter.Take("a", 1000));  // refilled
  EXPECT_TRUE(limiter.Take("a", 1000));
}

TEST(RateLimiter, UnlimitedNeverRefuses) {
  RateLimiter limiter(RateLimit{0, 0}, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Take("a", 0));
  EXPECT_EQ(limiter.Size(), 0u);
}

TEST(RateLimiter, BoundedUnderManyKeys) {
  RateLimiter limiter(RateLimit{1, 1}, 1000);
  // An attacker with a million addresses, all at one instant: the table never grows past the
  // bound, and the victim it evicted only gets a fresh bucket.
  EXPECT_FALSE(limiter.Take("victim", 0));
  EXPECT_TRUE(limiter.Take("victim", 0));
  for (int i = 0; i < 1000000; ++i) {
    (void)limiter.Take("attacker-" + std::to_string(i), 0);
    ASSERT_LE(limiter.Size(), 1000u);
  }
  EXPECT_FALSE(limiter.Take("victim", 0));
}

TEST(RateLimiter, IdleBucketsAreForgotten) {
  RateLimiter limiter(RateLimit{10, 1}, 1000);
  for (int i = 0; i < 500; ++i) (void)limiter.Take("k" + std::to_string(i), 0);
  EXPECT_EQ(limiter.Size(), 500u);
  // A second later every bucket has refilled; a few calls sweep them from the cold end.
  for (int i = 0; i < 300; ++i) (void)limiter.Take("hot", 1000 + i * 200);
  EXPECT_LE(limiter.Size(), 2u);
}

TEST(ClientKey, AddressesAndNetworks) {
  EXPECT_EQ(ClientKey("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(ClientKey("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ClientKey("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientKey("2001:db8:1:2:ffff::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientKey(""), "");
}

}  // namespace
}  // namespace agentpay
