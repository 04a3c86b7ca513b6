// The payer reservation table: a payer funded for k prices gets at most k reservations, the
// in-flight cap, the epoch that refuses a balance read older than a release, and the lapse.
#include "core/payer_reservations.h"

#include <gtest/gtest.h>

#include <limits>

namespace agentpay {
namespace {

constexpr int64_t kNow = 1'800'000'000;
constexpr int64_t kPrice = 1000;
constexpr int64_t kValidBefore = kNow + 120;

PayerReservationLimits Limits(int64_t in_flight = 128, size_t payers = 100) {
  return {in_flight, payers, 30};
}

// Begin + Reserve, as Settler::Check does with the balance it read in between.
ReserveOutcome Take(PayerReservations& table, const std::string& payer, const std::string& nonce,
                    int64_t balance, int64_t now = kNow) {
  ReservationCheck check = table.BeginCheck(payer, now);
  if (check.outcome != ReserveOutcome::kReserved) return check.outcome;
  return table.Reserve(payer, nonce, kPrice, kValidBefore, balance, check.epoch, now);
}

TEST(PayerReservations, FundedForOnePriceGetsOneOfTwenty) {
  PayerReservations table(Limits());
  int reserved = 0;
  for (int i = 0; i < 20; ++i) {
    ReserveOutcome outcome = Take(table, "0xa", "n" + std::to_string(i), kPrice);
    if (outcome == ReserveOutcome::kReserved) {
      ++reserved;
    } else {
      EXPECT_EQ(outcome, ReserveOutcome::kInsufficientBalance);
    }
  }
  EXPECT_EQ(reserved, 1);
  EXPECT_EQ(table.Reserved("0xa"), kPrice);
  // Funded for three prices: three of twenty.
  reserved = 0;
  for (int i = 0; i < 20; ++i) {
    reserved += Take(table, "0xb", "n" + std::to_string(i), 3 * kPrice) == ReserveOutcome::kReserved;
  }
  EXPECT_EQ(reserved, 3);
  EXPECT_EQ(table.Reserved("0xa"), kPrice);  // payers are apart
}

TEST(PayerReservations, ConcurrentChecksSeeEachOthersReservations) {
  PayerReservations table(Limits());
  // Twenty checks begin before any reserves (twenty requests reading the balance at once).
  std::vector<uint64_t> epochs;
  for (int i = 0; i < 20; ++i) {
    ReservationCheck check = table.BeginCheck("0xa", kNow);
    ASSERT_EQ(check.outcome, ReserveOutcome::kReserved);
    epochs.push_back(check.epoch);
  }
  EXPECT_EQ(table.InFlight("0xa"), 20);
  int reserved = 0;
  for (int i = 0; i < 20; ++i) {
    reserved += table.Reserve("0xa", "n" + std::to_string(i), kPrice, kValidBefore, kPrice,
                              epochs[i], kNow) == ReserveOutcome::kReserved;
  }
  EXPECT_EQ(reserved, 1);
  EXPECT_EQ(table.InFlight("0xa"), 1);
}

TEST(PayerReservations, InFlightCapCountsChecksAndReservations) {
  PayerReservations table(Limits(3));
  EXPECT_EQ(Take(table, "0xa", "n1", 100 * kPrice), ReserveOutcome::kReserved);
  EXPECT_EQ(Take(table, "0xa", "n2", 100 * kPrice), ReserveOutcome::kReserved);
  ReservationCheck third = table.BeginCheck("0xa", kNow);
  EXPECT_EQ(third.outcome, ReserveOutcome::kReserved);
  EXPECT_EQ(table.BeginCheck("0xa", kNow).outcome, ReserveOutcome::kTooManyInFlight);
  table.EndCheck("0xa");
  EXPECT_EQ(Take(table, "0xa", "n3", 100 * kPrice), ReserveOutcome::kReserved);
  EXPECT_EQ(Take(table, "0xa", "n4", 100 * kPrice), ReserveOutcome::kTooManyInFlight);
  EXPECT_TRUE(table.Release("0xa", "n1"));
  EXPECT_EQ(Take(table, "0xa", "n4", 100 * kPrice), ReserveOutcome::kReserved);
  EXPECT_EQ(Take(table, "0xb", "n1", 100 * kPrice), ReserveOutcome::kReserved);  // another payer
}

// A balance read that began before a release may predate the settlement that release reflects:
// it must be read again, never used (it would let one price back two broadcasts).
TEST(PayerReservations, ReleaseMakesAnEarlierBalanceReadStale) {
  PayerReservations table(Limits());
  ASSERT_EQ(Take(table, "0xa", "first", kPrice), ReserveOutcome::kReserved);
  table.Keep("0xa", "first");
  table.Unref("0xa", "first");
  ReservationCheck check = table.BeginCheck("0xa", kNow);  // reads the balance: still kPrice
  ASSERT_EQ(check.outcome, ReserveOutcome::kReserved);
  EXPECT_TRUE(table.Release("0xa", "first"));  // "first" settled: the chain balance is now 0
  EXPECT_EQ(table.Reserve("0xa", "second", kPrice, kValidBefore, kPrice, check.epoch, kNow),
            ReserveOutcome::kStale);
  // Read again (the chain says 0): refused for the balance.
  EXPECT_EQ(Take(table, "0xa", "second", 0), ReserveOutcome::kInsufficientBalance);
  EXPECT_EQ(table.Payers(), 0u);
}

TEST(PayerReservations, TheSameAuthorizationIsCountedOnce) {
  PayerReservations table(Limits());
  EXPECT_EQ(Take(table, "0xa", "n", kPrice), ReserveOutcome::kReserved);
  EXPECT_EQ(Take(table, "0xa", "n", kPrice), ReserveOutcome::kReserved);
  EXPECT_EQ(table.Reserved("0xa"), kPrice);
  table.Unref("0xa", "n");
  EXPECT_EQ(table.Reserved("0xa"), kPrice);  // the other request still holds it
  table.Unref("0xa", "n");
  EXPECT_EQ(table.Reserved("0xa"), 0);
  EXPECT_EQ(table.Payers(), 0u);
}

TEST(PayerReservations, KeptOutlivesItsRequestsUntilReleased) {
  PayerReservations table(Limits());
  ASSERT_EQ(Take(table, "0xa", "n", kPrice), ReserveOutcome::kReserved);
  table.Keep("0xa", "n");
  table.Unref("0xa", "n");
  EXPECT_EQ(table.Reserved("0xa"), kPrice);
  EXPECT_EQ(Take(table, "0xa", "m", kPrice), ReserveOutcome::kInsufficientBalance);
  EXPECT_TRUE(table.Release("0xa", "n"));
  EXPECT_FALSE(table.Release("0xa", "n"));
  EXPECT_EQ(table.Payers(), 0u);
}

TEST(PayerReservations, LapsesOnceTheAuthorizationCannotMoveMoney) {
  PayerReservations table(Limits());
  ASSERT_EQ(Take(table, "0xa", "n", kPrice), ReserveOutcome::kReserved);
  table.Keep("0xa", "n");
  table.Unref("0xa", "n");
  // validBefore + 30 s: still held one second before, gone at it.
  EXPECT_EQ(Take(table, "0xa", "m", kPrice, kValidBefore + 29), ReserveOutcome::kInsufficientBalance);
  EXPECT_EQ(Take(table, "0xa", "m", kPrice, kValidBefore + 30), ReserveOutcome::kReserved);
  EXPECT_EQ(table.Reserved("0xa"), kPrice);
}

TEST(PayerReservations, RestoreRebuildsWithoutABalanceCheck) {
  PayerReservations table(Limits(2, 1));
  table.Restore("0xa", "n1", kPrice, kValidBefore);
  table.Restore("0xa", "n1", kPrice, kValidBefore);  // idempotent
  table.Restore("0xa", "n2", kPrice, kValidBefore);
  EXPECT_EQ(table.Reserved("0xa"), 2 * kPrice);
  EXPECT_EQ(Take(table, "0xa", "n3", 10 * kPrice), ReserveOutcome::kTooManyInFlight);
  EXPECT_EQ(Take(table, "0xb", "n1", 10 * kPrice), ReserveOutcome::kTableFull);  // one payer max
  table.Unref("0xa", "n1");  // no request holds it; it stays kept
  EXPECT_EQ(table.Reserved("0xa"), 2 * kPrice);
}

TEST(PayerReservations, BoundedByPayers) {
  PayerReservations table(Limits(128, 3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Take(table, "p" + std::to_string(i), "n", kPrice), ReserveOutcome::kReserved);
  }
  EXPECT_EQ(Take(table, "p3", "n", kPrice), ReserveOutcome::kTableFull);
  table.Unref("p0", "n");  // never kept: dropped, and the payer's entry with it
  EXPECT_EQ(Take(table, "p3", "n", kPrice), ReserveOutcome::kReserved);
  // A refused reservation leaves no entry behind.
  EXPECT_EQ(Take(table, "p1", "m", 0), ReserveOutcome::kInsufficientBalance);
  EXPECT_EQ(table.Payers(), 3u);
}

TEST(PayerReservations, NoOverflowNearTheLimits) {
  PayerReservations table(Limits());
  ReservationCheck check = table.BeginCheck("0xa", kNow);
  EXPECT_EQ(table.Reserve("0xa", "n", INT64_MAX, kValidBefore, INT64_MAX, check.epoch, kNow),
            ReserveOutcome::kReserved);
  check = table.BeginCheck("0xa", kNow);
  EXPECT_EQ(table.Reserve("0xa", "m", 1, kValidBefore, INT64_MAX, check.epoch, kNow),
            ReserveOutcome::kInsufficientBalance);
}

// The cluster's decision (issue 36 item 8): every row of the table in payer_reservations.h.
TEST(ClusterReserve, EveryRowOfTheTable) {
  struct Row {
    int64_t reserved, covered;
    bool covered_is_balance;
    int64_t released_since;
    ClusterReserve expected;
  };
  const Row rows[] = {
      // covered, less what was released since the read: reserve
      {0, kPrice, false, 0, ClusterReserve::kReserve},  // the simulation's cover, nothing else
      {0, kPrice, true, 0, ClusterReserve::kReserve},
      {kPrice, 2 * kPrice, true, 0, ClusterReserve::kReserve},       // exactly covered
      {0, 2 * kPrice, true, kPrice, ClusterReserve::kReserve},       // a release counted against
      {kPrice, 3 * kPrice, true, kPrice, ClusterReserve::kReserve},  // exactly, with a release
      // not covered by the balance, nothing released since: refused
      {kPrice, kPrice, true, 0, ClusterReserve::kInsufficientBalance},
      {0, kPrice - 1, true, 0, ClusterReserve::kInsufficientBalance},
      // not covered by the balance once a release since is counted: the read may be stale
      {0, kPrice, true, kPrice, ClusterReserve::kReadAgain},
      {kPrice, 2 * kPrice, true, 1, ClusterReserve::kReadAgain},
      // not covered by the simulation alone (another gateway reserved meanwhile): read the balance
      {kPrice, kPrice, false, 0, ClusterReserve::kReadAgain},
      {0, kPrice, false, 1, ClusterReserve::kReadAgain},
  };
  for (const Row& row : rows) {
    ClusterReserveFacts facts{kPrice, row.reserved, row.covered, row.covered_is_balance,
                              row.released_since};
    EXPECT_EQ(DecideClusterReserve(facts), row.expected)
        << "reserved " << row.reserved << " covered " << row.covered << " balance "
        << row.covered_is_balance << " released " << row.released_since;
  }
}

TEST(ClusterReserve, OnePriceAmongTwentyAcrossGatewaysGetsOne) {
  // Twenty decisions, one at a time as the store's writer runs them, each with the simulation's
  // cover first and the balance after a kReadAgain: one reservation, nineteen refusals.
  int64_t reserved = 0;
  int reservations = 0, refused = 0;
  for (int i = 0; i < 20; ++i) {
    ClusterReserve first = DecideClusterReserve({kPrice, reserved, kPrice, false, 0});
    if (first == ClusterReserve::kReadAgain) {
      first = DecideClusterReserve({kPrice, reserved, kPrice, true, 0});
    }
    if (first == ClusterReserve::kReserve) {
      reserved += kPrice;
      ++reservations;
    } else {
      EXPECT_EQ(first, ClusterReserve::kInsufficientBalance);
      ++refused;
    }
  }
  EXPECT_EQ(reservations, 1);
  EXPECT_EQ(refused, 19);
}

TEST(ClusterReserve, AReleaseAfterTheBalanceReadIsNotSpentTwice) {
  // Funded for two prices, one reserved and broadcast. The shell reads epoch 0, then the balance:
  // 2 prices (the first transfer not mined yet). Meanwhile it is mined and released (epoch moves
  // by one price): the balance read shows a price the chain no longer holds.
  EXPECT_EQ(DecideClusterReserve({kPrice, 0, 2 * kPrice, true, kPrice}), ClusterReserve::kReserve);
  // Funded for one price: the same read would have let a second broadcast revert.
  EXPECT_EQ(DecideClusterReserve({kPrice, 0, kPrice, true, kPrice}), ClusterReserve::kReadAgain);
}

TEST(ClusterReserve, NoOverflowNearTheLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(DecideClusterReserve({kMax, kMax, kMax, true, 0}),
            ClusterReserve::kInsufficientBalance);
  EXPECT_EQ(DecideClusterReserve({1, kMax - 1, kMax, true, 0}), ClusterReserve::kReserve);
  EXPECT_EQ(DecideClusterReserve({1, kMax - 1, kMax, true, kMax}), ClusterReserve::kReadAgain);
  EXPECT_EQ(DecideClusterReserve({1, 0, kMax, true, kMax - 1}), ClusterReserve::kReserve);
}

TEST(ClusterReserve, NamesAreStable) {
  EXPECT_EQ(ClusterReserveName(ClusterReserve::kReserve), "reserve");
  EXPECT_EQ(ClusterReserveName(ClusterReserve::kReadAgain), "read_again");
  EXPECT_EQ(ClusterReserveName(ClusterReserve::kInsufficientBalance), "insufficient_balance");
}

TEST(ClusterReserve, APaymentStillMovingKeepsItsReservation) {
  Operation op;
  op.fulfillment = Fulfillment::kInProgress;
  const struct {
    Settlement settlement;
    Fulfillment fulfillment;
    bool keeps;
  } rows[] = {
      {Settlement::kSubmitted, Fulfillment::kInProgress, true},
      {Settlement::kUnknown, Fulfillment::kPendingRetry, true},
      {Settlement::kUnknown, Fulfillment::kSucceeded, true},
      {Settlement::kNone, Fulfillment::kInProgress, true},      // settle=after, upstream called
      {Settlement::kNone, Fulfillment::kPendingRetry, true},    // settle=after, a retry may settle
      {Settlement::kNone, Fulfillment::kRejected, false},       // never to be submitted
      {Settlement::kSettled, Fulfillment::kInProgress, false},  // the balance shows it now
      {Settlement::kVoid, Fulfillment::kPendingRetry, false},
      {Settlement::kFailed, Fulfillment::kSucceeded, false},
      {Settlement::kReleased, Fulfillment::kRejected, false},
      {Settlement::kHeld, Fulfillment::kInProgress, false},  // the wallet's: never reserved
  };
  for (const auto& row : rows) {
    op.settlement = row.settlement;
    op.fulfillment = row.fulfillment;
    EXPECT_EQ(PaymentMayStillMove(op), row.keeps)
        << SettlementName(row.settlement) << " " << FulfillmentName(row.fulfillment);
  }
}

}  // namespace
}  // namespace agentpay
