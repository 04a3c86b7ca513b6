// See rate_limiter.h.
#include "gateway/rate_limiter.h"

#include "core/check.h"

namespace agentpay {

RateLimiter::RateLimiter(RateLimit limit, size_t max_buckets)
    : limit_(limit), max_buckets_(max_buckets) {
  AGENTPAY_CHECK(max_buckets_ >= 1);
  if (!limit_.unlimited()) (void)FullBucket(limit_, 0);  // checks the limit's range
}

RateLimiter::Entry& RateLimiter::Touch(std::string_view key, int64_t now_ms) {
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
  return *found->second;
}

std::optional<int64_t> RateLimiter::Take(std::string_view key, int64_t now_ms) {
  if (limit_.unlimited()) return std::nullopt;
  std::lock_guard lock(mutex_);
  Entry& entry = Touch(key, now_ms);
  TakeDecision decision = TakeToken(entry.bucket, limit_, now_ms);
  entry.bucket = decision.bucket;
  if (decision.allowed && track_) {
    if (auto counted = taken_.find(entry.key); counted != taken_.end()) {
      ++counted->second;
    } else if (taken_.size() < max_buckets_) {
      taken_.emplace(entry.key, 1);
    }
  }
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

std::vector<std::pair<std::string, int64_t>> RateLimiter::TakeUsage() {
  std::unordered_map<std::string, int64_t> taken;
  {
    std::lock_guard lock(mutex_);
    taken.swap(taken_);
  }
  return {taken.begin(), taken.end()};
}

void RateLimiter::Debit(std::string_view key, int64_t count, int64_t now_ms) {
  if (limit_.unlimited() || count <= 0) return;
  std::lock_guard lock(mutex_);
  Entry& entry = Touch(key, now_ms);
  entry.bucket = DebitTokens(entry.bucket, limit_, count, now_ms);
}

RateLimiter* RateLimiters::ByKind(std::string_view kind) {
  if (kind == "client") return &client;
  if (kind == "account") return &account;
  if (kind == "payer") return &payer;
  return nullptr;
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
