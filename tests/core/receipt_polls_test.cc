// When the gateway looks for a receipt (core/receipt_polls.h): learned from the receipts seen.
#include "core/receipt_polls.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

// Looks for a receipt that appears `delay_ms` after the send, as the gateway does; returns the
// number of looks and records the find.
int LooksFor(ReceiptPolls& polls, int64_t delay_ms, int64_t* found_at = nullptr) {
  int64_t at = polls.FirstLookMs();
  int64_t previous = -1;
  int looks = 1;
  while (at < delay_ms) {
    previous = at;
    at += polls.NextGapMs(looks);
    ++looks;
  }
  polls.Found(previous, at);
  if (found_at != nullptr) *found_at = at;
  return looks;
}

// The old fixed schedule (20, 60, 140, 300, 550, 800, ... ms) took seven looks for a receipt a
// second after the send. Learned, a chain with one-second blocks (receipts 0-1000 ms after the
// send) costs about two looks a payment, and a receipt is seen within a fraction of a block.
TEST(ReceiptPolls, ASlowChainCostsAboutTwoLooks) {
  ReceiptPolls polls;
  for (int i = 0; i < 50; ++i) LooksFor(polls, 50 + (i * 397) % 950);  // warm up
  int looks = 0;
  int64_t late = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t delay = 50 + (i * 397) % 950;
    int64_t found_at = 0;
    looks += LooksFor(polls, delay, &found_at);
    late += found_at - delay;
  }
  EXPECT_LE(looks, 2.6 * 200) << "mean " << polls.mean_ms();
  EXPECT_LE(late / 200, 250) << "ms late on average";
}

// A chain that mines at once: the first look comes (nearly) at once and finds it.
TEST(ReceiptPolls, AnInstantChainIsLookedAtOnceAtOnce) {
  ReceiptPolls polls;
  for (int i = 0; i < 30; ++i) LooksFor(polls, 1);
  EXPECT_LE(polls.FirstLookMs(), 2);
  EXPECT_EQ(LooksFor(polls, 1), 1);
}

// The rhythm changes (a node under load, a slower chain): the estimate follows within a few
// receipts, and the looks in between are few because the gaps grow.
TEST(ReceiptPolls, TheEstimateFollowsTheChain) {
  ReceiptPolls polls;
  for (int i = 0; i < 30; ++i) LooksFor(polls, 2);
  EXPECT_LE(LooksFor(polls, 2000), 14) << "a wrong estimate costs few looks";
  for (int i = 0; i < 20; ++i) LooksFor(polls, 2000);
  EXPECT_GE(polls.FirstLookMs(), 1200);
  EXPECT_LE(LooksFor(polls, 2000), 3);
  for (int i = 0; i < 30; ++i) LooksFor(polls, 40);
  EXPECT_LE(polls.mean_ms(), 60);
}

TEST(ReceiptPolls, GapsGrowAndStayWithinBounds) {
  ReceiptPolls polls(400);
  EXPECT_EQ(polls.FirstLookMs(), 360);
  EXPECT_EQ(polls.NextGapMs(1), 100);
  EXPECT_EQ(polls.NextGapMs(2), 150);
  EXPECT_EQ(polls.NextGapMs(3), 225);
  EXPECT_EQ(polls.NextGapMs(100), ReceiptPolls::kMaxGapMs);
  ReceiptPolls fast(1);
  EXPECT_EQ(fast.NextGapMs(1), ReceiptPolls::kMinGapMs);
  fast.Found(-5, -7);  // clamped, never below 1 ms
  EXPECT_GE(fast.mean_ms(), 1);
  ReceiptPolls slow(1);
  for (int i = 0; i < 200; ++i) slow.Found(1'000'000'000, 2'000'000'000);
  EXPECT_EQ(slow.FirstLookMs(), ReceiptPolls::kMaxFirstLookMs);
}

}  // namespace
}  // namespace agentpay
