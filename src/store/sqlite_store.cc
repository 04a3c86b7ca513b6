// The SQLite backend of Store: WAL synced before every acknowledgement, versioned migrations, and
// one writer thread that commits queued decisions together (group commit), each inside its own
// savepoint so that one decision's rollback never touches another's.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "store/instance_locks.h"
#include "store/ledger.h"
#include "store/schema.h"
#include "sqlite/sqlite_db.h"
#include "store/store.h"
#include "store/wal_write_vfs.h"

namespace agentpay {
namespace {

using sqlite::Database;
using sqlite::Statement;

#define AGENTPAY_PREPARE(var, db, sql)                  \
  auto var##_result = (db).Prepare(sql);                \
  if (!var##_result.ok()) return var##_result.status(); \
  Statement& var = *var##_result

constexpr char kOperationColumns[] =
    "id, principal, idempotency_key, fingerprint, route, amount, intent, settlement, fulfillment, "
    "hold_expires_ms, lease_expires_ms, attempts, response_status, response_content_type, "
    "response_body, retained_until_ms, created_ms, updated_ms, claimed_by";

Result<Operation> ReadOperation(const Statement& row) {
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
    return Status::Error("store_corrupt", "operation " + op.id + " has an unknown state");
  }
  op.intent = *intent;
  op.settlement = *settlement;
  op.fulfillment = *fulfillment;
  op.hold_expires_ms = row.OptionalInt(9);
  op.lease_expires_ms = row.Int(10);
  op.attempts = static_cast<int32_t>(row.Int(11));
  if (!row.IsNull(12)) {
    op.response = StoredResponse{static_cast<int>(row.Int(12)), row.Text(13), row.Text(14)};
  }
  op.retained_until_ms = row.OptionalInt(15);
  op.created_ms = row.Int(16);
  op.updated_ms = row.Int(17);
  op.claimed_by = row.Text(18);
  return op;
}

Result<std::vector<Operation>> ReadOperations(Statement& stmt) {
  std::vector<Operation> ops;
  Status status;
  while (stmt.Step(&status)) {
    auto op = ReadOperation(stmt);
    if (!op.ok()) return op.status();
    ops.push_back(std::move(*op));
  }
  if (!status.ok()) return status;
  return ops;
}

void BindOperation(Statement& stmt, const Operation& op) {
  stmt.Bind(1, op.id).Bind(2, op.principal).Bind(3, op.idempotency_key).Bind(4, op.fingerprint);
  stmt.Bind(5, op.route).Bind(6, op.amount).Bind(7, IntentName(op.intent));
  stmt.Bind(8, SettlementName(op.settlement)).Bind(9, FulfillmentName(op.fulfillment));
  stmt.Bind(10, op.hold_expires_ms).Bind(11, op.lease_expires_ms);
  stmt.Bind(12, static_cast<int64_t>(op.attempts));
  if (op.response) {
    stmt.Bind(13, static_cast<int64_t>(op.response->status)).Bind(14, op.response->content_type);
    stmt.BindBlob(15, op.response->body);
  } else {
    stmt.BindNull(13).BindNull(14).BindNull(15);
  }
  stmt.Bind(16, op.retained_until_ms).Bind(17, op.created_ms).Bind(18, op.updated_ms);
  stmt.Bind(19, op.claimed_by);
}

AccountRecord ReadAccount(const Statement& row) {
  AccountRecord account;
  account.id = row.Text(0);
  account.name = row.Text(1);
  account.api_key_hash = row.Text(2);
  account.balances = Balances{row.Int(3), row.Int(4), row.Int(5)};
  account.created_ms = row.Int(6);
  return account;
}

constexpr char kAccountColumns[] = "id, name, api_key_hash, deposited, captured, held, created_ms";

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

constexpr char kPaymentColumns[] =
    "operation_id, payer, nonce, valid_after_s, valid_before_s, value, pay_to, signature, "
    "x402_version, tx_hash, raw_tx, relayer, relayer_nonce, submitted_ms, broadcasts";

void BindPayment(Statement& stmt, const X402PaymentRecord& r) {
  const Authorization& a = r.authorization;
  stmt.Bind(1, r.operation_id).Bind(2, a.from).Bind(3, a.nonce_hex).Bind(4, a.valid_after_s);
  stmt.Bind(5, a.valid_before_s).Bind(6, a.value).Bind(7, r.pay_to).Bind(8, r.signature_hex);
  stmt.Bind(9, static_cast<int64_t>(r.x402_version)).Bind(10, r.tx_hash).Bind(11, r.raw_tx_hex);
  stmt.Bind(12, r.relayer).Bind(13, r.relayer_nonce).Bind(14, r.submitted_ms);
  stmt.Bind(15, r.broadcasts);
}

X402PaymentRecord ReadPayment(const Statement& row) {
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
  return r;
}

constexpr char kAlertColumns[] =
    "id, operation_id, kind, detail, created_ms, resolved_ms, resolution, note";

Result<std::vector<Alert>> ReadAlerts(Statement& stmt) {
  std::vector<Alert> alerts;
  Status status;
  while (stmt.Step(&status)) {
    alerts.push_back({stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Int(4),
                      stmt.OptionalInt(5), stmt.Text(6), stmt.Text(7)});
  }
  if (!status.ok()) return status;
  return alerts;
}

class SqliteTransaction final : public Transaction {
 public:
  explicit SqliteTransaction(Database& db) : db_(db) {}

  Result<bool> InsertKey(const KeyRecord& record) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "INSERT INTO idempotency_keys (principal, key, operation_id, fingerprint, "
                     "created_ms) VALUES (?1, ?2, ?3, ?4, ?5) "
                     "ON CONFLICT DO NOTHING");
    stmt.Bind(1, record.principal).Bind(2, record.key).Bind(3, record.operation_id);
    stmt.Bind(4, record.fingerprint).Bind(5, record.created_ms);
    return RunChangingOneRow(stmt);
  }

  Result<std::optional<KeyRecord>> FindKey(std::string_view principal,
                                           std::string_view key) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "SELECT principal, key, operation_id, fingerprint, created_ms "
                     "FROM idempotency_keys WHERE principal = ?1 AND key = ?2");
    stmt.Bind(1, principal).Bind(2, key);
    return FindOne(stmt, [](const Statement& row) {
      return KeyRecord{row.Text(0), row.Text(1), row.Text(2), row.Text(3), row.Int(4)};
    });
  }

  Status DeleteKey(std::string_view principal, std::string_view key) override {
    AGENTPAY_PREPARE(stmt, db_, "DELETE FROM idempotency_keys WHERE principal = ?1 AND key = ?2");
    return stmt.Bind(1, principal).Bind(2, key).Run();
  }

  Status InsertOperation(const Operation& op) override {
    static const std::string kSql =
        std::string("INSERT INTO operations (") + kOperationColumns +
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
        "?18, ?19)";
    AGENTPAY_PREPARE(stmt, db_, kSql);
    BindOperation(stmt, op);
    return stmt.Run();
  }

  Status UpdateOperation(const Operation& op) override {
    AGENTPAY_PREPARE(
        stmt, db_,
        "UPDATE operations SET principal = ?2, idempotency_key = ?3, fingerprint = ?4, "
        "route = ?5, amount = ?6, intent = ?7, settlement = ?8, fulfillment = ?9, "
        "hold_expires_ms = ?10, lease_expires_ms = ?11, attempts = ?12, "
        "response_status = ?13, response_content_type = ?14, response_body = ?15, "
        "retained_until_ms = ?16, created_ms = ?17, updated_ms = ?18, claimed_by = ?19 "
        "WHERE id = ?1");
    BindOperation(stmt, op);
    Status status = stmt.Run();
    if (status.ok() && db_.Changes() != 1) {
      return Status::Error("store_not_found", "no operation " + op.id);
    }
    return status;
  }

  Result<bool> UpdateClaimedOperation(const Operation& op, int32_t expected_attempts) override {
    AGENTPAY_PREPARE(
        stmt, db_,
        "UPDATE operations SET principal = ?2, idempotency_key = ?3, fingerprint = ?4, "
        "route = ?5, amount = ?6, intent = ?7, settlement = ?8, fulfillment = ?9, "
        "hold_expires_ms = ?10, lease_expires_ms = ?11, attempts = ?12, "
        "response_status = ?13, response_content_type = ?14, response_body = ?15, "
        "retained_until_ms = ?16, created_ms = ?17, updated_ms = ?18, "
        "claimed_by = ?19 "
        "WHERE id = ?1 AND fulfillment = 'in_progress' AND attempts = ?20");
    BindOperation(stmt, op);
    stmt.Bind(20, static_cast<int64_t>(expected_attempts));
    return RunChangingOneRow(stmt);
  }

  Result<std::optional<Operation>> FindOperation(std::string_view id) override {
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

  Result<std::vector<Operation>> ListOperations(const OperationFilter& filter) override {
    // State names go into the SQL text (they are our own enum names, never client input): only a
    // literal lets SQLite use the partial indexes over unfinished operations.
    std::string sql = std::string("SELECT ") + kOperationColumns + " FROM operations WHERE 1";
    if (filter.settlement)
      sql += " AND settlement = '" + std::string(SettlementName(*filter.settlement)) + "'";
    if (filter.fulfillment) {
      sql += " AND fulfillment = '" + std::string(FulfillmentName(*filter.fulfillment)) + "'";
    }
    sql += " ORDER BY id DESC LIMIT ?1";
    AGENTPAY_PREPARE(stmt, db_, sql);
    stmt.Bind(1, static_cast<int64_t>(filter.limit));
    return ReadOperations(stmt);
  }

  Result<std::vector<Operation>> ListExpiredHolds(int64_t now_ms, int limit) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kOperationColumns +
                         " FROM operations WHERE settlement = 'held' AND hold_expires_ms <= ?1 "
                         "ORDER BY hold_expires_ms, id LIMIT ?2");
    stmt.Bind(1, now_ms).Bind(2, static_cast<int64_t>(limit));
    return ReadOperations(stmt);
  }

  Result<bool> InsertX402Payment(const X402PaymentRecord& r) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("INSERT INTO x402_payments (") + kPaymentColumns +
                         ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) "
                         "ON CONFLICT DO NOTHING");
    BindPayment(stmt, r);
    return RunChangingOneRow(stmt);
  }

  Result<std::optional<X402PaymentRecord>> FindX402Payment(
      std::string_view operation_id) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kPaymentColumns +
                         " FROM x402_payments WHERE operation_id = ?1");
    stmt.Bind(1, operation_id);
    return FindOne(stmt, ReadPayment);
  }

  Status UpdateX402Payment(const X402PaymentRecord& r) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "UPDATE x402_payments SET tx_hash = ?2, raw_tx = ?3, relayer = ?4, "
                     "relayer_nonce = ?5, submitted_ms = ?6, broadcasts = ?7 "
                     "WHERE operation_id = ?1");
    stmt.Bind(1, r.operation_id).Bind(2, r.tx_hash).Bind(3, r.raw_tx_hex).Bind(4, r.relayer);
    stmt.Bind(5, r.relayer_nonce).Bind(6, r.submitted_ms).Bind(7, r.broadcasts);
    Status status = stmt.Run();
    if (status.ok() && db_.Changes() != 1) {
      return Status::Error("store_not_found", "no x402 payment for operation " + r.operation_id);
    }
    return status;
  }

  Result<std::optional<X402PaymentRecord>> FindX402PaymentByRelayerNonce(
      std::string_view relayer, int64_t relayer_nonce) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kPaymentColumns +
                         " FROM x402_payments WHERE relayer = ?1 AND relayer_nonce = ?2 "
                         "ORDER BY submitted_ms LIMIT 1");
    stmt.Bind(1, relayer).Bind(2, relayer_nonce);
    return FindOne(stmt, ReadPayment);
  }

  Result<int64_t> TakeRelayerNonce(std::string_view relayer, int64_t chain_floor) override {
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

  Status InsertAlert(const Alert& alert) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "INSERT INTO alerts (id, operation_id, kind, detail, created_ms, resolved_ms, "
                     "resolution, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    stmt.Bind(1, alert.id).Bind(2, alert.operation_id).Bind(3, alert.kind).Bind(4, alert.detail);
    stmt.Bind(5, alert.created_ms).Bind(6, alert.resolved_ms).Bind(7, alert.resolution);
    return stmt.Bind(8, alert.note).Run();
  }

  Result<std::vector<Alert>> ListAlerts(int limit) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kAlertColumns +
                         " FROM alerts ORDER BY created_ms DESC, id LIMIT ?1");
    stmt.Bind(1, static_cast<int64_t>(limit));
    return ReadAlerts(stmt);
  }

  Result<std::vector<Alert>> ListAlertsOf(std::string_view operation_id) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kAlertColumns +
                         " FROM alerts WHERE operation_id = ?1 ORDER BY created_ms, id");
    stmt.Bind(1, operation_id);
    return ReadAlerts(stmt);
  }

  Result<bool> ResolveAlert(const Alert& resolved) override {
    AGENTPAY_CHECK(resolved.resolved_ms.has_value());
    AGENTPAY_PREPARE(stmt, db_,
                     "UPDATE alerts SET resolved_ms = ?2, resolution = ?3, note = ?4 "
                     "WHERE id = ?1 AND resolved_ms IS NULL");
    stmt.Bind(1, resolved.id).Bind(2, resolved.resolved_ms).Bind(3, resolved.resolution);
    stmt.Bind(4, resolved.note);
    return RunChangingOneRow(stmt);
  }

  Result<std::vector<std::string>> ListExpiredResults(int64_t now_ms, int limit) override {
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

  Result<PruneOutcome> PruneResult(const Operation& op) override {
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

  Status AppendEvent(const TraceEvent& event) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "INSERT INTO operation_events (operation_id, at_ms, actor, kind, detail) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)");
    stmt.Bind(1, event.operation_id).Bind(2, event.at_ms).Bind(3, event.actor);
    return stmt.Bind(4, event.kind).Bind(5, event.detail).Run();
  }

  Result<std::vector<TraceEvent>> ListEvents(std::string_view operation_id) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "SELECT operation_id, at_ms, actor, kind, detail FROM operation_events "
                     "WHERE operation_id = ?1 ORDER BY id");
    stmt.Bind(1, operation_id);
    std::vector<TraceEvent> events;
    Status status;
    while (stmt.Step(&status)) {
      events.push_back({stmt.Text(0), stmt.Int(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
    }
    if (!status.ok()) return status;
    return events;
  }

  Result<bool> InsertAccount(const AccountRecord& account) override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("INSERT INTO accounts (") + kAccountColumns +
                         ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING");
    stmt.Bind(1, account.id).Bind(2, account.name).Bind(3, account.api_key_hash);
    stmt.Bind(4, account.balances.deposited).Bind(5, account.balances.captured);
    stmt.Bind(6, account.balances.held).Bind(7, account.created_ms);
    return RunChangingOneRow(stmt);
  }

  Result<std::optional<AccountRecord>> FindAccount(std::string_view id) override {
    return FindAccountWhere("id", id);
  }
  Result<std::optional<AccountRecord>> FindAccountByKeyHash(std::string_view hash) override {
    return FindAccountWhere("api_key_hash", hash);
  }

  Result<std::vector<AccountRecord>> ListAccounts() override {
    AGENTPAY_PREPARE(stmt, db_,
                     std::string("SELECT ") + kAccountColumns + " FROM accounts ORDER BY id");
    std::vector<AccountRecord> accounts;
    Status status;
    while (stmt.Step(&status)) accounts.push_back(ReadAccount(stmt));
    if (!status.ok()) return status;
    return accounts;
  }

  Result<bool> InsertDeposit(const DepositRecord& deposit) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "INSERT INTO deposits (account_id, reference, amount, created_ms) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING");
    stmt.Bind(1, deposit.account_id).Bind(2, deposit.reference).Bind(3, deposit.amount);
    stmt.Bind(4, deposit.created_ms);
    return RunChangingOneRow(stmt);
  }

  Result<std::optional<DepositRecord>> FindDeposit(std::string_view account_id,
                                                   std::string_view reference) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "SELECT account_id, reference, amount, created_ms FROM deposits "
                     "WHERE account_id = ?1 AND reference = ?2");
    stmt.Bind(1, account_id).Bind(2, reference);
    return FindOne(stmt, [](const Statement& row) {
      return DepositRecord{row.Text(0), row.Text(1), row.Int(2), row.Int(3)};
    });
  }

  Result<MoveOutcome> Move(std::string_view account_id, MoveKind kind, int64_t amount,
                           std::string_view operation_id, int64_t at_ms) override {
    Balances balances;
    {
      AGENTPAY_PREPARE(read, db_, "SELECT deposited, captured, held FROM accounts WHERE id = ?1");
      read.Bind(1, account_id);
      Status status;
      if (!read.Step(&status)) {
        if (!status.ok()) return status;
        return Status::Error("store_not_found", "no account " + std::string(account_id));
      }
      balances = Balances{read.Int(0), read.Int(1), read.Int(2)};
    }
    MoveOutcome outcome = ApplyMove(&balances, kind, amount);
    if (outcome != MoveOutcome::kOk) return outcome;
    {
      AGENTPAY_PREPARE(
          update, db_,
          "UPDATE accounts SET deposited = ?2, captured = ?3, held = ?4 WHERE id = ?1");
      update.Bind(1, account_id).Bind(2, balances.deposited).Bind(3, balances.captured);
      Status status = update.Bind(4, balances.held).Run();
      if (!status.ok()) return status;
    }
    Posting posting = PostingFor(kind);
    AGENTPAY_PREPARE(
        insert, db_,
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

  Result<std::vector<PostingRecord>> ListPostings(std::string_view operation_id) override {
    AGENTPAY_PREPARE(stmt, db_,
                     "SELECT operation_id, kind, debit, credit, amount, at_ms FROM ledger_entries "
                     "WHERE operation_id = ?1 ORDER BY id");
    stmt.Bind(1, operation_id);
    std::vector<PostingRecord> postings;
    Status status;
    while (stmt.Step(&status)) {
      postings.push_back(
          {stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Int(4), stmt.Int(5)});
    }
    if (!status.ok()) return status;
    return postings;
  }

  Result<LedgerAudit> Audit() override {
    LedgerAudit audit;
    auto accounts = ListAccounts();
    if (!accounts.ok()) return accounts.status();
    AGENTPAY_PREPARE(sums, db_,
                     "SELECT account, kind, SUM(amount) FROM ("
                     " SELECT credit AS account, kind, amount FROM ledger_entries"
                     " UNION ALL SELECT debit, kind, -amount FROM ledger_entries"
                     ") GROUP BY account, kind");
    std::unordered_map<std::string, AccountAudit> by_account;
    for (const auto& account : *accounts) {
      by_account[account.id] = AccountAudit{account.id, account.balances, Balances{}};
    }
    Status status;
    while (sums.Step(&status)) {
      std::string account = sums.Text(0);
      std::string kind = sums.Text(1);
      int64_t net = sums.Int(2);
      if (account == "external") audit.external_total += net;
      if (account == "revenue") audit.revenue_total += net;
      auto colon = account.find(':');
      if (colon == std::string::npos) continue;
      std::string prefix = account.substr(0, colon);
      auto& entry = by_account[account.substr(colon + 1)];
      entry.account_id = account.substr(colon + 1);
      if (prefix == "wallet" && kind == "deposit") entry.from_ledger.deposited += net;
      if (prefix == "hold" && kind == "capture") entry.from_ledger.captured -= net;
      if (prefix == "wallet" && kind == "refund") entry.from_ledger.captured -= net;
      if (prefix == "hold") entry.from_ledger.held += net;
      if (prefix == "wallet") entry.wallet_net += net;
    }
    if (!status.ok()) return status;
    for (auto& [id, entry] : by_account) audit.accounts.push_back(entry);
    return audit;
  }

 private:
  Result<std::optional<AccountRecord>> FindAccountWhere(const char* column,
                                                        std::string_view value) {
    AGENTPAY_PREPARE(
        stmt, db_,
        std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE " + column + " = ?1");
    stmt.Bind(1, value);
    return FindOne(stmt, ReadAccount);
  }

  // Runs an INSERT … ON CONFLICT DO NOTHING or a compare-and-set UPDATE: true when it changed the
  // one row it targets, false when the conflict or the condition left everything as it was.
  Result<bool> RunChangingOneRow(Statement& stmt) {
    Status status = stmt.Run();
    if (!status.ok()) return status;
    return db_.Changes() == 1;
  }

  Database& db_;
};

Status Migrate(Database& db) {
  Status status = db.Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
      "description TEXT NOT NULL)");
  if (!status.ok()) return status;
  int64_t current = 0;
  {
    AGENTPAY_PREPARE(stmt, db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    if (stmt.Step(&status)) current = stmt.Int(0);
    if (!status.ok()) return status;
  }
  const auto& migrations = Migrations();
  if (current > migrations.back().version) {
    return Status::Error("store_too_new", "the database schema is version " +
                                              std::to_string(current) + ", newer than this binary");
  }
  for (const auto& migration : migrations) {
    if (migration.version <= current) continue;
    if (!(status = db.Exec("BEGIN IMMEDIATE")).ok()) return status;
    status = db.Exec(std::string(migration.sql));
    if (status.ok()) {
      AGENTPAY_PREPARE(record, db,
                       "INSERT INTO schema_migrations (version, description) VALUES (?1, ?2)");
      status = record.Bind(1, static_cast<int64_t>(migration.version))
                   .Bind(2, migration.description)
                   .Run();
    }
    if (!status.ok()) {
      db.Exec("ROLLBACK");
      return Status::Error(status.code(), "migration " + std::to_string(migration.version) + ": " +
                                              status.message());
    }
    if (!(status = db.Exec("COMMIT")).ok()) return status;
  }
  return Status::Ok();
}

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, StoreOptions options, std::unique_ptr<sqlite::WalWriteVfs> wal_vfs,
              std::unique_ptr<Database> writer, std::unique_ptr<Database> checkpointer,
              int wal_fd)
      : path_(std::move(path)),
        options_(options),
        wal_vfs_(std::move(wal_vfs)),
        writer_db_(std::move(writer)),
        checkpointer_db_(std::move(checkpointer)),
        instances_(path_ + ".instances"),
        wal_fd_(wal_fd) {
    // Checkpoints copy the WAL into the database file and fsync it: done inside a commit they
    // stalled the writer for milliseconds every thousand pages. The writer only reports the WAL's
    // size; a thread of its own checkpoints (PASSIVE: never blocks the writer or readers).
    sqlite3_wal_autocheckpoint(writer_db_->handle(), 0);
    sqlite3_wal_hook(writer_db_->handle(), &SqliteStore::OnWalCommit, this);
    // Named for top -H and debuggers (at most 15 characters).
    writer_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-writer");
      WriterLoop();
    });
    checkpoint_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-ckpt");
      CheckpointLoop();
    });
  }

  ~SqliteStore() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    writer_thread_.join();
    ::close(wal_fd_);
    {
      std::lock_guard lock(checkpoint_mutex_);
      checkpoint_stopping_ = true;
    }
    checkpoint_wanted_.notify_all();
    checkpoint_thread_.join();
  }

  void WriteAsync(TransactionFn fn, WriteDone done) override {
    auto job = std::make_unique<Job>(Job{std::move(fn), std::move(done)});
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() < options_.max_queued_writes) {
        queue_.push_back(std::move(job));
      }
    }
    if (job) {  // not queued
      job->done(Status::Error("store_overloaded", "too many decisions waiting for the store"));
      return;
    }
    work_ready_.notify_one();
  }

  Status Read(const TransactionFn& fn) override {
    Status status = ReadUnsynced(fn);
    // The snapshot may hold a commit whose WAL frames are written but not yet synced.
    AwaitDurable();
    return status;
  }

  void AwaitDurable() override { AwaitDurable(commits_started_.load(std::memory_order_acquire)); }

  Status ReadUnsynced(const TransactionFn& fn) override {
    auto db = AcquireReader();
    if (!db.ok()) return db.status();
    Status status = (*db)->Run("BEGIN");
    if (status.ok()) {
      SqliteTransaction tx(**db);
      status = RunGuarded(fn, tx);
      (*db)->Run("COMMIT");
    }
    ReleaseReader(std::move(*db));
    return status;
  }

  StoreStats Stats() override {
    std::lock_guard lock(mutex_);
    StoreStats stats = stats_;
    stats.write_queue_depth = queue_.size();
    stats.durability_syncs = syncs_.load(std::memory_order_relaxed);
    return stats;
  }

  // Liveness through flock(2) on files beside the database (instance_locks.h).
  Status RegisterInstance(const std::string& instance_id) override {
    return instances_.Register(instance_id);
  }
  Status ReleaseInstance(const std::string& instance_id) override {
    return instances_.Release(instance_id);
  }
  Result<bool> InstanceAlive(const std::string& instance_id) override {
    return instances_.Alive(instance_id);
  }

 private:
  struct Job {
    TransactionFn fn;
    WriteDone done;
  };

  static Status RunGuarded(const TransactionFn& fn, Transaction& tx) {
    try {
      return fn(tx);
    } catch (const std::exception& error) {
      return Status::Error("internal_error", error.what());
    }
  }

  // Group commit that follows the disk: one thread takes every decision queued so far, runs them
  // in one transaction, commits, makes the commit durable (fdatasync of the WAL) and only then
  // runs their completions. Decisions that arrive while it works wait in the queue and share the
  // next commit and sync: the busier the store, the larger the batches. No write lock is held
  // during the sync, so another process sharing the database gets its turn then. (A separate
  // syncer thread overlapped a sync with the next batch, but cost every batch two thread
  // hand-offs on the way to its answer; with batches following the syncs there was little to
  // overlap.)
  void WriterLoop() {
    std::vector<std::unique_ptr<Job>> batch;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        while (!queue_.empty() && batch.size() < options_.max_batch) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      CommitBatch(batch);
      batch.clear();
    }
  }

  // Runs each decision in its own savepoint inside one transaction, then commits once.
  void CommitBatch(std::vector<std::unique_ptr<Job>>& batch) {
    Database& db = *writer_db_;
    std::vector<Status> results(batch.size());
    Status begun = db.Run("BEGIN IMMEDIATE");
    if (!begun.ok()) {
      for (auto& job : batch) job->done(begun);
      return;
    }
    SqliteTransaction tx(db);
    uint64_t rolled_back = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Status status = db.Run("SAVEPOINT decision");
      if (status.ok()) status = RunGuarded(batch[i]->fn, tx);
      if (!status.ok()) {
        db.Run("ROLLBACK TO decision");
        ++rolled_back;
      }
      db.Run("RELEASE decision");
      results[i] = status;
    }
    // Numbered before COMMIT: a reader that can see this commit also sees its number, and waits
    // for the sync that makes it durable (see Read).
    const uint64_t sequence = commits_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
    Status committed = db.Run("COMMIT");
    if (!committed.ok()) {
      db.Run("ROLLBACK");
      committed = Status::Error("store_unavailable", "commit failed: " + committed.message());
    }
    {
      std::lock_guard lock(mutex_);
      if (committed.ok()) {
        ++stats_.commits;
        stats_.decisions += batch.size() - rolled_back;
      }
      stats_.decisions_rolled_back += rolled_back;
    }
    // Durable before anyone hears of it: the commit's WAL frames are written (synchronous=NORMAL;
    // the VFS wrote any it had gathered when the commit was published, Flush makes sure), then
    // synced. A failed commit is synced too, so that readers waiting for its number go on.
    if (Status written = wal_vfs_->Flush(); !written.ok()) {
      std::fprintf(stderr, "agentpay store: %s; stopping\n", written.message().c_str());
      std::abort();
    }
    SyncWal(sequence);
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->done(results[i].ok() && !committed.ok() ? committed : results[i]);
    }
  }

  // Checkpoint once the WAL has this many pages (40 MiB at 4 KiB pages). The same hot pages (the
  // account row, index roots, the tails of append-only tables) are in nearly every commit, so a
  // checkpoint copies each of them once however many commits rewrote it: rarer checkpoints copy
  // and sync far fewer pages per decision (1,000 pages meant ~17 checkpoints a second at load).
  static constexpr int kCheckpointPages = 10000;
  static constexpr int kWriterCheckpointPages =
      100000;  // the checkpointer fell behind: writer helps

  static int OnWalCommit(void* self, sqlite3* db, const char*, int wal_pages) {
    auto* store = static_cast<SqliteStore*>(self);
    if (wal_pages >= kWriterCheckpointPages) {
      // Bounded WAL: if the background checkpoints cannot keep up, the writer pays for one.
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (wal_pages >= kCheckpointPages) {
      {
        std::lock_guard lock(store->checkpoint_mutex_);
        store->checkpoint_due_ = true;
      }
      store->checkpoint_wanted_.notify_one();
    }
    return SQLITE_OK;
  }

  void CheckpointLoop() {
    std::unique_lock lock(checkpoint_mutex_);
    for (;;) {
      checkpoint_wanted_.wait_for(lock, std::chrono::seconds(1),
                                  [this] { return checkpoint_stopping_ || checkpoint_due_; });
      if (checkpoint_stopping_) return;
      checkpoint_due_ = false;
      lock.unlock();
      sqlite3_wal_checkpoint_v2(checkpointer_db_->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                nullptr, nullptr);
      lock.lock();
    }
  }

  void SyncWal(uint64_t through) {
    if (::fdatasync(wal_fd_) != 0) {
      // The commits are visible but may not be on disk, and cannot be taken back: going on would
      // acknowledge money movements a power loss could erase. Stop; recovery starts from the disk.
      std::perror("agentpay store: fdatasync of the WAL failed; stopping");
      std::abort();
    }
    syncs_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(durable_mutex_);
      durable_through_.store(through, std::memory_order_release);
    }
    durable_.notify_all();
  }

  void AwaitDurable(uint64_t sequence) {
    if (durable_through_.load(std::memory_order_acquire) >= sequence) return;
    std::unique_lock lock(durable_mutex_);
    durable_.wait(lock, [&] { return durable_through_.load(std::memory_order_acquire) >= sequence; });
  }

  Result<std::unique_ptr<Database>> AcquireReader() {
    {
      std::unique_lock lock(reader_mutex_);
      reader_free_.wait(
          lock, [this] { return !readers_.empty() || open_readers_ < options_.max_readers; });
      if (!readers_.empty()) {
        auto db = std::move(readers_.back());
        readers_.pop_back();
        return db;
      }
      ++open_readers_;
    }
    auto db = Database::Open(path_, /*read_only=*/true);
    if (!db.ok()) {
      std::lock_guard lock(reader_mutex_);
      --open_readers_;
      reader_free_.notify_one();
    }
    return db;
  }

  void ReleaseReader(std::unique_ptr<Database> db) {
    {
      std::lock_guard lock(reader_mutex_);
      readers_.push_back(std::move(db));
    }
    reader_free_.notify_one();
  }

  const std::string path_;
  const StoreOptions options_;
  // Declared before the writer's connection: it outlives it.
  std::unique_ptr<sqlite::WalWriteVfs> wal_vfs_;
  std::unique_ptr<Database> writer_db_;
  std::unique_ptr<Database> checkpointer_db_;
  InstanceLocks instances_;
  std::mutex checkpoint_mutex_;
  std::condition_variable checkpoint_wanted_;
  bool checkpoint_due_ = false;
  bool checkpoint_stopping_ = false;
  std::thread checkpoint_thread_;

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stopping_ = false;
  StoreStats stats_;
  std::thread writer_thread_;

  const int wal_fd_;  // the WAL file, for the syncs that make commits durable
  std::atomic<uint64_t> commits_started_{0};
  std::atomic<uint64_t> durable_through_{0};
  std::atomic<uint64_t> syncs_{0};
  std::mutex durable_mutex_;
  std::condition_variable durable_;

  std::mutex reader_mutex_;
  std::condition_variable reader_free_;
  std::vector<std::unique_ptr<Database>> readers_;
  size_t open_readers_ = 0;
};

}  // namespace

Status Store::Write(TransactionFn fn) {
  std::promise<Status> result;
  auto future = result.get_future();
  WriteAsync(std::move(fn), [&result](Status status) { result.set_value(std::move(status)); });
  return future.get();
}

SettlementRecord ToSettlementRecord(const X402PaymentRecord& record) {
  AGENTPAY_CHECK(record.submitted());
  return SettlementRecord{record.operation_id, record.authorization, record.tx_hash,
                          record.raw_tx_hex,  record.submitted_ms,  record.broadcasts};
}

Status Rollback() { return Status::Error("rollback", "decision rolled back"); }
bool IsRollback(const Status& status) { return status.code() == "rollback"; }

Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options) {
  // SQLite's memory statistics take a global mutex on every allocation; nothing reads them.
  static const bool configured = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)configured;
  const std::string prefix = "sqlite:";
  if (url.rfind(prefix, 0) != 0) {
    return Status::Error("invalid_config", "unsupported --db '" + url + "': expected sqlite:PATH");
  }
  std::string path = url.substr(prefix.size());
  if (path.empty()) return Status::Error("invalid_config", "--db sqlite: needs a path");
  // The writer's connection gathers each commit's WAL writes into one (wal_write_vfs.h).
  auto wal_vfs = sqlite::WalWriteVfs::Register();
  if (!wal_vfs.ok()) return wal_vfs.status();
  auto db = Database::Open(path, /*read_only=*/false, (*wal_vfs)->name());
  if (!db.ok()) return db.status();
  // Durability as synchronous=FULL gives it (NOTES: NORMAL alone can lose acknowledged commits):
  // migrations run with FULL; then the writer commits with NORMAL and fdatasyncs the WAL itself
  // before any decision of the commit is acknowledged or read (SqliteStore::CommitBatch).
  // temp_store=MEMORY keeps each decision's savepoint journal off the disk. The page cache stays
  // at SQLite's default (2 MiB): every commit walks the cache's hash table when it ends the write
  // transaction, so a 64 MiB cache cost the writer more per commit (measured: ~8 % of the paid
  // path's CPU) than re-reading cold pages from the OS page cache.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON", "PRAGMA temp_store=MEMORY"}) {
    Status status = (*db)->Exec(pragma);
    if (!status.ok()) return status;
  }
  Status migrated = Migrate(**db);
  if (!migrated.ok()) return migrated;
  // Pre-release builds changed migration 1 in place; such a database has the right version number
  // but not the columns this binary reads. Say so instead of failing on the first query.
  for (std::string probe : {std::string("SELECT ") + kOperationColumns + " FROM operations LIMIT 0",
                            std::string("SELECT principal, key, operation_id, fingerprint, "
                                        "created_ms FROM idempotency_keys LIMIT 0"),
                            std::string("SELECT ") + kPaymentColumns +
                                " FROM x402_payments LIMIT 0"}) {
    if (!(*db)->Exec(probe).ok()) {
      return Status::Error("store_incompatible",
                           path + " was created by a pre-release build of AgentPay whose schema "
                                  "differs; move it away and start again");
    }
  }
  auto checkpointer = Database::Open(path, /*read_only=*/false);
  if (!checkpointer.ok()) return checkpointer.status();
  if (Status s = (*checkpointer)->Exec("PRAGMA synchronous=FULL"); !s.ok()) return s;
  // The WAL exists from the first write (the migrations' version check wrote or read through it);
  // it keeps its inode while any connection is open, so this descriptor syncs the right file.
  const std::string wal_path = path + "-wal";
  int wal_fd = ::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (wal_fd < 0) {
    return Status::Error("store_unavailable", "cannot open " + wal_path + " to sync it");
  }
  if (Status s = (*db)->Exec("PRAGMA synchronous=NORMAL"); !s.ok()) {
    ::close(wal_fd);
    return s;
  }
  return std::unique_ptr<Store>(
      new SqliteStore(path, options, std::move(*wal_vfs), std::move(*db), std::move(*checkpointer),
                      wal_fd));
}

}  // namespace agentpay
