// The payer reservation table: a payer funded for k prices gets at most k reservations, the
// in-flight cap, the epoch that refuses a balance read older than a release, and the lapse.
#include "core/payer_reservations.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace agentpay
