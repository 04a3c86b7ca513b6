// Wallet moves keep the invariants of CONTRACT §4 and refuse anything that would break them.
#include "core/wallet.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

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

// The names are what the ledger stores, the postings JSON and the trace show and the books' SQL
// sums by: each kind has exactly the name it had as a string, and every name reads back as it.
TEST(Wallet, MoveKindNamesRoundTrip) {
  const std::vector<std::pair<MoveKind, std::string_view>> expected = {
      {MoveKind::kDeposit, "deposit"},
      {MoveKind::kHold, "hold"},
      {MoveKind::kCapture, "capture"},
      {MoveKind::kRelease, "release"},
      {MoveKind::kRefund, "refund"}};
  ASSERT_EQ(kMoveKinds.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(kMoveKinds[i], expected[i].first);  // the list names every enumerator, in order
    EXPECT_EQ(MoveKindName(expected[i].first), expected[i].second);
    EXPECT_EQ(ParseMoveKind(expected[i].second), expected[i].first);
  }
  for (std::string_view unknown : {"", "Hold", "hold ", "withdrawal", "wallet"}) {
    EXPECT_FALSE(ParseMoveKind(unknown).has_value()) << unknown;
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

// MoveSucceedsWhateverIsUndone, row by row of its table (wallet.h).
TEST(UnconfirmedMoves, EachRowOfTheTable) {
  const Balances b{1000, 100, 300};  // available 600
  UnconfirmedGains none;
  UnconfirmedGains gains{50, 40, 30};
  // deposit: decided on the balances as they are.
  EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kDeposit, 5));
  EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kDeposit,
                                            std::numeric_limits<int64_t>::max()));  // overflows
  // hold: the available balance less what undoing could take from it.
  EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, none, MoveKind::kHold, 600));
  EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kHold, 550));
  EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kHold, 551));
  // capture and release: what is held less what undoing could take from it.
  for (MoveKind kind : {MoveKind::kCapture, MoveKind::kRelease}) {
    EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, gains, kind, 260));
    EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, gains, kind, 261));
    EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, none, kind, 300));
  }
  // refund: what is captured less what undoing could take from it.
  EXPECT_TRUE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kRefund, 70));
  EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, gains, MoveKind::kRefund, 71));
  // No move of nothing, certain or not.
  for (MoveKind kind : {MoveKind::kDeposit, MoveKind::kHold, MoveKind::kCapture, MoveKind::kRelease,
                        MoveKind::kRefund}) {
    EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, none, kind, 0));
    EXPECT_FALSE(MoveSucceedsWhateverIsUndone(b, none, kind, -1));
  }
}

// Gains count only what a change added: a hold takes from available and adds to held; a
// release gives available back; a capture moves held to captured; a deposit adds available.
TEST(UnconfirmedMoves, GainsCountWhatEachChangeAdded) {
  UnconfirmedGains gains;
  gains.Add({0, 0, 10});  // a hold of 10
  EXPECT_EQ(gains.available, 0);
  EXPECT_EQ(gains.held, 10);
  gains.Add({0, 0, -7});  // a release of 7
  EXPECT_EQ(gains.available, 7);
  EXPECT_EQ(gains.held, 10);
  gains.Add({0, 5, -5});  // a capture of 5
  EXPECT_EQ(gains.available, 7);
  EXPECT_EQ(gains.captured, 5);
  gains.Add({20, 0, 0});  // a deposit of 20
  EXPECT_EQ(gains.available, 27);
  gains.Add({std::numeric_limits<int64_t>::max(), 0, 0});  // too much to count: saturates
  EXPECT_EQ(gains.available, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(MoveSucceedsWhateverIsUndone({100, 0, 0}, gains, MoveKind::kHold, 1));
}

// Against every subset: a move judged to succeed whatever is undone does succeed on the balances
// left by undoing any set of the unconfirmed changes before it (random changes of valid moves).
TEST(UnconfirmedMoves, AMoveJudgedSafeSucceedsWhateverSubsetIsUndone) {
  std::mt19937 rng(12345);
  const MoveKind kinds[] = {MoveKind::kDeposit, MoveKind::kHold, MoveKind::kCapture,
                            MoveKind::kRelease, MoveKind::kRefund};
  int judged_safe = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Balances start{500, 100, 200};
    Balances current = start;
    std::vector<Balances> changes;
    UnconfirmedGains gains;
    // Up to 6 unconfirmed decisions, each one move that was itself judged safe.
    const int count = static_cast<int>(rng() % 7);
    for (int i = 0; i < count; ++i) {
      const MoveKind kind = kinds[rng() % 5];
      const int64_t amount = 1 + static_cast<int64_t>(rng() % 120);
      if (!MoveSucceedsWhateverIsUndone(current, gains, kind, amount)) continue;
      Balances after = current;
      ASSERT_EQ(ApplyMove(&after, kind, amount), MoveOutcome::kOk);
      const Balances change{after.deposited - current.deposited, after.captured - current.captured,
                            after.held - current.held};
      changes.push_back(change);
      gains.Add(change);
      current = after;
    }
    const MoveKind kind = kinds[rng() % 5];
    const int64_t amount = 1 + static_cast<int64_t>(rng() % 150);
    if (!MoveSucceedsWhateverIsUndone(current, gains, kind, amount)) continue;
    ++judged_safe;
    for (uint32_t undone = 0; undone < (1u << changes.size()); ++undone) {
      Balances left = current;
      for (size_t i = 0; i < changes.size(); ++i) {
        if ((undone & (1u << i)) == 0) continue;
        left.deposited -= changes[i].deposited;
        left.captured -= changes[i].captured;
        left.held -= changes[i].held;
      }
      ASSERT_TRUE(left.Valid()) << trial;
      EXPECT_EQ(ApplyMove(&left, kind, amount), MoveOutcome::kOk)
          << "trial " << trial << " undone " << undone;
    }
  }
  EXPECT_GT(judged_safe, 1000);  // the check is not vacuous
}

}  // namespace
}  // namespace agentpay
