#include "core/receipt_polls.h"

#include <algorithm>

#include "core/check.h"

namespace agentpay {
namespace {
constexpr int64_t kMaxMeanMs = 60000;
}  // namespace

ReceiptPolls::ReceiptPolls(int64_t initial_mean_ms) : mean_ms_(initial_mean_ms) {
  AGENTPAY_CHECK(initial_mean_ms > 0);
}

int64_t ReceiptPolls::FirstLookMs() const {
  return std::clamp<int64_t>(mean_ms_ * 9 / 10, 0, kMaxFirstLookMs);
}

int64_t ReceiptPolls::NextGapMs(int looks) const {
  int64_t gap = std::max<int64_t>(mean_ms_ / 4, kMinGapMs);
  for (int i = 1; i < looks && gap < kMaxGapMs; ++i) gap += gap / 2;
  return std::clamp<int64_t>(gap, kMinGapMs, kMaxGapMs);
}

void ReceiptPolls::Found(int64_t previous_ms, int64_t found_ms) {
  found_ms = std::clamp<int64_t>(found_ms, 1, kMaxMeanMs);
  previous_ms = std::clamp<int64_t>(previous_ms, -1, found_ms);
  const int64_t sample = (std::max<int64_t>(previous_ms, 0) + found_ms + 1) / 2;
  // mean += (sample - mean) / 4, rounded so that it can still move by 1 ms.
  const int64_t step = (sample - mean_ms_) / 4;
  mean_ms_ += step != 0 ? step : (sample > mean_ms_ ? 1 : (sample < mean_ms_ ? -1 : 0));
  mean_ms_ = std::clamp<int64_t>(mean_ms_, 1, kMaxMeanMs);
}

}  // namespace agentpay
