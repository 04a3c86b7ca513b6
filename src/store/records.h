// How each stored record maps to its columns, written once for both backends: the column lists,
// the order in which a record's values are bound (Write…: `out` is anything with Add(int64_t),
// Add(string_view), Add(optional<int64_t>), AddBytes(string_view), AddNull(), appending the next
// parameter) and how a row is read back (Read…: `row` is anything with Int, OptionalInt, Text,
// Bytes and IsNull by column). SQLite binds ?1…?N and PostgreSQL $1…$N in the same order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/operation.h"
#include "core/result.h"
#include "store/store.h"

namespace agentpay {

inline constexpr char kOperationColumns[] =
    "id, principal, idempotency_key, fingerprint, route, amount, intent, settlement, fulfillment, "
    "hold_expires_ms, lease_expires_ms, attempts, response_status, response_content_type, "
    "response_body, retained_until_ms, created_ms, updated_ms, claimed_by";
inline constexpr char kAccountColumns[] =
    "id, name, api_key_hash, deposited, captured, held, created_ms";
inline constexpr char kPaymentColumns[] =
    "operation_id, payer, nonce, valid_after_s, valid_before_s, value, pay_to, signature, "
    "x402_version, tx_hash, raw_tx, relayer, relayer_nonce, submitted_ms, broadcasts, "
    "replaced_raw_txs, settled_block, settled_block_hash, settled_ms";
inline constexpr char kKeyColumns[] =
    "principal, key, operation_id, fingerprint, created_ms, arrivals_recorded";
inline constexpr char kEventColumns[] =
    "operation_id, at_ms, actor, kind, detail, attempt, amount, http_status, tx_hash, "
    "block_number, reason";
inline constexpr char kAlertColumns[] =
    "id, operation_id, kind, detail, created_ms, resolved_ms, resolution, note";

// A list of hex strings as one column: space-separated.
std::string JoinWords(const std::vector<std::string>& words);
std::vector<std::string> SplitWords(const std::string& joined);

// The 19 values of kOperationColumns, in order.
template <typename Out>
void WriteOperation(Out& out, const Operation& op) {
  out.Add(op.id).Add(op.principal).Add(op.idempotency_key).Add(op.fingerprint).Add(op.route);
  out.Add(op.amount).Add(IntentName(op.intent)).Add(SettlementName(op.settlement));
  out.Add(FulfillmentName(op.fulfillment)).Add(op.hold_expires_ms).Add(op.lease_expires_ms);
  out.Add(static_cast<int64_t>(op.attempts));
  if (op.response) {
    out.Add(static_cast<int64_t>(op.response->status)).Add(op.response->content_type);
    out.AddBytes(op.response->body);
  } else {
    out.AddNull().AddNull().AddNull();
  }
  out.Add(op.retained_until_ms).Add(op.created_ms).Add(op.updated_ms).Add(op.claimed_by);
}

template <typename Row>
Result<Operation> ReadOperation(const Row& row) {
  Operation op;
  op.id = row.Text(0);
  op.principal = row.Text(1);
  op.idempotency_key = row.Text(2);
  op.fingerprint = row.Text(3);
  op.route = row.Text(4);
  op.amount = row.Int(5);
  auto intent = ParseIntent(row.Text(6));
  auto settlement = ParseSettlement(row.Text(7));
  auto fulfillment = ParseFulfillment(row.Text(8));
  if (!intent || !settlement || !fulfillment) {
    return Status::Error(ErrorCode::kStoreCorrupt, "operation " + op.id + " has an unknown state");
  }
  op.intent = *intent;
  op.settlement = *settlement;
  op.fulfillment = *fulfillment;
  op.hold_expires_ms = row.OptionalInt(9);
  op.lease_expires_ms = row.Int(10);
  op.attempts = static_cast<int32_t>(row.Int(11));
  if (!row.IsNull(12)) {
    op.response = StoredResponse{static_cast<int>(row.Int(12)), row.Text(13), row.Bytes(14)};
  }
  op.retained_until_ms = row.OptionalInt(15);
  op.created_ms = row.Int(16);
  op.updated_ms = row.Int(17);
  op.claimed_by = row.Text(18);
  return op;
}

template <typename Row>
KeyRecord ReadKey(const Row& row) {
  return KeyRecord{row.Text(0), row.Text(1), row.Text(2),
                   row.Text(3), row.Int(4),  static_cast<int32_t>(row.Int(5))};
}

// The columns of kEventColumns, in order.
template <typename Out>
void WriteEvent(Out& out, const TraceEvent& e) {
  out.Add(e.operation_id).Add(e.at_ms).Add(TraceActorName(e.actor)).Add(e.kind).Add(e.detail);
  out.Add(static_cast<int64_t>(e.facts.attempt)).Add(e.facts.amount);
  out.Add(static_cast<int64_t>(e.facts.http_status)).Add(e.facts.tx_hash).Add(e.facts.block);
  out.Add(e.facts.reason);
}

// An actor the core does not know is a corrupt row, reported, never guessed.
template <typename Row>
Result<TraceEvent> ReadEvent(const Row& row) {
  const std::optional<TraceActor> actor = ParseTraceActor(row.Text(2));
  if (!actor) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "an event of operation " + row.Text(0) + " has an unknown actor");
  }
  TraceEvent e{row.Text(0), row.Int(1), *actor, row.Text(3), row.Text(4)};
  e.facts.attempt = static_cast<int32_t>(row.Int(5));
  e.facts.amount = row.OptionalInt(6);
  e.facts.http_status = static_cast<int32_t>(row.Int(7));
  e.facts.tx_hash = row.Text(8);
  e.facts.block = row.Int(9);
  e.facts.reason = row.Text(10);
  return e;
}

// The 10 transaction values of a payment (tx_hash … settled_ms), in order.
template <typename Out>
void WritePaymentTransaction(Out& out, const X402PaymentRecord& r) {
  out.Add(r.tx_hash).Add(r.raw_tx_hex).Add(r.relayer).Add(r.relayer_nonce).Add(r.submitted_ms);
  out.Add(r.broadcasts).Add(JoinWords(r.replaced_raw_txs)).Add(r.settled_block);
  out.Add(r.settled_block_hash).Add(r.settled_ms);
}

// The 19 values of kPaymentColumns, in order.
template <typename Out>
void WritePayment(Out& out, const X402PaymentRecord& r) {
  const Authorization& a = r.authorization;
  out.Add(r.operation_id).Add(a.from).Add(a.nonce_hex).Add(a.valid_after_s);
  out.Add(a.valid_before_s).Add(a.value).Add(r.pay_to).Add(r.signature_hex);
  out.Add(static_cast<int64_t>(r.x402_version));
  WritePaymentTransaction(out, r);
}

template <typename Row>
X402PaymentRecord ReadPayment(const Row& row) {
  X402PaymentRecord r;
  r.operation_id = row.Text(0);
  r.authorization = Authorization{row.Text(1), row.Text(2), row.Int(3), row.Int(4), row.Int(5)};
  r.pay_to = row.Text(6);
  r.signature_hex = row.Text(7);
  r.x402_version = static_cast<int>(row.Int(8));
  r.tx_hash = row.Text(9);
  r.raw_tx_hex = row.Text(10);
  r.relayer = row.Text(11);
  r.relayer_nonce = row.Int(12);
  r.submitted_ms = row.Int(13);
  r.broadcasts = row.Int(14);
  r.replaced_raw_txs = SplitWords(row.Text(15));
  r.settled_block = row.Int(16);
  r.settled_block_hash = row.Text(17);
  r.settled_ms = row.Int(18);
  return r;
}

// The 7 values of kAccountColumns, in order.
template <typename Out>
void WriteAccount(Out& out, const AccountRecord& account) {
  out.Add(account.id).Add(account.name).Add(account.api_key_hash);
  out.Add(account.balances.deposited).Add(account.balances.captured);
  out.Add(account.balances.held).Add(account.created_ms);
}

template <typename Row>
AccountRecord ReadAccount(const Row& row) {
  return AccountRecord{row.Text(0), row.Text(1), row.Text(2),
                       Balances{row.Int(3), row.Int(4), row.Int(5)}, row.Int(6)};
}

// The 8 values of kAlertColumns, in order.
template <typename Out>
void WriteAlert(Out& out, const Alert& alert) {
  out.Add(alert.id).Add(alert.operation_id).Add(alert.kind).Add(alert.detail);
  out.Add(alert.created_ms).Add(alert.resolved_ms).Add(alert.resolution).Add(alert.note);
}

template <typename Row>
Alert ReadAlert(const Row& row) {
  return Alert{row.Text(0), row.Text(1),        row.Text(2), row.Text(3),
               row.Int(4),  row.OptionalInt(5), row.Text(6), row.Text(7)};
}

// A posting read back: operation_id, kind, debit, credit, amount, at_ms. A kind the core does not
// know is a corrupt row, reported, never guessed.
template <typename Row>
Result<PostingRecord> ReadPosting(const Row& row) {
  const std::optional<MoveKind> kind = ParseMoveKind(row.Text(1));
  if (!kind) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "a posting of operation " + row.Text(0) + " has an unknown kind");
  }
  return PostingRecord{row.Text(0), *kind, row.Text(2), row.Text(3), row.Int(4), row.Int(5)};
}

// LedgerAudit from the accounts and the net of each (ledger account, posting kind): the same
// arithmetic whichever database summed the postings.
class LedgerAuditBuilder {
 public:
  explicit LedgerAuditBuilder(const std::vector<AccountRecord>& accounts);
  // `ledger_account` is "external", "revenue" or "<prefix>:<account id>"; `net` is credits less
  // debits of postings of kind `kind_name` (as stored) to it. A kind the core does not know is
  // kStoreCorrupt: the books cannot be checked around money whose meaning is unknown.
  Status Add(const std::string& ledger_account, std::string_view kind_name, int64_t net);
  LedgerAudit Finish() &&;

 private:
  LedgerAudit audit_;
  std::map<std::string, AccountAudit> by_account_;
};

// The SQL that sums the postings per (ledger account, kind) for LedgerAuditBuilder::Add.
inline constexpr char kLedgerSumsSql[] =
    "SELECT account, kind, SUM(amount) FROM ("
    " SELECT credit AS account, kind, amount FROM ledger_entries"
    " UNION ALL SELECT debit, kind, -amount FROM ledger_entries"
    ") AS postings GROUP BY account, kind";

// The audit's queries (store.h: ListOperationBooks, …), one text for both backends. `placeholder`
// names the n-th parameter: "?1" on SQLite, "$1" on PostgreSQL.
using Placeholder = std::string (*)(int n);
std::string OperationBooksSql(Placeholder placeholder);   // after_id, limit
std::string RepeatedChargesSql(Placeholder placeholder);  // limit
// Payments one relayer transaction may settle (a batch: chain::kMaxAggregate3Calls). The audit
// calls a transaction shared by more, or by payments at different relayer nonces or with
// different bytes, a violation; a batch's members share one transaction, each with its own
// authorization (which the audit checks on chain).
inline constexpr int kMaxPaymentsPerTransaction = 64;
std::string SharedPaymentsSql(Placeholder placeholder);   // limit (of each kind)
std::string SettledPaymentsSql(Placeholder placeholder);  // after_id, limit

// The UPDATE of an operation from WriteOperation's 19 values: its state columns set, its identity
// (principal, key, fingerprint, route, amount, created) required unchanged, so that an index on
// those is not rewritten (SQLite rewrites an index whose column is assigned, even to its value).
// With `claimed`, also in progress at attempt number placeholder(20) (UpdateClaimedOperation).
std::string OperationUpdateSql(Placeholder placeholder, bool claimed);

// ListOperations's SQL for `filter` (columns kOperationColumns, newest first) and its parameters in
// order: text or integers.
struct SqlParam {
  std::optional<std::string> text;  // else `number`
  int64_t number = 0;
};
struct SqlWithParams {
  std::string sql;
  std::vector<SqlParam> params;
};
SqlWithParams OperationListSql(const OperationFilter& filter, Placeholder placeholder);

// ReadOverview's statements, each one row: held (count, sum, oldest created), a settlement state's
// (count, oldest created) for 'submitted' and 'unknown' (literals: the partial indexes), open
// alerts, accounts, captured since (one parameter).
inline constexpr char kOverviewHeldSql[] =
    "SELECT COUNT(*), COALESCE(SUM(amount), 0), MIN(created_ms) FROM operations "
    "WHERE settlement = 'held'";
inline constexpr char kOverviewSubmittedSql[] =
    "SELECT COUNT(*), MIN(created_ms) FROM operations WHERE settlement = 'submitted'";
inline constexpr char kOverviewUnknownSql[] =
    "SELECT COUNT(*), MIN(created_ms) FROM operations WHERE settlement = 'unknown'";
inline constexpr char kOverviewAlertsSql[] =
    "SELECT COUNT(*) FROM alerts WHERE resolved_ms IS NULL";
inline constexpr char kOverviewAccountsSql[] = "SELECT COUNT(*) FROM accounts";
std::string OverviewCapturedSql(Placeholder placeholder);

// One row of integers (NULL: nullopt), as a backend reads an aggregate.
using IntRow = std::vector<std::optional<int64_t>>;

// ReadOverview, given `row(sql, parameter, columns)`: the first `columns` columns of the one row of
// `sql` (its parameter ?1/$1 bound when given). `captured_sql` is OverviewCapturedSql in the
// backend's placeholders.
template <typename RowFn>
Result<StoreOverview> ReadOverviewWith(RowFn row, const std::string& captured_sql,
                                       int64_t since_ms) {
  StoreOverview overview;
  auto held = row(kOverviewHeldSql, std::nullopt, 3);
  if (!held.ok()) return held.status();
  overview.held_count = (*held)[0].value_or(0);
  overview.held_amount = (*held)[1].value_or(0);
  overview.oldest_hold_created_ms = (*held)[2];
  for (const char* sql : {kOverviewSubmittedSql, kOverviewUnknownSql}) {
    auto settling = row(sql, std::nullopt, 2);
    if (!settling.ok()) return settling.status();
    (sql == kOverviewSubmittedSql ? overview.submitted : overview.unknown) =
        (*settling)[0].value_or(0);
    const std::optional<int64_t> oldest = (*settling)[1];
    if (oldest &&
        (!overview.oldest_settling_created_ms || *oldest < *overview.oldest_settling_created_ms)) {
      overview.oldest_settling_created_ms = oldest;
    }
  }
  const std::pair<std::string, int64_t*> counts[] = {{kOverviewAlertsSql, &overview.open_alerts},
                                                     {kOverviewAccountsSql, &overview.accounts},
                                                     {captured_sql, &overview.captured_since}};
  for (const auto& [sql, value] : counts) {
    auto one =
        row(sql,
            value == &overview.captured_since ? std::optional<int64_t>(since_ms) : std::nullopt, 1);
    if (!one.ok()) return one.status();
    *value = (*one)[0].value_or(0);
  }
  return overview;
}

// A row of OperationBooksSql.
template <typename Row>
Result<OperationBooks> ReadOperationBooks(const Row& row) {
  OperationBooks op;
  op.id = row.Text(0);
  op.principal = row.Text(1);
  op.idempotency_key = row.Text(2);
  op.amount = row.Int(3);
  auto settlement = ParseSettlement(row.Text(4));
  auto fulfillment = ParseFulfillment(row.Text(5));
  if (!settlement || !fulfillment) {
    return Status::Error(ErrorCode::kStoreCorrupt, "operation " + op.id + " has an unknown state");
  }
  op.settlement = *settlement;
  op.fulfillment = *fulfillment;
  op.hold_expires_ms = row.OptionalInt(6);
  op.lease_expires_ms = row.Int(7);
  op.created_ms = row.Int(8);
  op.held = row.Int(9);
  op.captured = row.Int(10);
  op.released = row.Int(11);
  op.refunded = row.Int(12);
  op.captures = row.Int(13);
  op.alerts = row.Int(14);
  op.expiry_alerts = row.Int(15);
  op.sweeper_releases = row.Int(16);
  op.updated_ms = row.Int(17);
  return op;
}

template <typename Row>
RepeatedCharge ReadRepeatedCharge(const Row& row) {
  return RepeatedCharge{row.Text(0), row.Text(1), row.Text(2),
                        row.Text(3), row.Int(4),  row.OptionalInt(5)};
}

template <typename Row>
SharedPayment ReadSharedPayment(const Row& row) {
  return SharedPayment{row.Text(0), row.Int(1)};
}

template <typename Row>
SettledPayment ReadSettledPayment(const Row& row) {
  return SettledPayment{row.Text(0), row.Text(1), row.Text(2),
                        row.Int(3),  row.Text(4), row.Text(5)};
}

}  // namespace agentpay
