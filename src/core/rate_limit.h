// Token buckets for the gateway's rate limits (issue 13 item 5): per account, per payer and per
// client address. Pure: the caller passes the time (Timers::MonotonicMs) and keeps the state; the
// table of buckets and its lock live in the shell (gateway/rate_limiter.h).
#pragma once

#include <cstdint>

namespace agentpay {

// A rate of `per_second` tokens a second, at most `burst` saved up. per_second == 0: no limit.
struct RateLimit {
  int64_t per_second = 0;
  int64_t burst = 0;
  bool unlimited() const { return per_second == 0; }
  bool operator==(const RateLimit&) const = default;
};

// The largest rate and burst accepted (a bucket's arithmetic stays far from int64 overflow).
inline constexpr int64_t kMaxRatePerSecond = 1000000000;
inline constexpr int64_t kMaxRateBurst = 1000000000;

// One bucket. Tokens are counted in thousandths so that a rate under 1000 a second still refills
// between two requests a millisecond apart; a new bucket is full.
struct TokenBucket {
  int64_t milli_tokens = 0;
  int64_t updated_ms = 0;
};

TokenBucket FullBucket(const RateLimit& limit, int64_t now_ms);

struct TakeDecision {
  bool allowed = false;
  int64_t retry_after_s = 0;  // when refused: whole seconds until a token, at least 1
  TokenBucket bucket;         // the state to keep (refills counted even when refused)
};

// Takes one token if there is one. Preconditions: 0 < limit.per_second <= kMaxRatePerSecond,
// 1 <= limit.burst <= kMaxRateBurst. A clock that went back (now_ms < bucket.updated_ms) refills
// nothing.
TakeDecision TakeToken(const TokenBucket& bucket, const RateLimit& limit, int64_t now_ms);

// The bucket after `count` tokens were taken elsewhere (other gateways of the cluster, issue 36
// item 8): refilled to now_ms, then `count` tokens less, down to at most one burst in debt (so that
// a key drained elsewhere waits its refill here too, and no arithmetic overflows). Preconditions:
// as TakeToken; count >= 0.
TokenBucket DebitTokens(const TokenBucket& bucket, const RateLimit& limit, int64_t count,
                        int64_t now_ms);

// Tokens of one key and window that other gateways took (issue 36 item 8): the store's total now,
// less the total this gateway saw last and what it just added itself; never negative (a total
// seen out of order takes nothing back).
int64_t UsageElsewhere(int64_t total, int64_t seen, int64_t own);

// Whether the bucket would be full at now_ms, i.e. equal to a new one: such a bucket can be
// forgotten without changing any later decision.
bool BucketIsFull(const TokenBucket& bucket, const RateLimit& limit, int64_t now_ms);

}  // namespace agentpay
