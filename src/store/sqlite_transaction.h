// The SQLite backend's Transaction: the SQL that stores and finds each record, over one
// connection. When a transaction begins, commits or rolls back is the store's business
// (sqlite_store.cc: the writer thread's group commit, the read connections), not this file's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sqlite/sqlite_db.h"
#include "store/store.h"

// Prepares `sql` on `db` as `sqlite::Statement& var`, or returns the error from the enclosing
// function (which returns a Status or a Result).
#define AGENTPAY_PREPARE(var, db, sql)                  \
  auto var##_result = (db).Prepare(sql);                \
  if (!var##_result.ok()) return var##_result.status(); \
  agentpay::sqlite::Statement& var = *var##_result

namespace agentpay {

// Creates or migrates the schema of a SQLite database to this binary's version (schema.h);
// store_too_new when the database is newer.
Status MigrateSqlite(sqlite::Database& db);

class SqliteTransaction final : public Transaction {
 public:
  // Precondition: `db` has a transaction open (BEGIN or a savepoint) for as long as this is used.
  explicit SqliteTransaction(sqlite::Database& db) : db_(db) {}

  Result<bool> InsertKey(const KeyRecord& record) override;
  Result<std::optional<KeyRecord>> FindKey(std::string_view principal,
                                           std::string_view key) override;
  Status DeleteKey(std::string_view principal, std::string_view key) override;
  Result<bool> RecordArrival(const KeyRecord& key, const TraceEvent& event) override;
  Status InsertOperation(const Operation& op) override;
  Status UpdateOperation(const Operation& op) override;
  Result<bool> UpdateClaimedOperation(const Operation& op, int32_t expected_attempts) override;
  Result<PayerReservationState> ReadPayerReservations(std::string_view network,
                                                      std::string_view asset,
                                                      std::string_view payer,
                                                      int64_t lapsed_at_s) override;
  Status InsertPayerReservation(const PayerReservationRecord& record) override;
  Status ReleasePayerReservation(std::string_view operation_id) override;
  Result<std::vector<int64_t>> AddRateUsage(const std::vector<RateUsageRecord>& usage,
                                            int64_t updated_ms) override;
  Result<std::vector<RateUsageRecord>> ListRateUsage(int64_t min_window_start_ms,
                                                     int64_t updated_since_ms, int limit) override;
  Status PruneRateUsage(int64_t window_start_ms) override;
  Result<std::optional<Operation>> FindOperation(std::string_view id) override;
  Result<std::vector<Operation>> ListOperations(const OperationFilter& filter) override;
  Result<std::vector<Operation>> ListSettlingOperations(std::string_view after_id,
                                                        int limit) override;
  Result<std::vector<Operation>> ListUnpaidRetries(std::string_view after_id, int limit) override;
  Result<std::vector<Operation>> ListExpiredHolds(int64_t now_ms, int limit) override;
  Result<bool> InsertX402Payment(const X402PaymentRecord& r) override;
  Result<std::optional<X402PaymentRecord>> FindX402Payment(std::string_view operation_id) override;
  Status UpdateX402Payment(const X402PaymentRecord& r) override;
  Result<std::optional<X402PaymentRecord>> FindX402PaymentByAuthorization(
      std::string_view payer, std::string_view nonce) override;
  Result<std::vector<X402PaymentRecord>> ListX402PaymentsAtRelayerNonce(
      std::string_view relayer, int64_t relayer_nonce) override;
  Result<int64_t> TakeRelayerNonce(std::string_view relayer, int64_t chain_floor) override;
  Result<int64_t> NextRelayerNonce(std::string_view relayer) override;
  Result<std::vector<X402PaymentRecord>> ListRecentSettlements(int64_t since_ms,
                                                               int limit) override;
  Status InsertAlert(const Alert& alert) override;
  Result<std::vector<Alert>> ListAlerts(int limit) override;
  Result<std::vector<Alert>> ListAlertsOf(std::string_view operation_id) override;
  Result<bool> ResolveAlert(const Alert& resolved) override;
  Result<std::vector<std::string>> ListExpiredResults(int64_t now_ms, int limit) override;
  Result<PruneOutcome> PruneResult(const Operation& op) override;
  Status AppendEvent(const TraceEvent& event) override;
  Result<std::vector<TraceEvent>> ListEvents(std::string_view operation_id) override;
  Result<bool> InsertAccount(const AccountRecord& account) override;
  Result<std::optional<AccountRecord>> FindAccount(std::string_view id) override;
  Result<std::optional<AccountRecord>> FindAccountByKeyHash(std::string_view hash) override;
  Result<std::vector<AccountRecord>> ListAccounts() override;
  Result<std::vector<AccountRecord>> ListAccountsPage(std::string_view after_id,
                                                      int limit) override;
  Result<bool> InsertApiKey(const ApiKeyRecord& key) override;
  Result<std::vector<ApiKeyRecord>> ListApiKeys(std::string_view account_id) override;
  Result<bool> RevokeApiKey(std::string_view account_id, std::string_view key_id,
                            int64_t at_ms) override;
  Result<bool> InsertDeposit(const DepositRecord& deposit) override;
  Result<std::optional<DepositRecord>> FindDeposit(std::string_view account_id,
                                                   std::string_view reference) override;
  Result<MoveOutcome> Move(std::string_view account_id, MoveKind kind, int64_t amount,
                           std::string_view operation_id, int64_t at_ms) override;
  Result<std::vector<PostingRecord>> ListPostings(std::string_view operation_id) override;
  Result<LedgerAudit> Audit() override;
  Result<std::vector<OperationBooks>> ListOperationBooks(std::string_view after_id,
                                                         int limit) override;
  Result<std::vector<RepeatedCharge>> ListRepeatedCharges(int limit) override;
  Result<std::vector<SharedPayment>> ListSharedPayments(int limit) override;
  Result<StoreOverview> ReadOverview(int64_t since_ms) override;
  Result<std::vector<SettledPayment>> ListSettledPayments(std::string_view after_id,
                                                          int limit) override;

 private:
  Result<std::optional<AccountRecord>> FindAccountWhere(const char* column, std::string_view value);
  // Runs an INSERT … ON CONFLICT DO NOTHING or a compare-and-set UPDATE: true when it changed the
  // one row it targets, false when the conflict or the condition left everything as it was.
  Result<bool> RunChangingOneRow(sqlite::Statement& stmt);
  sqlite::Database& db_;
};

// False when `db` lacks a column this file reads: a database made by a pre-release build whose
// migration 1 differs, though its version number is the same.
bool HasColumnsRead(sqlite::Database& db);

}  // namespace agentpay
