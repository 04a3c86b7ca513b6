// Wallet moves keep the invariants of CONTRACT §4 and refuse anything that would break them.
#include "core/wallet.h"

#include <gtest/gtest.h>

#include <random>

namespace agentpay {
namespace {

TEST(Wallet, HoldCaptureRelease) {
  Balances b;
  ASSERT_EQ(ApplyMove(&b, MoveKind::kDeposit, 1000), MoveOutcome::kOk);
  ASSERT_EQ(ApplyMove(&b, MoveKind::kHold, 300), MoveOutcome::kOk);
  EXPECT_EQ(b.available(), 700);
  EXPECT_EQ(b.balance(), 1000);
  ASSERT_EQ(ApplyMove(&b, MoveKind::kCapture, 300), MoveOutcome::kOk);
  EXPECT_EQ(b, (Balances{1000, 300, 0}));
  ASSERT_EQ(ApplyMove(&b, MoveKind::kHold, 200), MoveOutcome::kOk);
  ASSERT_EQ(ApplyMove(&b, MoveKind::kRelease, 200), MoveOutcome::kOk);
  EXPECT_EQ(b, (Balances{1000, 300, 0}));
  EXPECT_EQ(b.available(), 700);
}

TEST(Wallet, RefusalsChangeNothing) {
  Balances b{500, 100, 300};
  const Balances before = b;
  EXPECT_EQ(ApplyMove(&b, MoveKind::kHold, 101), MoveOutcome::kInsufficientFunds);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kCapture, 301), MoveOutcome::kNotHeld);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kRelease, 301), MoveOutcome::kNotHeld);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kDeposit, 0), MoveOutcome::kInvalidAmount);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kHold, -5), MoveOutcome::kInvalidAmount);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kDeposit, INT64_MAX), MoveOutcome::kOverflow);
  EXPECT_EQ(ApplyMove(&b, MoveKind::kRefund, 101), MoveOutcome::kNotCaptured);
  EXPECT_EQ(b, before);
}

TEST(Wallet, RefundReturnsCapturedMoneyToTheBalance) {
  Balances b{1000, 300, 100};
  ASSERT_EQ(ApplyMove(&b, MoveKind::kRefund, 300), MoveOutcome::kOk);
  EXPECT_EQ(b, (Balances{1000, 0, 100}));
  EXPECT_EQ(b.balance(), 1000);
  EXPECT_EQ(b.available(), 900);
}

TEST(Wallet, PostingsNameTwoDifferentAccounts) {
  for (MoveKind kind : {MoveKind::kDeposit, MoveKind::kHold, MoveKind::kCapture,
                        MoveKind::kRelease, MoveKind::kRefund}) {
    Posting posting = PostingFor(kind);
    EXPECT_NE(posting.debit_kind, posting.credit_kind) << MoveKindName(kind);
  }
}

// Any sequence of moves keeps the invariants and conserves money: deposits = balance + captured.
TEST(Wallet, RandomMovesConserveMoney) {
  std::mt19937_64 rng(42);
  Balances b;
  int64_t deposits = 0, captures = 0;
  for (int i = 0; i < 100000; ++i) {
    auto kind = static_cast<MoveKind>(rng() % 5);
    int64_t amount = static_cast<int64_t>(rng() % 1000) - 10;
    Balances before = b;
    MoveOutcome outcome = ApplyMove(&b, kind, amount);
    ASSERT_TRUE(b.Valid());
    if (outcome != MoveOutcome::kOk) {
      ASSERT_EQ(b, before);
      continue;
    }
    if (kind == MoveKind::kDeposit) deposits += amount;
    if (kind == MoveKind::kCapture) captures += amount;
    if (kind == MoveKind::kRefund) captures -= amount;
    ASSERT_EQ(b.balance() + b.captured, deposits);
    ASSERT_EQ(b.captured, captures);
  }
}

}  // namespace
}  // namespace agentpay
