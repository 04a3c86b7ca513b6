// The SQL of SqliteTransaction (see sqlite_transaction.h): how each record is bound into a
// statement and read back from a row.
#include "store/sqlite_transaction.h"

#include <algorithm>

#include "core/check.h"
#include "store/ledger.h"
#include "store/records.h"

namespace agentpay {
namespace {

using sqlite::Database;
using sqlite::Statement;

// records.h's `out`: binds ?1, ?2, … in the order the values are added.
class SqliteParams {
 public:
  explicit SqliteParams(Statement& stmt, int first = 1) : stmt_(stmt), next_(first) {}
  SqliteParams& Add(int64_t value) {
    return Next([&](int i) { stmt_.Bind(i, value); });
  }
  SqliteParams& Add(std::string_view value) {
    return Next([&](int i) { stmt_.Bind(i, value); });
  }
  SqliteParams& Add(const std::optional<int64_t>& value) {
    return Next([&](int i) { stmt_.Bind(i, value); });
  }
  SqliteParams& AddBytes(std::string_view value) {
    return Next([&](int i) { stmt_.BindBlob(i, value); });
  }
  SqliteParams& AddNull() {
    return Next([&](int i) { stmt_.BindNull(i); });
  }

 private:
  template <typename Bind>
  SqliteParams& Next(Bind bind) {
    bind(next_++);
    return *this;
  }
  Statement& stmt_;
  int next_;
};

// Every row of `stmt`, read by `read` (which returns a Result<T>): the first error ends it.
template <typename T, typename Reader>
Result<std::vector<T>> ReadCheckedRows(Statement& stmt, Reader read) {
  std::vector<T> rows;
  Status status;
  while (stmt.Step(&status)) {
    Result<T> row = read(stmt);
    if (!row.ok()) return row.status();
    rows.push_back(std::move(*row));
  }
  if (!status.ok()) return status;
  return rows;
}

Result<std::vector<Operation>> ReadOperations(Statement& stmt) {
  return ReadCheckedRows<Operation>(stmt, ReadOperation<Statement>);
}

void BindOperation(Statement& stmt, const Operation& op) {
  SqliteParams params(stmt);
  WriteOperation(params, op);
}

// The row a lookup by key finds, read by `read`, or nullopt when there is none.
template <typename Reader>
auto FindOne(Statement& stmt, Reader read) -> Result<std::optional<decltype(read(stmt))>> {
  using Row = decltype(read(stmt));
  Status status;
  if (!stmt.Step(&status)) {
    if (!status.ok()) return status;
    return std::optional<Row>();
  }
  return std::optional<Row>(read(stmt));
}

void BindPayment(Statement& stmt, const X402PaymentRecord& r) {
  SqliteParams params(stmt);
  WritePayment(params, r);
}

Result<std::vector<Alert>> ReadAlerts(Statement& stmt) {
  std::vector<Alert> alerts;
  Status status;
  while (stmt.Step(&status)) alerts.push_back(ReadAlert(stmt));
  if (!status.ok()) return status;
  return alerts;
}

// Every row of `stmt`, read by `read`.
template <typename Reader>
auto ReadRows(Statement& stmt, Reader read) -> Result<std::vector<decltype(read(stmt))>> {
  std::vector<decltype(read(stmt))> rows;
  Status status;
  while (stmt.Step(&status)) rows.push_back(read(stmt));
  if (!status.ok()) return status;
  return rows;
}

std::string SqlitePlaceholder(int n) { return "?" + std::to_string(n); }

}  // namespace

Result<bool> SqliteTransaction::InsertKey(const KeyRecord& record) {
  AGENTPAY_PREPARE(stmt, db_,
                   "INSERT INTO idempotency_keys (principal, key, operation_id, fingerprint, "
                   "created_ms) VALUES (?1, ?2, ?3, ?4, ?5) "
                   "ON CONFLICT DO NOTHING");
  stmt.Bind(1, record.principal).Bind(2, record.key).Bind(3, record.operation_id);
  stmt.Bind(4, record.fingerprint).Bind(5, record.created_ms);
  return RunChangingOneRow(stmt);
}

Result<std::optional<KeyRecord>> SqliteTransaction::FindKey(std::string_view principal,
                                                            std::string_view key) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kKeyColumns +
                       " FROM idempotency_keys WHERE principal = ?1 AND key = ?2");
  stmt.Bind(1, principal).Bind(2, key);
  return FindOne(stmt, ReadKey<Statement>);
}

Result<bool> SqliteTransaction::RecordArrival(const KeyRecord& key, const TraceEvent& event) {
  AGENTPAY_PREPARE(stmt, db_,
                   "UPDATE idempotency_keys SET arrivals_recorded = arrivals_recorded + 1 "
                   "WHERE principal = ?1 AND key = ?2 AND operation_id = ?3 "
                   "AND arrivals_recorded < ?4");
  stmt.Bind(1, key.principal).Bind(2, key.key).Bind(3, key.operation_id);
  stmt.Bind(4, static_cast<int64_t>(kMaxRecordedArrivals));
  auto counted = RunChangingOneRow(stmt);
  if (!counted.ok() || !*counted) return counted;
  if (Status s = AppendEvent(event); !s.ok()) return s;
  return true;
}

Status SqliteTransaction::DeleteKey(std::string_view principal, std::string_view key) {
  AGENTPAY_PREPARE(stmt, db_, "DELETE FROM idempotency_keys WHERE principal = ?1 AND key = ?2");
  return stmt.Bind(1, principal).Bind(2, key).Run();
}

Status SqliteTransaction::InsertOperation(const Operation& op) {
  static const std::string kSql =
      std::string("INSERT INTO operations (") + kOperationColumns +
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
      "?18, ?19)";
  AGENTPAY_PREPARE(stmt, db_, kSql);
  BindOperation(stmt, op);
  return stmt.Run();
}

Status SqliteTransaction::UpdateOperation(const Operation& op) {
  static const std::string kSql = OperationUpdateSql(SqlitePlaceholder, /*claimed=*/false);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  BindOperation(stmt, op);
  Status status = stmt.Run();
  if (status.ok() && db_.Changes() != 1) {
    return Status::Error(ErrorCode::kStoreNotFound, "no operation " + op.id + " of this identity");
  }
  if (status.ok() && ReleasesPayerReservation(op)) return ReleasePayerReservation(op.id);
  return status;
}

Result<bool> SqliteTransaction::UpdateClaimedOperation(const Operation& op,
                                                       int32_t expected_attempts) {
  static const std::string kSql = OperationUpdateSql(SqlitePlaceholder, /*claimed=*/true);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  BindOperation(stmt, op);
  stmt.Bind(20, static_cast<int64_t>(expected_attempts));
  auto updated = RunChangingOneRow(stmt);
  if (updated.ok() && *updated && ReleasesPayerReservation(op)) {
    if (Status s = ReleasePayerReservation(op.id); !s.ok()) return s;
  }
  return updated;
}

Result<PayerReservationState> SqliteTransaction::ReadPayerReservations(std::string_view network,
                                                                      std::string_view asset,
                                                                      std::string_view payer,
                                                                      int64_t lapsed_at_s) {
  PayerReservationState state;
  Status status;
  {
    AGENTPAY_PREPARE(read, db_,
                     "SELECT epoch FROM payer_epochs WHERE network = ?1 AND asset = ?2 AND "
                     "payer = ?3");
    read.Bind(1, network).Bind(2, asset).Bind(3, payer);
    if (read.Step(&status)) state.epoch = read.Int(0);
    if (!status.ok()) return status;
  }
  AGENTPAY_PREPARE(sum, db_,
                   "SELECT COALESCE(SUM(amount), 0) FROM payer_reservations WHERE network = ?1 "
                   "AND asset = ?2 AND payer = ?3 AND valid_before_s > ?4");
  sum.Bind(1, network).Bind(2, asset).Bind(3, payer).Bind(4, lapsed_at_s);
  if (sum.Step(&status)) state.reserved = sum.Int(0);
  if (!status.ok()) return status;
  return state;
}

Status SqliteTransaction::InsertPayerReservation(const PayerReservationRecord& record) {
  AGENTPAY_CHECK(record.amount > 0);
  AGENTPAY_PREPARE(stmt, db_,
                   "INSERT INTO payer_reservations (network, asset, payer, nonce, operation_id, "
                   "amount, valid_before_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  stmt.Bind(1, record.network).Bind(2, record.asset).Bind(3, record.payer).Bind(4, record.nonce);
  stmt.Bind(5, record.operation_id).Bind(6, record.amount).Bind(7, record.valid_before_s);
  return stmt.Run();
}

Status SqliteTransaction::ReleasePayerReservation(std::string_view operation_id) {
  {
    AGENTPAY_PREPARE(bump, db_,
                     "INSERT INTO payer_epochs (network, asset, payer, epoch) "
                     "SELECT network, asset, payer, amount FROM payer_reservations "
                     "WHERE operation_id = ?1 "
                     "ON CONFLICT (network, asset, payer) DO UPDATE SET epoch = epoch + "
                     "excluded.epoch");
    if (Status s = bump.Bind(1, operation_id).Run(); !s.ok()) return s;
  }
  AGENTPAY_PREPARE(drop, db_, "DELETE FROM payer_reservations WHERE operation_id = ?1");
  return drop.Bind(1, operation_id).Run();
}

Result<std::vector<int64_t>> SqliteTransaction::AddRateUsage(
    const std::vector<RateUsageRecord>& usage, int64_t updated_ms) {
  std::vector<int64_t> totals;
  totals.reserve(usage.size());
  static constexpr std::string_view kSql =
      "INSERT INTO rate_usage (kind, key, window_start_ms, count, updated_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, key, window_start_ms) DO "
      "UPDATE SET count = count + excluded.count, updated_ms = excluded.updated_ms "
      "RETURNING count";
  for (const RateUsageRecord& row : usage) {
    AGENTPAY_CHECK(row.count >= 0);
    AGENTPAY_PREPARE(stmt, db_, kSql);
    stmt.Bind(1, row.kind).Bind(2, row.key).Bind(3, row.window_start_ms).Bind(4, row.count);
    stmt.Bind(5, updated_ms);
    Status status;
    if (!stmt.Step(&status)) {
      if (!status.ok()) return status;
      return Status::Error(ErrorCode::kStoreCorrupt, "rate usage upsert returned no row");
    }
    totals.push_back(stmt.Int(0));
    while (stmt.Step(&status)) {
    }
    if (!status.ok()) return status;
  }
  return totals;
}

Result<std::vector<RateUsageRecord>> SqliteTransaction::ListRateUsage(int64_t min_window_start_ms,
                                                                     int64_t updated_since_ms,
                                                                     int limit) {
  AGENTPAY_CHECK(limit > 0);
  AGENTPAY_PREPARE(stmt, db_,
                   "SELECT kind, key, window_start_ms, count FROM rate_usage "
                   "WHERE updated_ms >= ?2 AND window_start_ms >= ?1 "
                   "ORDER BY updated_ms LIMIT ?3");
  stmt.Bind(1, min_window_start_ms).Bind(2, updated_since_ms).Bind(3, int64_t{limit});
  std::vector<RateUsageRecord> rows;
  Status status;
  while (stmt.Step(&status)) {
    rows.push_back({stmt.Text(0), stmt.Text(1), stmt.Int(2), stmt.Int(3)});
  }
  if (!status.ok()) return status;
  return rows;
}

Status SqliteTransaction::PruneRateUsage(int64_t window_start_ms) {
  AGENTPAY_PREPARE(stmt, db_, "DELETE FROM rate_usage WHERE window_start_ms < ?1");
  return stmt.Bind(1, window_start_ms).Run();
}

Result<std::optional<Operation>> SqliteTransaction::FindOperation(std::string_view id) {
  static const std::string kSql =
      std::string("SELECT ") + kOperationColumns + " FROM operations WHERE id = ?1";
  AGENTPAY_PREPARE(stmt, db_, kSql);
  stmt.Bind(1, id);
  Status status;
  if (!stmt.Step(&status)) {
    if (!status.ok()) return status;
    return std::optional<Operation>();
  }
  auto op = ReadOperation(stmt);
  if (!op.ok()) return op.status();
  return std::optional<Operation>(std::move(*op));
}

Result<std::vector<Operation>> SqliteTransaction::ListOperations(const OperationFilter& filter) {
  SqlWithParams query = OperationListSql(filter, SqlitePlaceholder);
  AGENTPAY_PREPARE(stmt, db_, query.sql);
  for (size_t i = 0; i < query.params.size(); ++i) {
    const SqlParam& param = query.params[i];
    if (param.text) {
      stmt.Bind(static_cast<int>(i) + 1, std::string_view(*param.text));
    } else {
      stmt.Bind(static_cast<int>(i) + 1, param.number);
    }
  }
  return ReadOperations(stmt);
}

Result<std::vector<Operation>> SqliteTransaction::ListSettlingOperations(std::string_view after_id,
                                                                         int limit) {
  AGENTPAY_CHECK(limit > 0);
  // One query per state, each along its partial index in id order; the two pages merged.
  std::vector<Operation> merged;
  for (const char* state : {"submitted", "unknown"}) {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kOperationColumns +
                         " FROM operations WHERE settlement = '" + state +
                         "' AND id > ?1 ORDER BY id LIMIT ?2");
    stmt.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
    auto page = ReadOperations(stmt);
    if (!page.ok()) return page.status();
    for (Operation& op : *page) merged.push_back(std::move(op));
  }
  std::sort(merged.begin(), merged.end(),
            [](const Operation& a, const Operation& b) { return a.id < b.id; });
  if (merged.size() > static_cast<size_t>(limit)) merged.resize(static_cast<size_t>(limit));
  return merged;
}

Result<std::vector<Operation>> SqliteTransaction::ListUnpaidRetries(std::string_view after_id,
                                                                    int limit) {
  AGENTPAY_CHECK(limit > 0);
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kOperationColumns +
                       " FROM operations WHERE settlement = 'none' AND fulfillment = "
                       "'pending_retry' AND id > ?1 ORDER BY id LIMIT ?2");
  stmt.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
  return ReadOperations(stmt);
}

Result<std::vector<Operation>> SqliteTransaction::ListExpiredHolds(int64_t now_ms, int limit) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kOperationColumns +
                       " FROM operations WHERE settlement = 'held' AND hold_expires_ms <= ?1 "
                       "ORDER BY hold_expires_ms, id LIMIT ?2");
  stmt.Bind(1, now_ms).Bind(2, static_cast<int64_t>(limit));
  return ReadOperations(stmt);
}

Result<bool> SqliteTransaction::InsertX402Payment(const X402PaymentRecord& r) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("INSERT INTO x402_payments (") + kPaymentColumns +
                       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                       "?15, ?16, ?17, ?18, ?19) "
                       "ON CONFLICT DO NOTHING");
  BindPayment(stmt, r);
  return RunChangingOneRow(stmt);
}

Result<std::optional<X402PaymentRecord>> SqliteTransaction::FindX402Payment(
    std::string_view operation_id) {
  AGENTPAY_PREPARE(
      stmt, db_,
      std::string("SELECT ") + kPaymentColumns + " FROM x402_payments WHERE operation_id = ?1");
  stmt.Bind(1, operation_id);
  return FindOne(stmt, ReadPayment<Statement>);
}

Result<std::optional<X402PaymentRecord>> SqliteTransaction::FindX402PaymentByAuthorization(
    std::string_view payer, std::string_view nonce) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kPaymentColumns +
                       " FROM x402_payments WHERE payer = ?1 AND nonce = ?2");
  stmt.Bind(1, payer).Bind(2, nonce);
  return FindOne(stmt, ReadPayment<Statement>);
}

Status SqliteTransaction::UpdateX402Payment(const X402PaymentRecord& r) {
  AGENTPAY_PREPARE(stmt, db_,
                   "UPDATE x402_payments SET tx_hash = ?2, raw_tx = ?3, relayer = ?4, "
                   "relayer_nonce = ?5, submitted_ms = ?6, broadcasts = ?7, "
                   "replaced_raw_txs = ?8, settled_block = ?9, settled_block_hash = ?10, "
                   "settled_ms = ?11 WHERE operation_id = ?1");
  SqliteParams params(stmt);
  params.Add(r.operation_id);
  WritePaymentTransaction(params, r);
  Status status = stmt.Run();
  if (status.ok() && db_.Changes() != 1) {
    return Status::Error(ErrorCode::kStoreNotFound,
                         "no x402 payment for operation " + r.operation_id);
  }
  return status;
}

Result<std::vector<X402PaymentRecord>> SqliteTransaction::ListX402PaymentsAtRelayerNonce(
    std::string_view relayer, int64_t relayer_nonce) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kPaymentColumns +
                       " FROM x402_payments WHERE relayer = ?1 AND relayer_nonce = ?2 "
                       "ORDER BY submitted_ms, operation_id LIMIT " +
                       std::to_string(kMaxPaymentsPerTransaction + 1));
  stmt.Bind(1, relayer).Bind(2, relayer_nonce);
  std::vector<X402PaymentRecord> out;
  Status status;
  while (stmt.Step(&status)) out.push_back(ReadPayment(stmt));
  if (!status.ok()) return status;
  return out;
}

Result<int64_t> SqliteTransaction::TakeRelayerNonce(std::string_view relayer, int64_t chain_floor) {
  int64_t next = chain_floor;
  {
    AGENTPAY_PREPARE(read, db_, "SELECT next_nonce FROM relayer_nonces WHERE relayer = ?1");
    read.Bind(1, relayer);
    Status status;
    if (read.Step(&status)) next = std::max(next, read.Int(0));
    if (!status.ok()) return status;
  }
  AGENTPAY_PREPARE(write, db_,
                   "INSERT INTO relayer_nonces (relayer, next_nonce) VALUES (?1, ?2) "
                   "ON CONFLICT (relayer) DO UPDATE SET next_nonce = excluded.next_nonce");
  if (Status s = write.Bind(1, relayer).Bind(2, next + 1).Run(); !s.ok()) return s;
  return next;
}

Result<std::vector<X402PaymentRecord>> SqliteTransaction::ListRecentSettlements(int64_t since_ms,
                                                                                int limit) {
  AGENTPAY_CHECK(limit > 0);
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kPaymentColumns +
                       " FROM x402_payments WHERE settled_ms > 0 AND settled_ms >= ?1 "
                       "ORDER BY settled_block DESC, settled_block_hash DESC, operation_id DESC "
                       "LIMIT ?2");
  stmt.Bind(1, since_ms).Bind(2, static_cast<int64_t>(limit));
  std::vector<X402PaymentRecord> out;
  Status status;
  while (stmt.Step(&status)) out.push_back(ReadPayment(stmt));
  if (!status.ok()) return status;
  return out;
}

Result<int64_t> SqliteTransaction::NextRelayerNonce(std::string_view relayer) {
  AGENTPAY_PREPARE(read, db_, "SELECT next_nonce FROM relayer_nonces WHERE relayer = ?1");
  read.Bind(1, relayer);
  Status status;
  if (read.Step(&status)) return read.Int(0);
  if (!status.ok()) return status;
  return int64_t{0};
}

Status SqliteTransaction::InsertAlert(const Alert& alert) {
  AGENTPAY_PREPARE(stmt, db_,
                   "INSERT INTO alerts (id, operation_id, kind, detail, created_ms, resolved_ms, "
                   "resolution, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  SqliteParams params(stmt);
  WriteAlert(params, alert);
  return stmt.Run();
}

Result<std::vector<Alert>> SqliteTransaction::ListAlerts(int limit) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kAlertColumns +
                       " FROM alerts ORDER BY created_ms DESC, id LIMIT ?1");
  stmt.Bind(1, static_cast<int64_t>(limit));
  return ReadAlerts(stmt);
}

Result<std::vector<Alert>> SqliteTransaction::ListAlertsOf(std::string_view operation_id) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kAlertColumns +
                       " FROM alerts WHERE operation_id = ?1 ORDER BY created_ms, id");
  stmt.Bind(1, operation_id);
  return ReadAlerts(stmt);
}

Result<bool> SqliteTransaction::ResolveAlert(const Alert& resolved) {
  AGENTPAY_CHECK(resolved.resolved_ms.has_value());
  AGENTPAY_PREPARE(stmt, db_,
                   "UPDATE alerts SET resolved_ms = ?2, resolution = ?3, note = ?4 "
                   "WHERE id = ?1 AND resolved_ms IS NULL");
  stmt.Bind(1, resolved.id).Bind(2, resolved.resolved_ms).Bind(3, resolved.resolution);
  stmt.Bind(4, resolved.note);
  return RunChangingOneRow(stmt);
}

Result<std::vector<std::string>> SqliteTransaction::ListExpiredResults(int64_t now_ms, int limit) {
  // The terms include the partial index operations_retained's, so SQLite uses it. Only final
  // operations (core's IsFinal) are listed: nothing else may ever block the head of the list.
  AGENTPAY_PREPARE(stmt, db_,
                   "SELECT id FROM operations WHERE response_body IS NOT NULL "
                   "AND retained_until_ms <= ?1 AND fulfillment IN ('succeeded', 'rejected') "
                   "ORDER BY retained_until_ms, id LIMIT ?2");
  stmt.Bind(1, now_ms).Bind(2, static_cast<int64_t>(limit));
  std::vector<std::string> ids;
  Status status;
  while (stmt.Step(&status)) ids.push_back(stmt.Text(0));
  if (!status.ok()) return status;
  return ids;
}

Result<PruneOutcome> SqliteTransaction::PruneResult(const Operation& op) {
  PruneOutcome outcome;
  {
    AGENTPAY_PREPARE(body, db_,
                     "UPDATE operations SET response_body = NULL "
                     "WHERE id = ?1 AND response_body IS NOT NULL");
    if (Status s = body.Bind(1, op.id).Run(); !s.ok()) return s;
    if (db_.Changes() != 1) return outcome;
  }
  outcome.pruned = true;
  AGENTPAY_PREPARE(key, db_,
                   "DELETE FROM idempotency_keys WHERE principal = ?1 AND key = ?2 "
                   "AND operation_id = ?3");
  key.Bind(1, op.principal).Bind(2, op.idempotency_key).Bind(3, op.id);
  if (Status s = key.Run(); !s.ok()) return s;
  outcome.key_deleted = db_.Changes() == 1;
  return outcome;
}

Status SqliteTransaction::AppendEvent(const TraceEvent& event) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("INSERT INTO operation_events (") + kEventColumns +
                       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  SqliteParams params(stmt);
  WriteEvent(params, event);
  return stmt.Run();
}

Result<std::vector<TraceEvent>> SqliteTransaction::ListEvents(std::string_view operation_id) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kEventColumns +
                       " FROM operation_events WHERE operation_id = ?1 ORDER BY id");
  stmt.Bind(1, operation_id);
  return ReadCheckedRows<TraceEvent>(stmt, ReadEvent<Statement>);
}

Result<bool> SqliteTransaction::InsertAccount(const AccountRecord& account) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("INSERT INTO accounts (") + kAccountColumns +
                       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING");
  SqliteParams params(stmt);
  WriteAccount(params, account);
  auto inserted = RunChangingOneRow(stmt);
  if (!inserted.ok() || !*inserted) return inserted;
  if (Status keyed = InsertFirstApiKey(*this, account); !keyed.ok()) return keyed;
  return true;
}

Result<std::optional<AccountRecord>> SqliteTransaction::FindAccount(std::string_view id) {
  return FindAccountWhere("id", id);
}

Result<std::optional<AccountRecord>> SqliteTransaction::FindAccountByKeyHash(
    std::string_view hash) {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kAccountColumns +
                       " FROM accounts WHERE id = (SELECT account_id FROM api_keys "
                       "WHERE key_hash = ?1 AND revoked_ms IS NULL)");
  stmt.Bind(1, hash);
  return FindOne(stmt, ReadAccount<Statement>);
}

Result<bool> SqliteTransaction::InsertApiKey(const ApiKeyRecord& key) {
  AGENTPAY_PREPARE(stmt, db_,
                   "INSERT INTO api_keys (id, account_id, key_hash, created_ms, revoked_ms) "
                   "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING");
  stmt.Bind(1, key.id).Bind(2, key.account_id).Bind(3, key.key_hash).Bind(4, key.created_ms);
  stmt.Bind(5, key.revoked_ms);
  return RunChangingOneRow(stmt);
}

Result<std::vector<ApiKeyRecord>> SqliteTransaction::ListApiKeys(std::string_view account_id) {
  AGENTPAY_PREPARE(stmt, db_,
                   "SELECT id, account_id, key_hash, created_ms, revoked_ms FROM api_keys "
                   "WHERE account_id = ?1 ORDER BY created_ms, id");
  stmt.Bind(1, account_id);
  std::vector<ApiKeyRecord> keys;
  Status status;
  while (stmt.Step(&status)) {
    keys.push_back({stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Int(3), stmt.OptionalInt(4)});
  }
  if (!status.ok()) return status;
  return keys;
}

Result<bool> SqliteTransaction::RevokeApiKey(std::string_view account_id, std::string_view key_id,
                                             int64_t at_ms) {
  AGENTPAY_PREPARE(stmt, db_,
                   "UPDATE api_keys SET revoked_ms = ?3 "
                   "WHERE account_id = ?1 AND id = ?2 AND revoked_ms IS NULL");
  stmt.Bind(1, account_id).Bind(2, key_id).Bind(3, at_ms);
  return RunChangingOneRow(stmt);
}

Result<std::vector<AccountRecord>> SqliteTransaction::ListAccounts() {
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kAccountColumns + " FROM accounts ORDER BY id");
  return ReadRows(stmt, ReadAccount<Statement>);
}

Result<std::vector<AccountRecord>> SqliteTransaction::ListAccountsPage(std::string_view after_id,
                                                                       int limit) {
  AGENTPAY_CHECK(limit > 0);
  AGENTPAY_PREPARE(stmt, db_,
                   std::string("SELECT ") + kAccountColumns +
                       " FROM accounts WHERE id > ?1 ORDER BY id LIMIT ?2");
  stmt.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
  return ReadRows(stmt, ReadAccount<Statement>);
}

Result<bool> SqliteTransaction::InsertDeposit(const DepositRecord& deposit) {
  AGENTPAY_PREPARE(stmt, db_,
                   "INSERT INTO deposits (account_id, reference, amount, created_ms) "
                   "VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING");
  stmt.Bind(1, deposit.account_id).Bind(2, deposit.reference).Bind(3, deposit.amount);
  stmt.Bind(4, deposit.created_ms);
  return RunChangingOneRow(stmt);
}

Result<std::optional<DepositRecord>> SqliteTransaction::FindDeposit(std::string_view account_id,
                                                                    std::string_view reference) {
  AGENTPAY_PREPARE(stmt, db_,
                   "SELECT account_id, reference, amount, created_ms FROM deposits "
                   "WHERE account_id = ?1 AND reference = ?2");
  stmt.Bind(1, account_id).Bind(2, reference);
  return FindOne(stmt, [](const Statement& row) {
    return DepositRecord{row.Text(0), row.Text(1), row.Int(2), row.Int(3)};
  });
}

Result<MoveOutcome> SqliteTransaction::Move(std::string_view account_id, MoveKind kind,
                                            int64_t amount, std::string_view operation_id,
                                            int64_t at_ms) {
  Balances balances;
  {
    AGENTPAY_PREPARE(read, db_, "SELECT deposited, captured, held FROM accounts WHERE id = ?1");
    read.Bind(1, account_id);
    Status status;
    if (!read.Step(&status)) {
      if (!status.ok()) return status;
      return Status::Error(ErrorCode::kStoreNotFound, "no account " + std::string(account_id));
    }
    balances = Balances{read.Int(0), read.Int(1), read.Int(2)};
  }
  MoveOutcome outcome = ApplyMove(&balances, kind, amount);
  if (outcome != MoveOutcome::kOk) return outcome;
  {
    AGENTPAY_PREPARE(update, db_,
                     "UPDATE accounts SET deposited = ?2, captured = ?3, held = ?4 WHERE id = ?1");
    update.Bind(1, account_id).Bind(2, balances.deposited).Bind(3, balances.captured);
    Status status = update.Bind(4, balances.held).Run();
    if (!status.ok()) return status;
  }
  Posting posting = PostingFor(kind);
  AGENTPAY_PREPARE(insert, db_,
                   "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, at_ms) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (operation_id.empty()) {
    insert.BindNull(1);
  } else {
    insert.Bind(1, operation_id);
  }
  insert.Bind(2, MoveKindName(kind));
  insert.Bind(3, LedgerAccountName(posting.debit_kind, account_id));
  insert.Bind(4, LedgerAccountName(posting.credit_kind, account_id));
  Status status = insert.Bind(5, amount).Bind(6, at_ms).Run();
  if (!status.ok()) return status;
  return MoveOutcome::kOk;
}

Result<std::vector<PostingRecord>> SqliteTransaction::ListPostings(std::string_view operation_id) {
  AGENTPAY_PREPARE(stmt, db_,
                   "SELECT operation_id, kind, debit, credit, amount, at_ms FROM ledger_entries "
                   "WHERE operation_id = ?1 ORDER BY id");
  stmt.Bind(1, operation_id);
  return ReadCheckedRows<PostingRecord>(stmt, ReadPosting<Statement>);
}

Result<LedgerAudit> SqliteTransaction::Audit() {
  auto accounts = ListAccounts();
  if (!accounts.ok()) return accounts.status();
  AGENTPAY_PREPARE(sums, db_, kLedgerSumsSql);
  LedgerAuditBuilder builder(*accounts);
  Status status;
  while (sums.Step(&status)) {
    if (Status added = builder.Add(sums.Text(0), sums.Text(1), sums.Int(2)); !added.ok()) {
      return added;
    }
  }
  if (!status.ok()) return status;
  return std::move(builder).Finish();
}

Result<std::optional<AccountRecord>> SqliteTransaction::FindAccountWhere(const char* column,
                                                                         std::string_view value) {
  AGENTPAY_PREPARE(
      stmt, db_,
      std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE " + column + " = ?1");
  stmt.Bind(1, value);
  return FindOne(stmt, ReadAccount<Statement>);
}

Result<bool> SqliteTransaction::RunChangingOneRow(Statement& stmt) {
  Status status = stmt.Run();
  if (!status.ok()) return status;
  return db_.Changes() == 1;
}

bool HasColumnsRead(Database& db) {
  for (std::string probe :
       {std::string("SELECT ") + kOperationColumns + " FROM operations LIMIT 0",
        std::string("SELECT ") + kKeyColumns + " FROM idempotency_keys LIMIT 0",
        std::string("SELECT ") + kEventColumns + " FROM operation_events LIMIT 0",
        std::string("SELECT ") + kPaymentColumns + " FROM x402_payments LIMIT 0"}) {
    if (!db.Exec(probe).ok()) return false;
  }
  return true;
}

Result<std::vector<OperationBooks>> SqliteTransaction::ListOperationBooks(std::string_view after_id,
                                                                          int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = OperationBooksSql(SqlitePlaceholder);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  stmt.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
  return ReadCheckedRows<OperationBooks>(stmt, ReadOperationBooks<Statement>);
}

Result<std::vector<RepeatedCharge>> SqliteTransaction::ListRepeatedCharges(int limit) {
  static const std::string kSql = RepeatedChargesSql(SqlitePlaceholder);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  stmt.Bind(1, static_cast<int64_t>(limit));
  return ReadRows(stmt, ReadRepeatedCharge<Statement>);
}

Result<std::vector<SharedPayment>> SqliteTransaction::ListSharedPayments(int limit) {
  static const std::string kSql = SharedPaymentsSql(SqlitePlaceholder);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  stmt.Bind(1, static_cast<int64_t>(limit));
  return ReadRows(stmt, ReadSharedPayment<Statement>);
}

Result<std::vector<SettledPayment>> SqliteTransaction::ListSettledPayments(
    std::string_view after_id, int limit) {
  AGENTPAY_CHECK(limit > 0);
  static const std::string kSql = SettledPaymentsSql(SqlitePlaceholder);
  AGENTPAY_PREPARE(stmt, db_, kSql);
  stmt.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
  return ReadRows(stmt, ReadSettledPayment<Statement>);
}

Result<StoreOverview> SqliteTransaction::ReadOverview(int64_t since_ms) {
  static const std::string kCaptured = OverviewCapturedSql(SqlitePlaceholder);
  auto row = [this](const std::string& sql, std::optional<int64_t> param,
                    int columns) -> Result<IntRow> {
    AGENTPAY_PREPARE(stmt, db_, sql);
    if (param) stmt.Bind(1, *param);
    Status status;
    if (!stmt.Step(&status)) {
      if (!status.ok()) return status;
      return Status::Error(ErrorCode::kStoreCorrupt, "an aggregate without a row");
    }
    IntRow values;
    for (int i = 0; i < columns; ++i) values.push_back(stmt.OptionalInt(i));
    return values;
  };
  return ReadOverviewWith(row, kCaptured, since_ms);
}

}  // namespace agentpay
