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
#include <utility>
#include <vector>

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

  // Sharing with the other gateways of the database (gateway/rate_sync.h). With tracking on, every
  // token taken is counted per key until TakeUsage hands the counts over (at most max_buckets keys
  // between two calls; past that a new key's tokens are not shared, only counted here).
  void TrackUsage() { track_ = true; }
  std::vector<std::pair<std::string, int64_t>> TakeUsage();
  // `count` tokens of `key` taken by other gateways (core/rate_limit.h DebitTokens).
  void Debit(std::string_view key, int64_t count, int64_t now_ms);

 private:
  struct Entry {
    std::string key;
    TokenBucket bucket;
  };
  // The key's entry, created full (the least recently used forgotten past max_buckets) and made
  // the most recently used. Precondition: mutex_ held.
  Entry& Touch(std::string_view key, int64_t now_ms);
  const RateLimit limit_;
  const size_t max_buckets_;
  std::mutex mutex_;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  bool track_ = false;
  std::unordered_map<std::string, int64_t> taken_;  // tracking: tokens per key since TakeUsage
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
  // The tables by the kind name rate_usage rows carry ("client", "account", "payer").
  RateLimiter* ByKind(std::string_view kind);
};

// 429 limit_exceeded with Retry-After; `who` names the bucket ("client address", "account", ...).
HttpResponse TooManyRequests(int64_t retry_after_s, std::string_view who);

}  // namespace agentpay
