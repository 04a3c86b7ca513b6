// See rate_limit.h.
#include "core/rate_limit.h"

#include <algorithm>

#include "core/check.h"

namespace agentpay {
namespace {

constexpr int64_t kMilli = 1000;

void CheckLimit(const RateLimit& limit) {
  AGENTPAY_CHECK(limit.per_second > 0 && limit.per_second <= kMaxRatePerSecond);
  AGENTPAY_CHECK(limit.burst >= 1 && limit.burst <= kMaxRateBurst);
}

// The bucket's content at now_ms. per_second tokens a second are per_second thousandths a ms.
int64_t Refilled(const TokenBucket& bucket, const RateLimit& limit, int64_t now_ms) {
  const int64_t capacity = limit.burst * kMilli;
  const int64_t missing = capacity - std::min(bucket.milli_tokens, capacity);
  const int64_t elapsed_ms = std::max<int64_t>(0, now_ms - bucket.updated_ms);
  // Past this many ms the bucket is full whatever it held; the clamp keeps the product small.
  const int64_t fill_ms = missing / limit.per_second + 1;
  const int64_t gained = std::min(elapsed_ms, fill_ms) * limit.per_second;
  return std::min(capacity, bucket.milli_tokens + gained);
}

}  // namespace

TokenBucket FullBucket(const RateLimit& limit, int64_t now_ms) {
  CheckLimit(limit);
  return TokenBucket{limit.burst * kMilli, now_ms};
}

TakeDecision TakeToken(const TokenBucket& bucket, const RateLimit& limit, int64_t now_ms) {
  CheckLimit(limit);
  TakeDecision decision;
  decision.bucket.milli_tokens = Refilled(bucket, limit, now_ms);
  decision.bucket.updated_ms = std::max(now_ms, bucket.updated_ms);
  if (decision.bucket.milli_tokens >= kMilli) {
    decision.allowed = true;
    decision.bucket.milli_tokens -= kMilli;
    return decision;
  }
  // per_second thousandths a ms: the ms until a whole token, rounded up, then to seconds.
  const int64_t wait_ms =
      (kMilli - decision.bucket.milli_tokens + limit.per_second - 1) / limit.per_second;
  decision.retry_after_s = std::max<int64_t>(1, (wait_ms + 999) / 1000);
  return decision;
}

TokenBucket DebitTokens(const TokenBucket& bucket, const RateLimit& limit, int64_t count,
                        int64_t now_ms) {
  CheckLimit(limit);
  AGENTPAY_CHECK(count >= 0);
  TokenBucket debited;
  debited.milli_tokens = Refilled(bucket, limit, now_ms);
  debited.updated_ms = std::max(now_ms, bucket.updated_ms);
  const int64_t floor = -limit.burst * kMilli;
  // milli_tokens - count * kMilli, never below the floor (count may be as large as it likes).
  const int64_t room = (debited.milli_tokens - floor) / kMilli;
  debited.milli_tokens = count >= room ? floor : debited.milli_tokens - count * kMilli;
  return debited;
}

int64_t UsageElsewhere(int64_t total, int64_t seen, int64_t own) {
  AGENTPAY_CHECK(total >= 0 && seen >= 0 && own >= 0);
  return std::max<int64_t>(0, total - seen - own);
}

bool BucketIsFull(const TokenBucket& bucket, const RateLimit& limit, int64_t now_ms) {
  CheckLimit(limit);
  return Refilled(bucket, limit, now_ms) >= limit.burst * kMilli;
}

}  // namespace agentpay
