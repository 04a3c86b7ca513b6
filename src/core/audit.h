// The books audit (`agentpay admin audit`, GET /admin/v1/audit): the rules every record the store
// keeps must satisfy, checked over one consistent snapshot of everything kept. Pure: the shell
// pages the records in (store.h: ListOperationBooks, ListRepeatedCharges, ListSharedPayments) and
// the chain's receipts for the chain check; out comes a report. Each rule is one row of
// AuditChecks(), each tested (tests/core/audit_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/operation.h"
#include "core/wallet.h"

namespace agentpay {

// Per-account figures recomputed from the ledger postings, beside the balances the store keeps.
struct AccountAudit {
  std::string account_id;
  Balances stored;
  // deposited and captured (captures less refunds) from the postings' kinds, held = net of
  // hold:<id>
  Balances from_ledger;
  int64_t wallet_net = 0;  // net of wallet:<id>: must equal stored.available()
};
struct LedgerAudit {
  std::vector<AccountAudit> accounts;
  int64_t external_total = 0;  // net of the "external" ledger account: minus all deposits
  int64_t revenue_total = 0;   // net of "revenue": all captures less refunds
};

enum class AuditCheck {
  kAccountBooks,
  kMoneyConserved,
  kOperationPostings,
  kOneChargePerKey,
  kOnePaymentPerAuthorization,
  kHoldsWithinTtl,
  kSettledAccountedFor,
  kChainTransfers,
};

struct AuditCheckInfo {
  AuditCheck check;
  std::string_view name;  // stable, in JSON and in the table
  std::string_view rule;  // what must hold, one sentence
};

//  check                           | what is examined               | a violation
//  account_books                   | each account                   | stored
//  deposited/captured/held differ from its ledger postings, or held outside [0, balance]
//  money_conserved                 | the whole ledger               | balances + revenue ≠
//  deposits, or −external ≠ deposits operation_postings              | each wallet operation |
//  postings disagree with its settlement (held: its amount held; settled: captured once;
//  released/none/void/failed: nothing kept), more than one capture, a refund above the capture
//  one_charge_per_key              | each (principal, key) pair     | two settled operations, the
//  second begun while the first was still remembered one_payment_per_authorization   | each x402
//  authorization and tx | one (payer, nonce) or one transaction paying for two operations
//  holds_within_ttl                | each held operation            | held past its TTL plus the
//  sweeper's slack, with no live attempt holding it settled_accounted_for           | each settled
//  or released one   | settled but neither fulfilled, waiting for a retry, in flight nor alerted;
//  released by the sweeper without an alert chain_transfers                 | each settled x402
//  operation    | its transaction shows no successful Transfer of the authorization to payTo, or
//  more than one
const std::array<AuditCheckInfo, 8>& AuditChecks();
const AuditCheckInfo& AuditCheckInfoOf(AuditCheck check);
std::string_view AuditCheckName(AuditCheck check);

struct AuditViolation {
  AuditCheck check;
  std::string subject;  // an account, operation, key, authorization or transaction
  std::string detail;
  bool operator==(const AuditViolation&) const = default;
};

// One operation as the audit sees it: its state, and the postings, alerts and sweeper releases that
// name it.
struct OperationBooks {
  std::string id;
  std::string principal;
  std::string idempotency_key;
  int64_t amount = 0;
  Settlement settlement = Settlement::kNone;
  Fulfillment fulfillment = Fulfillment::kNotStarted;
  std::optional<int64_t> hold_expires_ms;
  int64_t lease_expires_ms = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;  // its last change (an attempt ending is one)
  // Sums of its postings by kind, and how many captures.
  int64_t held = 0;
  int64_t captured = 0;
  int64_t released = 0;
  int64_t refunded = 0;
  int64_t captures = 0;
  int64_t alerts = 0;            // every alert about it, resolved or not
  int64_t expiry_alerts = 0;     // of kind hold_expired_after_possible_work
  int64_t sweeper_releases = 0;  // hold_expired events: the sweeper released its hold
};

// Two settled operations of one (principal, key), the second created while the first was still
// remembered (its retention had not ended, or it has none).
struct RepeatedCharge {
  std::string principal;
  std::string idempotency_key;
  std::string first_id;
  std::string second_id;
  int64_t second_created_ms = 0;
  std::optional<int64_t> first_retained_until_ms;
};

// One authorization ("payer:nonce") or one transaction hash that several x402 operations share.
struct SharedPayment {
  std::string what;  // "authorization 0xpayer/0xnonce" or "transaction 0xhash"
  int64_t operations = 0;
};

// One settled x402 payment, as the chain check needs it.
struct SettledPayment {
  std::string operation_id;
  std::string payer;  // lower-case 0x hex
  std::string pay_to;
  int64_t value = 0;
  std::string tx_hash;
  std::string nonce;  // the authorization's, 0x hex (what the chain shows it by)
};

// What the chain shows for one settled payment's transaction: the receipt's status (nullopt: no
// receipt) and how many times it shows the payment made: the authorization's own AuthorizationUsed
// with its Transfer of exactly the value to payTo (so 0 or 1: a transaction that settles several
// authorizations shows each by its own logs).
struct ChainTransferFacts {
  std::optional<bool> receipt_succeeded;
  int64_t matching_transfers = 0;
};

// What a hold may be late beyond two sweep intervals before the audit calls it overdue: a sweeper
// slowed by a busy machine or a store that was briefly away is not a finding.
inline constexpr int64_t kAuditHoldSlackMs = 5000;

struct AuditOptions {
  int64_t now_ms = 0;
  // A hold is overdue once this long past its expiry (and its attempt's lease): the sweeper runs
  // every sweep interval, so the gateway passes twice that plus kAuditHoldSlackMs.
  int64_t hold_slack_ms = 0;
  size_t max_listed = 100;  // violations listed; all are counted
};

struct AuditCheckResult {
  AuditCheck check;
  int64_t examined = 0;
  int64_t violations = 0;
  bool ran = false;  // chain_transfers runs only where a chain is given
};

struct AuditTotals {
  int64_t accounts = 0;
  int64_t operations = 0;
  int64_t deposited = 0;  // sum over accounts, as stored
  int64_t balance = 0;    // deposited − captured, summed
  int64_t held = 0;
  int64_t captured = 0;  // revenue: captures less refunds
  int64_t x402_settled = 0;
  int64_t charges = 0;  // wallet operations captured (each at most once, operation_postings)
  int64_t alerts = 0;   // every alert raised, resolved or not
};

struct AuditReport {
  std::vector<AuditCheckResult> checks;  // in AuditChecks() order
  std::vector<AuditViolation> listed;    // the first max_listed violations
  int64_t violations = 0;
  AuditTotals totals;
  // Two checks depend on the time as well as the books (a hold overdue, a settled operation's
  // attempt no longer live): the same books give the same report at any time before this one, in
  // ms (INT64_MAX: at any time after now_ms). A clock that steps back can only take findings away.
  int64_t same_until_ms = INT64_MAX;
  bool ok() const { return violations == 0; }
  // The row of `check` (every check has one).
  const AuditCheckResult& Of(AuditCheck check) const;
};

// Accumulates the rules over records fed in any order; each Add… examines what it is given.
class BooksAudit {
 public:
  explicit BooksAudit(AuditOptions options);
  void AddLedger(const LedgerAudit& ledger);
  void AddOperation(const OperationBooks& op);
  void AddRepeatedCharge(const RepeatedCharge& repeat);
  void AddSharedPayment(const SharedPayment& shared);
  // The chain check (the CLI's, against a node it names): one settled payment's transaction.
  void AddChainTransfer(const SettledPayment& payment, const ChainTransferFacts& facts);
  AuditReport Finish() &&;

 private:
  AuditCheckResult& Result(AuditCheck check);
  void Violation(AuditCheck check, std::string subject, std::string detail);

  AuditOptions options_;
  AuditReport report_;
};

}  // namespace agentpay
