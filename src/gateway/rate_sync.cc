// See rate_sync.h.
#include "gateway/rate_sync.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/rate_limit.h"

namespace agentpay {

RateSync::RateSync(Store& store, RateLimiters& limiters, RateSyncLimits limits)
    : store_(store), limiters_(limiters), limits_(limits) {
  AGENTPAY_CHECK(limits_.window_ms > 0 && limits_.max_rows > 0 && limits_.reread_margin_ms >= 0);
  limiters_.client.TrackUsage();
  limiters_.account.TrackUsage();
  limiters_.payer.TrackUsage();
}

Status RateSync::Run(int64_t wall_ms, int64_t monotonic_ms) {
  const int64_t window = wall_ms - wall_ms % limits_.window_ms;
  const int64_t oldest_window = window - limits_.window_ms;
  std::vector<RateUsageRecord> own;
  for (const char* kind : {"client", "account", "payer"}) {
    for (auto& [key, count] : limiters_.ByKind(kind)->TakeUsage()) {
      own.push_back({kind, std::move(key), window, count});
    }
  }
  const bool first = last_read_ms_ < 0;
  // The first exchange reads every row of the two windows: what was taken before this gateway
  // started is its baseline, not debited.
  const int64_t since = first ? 0 : last_read_ms_ - limits_.reread_margin_ms;
  const bool prune = window != pruned_window_;
  std::vector<int64_t> totals;
  std::vector<RateUsageRecord> rows;
  auto exchange = [&](Transaction& tx) -> Status {
    if (!own.empty()) {
      auto added = tx.AddRateUsage(own, wall_ms);
      if (!added.ok()) return added.status();
      totals = std::move(*added);
    }
    auto read = tx.ListRateUsage(oldest_window, since, limits_.max_rows);
    if (!read.ok()) return read.status();
    rows = std::move(*read);
    return prune ? tx.PruneRateUsage(oldest_window) : Status::Ok();
  };
  // An idle gateway only reads: no commit every exchange.
  Status written = own.empty() && !prune ? store_.ReadUnsynced(exchange) : store_.Write(exchange);
  if (!written.ok()) return written;
  last_read_ms_ = wall_ms;
  if (prune) pruned_window_ = window;
  std::erase_if(seen_, [&](const auto& entry) { return std::get<2>(entry.first) < oldest_window; });
  // Ours first: the total after our addition, less what we added and what we had seen.
  for (size_t i = 0; i < own.size(); ++i) {
    RowKey row{own[i].kind, own[i].key, own[i].window_start_ms};
    int64_t& seen = seen_[row];
    const int64_t elsewhere = UsageElsewhere(totals[i], seen, own[i].count);
    if (!first) limiters_.ByKind(own[i].kind)->Debit(own[i].key, elsewhere, monotonic_ms);
    seen = std::max(seen, totals[i]);
  }
  for (const RateUsageRecord& read : rows) {
    RateLimiter* limiter = limiters_.ByKind(read.kind);
    if (limiter == nullptr) continue;  // a kind of a newer version
    int64_t& seen = seen_[{read.kind, read.key, read.window_start_ms}];
    const int64_t elsewhere = UsageElsewhere(read.count, seen, 0);
    if (!first) limiter->Debit(read.key, elsewhere, monotonic_ms);
    seen = std::max(seen, read.count);
  }
  return Status::Ok();
}

}  // namespace agentpay
