// The SQL of PostgresTransaction (see postgres_transaction.h). Records are bound and read through
// records.h, as SQLite's are; only the dialect differs ($n parameters, FOR UPDATE, RETURNING).
#include "store/postgres_transaction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/check.h"
#include "store/ledger.h"
#include "store/records.h"

namespace agentpay {
namespace {

// records.h's `row` over one row of a result.
class RowView {
 public:
  RowView(const pg::Rows& rows, int row) : rows_(rows), row_(row) {}
  int64_t Int(int column) const { return rows_.Int(row_, column); }
  std::optional<int64_t> OptionalInt(int column) const { return rows_.OptionalInt(row_, column); }
  std::string Text(int column) const { return rows_.Text(row_, column); }
  std::string Bytes(int column) const { return rows_.Bytes(row_, column); }
  bool IsNull(int column) const { return rows_.IsNull(row_, column); }

 private:
  const pg::Rows& rows_;
  int row_;
};

// Every row of `rows`, read by `read`.
template <typename Reader>
auto ReadAll(const pg::Rows& rows, Reader read) -> std::vector<decltype(read(RowView(rows, 0)))> {
  std::vector<decltype(read(RowView(rows, 0)))> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(read(RowView(rows, i)));
  return out;
}

// Every row of `rows`, read by `read` (which returns a Result<T>): the first error ends it.
template <typename T, typename Reader>
Result<std::vector<T>> ReadAllChecked(const pg::Rows& rows, Reader read) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    Result<T> row = read(RowView(rows, i));
    if (!row.ok()) return row.status();
    out.push_back(std::move(*row));
  }
  return out;
}

std::string PostgresPlaceholder(int n) { return "$" + std::to_string(n); }

// The first row of `rows` read by `read`, or nullopt when there is none.
template <typename Reader>
auto ReadFirst(const pg::Rows& rows, Reader read)
    -> std::optional<decltype(read(RowView(rows, 0)))> {
  if (rows.empty()) return std::nullopt;
  return read(RowView(rows, 0));
}

Result<std::vector<Operation>> ReadOperations(const pg::Rows& rows) {
  std::vector<Operation> ops;
  ops.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    auto op = ReadOperation(RowView(rows, i));
    if (!op.ok()) return op.status();
    ops.push_back(std::move(*op));
  }
  return ops;
}

// "$1, $2, …, $n".
std::string Placeholders(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) out += (i > 1 ? ", $" : "$") + std::to_string(i);
  return out;
}

const std::string& OperationSelect() {
  static const std::string kSql = std::string("SELECT ") + kOperationColumns + " FROM operations ";
  return kSql;
}

const std::string& PaymentSelect() {
  static const std::string kSql = std::string("SELECT ") + kPaymentColumns + " FROM x402_payments ";
  return kSql;
}

// The compare-and-set of a claimed attempt: in progress, with the claim's attempt number.
const std::string& UpdateClaimedSql() {
  static const std::string kSql = OperationUpdateSql(PostgresPlaceholder, /*claimed=*/true);
  return kSql;
}

}  // namespace

// Every Result<Rows> below is checked with this: on error, the enclosing function returns it.
#define AGENTPAY_ROWS(var, expr)                        \
  auto var##_result = (expr);                           \
  if (!var##_result.ok()) return var##_result.status(); \
  const pg::Rows& var = *var##_result

Result<bool> PostgresTransaction::InsertKey(const KeyRecord& record) {
  AGENTPAY_ROWS(rows, conn_.Query("INSERT INTO idempotency_keys (principal, key, operation_id, "
                                  "fingerprint, created_ms) VALUES ($1, $2, $3, $4, $5) "
                                  "ON CONFLICT DO NOTHING",
                                  pg::Params()
                                      .Add(record.principal)
                                      .Add(record.key)
                                      .Add(record.operation_id)
                                      .Add(record.fingerprint)
                                      .Add(record.created_ms)));
  return rows.changed() == 1;
}

Status PostgresTransaction::ReserveNewKey(const KeyRecord& record) {
  return conn_.Defer(
      "INSERT INTO idempotency_keys (principal, key, operation_id, fingerprint, created_ms) "
      "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
      pg::Params()
          .Add(record.principal)
          .Add(record.key)
          .Add(record.operation_id)
          .Add(record.fingerprint)
          .Add(record.created_ms),
      pg::Connection::Expect{
          1, Status::Error(ErrorCode::kStoreKeyTaken, "the idempotency key exists already")});
}

Result<std::optional<KeyRecord>> PostgresTransaction::FindKey(std::string_view principal,
                                                              std::string_view key) {
  AGENTPAY_ROWS(rows, conn_.Query(std::string("SELECT ") + kKeyColumns +
                                      " FROM idempotency_keys WHERE principal = $1 AND key = $2",
                                  pg::Params().Add(principal).Add(key)));
  return ReadFirst(rows, ReadKey<RowView>);
}

Result<bool> PostgresTransaction::RecordArrival(const KeyRecord& key, const TraceEvent& event) {
  AGENTPAY_ROWS(rows, conn_.Query("UPDATE idempotency_keys "
                                  "SET arrivals_recorded = arrivals_recorded + 1 "
                                  "WHERE principal = $1 AND key = $2 AND operation_id = $3 "
                                  "AND arrivals_recorded < $4",
                                  pg::Params()
                                      .Add(key.principal)
                                      .Add(key.key)
                                      .Add(key.operation_id)
                                      .Add(static_cast<int64_t>(kMaxRecordedArrivals))));
  if (rows.changed() != 1) return false;
  if (Status s = AppendEvent(event); !s.ok()) return s;
  return true;
}

Status PostgresTransaction::DeleteKey(std::string_view principal, std::string_view key) {
  return conn_.Defer("DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2",
                     pg::Params().Add(principal).Add(key));
}

Status PostgresTransaction::InsertOperation(const Operation& op) {
  static const std::string kSql = std::string("INSERT INTO operations (") + kOperationColumns +
                                  ") VALUES (" + Placeholders(19) + ")";
  pg::Params params;
  WriteOperation(params, op);
  return conn_.Defer(kSql, params);
}

Status PostgresTransaction::UpdateOperation(const Operation& op) {
  static const std::string kSql = OperationUpdateSql(PostgresPlaceholder, /*claimed=*/false);
  pg::Params params;
  WriteOperation(params, op);
  Status updated = conn_.Defer(
      kSql, params,
      pg::Connection::Expect{1, Status::Error(ErrorCode::kStoreNotFound,
                                              "no operation " + op.id + " of this identity")});
  if (updated.ok() && ReleasesPayerReservation(op)) return ReleasePayerReservation(op.id);
  return updated;
}

Result<bool> PostgresTransaction::UpdateClaimedOperation(const Operation& op,
                                                         int32_t expected_attempts) {
  pg::Params params;
  WriteOperation(params, op);
  params.Add(static_cast<int64_t>(expected_attempts));
  AGENTPAY_ROWS(rows, conn_.Query(UpdateClaimedSql(), params));
  if (rows.changed() == 1 && ReleasesPayerReservation(op)) {
    if (Status s = ReleasePayerReservation(op.id); !s.ok()) return s;
  }
  return rows.changed() == 1;
}

Status PostgresTransaction::UpdateClaimedOperationOrFail(const Operation& op,
                                                         int32_t expected_attempts) {
  pg::Params params;
  WriteOperation(params, op);
  params.Add(static_cast<int64_t>(expected_attempts));
  Status updated = conn_.Defer(
      UpdateClaimedSql(), params,
      pg::Connection::Expect{
          1, Status::Error(ErrorCode::kStoreClaimLost,
                           "operation " + op.id + " is no longer claimed by this attempt")});
  // A lost claim fails the whole decision, this release with it.
  if (updated.ok() && ReleasesPayerReservation(op)) return ReleasePayerReservation(op.id);
  return updated;
}

Result<PayerReservationState> PostgresTransaction::ReadPayerReservations(
    std::string_view network, std::string_view asset, std::string_view payer,
    int64_t lapsed_at_s) {
  // One round trip for both. Decisions of every gateway run one batch at a time under the
  // writers' lock (postgres_store.cc), so no row lock is needed to serialise a payer's reservers.
  AGENTPAY_ROWS(rows,
                conn_.Query("SELECT COALESCE((SELECT epoch FROM payer_epochs WHERE network = $1 "
                            "AND asset = $2 AND payer = $3), 0), COALESCE((SELECT SUM(amount) "
                            "FROM payer_reservations WHERE network = $1 AND asset = $2 AND "
                            "payer = $3 AND valid_before_s > $4), 0)",
                            pg::Params().Add(network).Add(asset).Add(payer).Add(lapsed_at_s)));
  AGENTPAY_CHECK(rows.size() == 1);
  return PayerReservationState{rows.Int(0, 0), rows.Int(0, 1)};
}

Status PostgresTransaction::InsertPayerReservation(const PayerReservationRecord& record) {
  AGENTPAY_CHECK(record.amount > 0);
  return conn_.Defer(
      "INSERT INTO payer_reservations (network, asset, payer, nonce, operation_id, amount, "
      "valid_before_s) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      pg::Params()
          .Add(record.network)
          .Add(record.asset)
          .Add(record.payer)
          .Add(record.nonce)
          .Add(record.operation_id)
          .Add(record.amount)
          .Add(record.valid_before_s));
}

Status PostgresTransaction::ReleasePayerReservation(std::string_view operation_id) {
  // The reservation goes and the epoch moves on by its amount, in one statement.
  return conn_.Defer(
      "WITH dropped AS (DELETE FROM payer_reservations WHERE operation_id = $1 "
      "RETURNING network, asset, payer, amount) "
      "INSERT INTO payer_epochs AS e (network, asset, payer, epoch) "
      "SELECT network, asset, payer, amount FROM dropped "
      "ON CONFLICT (network, asset, payer) DO UPDATE SET epoch = e.epoch + excluded.epoch",
      pg::Params().Add(operation_id));
}

Result<std::vector<int64_t>> PostgresTransaction::AddRateUsage(
    const std::vector<RateUsageRecord>& usage, int64_t updated_ms) {
  if (usage.empty()) return std::vector<int64_t>{};
  std::vector<std::string> kinds, keys;
  std::vector<int64_t> windows, counts;
  for (const RateUsageRecord& row : usage) {
    AGENTPAY_CHECK(row.count >= 0);
    kinds.push_back(row.kind);
    keys.push_back(row.key);
    windows.push_back(row.window_start_ms);
    counts.push_back(row.count);
  }
  // One statement for all rows (the caller gives each (kind, key, window) once).
  AGENTPAY_ROWS(rows,
                conn_.Query("INSERT INTO rate_usage AS r (kind, key, window_start_ms, count, "
                            "updated_ms) SELECT u.kind, u.key, u.w, u.c, $5 FROM "
                            "unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) "
                            "AS u(kind, key, w, c) ON CONFLICT (kind, key, window_start_ms) DO "
                            "UPDATE SET count = r.count + excluded.count, updated_ms = "
                            "excluded.updated_ms RETURNING kind, key, window_start_ms, count",
                            pg::Params()
                                .AddArray(kinds)
                                .AddArray(keys)
                                .AddArray(windows)
                                .AddArray(counts)
                                .Add(updated_ms)));
  std::map<std::tuple<std::string, std::string, int64_t>, int64_t> by_row;
  for (int i = 0; i < rows.size(); ++i) {
    by_row[{rows.Text(i, 0), rows.Text(i, 1), rows.Int(i, 2)}] = rows.Int(i, 3);
  }
  std::vector<int64_t> totals;
  for (const RateUsageRecord& row : usage) {
    auto found = by_row.find({row.kind, row.key, row.window_start_ms});
    if (found == by_row.end()) {
      return Status::Error(ErrorCode::kStoreCorrupt, "rate usage upsert lost a row");
    }
    totals.push_back(found->second);
  }
  return totals;
}

Result<std::vector<RateUsageRecord>> PostgresTransaction::ListRateUsage(
    int64_t min_window_start_ms, int64_t updated_since_ms, int limit) {
  AGENTPAY_CHECK(limit > 0);
  AGENTPAY_ROWS(rows, conn_.Query("SELECT kind, key, window_start_ms, count FROM rate_usage "
                                  "WHERE updated_ms >= $2 AND window_start_ms >= $1 "
                                  "ORDER BY updated_ms LIMIT $3",
                                  pg::Params()
                                      .Add(min_window_start_ms)
                                      .Add(updated_since_ms)
                                      .Add(int64_t{limit})));
  std::vector<RateUsageRecord> out;
  for (int i = 0; i < rows.size(); ++i) {
    out.push_back({rows.Text(i, 0), rows.Text(i, 1), rows.Int(i, 2), rows.Int(i, 3)});
  }
  return out;
}

Status PostgresTransaction::PruneRateUsage(int64_t window_start_ms) {
  return conn_.Defer("DELETE FROM rate_usage WHERE window_start_ms < $1",
                     pg::Params().Add(window_start_ms));
}

Result<std::optional<Operation>> PostgresTransaction::FindOperation(std::string_view id) {
  static const std::string kSql = OperationSelect() + "WHERE id = $1";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(id)));
  if (rows.empty()) return std::optional<Operation>();
  auto op = ReadOperation(RowView(rows, 0));
  if (!op.ok()) return op.status();
  return std::optional<Operation>(std::move(*op));
}

Result<std::vector<Operation>> PostgresTransaction::ListOperations(const OperationFilter& filter) {
  SqlWithParams query = OperationListSql(filter, PostgresPlaceholder);
  pg::Params params;
  for (const SqlParam& param : query.params) {
    if (param.text) {
      params.Add(std::string_view(*param.text));
    } else {
      params.Add(param.number);
    }
  }
  AGENTPAY_ROWS(rows, conn_.Query(query.sql, params));
  return ReadOperations(rows);
}

Result<std::vector<Operation>> PostgresTransaction::ListSettlingOperations(
    std::string_view after_id, int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = OperationSelect() +
                                  "WHERE settlement IN ('submitted', 'unknown') AND id > $1 "
                                  "ORDER BY id LIMIT $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(after_id).Add(int64_t{limit})));
  return ReadOperations(rows);
}

Result<std::vector<Operation>> PostgresTransaction::ListUnpaidRetries(std::string_view after_id,
                                                                      int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = OperationSelect() +
                                  "WHERE settlement = 'none' AND fulfillment = 'pending_retry' "
                                  "AND id > $1 ORDER BY id LIMIT $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(after_id).Add(int64_t{limit})));
  return ReadOperations(rows);
}

Result<std::vector<Operation>> PostgresTransaction::ListExpiredHolds(int64_t now_ms, int limit) {
  static const std::string kSql = OperationSelect() +
                                  "WHERE settlement = 'held' AND hold_expires_ms <= $1 "
                                  "ORDER BY hold_expires_ms, id LIMIT $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(now_ms).Add(int64_t{limit})));
  return ReadOperations(rows);
}

Result<bool> PostgresTransaction::InsertX402Payment(const X402PaymentRecord& r) {
  static const std::string kSql = std::string("INSERT INTO x402_payments (") + kPaymentColumns +
                                  ") VALUES (" + Placeholders(19) + ") ON CONFLICT DO NOTHING";
  pg::Params params;
  WritePayment(params, r);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, params));
  return rows.changed() == 1;
}

Result<std::optional<X402PaymentRecord>> PostgresTransaction::FindX402Payment(
    std::string_view operation_id) {
  static const std::string kSql = PaymentSelect() + "WHERE operation_id = $1";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(operation_id)));
  return ReadFirst(rows, ReadPayment<RowView>);
}

Result<std::optional<X402PaymentRecord>> PostgresTransaction::FindX402PaymentByAuthorization(
    std::string_view payer, std::string_view nonce) {
  static const std::string kSql = PaymentSelect() + "WHERE payer = $1 AND nonce = $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(payer).Add(nonce)));
  return ReadFirst(rows, ReadPayment<RowView>);
}

Status PostgresTransaction::UpdateX402Payment(const X402PaymentRecord& r) {
  pg::Params params;
  params.Add(r.operation_id);
  WritePaymentTransaction(params, r);
  return conn_.Defer(
      "UPDATE x402_payments SET tx_hash = $2, raw_tx = $3, relayer = $4, relayer_nonce = $5, "
      "submitted_ms = $6, broadcasts = $7, replaced_raw_txs = $8, settled_block = $9, "
      "settled_block_hash = $10, settled_ms = $11 WHERE operation_id = $1",
      params,
      pg::Connection::Expect{1, Status::Error(ErrorCode::kStoreNotFound,
                                              "no x402 payment for operation " + r.operation_id)});
}

Result<std::vector<X402PaymentRecord>> PostgresTransaction::ListX402PaymentsAtRelayerNonce(
    std::string_view relayer, int64_t relayer_nonce) {
  static const std::string kSql = PaymentSelect() +
                                  "WHERE relayer = $1 AND relayer_nonce = $2 "
                                  "ORDER BY submitted_ms, operation_id LIMIT " +
                                  std::to_string(kMaxPaymentsPerTransaction + 1);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(relayer).Add(relayer_nonce)));
  return ReadAll(rows, ReadPayment<RowView>);
}

Result<int64_t> PostgresTransaction::TakeRelayerNonce(std::string_view relayer,
                                                      int64_t chain_floor) {
  // One statement: the row's lock orders concurrent takers, each gets its own nonce.
  AGENTPAY_ROWS(rows, conn_.Query("INSERT INTO relayer_nonces AS r (relayer, next_nonce) "
                                  "VALUES ($1, $2 + 1) ON CONFLICT (relayer) DO UPDATE "
                                  "SET next_nonce = GREATEST(r.next_nonce, $2) + 1 "
                                  "RETURNING next_nonce - 1",
                                  pg::Params().Add(relayer).Add(chain_floor)));
  AGENTPAY_CHECK(rows.size() == 1);
  return rows.Int(0, 0);
}

Result<int64_t> PostgresTransaction::NextRelayerNonce(std::string_view relayer) {
  AGENTPAY_ROWS(rows, conn_.Query("SELECT next_nonce FROM relayer_nonces WHERE relayer = $1",
                                  pg::Params().Add(relayer)));
  return rows.empty() ? int64_t{0} : rows.Int(0, 0);
}

Result<std::vector<X402PaymentRecord>> PostgresTransaction::ListRecentSettlements(int64_t since_ms,
                                                                                  int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql =
      PaymentSelect() +
      "WHERE settled_ms > 0 AND settled_ms >= $1 "
      "ORDER BY settled_block DESC, settled_block_hash DESC, operation_id DESC LIMIT $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(since_ms).Add(int64_t{limit})));
  return ReadAll(rows, ReadPayment<RowView>);
}

Status PostgresTransaction::InsertAlert(const Alert& alert) {
  static const std::string kSql =
      std::string("INSERT INTO alerts (") + kAlertColumns + ") VALUES (" + Placeholders(8) + ")";
  pg::Params params;
  WriteAlert(params, alert);
  return conn_.Defer(kSql, params);
}

Result<std::vector<Alert>> PostgresTransaction::ListAlerts(int limit) {
  static const std::string kSql =
      std::string("SELECT ") + kAlertColumns + " FROM alerts ORDER BY created_ms DESC, id LIMIT $1";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(int64_t{limit})));
  return ReadAll(rows, ReadAlert<RowView>);
}

Result<std::vector<Alert>> PostgresTransaction::ListAlertsOf(std::string_view operation_id) {
  static const std::string kSql = std::string("SELECT ") + kAlertColumns +
                                  " FROM alerts WHERE operation_id = $1 ORDER BY created_ms, id";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(operation_id)));
  return ReadAll(rows, ReadAlert<RowView>);
}

Result<bool> PostgresTransaction::ResolveAlert(const Alert& resolved) {
  AGENTPAY_CHECK(resolved.resolved_ms.has_value());
  AGENTPAY_ROWS(rows, conn_.Query("UPDATE alerts SET resolved_ms = $2, resolution = $3, note = $4 "
                                  "WHERE id = $1 AND resolved_ms IS NULL",
                                  pg::Params()
                                      .Add(resolved.id)
                                      .Add(resolved.resolved_ms)
                                      .Add(resolved.resolution)
                                      .Add(resolved.note)));
  return rows.changed() == 1;
}

Result<std::vector<std::string>> PostgresTransaction::ListExpiredResults(int64_t now_ms,
                                                                         int limit) {
  AGENTPAY_ROWS(rows, conn_.Query("SELECT id FROM operations WHERE response_body IS NOT NULL "
                                  "AND retained_until_ms <= $1 "
                                  "AND fulfillment IN ('succeeded', 'rejected') "
                                  "ORDER BY retained_until_ms, id LIMIT $2",
                                  pg::Params().Add(now_ms).Add(int64_t{limit})));
  return ReadAll(rows, [](const RowView& row) { return row.Text(0); });
}

Result<PruneOutcome> PostgresTransaction::PruneResult(const Operation& op) {
  PruneOutcome outcome;
  {
    AGENTPAY_ROWS(body, conn_.Query("UPDATE operations SET response_body = NULL "
                                    "WHERE id = $1 AND response_body IS NOT NULL",
                                    pg::Params().Add(op.id)));
    if (body.changed() != 1) return outcome;
  }
  outcome.pruned = true;
  AGENTPAY_ROWS(key,
                conn_.Query("DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 "
                            "AND operation_id = $3",
                            pg::Params().Add(op.principal).Add(op.idempotency_key).Add(op.id)));
  outcome.key_deleted = key.changed() == 1;
  return outcome;
}

Status PostgresTransaction::AppendEvent(const TraceEvent& event) {
  pg::Params params;
  WriteEvent(params, event);
  return conn_.Defer(std::string("INSERT INTO operation_events (") + kEventColumns +
                         ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                     std::move(params));
}

Result<std::vector<TraceEvent>> PostgresTransaction::ListEvents(std::string_view operation_id) {
  AGENTPAY_ROWS(rows, conn_.Query(std::string("SELECT ") + kEventColumns +
                                      " FROM operation_events WHERE operation_id = $1 ORDER BY id",
                                  pg::Params().Add(operation_id)));
  return ReadAllChecked<TraceEvent>(rows, ReadEvent<RowView>);
}

Result<bool> PostgresTransaction::InsertAccount(const AccountRecord& account) {
  static const std::string kSql = std::string("INSERT INTO accounts (") + kAccountColumns +
                                  ") VALUES (" + Placeholders(7) + ") ON CONFLICT DO NOTHING";
  pg::Params params;
  WriteAccount(params, account);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, params));
  if (rows.changed() != 1) return false;
  if (balances_ != nullptr) balances_->NoteInserted(account.id);
  if (Status keyed = InsertFirstApiKey(*this, account); !keyed.ok()) return keyed;
  return true;
}

Result<std::optional<AccountRecord>> PostgresTransaction::FindAccount(std::string_view id) {
  if (Status written = WriteKeptBalances(); !written.ok()) return written;
  static const std::string kSql =
      std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE id = $1";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(id)));
  return ReadFirst(rows, ReadAccount<RowView>);
}

Result<std::optional<AccountRecord>> PostgresTransaction::FindAccountByKeyHash(
    std::string_view hash) {
  if (Status written = WriteKeptBalances(); !written.ok()) return written;
  static const std::string kSql = std::string("SELECT ") + kAccountColumns +
                                  " FROM accounts WHERE id = (SELECT account_id FROM api_keys "
                                  "WHERE key_hash = $1 AND revoked_ms IS NULL)";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(hash)));
  return ReadFirst(rows, ReadAccount<RowView>);
}

Result<std::vector<AccountRecord>> PostgresTransaction::ListAccounts() {
  if (Status written = WriteKeptBalances(); !written.ok()) return written;
  static const std::string kSql =
      std::string("SELECT ") + kAccountColumns + " FROM accounts ORDER BY id";
  AGENTPAY_ROWS(rows, conn_.Query(kSql));
  return ReadAll(rows, ReadAccount<RowView>);
}

Result<std::vector<AccountRecord>> PostgresTransaction::ListAccountsPage(std::string_view after_id,
                                                                         int limit) {
  if (Status written = WriteKeptBalances(); !written.ok()) return written;
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = std::string("SELECT ") + kAccountColumns +
                                  " FROM accounts WHERE id > $1 ORDER BY id LIMIT $2";
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(after_id).Add(int64_t{limit})));
  return ReadAll(rows, ReadAccount<RowView>);
}

Result<bool> PostgresTransaction::InsertApiKey(const ApiKeyRecord& key) {
  AGENTPAY_ROWS(rows, conn_.Query("INSERT INTO api_keys (id, account_id, key_hash, created_ms, "
                                  "revoked_ms) VALUES ($1, $2, $3, $4, $5) "
                                  "ON CONFLICT DO NOTHING",
                                  pg::Params()
                                      .Add(key.id)
                                      .Add(key.account_id)
                                      .Add(key.key_hash)
                                      .Add(key.created_ms)
                                      .Add(key.revoked_ms)));
  return rows.changed() == 1;
}

Result<std::vector<ApiKeyRecord>> PostgresTransaction::ListApiKeys(std::string_view account_id) {
  AGENTPAY_ROWS(rows, conn_.Query("SELECT id, account_id, key_hash, created_ms, revoked_ms "
                                  "FROM api_keys WHERE account_id = $1 ORDER BY created_ms, id",
                                  pg::Params().Add(account_id)));
  return ReadAll(rows, [](const RowView& row) {
    return ApiKeyRecord{row.Text(0), row.Text(1), row.Text(2), row.Int(3), row.OptionalInt(4)};
  });
}

Result<bool> PostgresTransaction::RevokeApiKey(std::string_view account_id, std::string_view key_id,
                                               int64_t at_ms) {
  AGENTPAY_ROWS(rows, conn_.Query("UPDATE api_keys SET revoked_ms = $3 "
                                  "WHERE account_id = $1 AND id = $2 AND revoked_ms IS NULL",
                                  pg::Params().Add(account_id).Add(key_id).Add(at_ms)));
  return rows.changed() == 1;
}

Result<bool> PostgresTransaction::InsertDeposit(const DepositRecord& deposit) {
  AGENTPAY_ROWS(rows, conn_.Query("INSERT INTO deposits (account_id, reference, amount, "
                                  "created_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                  pg::Params()
                                      .Add(deposit.account_id)
                                      .Add(deposit.reference)
                                      .Add(deposit.amount)
                                      .Add(deposit.created_ms)));
  return rows.changed() == 1;
}

Result<std::optional<DepositRecord>> PostgresTransaction::FindDeposit(std::string_view account_id,
                                                                      std::string_view reference) {
  AGENTPAY_ROWS(rows, conn_.Query("SELECT account_id, reference, amount, created_ms FROM deposits "
                                  "WHERE account_id = $1 AND reference = $2",
                                  pg::Params().Add(account_id).Add(reference)));
  return ReadFirst(rows, [](const RowView& row) {
    return DepositRecord{row.Text(0), row.Text(1), row.Int(2), row.Int(3)};
  });
}

const BalanceCache::Entry* BalanceCache::Find(std::string_view account_id) const {
  auto found = accounts_.find(account_id);
  return found == accounts_.end() ? nullptr : &found->second;
}

void BalanceCache::Note(const std::string& account_id, const Entry* entry) {
  if (entry != nullptr && !(entry->current == entry->stored)) {
    unwritten_.insert(account_id);
  } else {
    unwritten_.erase(account_id);
  }
}

namespace {

Balances Minus(const Balances& a, const Balances& b) {
  return {a.deposited - b.deposited, a.captured - b.captured, a.held - b.held};
}

Balances Plus(const Balances& a, const Balances& b) {
  return {a.deposited + b.deposited, a.captured + b.captured, a.held + b.held};
}

}  // namespace

std::unordered_set<std::string_view> BalanceCache::Journaled() const {
  std::unordered_set<std::string_view> named;
  for (const Change& change : journal_) named.insert(change.account_id);
  for (const auto& [id, journal] : held_) {
    for (const Change& change : journal) named.insert(change.account_id);
  }
  return named;
}

BalanceCache::Change& BalanceCache::Journaled(std::string_view account_id) {
  auto noted = std::find_if(journal_.begin(), journal_.end(),
                            [&](const Change& change) { return change.account_id == account_id; });
  if (noted != journal_.end()) return *noted;
  return journal_.emplace_back(Change{std::string(account_id), {}, {}, false});
}

void BalanceCache::Set(std::string_view account_id, const Entry& entry) {
  auto found = accounts_.find(account_id);
  if (found != accounts_.end()) {
    // A new entry is what the row holds, read: nothing changed yet.
    const Balances current = Minus(entry.current, found->second.current);
    const Balances stored = Minus(entry.stored, found->second.stored);
    if (!(current == Balances{}) || !(stored == Balances{})) {
      Change& change = Journaled(account_id);
      change.current = Plus(change.current, current);
      change.stored = Plus(change.stored, stored);
    }
  }
  if (found == accounts_.end()) {
    if (accounts_.size() >= kMaxAccounts) {
      // Forgets what has nothing to write and no journal names (undoing needs the entry).
      const auto journaled = Journaled();
      std::erase_if(accounts_, [&](const auto& kept) {
        return kept.second.current == kept.second.stored && !journaled.contains(kept.first);
      });
    }
    found = accounts_.emplace(std::string(account_id), entry).first;
  } else {
    found->second = entry;
  }
  Note(found->first, &found->second);
}

void BalanceCache::NoteInserted(std::string_view account_id) {
  Journaled(account_id).inserted = true;
}

bool BalanceCache::InsertedByHeld(std::string_view account_id) const {
  return std::any_of(held_.begin(), held_.end(), [&](const auto& held) {
    return std::any_of(held.second.begin(), held.second.end(), [&](const Change& change) {
      return change.inserted && change.account_id == account_id;
    });
  });
}

std::vector<std::pair<std::string, BalanceCache::Entry>> BalanceCache::Unwritten() const {
  std::vector<std::pair<std::string, Entry>> unwritten;
  unwritten.reserve(unwritten_.size());
  for (const std::string& id : unwritten_) unwritten.emplace_back(id, accounts_.find(id)->second);
  return unwritten;
}

void BalanceCache::Undo(const Journal& journal) {
  for (const Change& change : journal) {
    auto found = accounts_.find(change.account_id);
    // Gone only with Clear, which forgot the moves too.
    if (found == accounts_.end()) continue;
    if (change.inserted) {
      // The row goes with the decision (no decision after it moved money on the account: Move
      // waits for the decision that inserted it, InsertedByHeld).
      accounts_.erase(found);
      Note(change.account_id, nullptr);
      continue;
    }
    found->second.current = Minus(found->second.current, change.current);
    found->second.stored = Minus(found->second.stored, change.stored);
    Note(found->first, &found->second);
  }
}

uint64_t BalanceCache::Hold(Journal journal) {
  held_.emplace_back(next_held_, std::move(journal));
  return next_held_++;
}

void BalanceCache::UndoHeld(uint64_t id) {
  auto found =
      std::find_if(held_.begin(), held_.end(), [&](const auto& held) { return held.first == id; });
  if (found == held_.end()) return;  // confirmed or cleared already
  Journal journal = std::move(found->second);
  held_.erase(found);
  Undo(journal);
}

UnconfirmedGains BalanceCache::GainsAtRisk(std::string_view account_id) const {
  UnconfirmedGains gains;
  for (const auto& [id, journal] : held_) {
    for (const Change& change : journal) {
      if (change.account_id == account_id) gains.Add(change.current);
    }
  }
  return gains;
}

void BalanceCache::Refresh(std::string_view account_id, const Balances& row) {
  AGENTPAY_CHECK(unwritten_.empty() && journal_.empty() && held_.empty());
  auto found = accounts_.find(account_id);
  if (found != accounts_.end()) found->second = Entry{row, row};
}

void BalanceCache::Clear() {
  accounts_.clear();
  unwritten_.clear();
  journal_.clear();
  held_.clear();
}

// Up to this many accounts, WriteBalances writes a row per statement; more share one statement.
// (bench/postgres_vs_sqlite.py: a batch's accounts are one with a hot account, about eight
// with 32.)
constexpr size_t kBalanceRowsOneByOne = 8;

Status WriteBalances(pg::Connection& conn, BalanceCache& cache) {
  auto unwritten = cache.Unwritten();
  if (unwritten.empty()) return Status::Ok();
  // Each row a compare-and-set against what it held when it was read or last written, so that a
  // row changed any other way fails the statement (and the rest of the transaction with it).
  // (written_batch is for gateways from before migration 15 still running beside this one.)
  const Status changed_under_us =
      Status::Error(ErrorCode::kStoreNotFound, "an account's balances changed under the writer");
  std::vector<std::string> ids;
  ids.reserve(unwritten.size());
  for (const auto& [account_id, entry] : unwritten) ids.push_back(account_id);
  if (unwritten.size() <= kBalanceRowsOneByOne) {
    // A statement per row: the server keeps one plan for it. (The statement for many rows below is
    // planned again each time, its rows unknown until then, which costs more than a few rows.)
    for (const auto& [account_id, entry] : unwritten) {
      if (Status written = conn.Defer(
              "UPDATE accounts SET deposited = $2, captured = $3, held = $4, written_batch = $8 "
              "WHERE id = $1 AND deposited = $5 AND captured = $6 AND held = $7",
              pg::Params()
                  .Add(account_id)
                  .Add(entry.current.deposited)
                  .Add(entry.current.captured)
                  .Add(entry.current.held)
                  .Add(entry.stored.deposited)
                  .Add(entry.stored.captured)
                  .Add(entry.stored.held)
                  .Add(cache.batch()),
              pg::Connection::Expect{1, changed_under_us});
          !written.ok()) {
        return written;
      }
    }
  } else {
    // One statement for all of them (a statement's start costs the server more than a row).
    std::vector<int64_t> deposited, captured, held, was_deposited, was_captured, was_held;
    for (const auto& [account_id, entry] : unwritten) {
      deposited.push_back(entry.current.deposited);
      captured.push_back(entry.current.captured);
      held.push_back(entry.current.held);
      was_deposited.push_back(entry.stored.deposited);
      was_captured.push_back(entry.stored.captured);
      was_held.push_back(entry.stored.held);
    }
    if (Status written = conn.Defer(
            "UPDATE accounts AS a SET deposited = v.deposited, captured = v.captured, held = "
            "v.held, written_batch = $8 FROM unnest($1::text[], $2::bigint[], $3::bigint[], "
            "$4::bigint[], "
            "$5::bigint[], $6::bigint[], $7::bigint[]) AS v(id, deposited, captured, held, "
            "was_deposited, was_captured, was_held) WHERE a.id = v.id AND a.deposited = "
            "v.was_deposited AND a.captured = v.was_captured AND a.held = v.was_held",
            pg::Params()
                .AddArray(ids)
                .AddArray(deposited)
                .AddArray(captured)
                .AddArray(held)
                .AddArray(was_deposited)
                .AddArray(was_captured)
                .AddArray(was_held)
                .Add(cache.batch()),
            pg::Connection::Expect{static_cast<int64_t>(ids.size()), changed_under_us});
        !written.ok()) {
      return written;
    }
  }
  // The accounts this batch wrote, for other gateways' next batches (postgres_store.cc, Begin).
  // A batch that writes balances twice (WriteKeptBalances) logs twice: the log is read as a set.
  if (Status logged =
          conn.Defer("INSERT INTO accounts_written (batch, account_ids) VALUES ($1, $2)",
                     pg::Params().Add(cache.batch()).AddArray(ids));
      !logged.ok()) {
    return logged;
  }
  for (const auto& [account_id, entry] : unwritten) {
    cache.Set(account_id, {entry.current, entry.current});
  }
  return Status::Ok();
}

Status PostgresTransaction::WriteKeptBalances() {
  if (balances_ == nullptr) return Status::Ok();
  // The decisions held over may yet be undone, moves and all: confirmed first.
  if (Status confirmed = ConfirmHeld(); !confirmed.ok()) return confirmed;
  return WriteBalances(conn_, *balances_);
}

Status PostgresTransaction::ConfirmHeld() {
  if (conn_.holding_over()) {
    if (Status confirmed = conn_.Sync(); !confirmed.ok()) return confirmed;
  }
  if (balances_ != nullptr) balances_->ConfirmHeld();
  return Status::Ok();
}

Result<std::optional<BalanceCache::Entry>> PostgresTransaction::ReadBalances(
    std::string_view account_id) {
  if (balances_ != nullptr) {
    if (const BalanceCache::Entry* kept = balances_->Find(account_id)) return std::optional(*kept);
  }
  // No FOR UPDATE: the writers' lock (postgres_store.cc) already makes this decision the only
  // writer until it commits, and a row lock taken in one savepoint of a transaction on a row
  // that an earlier savepoint updated costs PostgreSQL a multixact each time.
  AGENTPAY_ROWS(read, conn_.Query("SELECT deposited, captured, held FROM accounts WHERE id = $1",
                                  pg::Params().Add(account_id)));
  if (read.empty()) return std::optional<BalanceCache::Entry>();
  Balances balances{read.Int(0, 0), read.Int(0, 1), read.Int(0, 2)};
  BalanceCache::Entry entry{balances, balances};
  if (balances_ != nullptr) balances_->Set(account_id, entry);
  return std::optional(entry);
}

Result<MoveOutcome> PostgresTransaction::Move(std::string_view account_id, MoveKind kind,
                                              int64_t amount, std::string_view operation_id,
                                              int64_t at_ms) {
  auto read = ReadBalances(account_id);
  if (!read.ok()) return read.status();
  if (!read->has_value()) {
    return Status::Error(ErrorCode::kStoreNotFound, "no account " + std::string(account_id));
  }
  BalanceCache::Entry entry = **read;
  if (balances_ != nullptr && conn_.pending()) {
    // The cache's balances include the moves of decisions held over, and those may yet be undone;
    // and this decision's own writes may yet fail. A move that succeeds whatever is undone is
    // decided now (the common case: the account holds more than the moves in flight); any other,
    // refusals included, once the database has answered for everything sent.
    if (!conn_.holding_over()) balances_->ConfirmHeld();
    if (balances_->InsertedByHeld(account_id) ||
        !MoveSucceedsWhateverIsUndone(entry.current, balances_->GainsAtRisk(account_id), kind,
                                      amount)) {
      if (Status confirmed = conn_.Sync(); !confirmed.ok()) return confirmed;
      balances_->ConfirmHeld();
      read = ReadBalances(account_id);  // the cache, after any undo
      if (!read.ok()) return read.status();
      if (!read->has_value()) {
        return Status::Error(ErrorCode::kStoreNotFound, "no account " + std::string(account_id));
      }
      entry = **read;
    }
  }
  MoveOutcome outcome = ApplyMove(&entry.current, kind, amount);
  if (outcome != MoveOutcome::kOk) return outcome;
  if (balances_ != nullptr) {
    balances_->Set(account_id, entry);  // the row is written with the batch (WriteBalances)
  } else {
    BalanceCache once;
    once.Set(account_id, entry);
    if (Status written = WriteBalances(conn_, once); !written.ok()) return written;
  }
  Posting posting = PostingFor(kind);
  pg::Params params;
  if (operation_id.empty()) {
    params.AddNull();
  } else {
    params.Add(operation_id);
  }
  params.Add(MoveKindName(kind))
      .Add(LedgerAccountName(posting.debit_kind, account_id))
      .Add(LedgerAccountName(posting.credit_kind, account_id))
      .Add(amount)
      .Add(at_ms);
  if (Status posted = conn_.Defer("INSERT INTO ledger_entries (operation_id, kind, debit, credit, "
                                  "amount, at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
                                  std::move(params));
      !posted.ok()) {
    return posted;
  }
  return MoveOutcome::kOk;
}

Result<std::vector<PostingRecord>> PostgresTransaction::ListPostings(
    std::string_view operation_id) {
  AGENTPAY_ROWS(rows, conn_.Query("SELECT operation_id, kind, debit, credit, amount, at_ms "
                                  "FROM ledger_entries WHERE operation_id = $1 ORDER BY id",
                                  pg::Params().Add(operation_id)));
  return ReadAllChecked<PostingRecord>(rows, ReadPosting<RowView>);
}

Result<LedgerAudit> PostgresTransaction::Audit() {
  auto accounts = ListAccounts();
  if (!accounts.ok()) return accounts.status();
  AGENTPAY_ROWS(sums, conn_.Query(kLedgerSumsSql));
  LedgerAuditBuilder builder(*accounts);
  for (int i = 0; i < sums.size(); ++i) {
    if (Status added = builder.Add(sums.Text(i, 0), sums.Text(i, 1), sums.Int(i, 2)); !added.ok()) {
      return added;
    }
  }
  return std::move(builder).Finish();
}

Result<std::vector<OperationBooks>> PostgresTransaction::ListOperationBooks(
    std::string_view after_id, int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = OperationBooksSql(PostgresPlaceholder);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(after_id).Add(int64_t{limit})));
  std::vector<OperationBooks> page;
  for (int i = 0; i < rows.size(); ++i) {
    auto books = ReadOperationBooks(RowView(rows, i));
    if (!books.ok()) return books.status();
    page.push_back(std::move(*books));
  }
  return page;
}

Result<std::vector<RepeatedCharge>> PostgresTransaction::ListRepeatedCharges(int limit) {
  static const std::string kSql = RepeatedChargesSql(PostgresPlaceholder);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(int64_t{limit})));
  return ReadAll(rows, ReadRepeatedCharge<RowView>);
}

Result<std::vector<SharedPayment>> PostgresTransaction::ListSharedPayments(int limit) {
  static const std::string kSql = SharedPaymentsSql(PostgresPlaceholder);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(int64_t{limit})));
  return ReadAll(rows, ReadSharedPayment<RowView>);
}

Result<std::vector<SettledPayment>> PostgresTransaction::ListSettledPayments(
    std::string_view after_id, int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = SettledPaymentsSql(PostgresPlaceholder);
  AGENTPAY_ROWS(rows, conn_.Query(kSql, pg::Params().Add(after_id).Add(int64_t{limit})));
  return ReadAll(rows, ReadSettledPayment<RowView>);
}

Result<StoreOverview> PostgresTransaction::ReadOverview(int64_t since_ms) {
  static const std::string kCaptured = OverviewCapturedSql(PostgresPlaceholder);
  auto row = [this](const std::string& sql, std::optional<int64_t> param,
                    int columns) -> Result<IntRow> {
    pg::Params params;
    if (param) params.Add(*param);
    AGENTPAY_ROWS(rows, conn_.Query(sql, params));
    if (rows.size() != 1)
      return Status::Error(ErrorCode::kStoreCorrupt, "an aggregate without a row");
    IntRow values;
    for (int i = 0; i < columns; ++i) values.push_back(rows.OptionalInt(0, i));
    return values;
  };
  return ReadOverviewWith(row, kCaptured, since_ms);
}

}  // namespace agentpay
