// How each stored record maps to its columns, written once for both backends: the column lists,
// the order in which a record's values are bound (Write…: `out` is anything with Add(int64_t),
// Add(string_view), Add(optional<int64_t>), AddBytes(string_view), AddNull(), appending the next
// parameter) and how a row is read back (Read…: `row` is anything with Int, OptionalInt, Text,
// Bytes and IsNull by column). SQLite binds ?1…?N and PostgreSQL $1…$N in the same order.
#pragma once

#include <cstdint>
#include <map>
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

// LedgerAudit from the accounts and the net of each (ledger account, posting kind): the same
// arithmetic whichever database summed the postings.
class LedgerAuditBuilder {
 public:
  explicit LedgerAuditBuilder(const std::vector<AccountRecord>& accounts);
  // `ledger_account` is "external", "revenue" or "<prefix>:<account id>"; `net` is credits less
  // debits of postings of `kind` to it.
  void Add(const std::string& ledger_account, const std::string& kind, int64_t net);
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

}  // namespace agentpay
