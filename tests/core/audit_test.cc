// Every rule of core/audit.h: the books that hold pass, and each way of breaking one is named.
#include "core/audit.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

constexpr int64_t kNow = 1'000'000;

AuditReport Audit(const LedgerAudit& ledger, const std::vector<OperationBooks>& ops = {},
                  int64_t now_ms = kNow) {
  BooksAudit audit(AuditOptions{now_ms, 3000, 10});
  audit.AddLedger(ledger);
  for (const OperationBooks& op : ops) audit.AddOperation(op);
  return std::move(audit).Finish();
}

const AuditCheckResult& Row(const AuditReport& report, AuditCheck check) {
  return report.Of(check);
}

// One account: 1000 deposited, 300 captured, 200 held; the ledger agrees.
LedgerAudit Balanced() {
  AccountAudit account{"acct_1", Balances{1000, 300, 200}, Balances{1000, 300, 200}, 500};
  return LedgerAudit{{account}, -1000, 300};
}

OperationBooks Wallet(Settlement settlement, Fulfillment fulfillment) {
  OperationBooks op;
  op.id = "op_1";
  op.principal = "account:acct_1";
  op.idempotency_key = "k";
  op.amount = 100;
  op.settlement = settlement;
  op.fulfillment = fulfillment;
  op.lease_expires_ms = kNow - 1;
  return op;
}

OperationBooks Captured() {
  OperationBooks op = Wallet(Settlement::kSettled, Fulfillment::kSucceeded);
  op.held = op.captured = 100;
  op.captures = 1;
  return op;
}

TEST(BooksAudit, BalancedBooksPass) {
  AuditReport report = Audit(Balanced(), {Captured()});
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(Row(report, AuditCheck::kAccountBooks).examined, 1);
  EXPECT_EQ(Row(report, AuditCheck::kOperationPostings).examined, 1);
  EXPECT_FALSE(Row(report, AuditCheck::kChainTransfers).ran);
  EXPECT_EQ(report.totals.deposited, 1000);
  EXPECT_EQ(report.totals.balance, 700);
  EXPECT_EQ(report.totals.held, 200);
  EXPECT_EQ(report.totals.captured, 300);
}

TEST(BooksAudit, StoredBalancesThatDifferFromTheLedgerAreNamed) {
  LedgerAudit ledger = Balanced();
  ledger.accounts[0].stored.held = 250;
  ledger.accounts[0].wallet_net = 450;
  AuditReport report = Audit(ledger);
  EXPECT_EQ(Row(report, AuditCheck::kAccountBooks).violations, 1);
  ASSERT_EQ(report.listed.size(), 1u);
  EXPECT_EQ(report.listed[0].subject, "acct_1");
  EXPECT_NE(report.listed[0].detail.find("held=250"), std::string::npos);
}

TEST(BooksAudit, WalletNetThatDiffersFromAvailableIsNamed) {
  LedgerAudit ledger = Balanced();
  ledger.accounts[0].wallet_net = 499;
  EXPECT_EQ(Row(Audit(ledger), AuditCheck::kAccountBooks).violations, 1);
}

TEST(BooksAudit, HeldAboveTheBalanceIsNamedEvenWhenTheLedgerAgrees) {
  LedgerAudit ledger = Balanced();
  ledger.accounts[0].stored = ledger.accounts[0].from_ledger = Balances{1000, 300, 800};
  ledger.accounts[0].wallet_net = -100;
  EXPECT_EQ(Row(Audit(ledger), AuditCheck::kAccountBooks).violations, 1);
}

TEST(BooksAudit, MoneyCreatedOrLostIsNamed) {
  LedgerAudit ledger = Balanced();
  ledger.revenue_total = 301;  // a capture with no account paying for it
  EXPECT_EQ(Row(Audit(ledger), AuditCheck::kMoneyConserved).violations, 1);
  ledger = Balanced();
  ledger.external_total = -900;  // a deposit that came from nowhere
  EXPECT_EQ(Row(Audit(ledger), AuditCheck::kMoneyConserved).violations, 1);
}

TEST(BooksAudit, OperationPostingsRows) {
  struct Case {
    const char* name;
    OperationBooks op;
    bool violation;
  };
  OperationBooks twice = Captured();
  twice.captures = 2;
  twice.captured = 200;
  twice.held = 200;
  OperationBooks refunded_more = Captured();
  refunded_more.refunded = 150;
  OperationBooks refunded = Captured();
  refunded.refunded = 100;
  OperationBooks overdrawn = Captured();
  overdrawn.released = 100;
  OperationBooks held = Wallet(Settlement::kHeld, Fulfillment::kPendingRetry);
  held.held = 100;
  held.hold_expires_ms = kNow + 1;
  OperationBooks held_short = held;
  held_short.held = 50;
  OperationBooks settled_uncaptured = Wallet(Settlement::kSettled, Fulfillment::kSucceeded);
  settled_uncaptured.held = 100;
  OperationBooks released = Wallet(Settlement::kReleased, Fulfillment::kRejected);
  released.held = released.released = 100;
  OperationBooks released_kept = released;
  released_kept.released = 0;
  OperationBooks void_captured = Captured();
  void_captured.settlement = Settlement::kVoid;
  OperationBooks none = Wallet(Settlement::kNone, Fulfillment::kNotStarted);
  const Case cases[] = {
      {"captured once", Captured(), false},
      {"captured twice", twice, true},
      {"refund above the capture", refunded_more, true},
      {"refunded in full", refunded, false},
      {"more out than held", overdrawn, true},
      {"held", held, false},
      {"held less than the amount", held_short, true},
      {"settled without a capture", settled_uncaptured, true},
      {"released", released, false},
      {"released but still held", released_kept, true},
      {"void with a capture", void_captured, true},
      {"none", none, false},
  };
  for (const Case& c : cases) {
    AuditReport report = Audit(Balanced(), {c.op});
    EXPECT_EQ(Row(report, AuditCheck::kOperationPostings).violations, c.violation ? 1 : 0)
        << c.name;
  }
}

TEST(BooksAudit, X402OperationsHaveNoPostingsToCheck) {
  OperationBooks op = Wallet(Settlement::kSettled, Fulfillment::kSucceeded);
  op.principal = "x402:0xabc";
  AuditReport report = Audit(Balanced(), {op});
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(Row(report, AuditCheck::kOperationPostings).examined, 0);
  EXPECT_EQ(Row(report, AuditCheck::kOnePaymentPerAuthorization).examined, 1);
  EXPECT_EQ(report.totals.x402_settled, 1);
}

TEST(BooksAudit, CountsTheWalletChargesAndEveryAlert) {
  OperationBooks charged = Captured();
  charged.alerts = 1;
  OperationBooks released = Wallet(Settlement::kReleased, Fulfillment::kRejected);
  released.id = "op_2";
  released.held = released.released = 100;
  released.alerts = 2;
  OperationBooks paid_on_chain = Wallet(Settlement::kSettled, Fulfillment::kSucceeded);
  paid_on_chain.id = "op_3";
  paid_on_chain.principal = "x402:0xabc";
  AuditReport report = Audit(Balanced(), {charged, released, paid_on_chain});
  EXPECT_EQ(report.totals.charges, 1);  // the x402 one is counted in x402_settled
  EXPECT_EQ(report.totals.x402_settled, 1);
  EXPECT_EQ(report.totals.alerts, 3);
}

TEST(BooksAudit, HoldsPastTheirTtlAndTheSlackAreNamed) {
  OperationBooks op = Wallet(Settlement::kHeld, Fulfillment::kPendingRetry);
  op.held = 100;
  op.hold_expires_ms = kNow - 3000;  // exactly the slack: not yet overdue
  EXPECT_TRUE(Audit(Balanced(), {op}).ok());
  op.hold_expires_ms = kNow - 3001;
  AuditReport report = Audit(Balanced(), {op});
  EXPECT_EQ(Row(report, AuditCheck::kHoldsWithinTtl).violations, 1);
  // A live attempt keeps its hold past the expiry until its lease ends.
  op.fulfillment = Fulfillment::kInProgress;
  op.lease_expires_ms = kNow + 10;
  EXPECT_TRUE(Audit(Balanced(), {op}).ok());
}

// The report says until when the same books give the same report: the first moment a hold is
// overdue, or a settled operation's live attempt stops being live. `sim swarm` audits again only
// after a commit, a crash or that moment; before it, the report must not change.
TEST(BooksAudit, TheSameBooksGiveTheSameReportUntilTheTimeItNames) {
  EXPECT_EQ(Audit(Balanced(), {Captured()}).same_until_ms, INT64_MAX);
  OperationBooks hold = Wallet(Settlement::kHeld, Fulfillment::kPendingRetry);
  hold.held = 100;
  hold.hold_expires_ms = kNow - 1000;  // overdue 2001 ms from now (slack 3000)
  OperationBooks settled = Wallet(Settlement::kSettled, Fulfillment::kInProgress);
  settled.id = "op_2";
  settled.held = settled.captured = 100;
  settled.captures = 1;
  settled.lease_expires_ms = kNow + 5000;  // live for 5 s more, and no alert
  AuditReport now = Audit(Balanced(), {hold, settled});
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now.same_until_ms, kNow + 2001);
  for (int64_t at : {kNow + 1, kNow + 2000}) {
    AuditReport later = Audit(Balanced(), {hold, settled}, at);
    EXPECT_TRUE(later.ok()) << at;
    EXPECT_GE(later.same_until_ms, kNow + 2001) << at;
  }
  AuditReport overdue = Audit(Balanced(), {hold, settled}, kNow + 2001);
  EXPECT_EQ(Row(overdue, AuditCheck::kHoldsWithinTtl).violations, 1);
  // Without the hold, the lease is the next moment: the settled operation is unaccounted for then.
  EXPECT_EQ(Audit(Balanced(), {settled}).same_until_ms, kNow + 5000);
  EXPECT_TRUE(Audit(Balanced(), {settled}, kNow + 4999).ok());
  EXPECT_EQ(
      Row(Audit(Balanced(), {settled}, kNow + 5000), AuditCheck::kSettledAccountedFor).violations,
      1);
}

// Found by `agentpay sim swarm` (seed 10285): a retry resumed a hold past its expiry that was not
// swept yet, its attempt ended (hold kept) long after the expiry, and the audit named the hold at
// once, before the sweeper could have had its turn. The slack counts from the attempt's end.
TEST(BooksAudit, TheSlackOfAHoldARetryHeldPastItsExpiryRunsFromTheAttemptsEnd) {
  OperationBooks op = Wallet(Settlement::kHeld, Fulfillment::kPendingRetry);
  op.held = 100;
  op.hold_expires_ms = kNow - 7000;  // long past its expiry and the slack…
  op.updated_ms = kNow - 10;         // …but the attempt that held it ended just now
  EXPECT_TRUE(Audit(Balanced(), {op}).ok());
  op.updated_ms = kNow - 3000;  // the slack from the attempt's end
  EXPECT_TRUE(Audit(Balanced(), {op}).ok());
  op.updated_ms = kNow - 3001;  // and past it: the sweeper should have released it
  EXPECT_EQ(Row(Audit(Balanced(), {op}), AuditCheck::kHoldsWithinTtl).violations, 1);
}

TEST(BooksAudit, SettledAccountedForRows) {
  struct Case {
    const char* name;
    Fulfillment fulfillment;
    int64_t lease_expires_ms;
    int64_t alerts;
    bool violation;
  };
  const Case cases[] = {
      {"succeeded", Fulfillment::kSucceeded, 0, 0, false},
      {"rejected", Fulfillment::kRejected, 0, 0, false},
      {"waiting for a retry", Fulfillment::kPendingRetry, 0, 0, false},
      {"x402 call still to come", Fulfillment::kNotStarted, 0, 0, false},
      {"in flight", Fulfillment::kInProgress, kNow + 1, 0, false},
      {"lease over, no alert", Fulfillment::kInProgress, kNow, 0, true},
      {"lease over, alerted", Fulfillment::kInProgress, kNow, 1, false},
  };
  for (const Case& c : cases) {
    OperationBooks op = Captured();
    op.fulfillment = c.fulfillment;
    op.lease_expires_ms = c.lease_expires_ms;
    op.alerts = c.alerts;
    AuditReport report = Audit(Balanced(), {op});
    EXPECT_EQ(Row(report, AuditCheck::kSettledAccountedFor).violations, c.violation ? 1 : 0)
        << c.name;
  }
}

TEST(BooksAudit, EverySweeperReleaseRaisedOneAlert) {
  OperationBooks op = Wallet(Settlement::kReleased, Fulfillment::kPendingRetry);
  op.held = op.released = 100;
  op.sweeper_releases = 1;
  AuditReport silent = Audit(Balanced(), {op});
  EXPECT_EQ(Row(silent, AuditCheck::kSettledAccountedFor).violations, 1);
  op.alerts = op.expiry_alerts = 1;
  EXPECT_TRUE(Audit(Balanced(), {op}).ok());
  op.alerts = op.expiry_alerts = 2;  // two alerts for one release
  EXPECT_FALSE(Audit(Balanced(), {op}).ok());
}

TEST(BooksAudit, RepeatedChargesAndSharedPaymentsAreNamed) {
  BooksAudit audit(AuditOptions{kNow, 0, 10});
  audit.AddRepeatedCharge({"account:acct_1", "k", "op_a", "op_b", 5, std::nullopt});
  audit.AddSharedPayment({"authorization 0xpayer/0xnonce", 2});
  AuditReport report = std::move(audit).Finish();
  EXPECT_EQ(Row(report, AuditCheck::kOneChargePerKey).violations, 1);
  EXPECT_EQ(Row(report, AuditCheck::kOnePaymentPerAuthorization).violations, 1);
  EXPECT_EQ(report.listed[0].subject, "account:acct_1 k");
}

TEST(BooksAudit, ChainTransferRows) {
  SettledPayment payment{"op_1", "0xpayer", "0xpayto", 100, "0xtx", "0xnonce"};
  struct Case {
    const char* name;
    ChainTransferFacts facts;
    bool violation;
  };
  const Case cases[] = {
      {"one transfer", {true, 1}, false}, {"no receipt", {std::nullopt, 0}, true},
      {"reverted", {false, 0}, true},     {"no matching transfer", {true, 0}, true},
      {"two transfers", {true, 2}, true},
  };
  for (const Case& c : cases) {
    BooksAudit audit(AuditOptions{kNow, 0, 10});
    audit.AddChainTransfer(payment, c.facts);
    AuditReport report = std::move(audit).Finish();
    EXPECT_TRUE(Row(report, AuditCheck::kChainTransfers).ran) << c.name;
    EXPECT_EQ(Row(report, AuditCheck::kChainTransfers).violations, c.violation ? 1 : 0) << c.name;
  }
}

TEST(BooksAudit, ViolationsAreAllCountedButOnlyTheFirstListed) {
  BooksAudit audit(AuditOptions{kNow, 0, 2});
  for (int i = 0; i < 5; ++i) audit.AddSharedPayment({"transaction 0x" + std::to_string(i), 2});
  AuditReport report = std::move(audit).Finish();
  EXPECT_EQ(report.violations, 5);
  EXPECT_EQ(report.listed.size(), 2u);
}

TEST(BooksAudit, EveryCheckHasAStableName) {
  std::vector<std::string_view> names;
  for (const AuditCheckInfo& info : AuditChecks()) {
    EXPECT_FALSE(info.rule.empty());
    EXPECT_EQ(AuditCheckName(info.check), info.name);
    names.push_back(info.name);
  }
  EXPECT_EQ(names.front(), "account_books");
  EXPECT_EQ(names.back(), "chain_transfers");
}

}  // namespace
}  // namespace agentpay
