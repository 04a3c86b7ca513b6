// When the gateway looks for a settlement's receipt after sending it (issue 14 item 6: a hosted
// node bills each look). A chain answers in its own rhythm: Anvil mines at once, an L2 every
// second or two. Fixed delays either look too often on a slow chain (0, 20, 60, 140, 300, 550 ms,
// ... cost seven looks for a one-second block) or answer late on a fast one. So the looks follow
// what receipts took lately: an exponentially weighted mean of the send-to-receipt delay, each
// sample the middle of the interval in which the receipt appeared (between the last empty look,
// or the send, and the look that found it; on a chain that mines at once the first look comes at
// once). The first look comes at 0.9 of the mean; the next ones a quarter of the mean apart,
// growing by half each time (a wrong estimate costs few looks), within [kMinGapMs, kMaxGapMs].
// Pure: delays come in as arguments; not thread-safe.
#pragma once

#include <cstdint>

namespace agentpay {

class ReceiptPolls {
 public:
  static constexpr int64_t kMinGapMs = 10;
  static constexpr int64_t kMaxGapMs = 1000;
  static constexpr int64_t kMaxFirstLookMs = 5000;

  // initial_mean_ms: the estimate before any receipt was seen. Precondition: > 0.
  explicit ReceiptPolls(int64_t initial_mean_ms = 20);

  // Milliseconds from the send to the first look.
  int64_t FirstLookMs() const;
  // Milliseconds from the `looks`-th empty look (>= 1) to the next one.
  int64_t NextGapMs(int looks) const;
  // A look `found_ms` after the send found the receipt; the look before it, `previous_ms` after
  // the send, found none (-1: it was the first look). Negative or absurd values are clamped.
  void Found(int64_t previous_ms, int64_t found_ms);
  int64_t mean_ms() const { return mean_ms_; }

 private:
  int64_t mean_ms_;
};

}  // namespace agentpay
