// See rate_limiter.h.
#include "gateway/rate_limiter.h"

#include "core/check.h"

namespace agentpay {

RateLimiter::RateLimiter(RateLimit limit, size_t max_buckets)
    : limit_(limit), max_buckets_(max_buckets) {
  AGENTPAY_CHECK(max_buckets_ >= 1);
  if (!limit_.unlimited()) (void)FullBucket(limit_, 0);  // checks the limit's range
}

std::optional<int64_t> RateLimiter::Take(std::string_view key, int64_t now_ms) {
  if (limit_.unlimited()) return std::nullopt;
  std::lock_guard lock(mutex_);
  auto found = index_.find(std::string(key));
  if (found == index_.end()) {
    if (index_.size() >= max_buckets_) {
      // The least recently used goes. Usually it has refilled and is the same as a new bucket;
      // if not, its key merely starts afresh later (documented in docs/protocol.md).
      index_.erase(recent_.back().key);
      recent_.pop_back();
    }
    recent_.push_front(Entry{std::string(key), FullBucket(limit_, now_ms)});
    found = index_.emplace(recent_.front().key, recent_.begin()).first;
  } else if (found->second != recent_.begin()) {
    recent_.splice(recent_.begin(), recent_, found->second);
  }
  Entry& entry = *found->second;
  TakeDecision decision = TakeToken(entry.bucket, limit_, now_ms);
  entry.bucket = decision.bucket;
  // Full buckets at the cold end carry no information: forget them, a few per call.
  for (int i = 0; i < 2 && recent_.size() > 1; ++i) {
    Entry& oldest = recent_.back();
    if (!BucketIsFull(oldest.bucket, limit_, now_ms)) break;
    index_.erase(oldest.key);
    recent_.pop_back();
  }
  if (decision.allowed) return std::nullopt;
  return decision.retry_after_s;
}

size_t RateLimiter::Size() {
  std::lock_guard lock(mutex_);
  return index_.size();
}

HttpResponse TooManyRequests(int64_t retry_after_s, std::string_view who) {
  HttpResponse response =
      ProblemResponse(429, ProblemCode::kLimitExceeded,
                      "rate limit of this " + std::string(who) + " exceeded; retry after " +
                          std::to_string(retry_after_s) + " s");
  response.SetHeader("Retry-After", std::to_string(retry_after_s));
  return response;
}

}  // namespace agentpay
