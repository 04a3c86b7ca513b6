// A bounded table of token buckets (core/rate_limit.h), one per key (an account, a payer, a client
// address), safe to share between threads. The time comes from the caller (Timers::MonotonicMs).
// Memory is bounded by max_buckets: past it the least recently used bucket is forgotten, which
// only ever gives that key a fresh (full) bucket, so an attacker with many keys can neither grow
// the table nor empty anyone else's bucket.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/rate_limit.h"
#include "gateway/config.h"
#include "http/message.h"

namespace agentpay {

class RateLimiter {
 public:
  // Precondition: limit is unlimited or valid for TakeToken; max_buckets >= 1.
  RateLimiter(RateLimit limit, size_t max_buckets);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes a token from `key`'s bucket: nullopt when allowed, else the whole seconds (>= 1) the
  // caller should wait (Retry-After).
  std::optional<int64_t> Take(std::string_view key, int64_t now_ms);
  size_t Size();
  const RateLimit& limit() const { return limit_; }

 private:
  struct Entry {
    std::string key;
    TokenBucket bucket;
  };
  const RateLimit limit_;
  const size_t max_buckets_;
  std::mutex mutex_;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// The gateway's three tables.
struct RateLimiters {
  explicit RateLimiters(const RateLimitConfig& config)
      : client(config.per_client, config.max_buckets),
        account(config.per_account, config.max_buckets),
        payer(config.per_payer, config.max_buckets) {}
  RateLimiter client;   // keyed by ClientKey(remote address)
  RateLimiter account;  // keyed by account id
  RateLimiter payer;    // keyed by lower-case payer address
};

// 429 limit_exceeded with Retry-After; `who` names the bucket ("client address", "account", ...).
HttpResponse TooManyRequests(int64_t retry_after_s, std::string_view who);

}  // namespace agentpay
