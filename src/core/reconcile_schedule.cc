// See reconcile_schedule.h.
#include "core/reconcile_schedule.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace agentpay {

int64_t NextLookMs(const ReconcileBackoff& backoff, int looks, int64_t now_ms, int64_t expires_ms) {
  AGENTPAY_CHECK(looks >= 1 && backoff.initial_delay_ms > 0 &&
                 backoff.initial_delay_ms <= backoff.max_delay_ms);
  int64_t delay = backoff.initial_delay_ms;
  for (int i = 1; i < looks && delay < backoff.max_delay_ms; ++i) delay *= 2;
  delay = std::min(delay, backoff.max_delay_ms);
  const int64_t next = now_ms + delay;
  if (expires_ms > now_ms && expires_ms < next) return expires_ms;
  if (expires_ms > 0 && now_ms >= expires_ms && now_ms - expires_ms < backoff.max_delay_ms) {
    return now_ms + backoff.initial_delay_ms;
  }
  return next;
}

ReconcileSchedule::ReconcileSchedule(ReconcileBackoff backoff, size_t max_entries)
    : backoff_(backoff), max_entries_(max_entries) {
  AGENTPAY_CHECK(backoff_.initial_delay_ms > 0 &&
                 backoff_.initial_delay_ms <= backoff_.max_delay_ms);
}

bool ReconcileSchedule::Due(std::string_view id, int64_t now_ms) const {
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.next_ms <= now_ms;
}

void ReconcileSchedule::Looked(const std::string& id, int64_t now_ms, int64_t expires_ms) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    if (entries_.size() >= max_entries_) return;
    it = entries_.emplace(id, Entry{}).first;
  }
  Entry& entry = it->second;
  entry.looks = std::min(entry.looks + 1, 62);
  entry.next_ms = NextLookMs(backoff_, entry.looks, now_ms, expires_ms);
  entry.listed = true;
}

void ReconcileSchedule::Forget(std::string_view id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) entries_.erase(it);
}

void ReconcileSchedule::Passed(std::string_view id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.listed = true;
}

void ReconcileSchedule::EndRound() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.listed) {
      it = entries_.erase(it);
    } else {
      it->second.listed = false;
      ++it;
    }
  }
}

RpcBudget::RpcBudget(int64_t per_second, int64_t now_ms)
    : per_second_(per_second), milli_tokens_(per_second * 1000), last_ms_(now_ms) {
  AGENTPAY_CHECK(per_second > 0 && per_second <= std::numeric_limits<int64_t>::max() / 1000);
}

void RpcBudget::Refill(int64_t now_ms) {
  if (now_ms <= last_ms_) return;  // a clock that stepped back refills nothing
  const int64_t capacity = per_second_ * 1000;
  const int64_t elapsed = std::min(now_ms - last_ms_, int64_t{1000});
  milli_tokens_ = std::min(capacity, milli_tokens_ + elapsed * per_second_);
  last_ms_ = now_ms;
}

bool RpcBudget::TryTake(int64_t calls, int64_t now_ms) {
  AGENTPAY_CHECK(calls >= 0);
  Refill(now_ms);
  if (calls > per_second_ || milli_tokens_ < calls * 1000) return false;
  milli_tokens_ -= calls * 1000;
  return true;
}

}  // namespace agentpay
