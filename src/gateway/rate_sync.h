// Rate limits shared by the gateways of one database (issue 36 item 8). Each gateway decides on
// its own token buckets (gateway/rate_limiter.h), with no database round trip per request, and
// every --rate-limit-sync-ms exchanges counts with the others through the store: the tokens it
// took since the last exchange are added to the key's row of the current window (rate_usage), and
// what the other gateways added since are debited from its own buckets. A client over its rate on
// one gateway is over it on all within about two exchanges (docs/deployment.md gives the excess).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "core/result.h"
#include "gateway/rate_limiter.h"
#include "store/store.h"

namespace agentpay {

struct RateSyncLimits {
  int64_t window_ms = 60000;  // rows are per key and window; older than the previous one: pruned
  int max_rows = 10000;       // rows read per exchange (the busiest keys of the cluster)
  // Rows updated this long before the last exchange are read again: other gateways' clocks may be
  // behind this one's by up to this much (a row read twice debits nothing twice).
  int64_t reread_margin_ms = 5000;
};

class RateSync {
 public:
  // `store` and `limiters` outlive this; Run is called from one thread at a time.
  RateSync(Store& store, RateLimiters& limiters, RateSyncLimits limits = {});

  // One exchange. `wall_ms`: the wall clock (windows, comparable between gateways);
  // `monotonic_ms`: the buckets' clock (Timers::MonotonicMs). On a store error this gateway's
  // counts are lost (its own buckets are unchanged) and the next exchange goes on.
  Status Run(int64_t wall_ms, int64_t monotonic_ms);

 private:
  using RowKey = std::tuple<std::string, std::string, int64_t>;  // kind, key, window
  Store& store_;
  RateLimiters& limiters_;
  const RateSyncLimits limits_;
  std::map<RowKey, int64_t> seen_;  // the total of each row this gateway saw last
  int64_t last_read_ms_ = -1;       // wall_ms of the last exchange; -1 before the first
  int64_t pruned_window_ = -1;
};

}  // namespace agentpay
