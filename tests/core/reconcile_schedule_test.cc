// The reconciler's pacing: per-operation backoff (doubling, capped, brought forward to the
// authorization's expiry), the bounded schedule, and the RPC token bucket.
#include "core/reconcile_schedule.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

constexpr int64_t kNoExpiry = 0;

TEST(ReconcileSchedule, BackoffDoublesUpToTheCap) {
  const ReconcileBackoff backoff{1000, 60000};
  EXPECT_EQ(NextLookMs(backoff, 1, 0, kNoExpiry), 1000);
  EXPECT_EQ(NextLookMs(backoff, 2, 0, kNoExpiry), 2000);
  EXPECT_EQ(NextLookMs(backoff, 6, 0, kNoExpiry), 32000);
  EXPECT_EQ(NextLookMs(backoff, 7, 0, kNoExpiry), 60000);
  EXPECT_EQ(NextLookMs(backoff, 1000, 5, kNoExpiry), 60005);
}

TEST(ReconcileSchedule, ExpiryBringsTheNextLookForward) {
  const ReconcileBackoff backoff{1000, 60000};
  EXPECT_EQ(NextLookMs(backoff, 7, 100000, 130000), 130000);  // expires before the backoff ends
  EXPECT_EQ(NextLookMs(backoff, 1, 100000, 130000), 101000);  // backoff sooner
  // Just expired (within max_delay_ms of it): looked at again after the initial delay, whatever
  // the backoff, since a decision is imminent; long expired and still unresolved: plain backoff.
  EXPECT_EQ(NextLookMs(backoff, 7, 100000, 90000), 101000);
  EXPECT_EQ(NextLookMs(backoff, 7, 100000, 100000), 101000);
  EXPECT_EQ(NextLookMs(backoff, 7, 160000, 100000), 220000);
}

TEST(ReconcileSchedule, AnOperationJustLookedAtIsNotDueOnTheNextPass) {
  ReconcileSchedule schedule({1000, 8000}, 10);
  EXPECT_TRUE(schedule.Due("op_a", 0));  // never looked at
  schedule.Looked("op_a", 0, kNoExpiry);
  EXPECT_FALSE(schedule.Due("op_a", 999));
  EXPECT_TRUE(schedule.Due("op_a", 1000));
  schedule.Looked("op_a", 1000, kNoExpiry);
  EXPECT_FALSE(schedule.Due("op_a", 2999));
  EXPECT_TRUE(schedule.Due("op_a", 3000));
  // Passes every 1000 ms for a minute: looks at 0, 1, 3, 7, 15, then every 8 s.
  ReconcileSchedule paced({1000, 8000}, 10);
  int looks = 0;
  for (int64_t now = 0; now < 60000; now += 1000) {
    if (paced.Due("op_b", now)) {
      paced.Looked("op_b", now, kNoExpiry);
      ++looks;
    }
  }
  EXPECT_EQ(looks, 4 + 6);  // 0, 1, 3, 7 s; then 15, 23, 31, 39, 47, 55 s
  schedule.Forget("op_a");
  EXPECT_TRUE(schedule.Due("op_a", 1001));
}

TEST(ReconcileSchedule, RoundsDropOperationsNoLongerListed) {
  ReconcileSchedule schedule({1000, 8000}, 10);
  schedule.Looked("op_a", 0, kNoExpiry);
  schedule.Looked("op_b", 0, kNoExpiry);
  schedule.EndRound();  // both seen this round
  EXPECT_EQ(schedule.size(), 2u);
  schedule.Passed("op_a");  // the next round lists only op_a (op_b resolved elsewhere)
  schedule.EndRound();
  EXPECT_EQ(schedule.size(), 1u);
  EXPECT_FALSE(schedule.Due("op_a", 10));
}

TEST(ReconcileSchedule, BoundedEntries) {
  ReconcileSchedule schedule({1000, 8000}, 2);
  schedule.Looked("op_a", 0, kNoExpiry);
  schedule.Looked("op_b", 0, kNoExpiry);
  schedule.Looked("op_c", 0, kNoExpiry);  // not remembered: always due
  EXPECT_EQ(schedule.size(), 2u);
  EXPECT_TRUE(schedule.Due("op_c", 1));
  EXPECT_FALSE(schedule.Due("op_b", 1));
}

TEST(RpcBudget, NeverMoreThanTheRatePlusOneSecondsBurst) {
  RpcBudget budget(20, 0);
  int64_t taken = 0;
  // A caller that takes 4 calls whenever it can, asking every 10 ms for 10 s.
  for (int64_t now = 0; now <= 10000; now += 10) {
    while (budget.TryTake(4, now)) taken += 4;
  }
  EXPECT_LE(taken, 20 * 11);
  EXPECT_GE(taken, 20 * 10 - 4);
  EXPECT_FALSE(budget.TryTake(21, 20000));  // more than a second's worth never fits
  EXPECT_TRUE(budget.TryTake(20, 20000));
  EXPECT_FALSE(budget.TryTake(1, 20000));
  EXPECT_FALSE(budget.TryTake(1, 19000));  // a clock stepping back refills nothing
  EXPECT_TRUE(budget.TryTake(1, 20050));
}

}  // namespace
}  // namespace agentpay
