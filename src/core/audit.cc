// See audit.h.
#include "core/audit.h"

#include <algorithm>

#include "core/check.h"

namespace agentpay {
namespace {

constexpr std::array<AuditCheckInfo, 8> kChecks = {{
    {AuditCheck::kAccountBooks, "account_books",
     "each account's stored deposited, captured and held equal its ledger postings, and 0 <= held "
     "<= balance"},
    {AuditCheck::kMoneyConserved, "money_conserved",
     "balances plus revenue equal deposits, and the external account's net is minus the deposits"},
    {AuditCheck::kOperationPostings, "operation_postings",
     "each wallet operation's postings match its settlement: held keeps its amount, settled "
     "captured it once, released/none/void/failed keep nothing; no refund above the capture"},
    {AuditCheck::kOneChargePerKey, "one_charge_per_key",
     "an idempotency key is charged once while it is remembered"},
    {AuditCheck::kOnePaymentPerAuthorization, "one_payment_per_authorization",
     "one x402 authorization and one transaction pay for one operation"},
    {AuditCheck::kHoldsWithinTtl, "holds_within_ttl",
     "no hold outlives its TTL (plus the sweeper's slack) unless a live attempt holds it or "
     "just let go of it"},
    {AuditCheck::kSettledAccountedFor, "settled_accounted_for",
     "a settled operation is fulfilled, waiting for a retry, in flight or alerted; every hold the "
     "sweeper released raised one alert"},
    {AuditCheck::kChainTransfers, "chain_transfers",
     "each settled x402 operation's transaction succeeded with exactly one Transfer of the "
     "authorized value from the payer to payTo"},
}};

std::string Money(int64_t deposited, int64_t captured, int64_t held) {
  return "deposited=" + std::to_string(deposited) + " captured=" + std::to_string(captured) +
         " held=" + std::to_string(held);
}

}  // namespace

const std::array<AuditCheckInfo, 8>& AuditChecks() { return kChecks; }

const AuditCheckInfo& AuditCheckInfoOf(AuditCheck check) {
  for (const AuditCheckInfo& info : kChecks) {
    if (info.check == check) return info;
  }
  AGENTPAY_CHECK(false);
}

std::string_view AuditCheckName(AuditCheck check) { return AuditCheckInfoOf(check).name; }

BooksAudit::BooksAudit(AuditOptions options) : options_(options) {
  for (const AuditCheckInfo& info : kChecks) {
    report_.checks.push_back(
        AuditCheckResult{info.check, 0, 0, info.check != AuditCheck::kChainTransfers});
  }
}

AuditCheckResult& BooksAudit::Result(AuditCheck check) {
  for (AuditCheckResult& result : report_.checks) {
    if (result.check == check) return result;
  }
  AGENTPAY_CHECK(false);
}

void BooksAudit::Violation(AuditCheck check, std::string subject, std::string detail) {
  ++Result(check).violations;
  ++report_.violations;
  if (report_.listed.size() < options_.max_listed) {
    report_.listed.push_back(AuditViolation{check, std::move(subject), std::move(detail)});
  }
}

void BooksAudit::AddLedger(const LedgerAudit& ledger) {
  AuditTotals& totals = report_.totals;
  for (const AccountAudit& account : ledger.accounts) {
    ++Result(AuditCheck::kAccountBooks).examined;
    ++totals.accounts;
    const Balances& stored = account.stored;
    const Balances& books = account.from_ledger;
    totals.deposited += stored.deposited;
    totals.balance += stored.balance();
    totals.held += stored.held;
    if (!(stored == books)) {
      Violation(AuditCheck::kAccountBooks, account.account_id,
                "stored " + Money(stored.deposited, stored.captured, stored.held) +
                    " but the ledger says " + Money(books.deposited, books.captured, books.held));
    } else if (account.wallet_net != stored.available()) {
      Violation(AuditCheck::kAccountBooks, account.account_id,
                "available " + std::to_string(stored.available()) +
                    " but the wallet's postings net " + std::to_string(account.wallet_net));
    }
    if (!stored.Valid()) {
      Violation(AuditCheck::kAccountBooks, account.account_id,
                "stored " + Money(stored.deposited, stored.captured, stored.held) +
                    ": need 0 <= captured <= deposited and 0 <= held <= balance");
    }
  }
  totals.captured = ledger.revenue_total;
  ++Result(AuditCheck::kMoneyConserved).examined;
  if (totals.balance + ledger.revenue_total != totals.deposited) {
    Violation(AuditCheck::kMoneyConserved, "ledger",
              "balances " + std::to_string(totals.balance) + " + revenue " +
                  std::to_string(ledger.revenue_total) + " != deposits " +
                  std::to_string(totals.deposited));
  }
  if (-ledger.external_total != totals.deposited) {
    Violation(AuditCheck::kMoneyConserved, "ledger",
              "the external account nets " + std::to_string(ledger.external_total) +
                  " but deposits total " + std::to_string(totals.deposited));
  }
}

void BooksAudit::AddOperation(const OperationBooks& op) {
  ++report_.totals.operations;
  report_.totals.alerts += op.alerts;
  const bool wallet = WalletAccountOf(op.principal).has_value();
  if (wallet && op.captures > 0) ++report_.totals.charges;
  const bool settled = op.settlement == Settlement::kSettled;
  if (settled) ++Result(AuditCheck::kOneChargePerKey).examined;
  if (wallet) {
    ++Result(AuditCheck::kOperationPostings).examined;
    const int64_t outstanding = op.held - op.captured - op.released;
    const std::string postings =
        "held " + std::to_string(op.held) + ", captured " + std::to_string(op.captured) + " in " +
        std::to_string(op.captures) + ", released " + std::to_string(op.released) + ", refunded " +
        std::to_string(op.refunded);
    const std::string state = "settlement " + std::string(SettlementName(op.settlement)) +
                              ", amount " + std::to_string(op.amount) + ": ";
    if (op.captures > 1 || op.captured > op.amount) {
      Violation(AuditCheck::kOperationPostings, op.id,
                state + "charged more than once (" + postings + ")");
    } else if (op.refunded > op.captured) {
      Violation(AuditCheck::kOperationPostings, op.id,
                state + "refunded more than captured (" + postings + ")");
    } else if (outstanding < 0) {
      Violation(AuditCheck::kOperationPostings, op.id,
                state + "more captured and released than held (" + postings + ")");
    } else if (op.settlement == Settlement::kHeld && outstanding != op.amount) {
      Violation(
          AuditCheck::kOperationPostings, op.id,
          state + "the hold outstanding is " + std::to_string(outstanding) + " (" + postings + ")");
    } else if (settled && (op.captured != op.amount || outstanding != 0)) {
      Violation(AuditCheck::kOperationPostings, op.id,
                state + "need one capture of the amount and nothing held (" + postings + ")");
    } else if ((op.settlement == Settlement::kNone || op.settlement == Settlement::kReleased ||
                op.settlement == Settlement::kVoid || op.settlement == Settlement::kFailed) &&
               (op.captured != 0 || outstanding != 0)) {
      Violation(AuditCheck::kOperationPostings, op.id,
                state + "need nothing captured or held (" + postings + ")");
    }
  } else {
    ++Result(AuditCheck::kOnePaymentPerAuthorization).examined;
    if (settled) ++report_.totals.x402_settled;
  }
  if (op.settlement == Settlement::kHeld && op.hold_expires_ms) {
    ++Result(AuditCheck::kHoldsWithinTtl).examined;
    int64_t due = *op.hold_expires_ms;
    // The sweeper never takes a hold from a live attempt, and a retry may resume a hold past its
    // expiry that was not swept yet: the slack runs from the later of the expiry and the moment
    // the last attempt let go of it (the operation's last change).
    if (op.fulfillment == Fulfillment::kInProgress) due = std::max(due, op.lease_expires_ms);
    due = std::max(due, op.updated_ms);
    if (options_.now_ms <= due + options_.hold_slack_ms) {
      report_.same_until_ms = std::min(report_.same_until_ms, due + options_.hold_slack_ms + 1);
    }
    if (options_.now_ms > due + options_.hold_slack_ms) {
      Violation(AuditCheck::kHoldsWithinTtl, op.id,
                "held " + std::to_string(op.amount) + " for " + op.principal + " " +
                    std::to_string(options_.now_ms - due) +
                    " ms past its expiry; the sweeper should have released it");
    }
  }
  if (settled || op.settlement == Settlement::kReleased || op.sweeper_releases > 0) {
    ++Result(AuditCheck::kSettledAccountedFor).examined;
    const bool alerted = op.alerts > 0;
    const bool live =
        op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > options_.now_ms;
    if (live) report_.same_until_ms = std::min(report_.same_until_ms, op.lease_expires_ms);
    // not_started: an x402 settle=before payment the reconciler settled, its call still to come.
    const bool accounted = op.fulfillment == Fulfillment::kSucceeded ||
                           op.fulfillment == Fulfillment::kRejected ||
                           op.fulfillment == Fulfillment::kPendingRetry ||
                           op.fulfillment == Fulfillment::kNotStarted || live || alerted;
    if (op.sweeper_releases != op.expiry_alerts) {
      Violation(AuditCheck::kSettledAccountedFor, op.id,
                "the sweeper released its hold " + std::to_string(op.sweeper_releases) +
                    " time(s) and " + std::to_string(op.expiry_alerts) + " alert(s) were raised");
    } else if (settled && !accounted) {
      Violation(AuditCheck::kSettledAccountedFor, op.id,
                "settled, fulfillment " + std::string(FulfillmentName(op.fulfillment)) +
                    ", no live attempt and no alert");
    } else if (op.settlement == Settlement::kReleased &&
               op.fulfillment == Fulfillment::kPendingRetry && !alerted) {
      Violation(AuditCheck::kSettledAccountedFor, op.id,
                "hold released with the upstream's work possibly done, and no alert");
    }
  }
}

void BooksAudit::AddRepeatedCharge(const RepeatedCharge& repeat) {
  Violation(AuditCheck::kOneChargePerKey, repeat.principal + " " + repeat.idempotency_key,
            "charged by " + repeat.first_id + " and again by " + repeat.second_id +
                ", created at " + std::to_string(repeat.second_created_ms) + " while the first " +
                (repeat.first_retained_until_ms
                     ? "was remembered until " + std::to_string(*repeat.first_retained_until_ms)
                     : std::string("was still remembered")));
}

void BooksAudit::AddSharedPayment(const SharedPayment& shared) {
  Violation(AuditCheck::kOnePaymentPerAuthorization, shared.what,
            "pays for " + std::to_string(shared.operations) + " operations");
}

void BooksAudit::AddChainTransfer(const SettledPayment& payment, const ChainTransferFacts& facts) {
  AuditCheckResult& result = Result(AuditCheck::kChainTransfers);
  result.ran = true;
  ++result.examined;
  if (!facts.receipt_succeeded) {
    Violation(AuditCheck::kChainTransfers, payment.operation_id,
              "settled, but the chain has no receipt for " + payment.tx_hash);
  } else if (!*facts.receipt_succeeded) {
    Violation(AuditCheck::kChainTransfers, payment.operation_id,
              "settled, but " + payment.tx_hash + " reverted");
  } else if (facts.matching_transfers != 1) {
    Violation(AuditCheck::kChainTransfers, payment.operation_id,
              payment.tx_hash + " shows authorization " + payment.nonce + " of " + payment.payer +
                  " settled " + std::to_string(facts.matching_transfers) +
                  " times (its AuthorizationUsed with a Transfer of " +
                  std::to_string(payment.value) + " to " + payment.pay_to + "), need exactly one");
  }
}

AuditReport BooksAudit::Finish() && { return std::move(report_); }

const AuditCheckResult& AuditReport::Of(AuditCheck check) const {
  auto row = std::find_if(checks.begin(), checks.end(),
                          [check](const AuditCheckResult& r) { return r.check == check; });
  AGENTPAY_CHECK(row != checks.end());
  return *row;
}

}  // namespace agentpay
