// The PostgreSQL backend's Transaction: the SQL that stores and finds each record, over one
// connection, the same records as SqliteTransaction in PostgreSQL's dialect. When a transaction
// begins, commits or rolls back is the store's business (postgres_store.cc), not this file's.
// Writes whose answer a decision does not need (inserts of events, alerts, postings, operations;
// updates that must find their row) go through pg::Connection::Defer: on the writer's pipelined
// connection their failure fails the decision at its next read or at its end, with the same
// status and the same rollback as if it had been reported at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/wallet.h"
#include "store/pg_connection.h"
#include "store/store.h"

namespace agentpay {

// The balances of the accounts the writer's decisions moved money on, kept from one decision and
// one batch to the next, so that a hold or a capture on an account the writer knows costs neither
// a read nor a write of its row: a move changes `current` and posts to the ledger, and the row is
// written once, with the batch's COMMIT (or before anything in the batch reads accounts), by a
// compare-and-set against `stored`, the balances the row held. True only while nobody else changes
// those rows: the writer clears it when another gateway's batch ran since its own last one and
// when a batch fails (postgres_store.cc), and a stale entry fails a compare-and-set, and so its
// batch, instead of writing wrong money. What each decision changes is journaled, as amounts, so
// that a decision that is undone takes its own moves back, and only those, whatever decisions
// after it moved on the same accounts. Bounded: full, it forgets the accounts that have nothing to
// write and that no decision still open or unconfirmed moved.
//
// The writer holds decisions over (pg_connection.h, HoldOver): their writes are sent, and moves
// after them decided, before the database has confirmed them. Their journals stay here until it
// has (ConfirmHeld), and a held-over decision that fails is undone from here (UndoHeld);
// GainsAtRisk says what undoing them could take from an account, for the moves decided meanwhile
// (MoveSucceedsWhateverIsUndone, core/wallet.h).
class BalanceCache {
 public:
  static constexpr size_t kMaxAccounts = 100000;
  struct Entry {
    Balances stored;   // what the accounts row holds, as this transaction has written it
    Balances current;  // with the moves not written to the row yet
  };
  // What one decision changed on one account: `current` and `stored` after it minus before it,
  // and whether it inserted the account (undone, the entry goes: the row is gone too).
  struct Change {
    std::string account_id;
    Balances current;
    Balances stored;
    bool inserted = false;
  };
  using Journal = std::vector<Change>;

  const Entry* Find(std::string_view account_id) const;
  // Sets an entry; its changes are journaled for the running decision.
  void Set(std::string_view account_id, const Entry& entry);
  // The running decision inserted the account's row.
  void NoteInserted(std::string_view account_id);
  // A held-over decision inserted the account's row: it may not exist once that one is settled.
  bool InsertedByHeld(std::string_view account_id) const;
  // The accounts whose row is behind their moves.
  std::vector<std::pair<std::string, Entry>> Unwritten() const;
  bool HasUnwritten() const { return !unwritten_.empty(); }
  // The running decision ended: its journal, for Undo or Hold.
  Journal EndDecision() { return std::exchange(journal_, {}); }
  // Takes back what `journal` changed.
  void Undo(const Journal& journal);
  // Keeps the journal of a decision held over until it is confirmed; the id names it to UndoHeld.
  uint64_t Hold(Journal journal);
  // The held-over decision `id` failed: its changes are taken back.
  void UndoHeld(uint64_t id);
  // Every held-over decision is confirmed (or was undone).
  void ConfirmHeld() { held_.clear(); }
  // A held-over decision changed what is kept.
  bool ChangesHeld() const {
    return std::any_of(held_.begin(), held_.end(),
                       [](const auto& held) { return !held.second.empty(); });
  }
  // What undoing any of the held-over decisions could take from `account_id`'s balances.
  UnconfirmedGains GainsAtRisk(std::string_view account_id) const;
  // Forgets everything: only where nothing is unwritten, or the transaction is rolled back.
  void Clear();
  // The writers' batch the balances are written in (WriteBalances logs the accounts it wrote
  // under it in accounts_written, so that another gateway's writer finds the rows changed since
  // its own last batch, and stamps each row with it for gateways from before migration 15).
  void SetBatch(int64_t batch) { batch_ = batch; }
  int64_t batch() const { return batch_; }
  // What a row holds now, read at a batch's start: a kept entry for it is replaced (nothing may be
  // unwritten or journaled then); an account not kept stays unkept.
  void Refresh(std::string_view account_id, const Balances& row);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  // Keeps `unwritten_` in step with the entry of `account_id` (null: none).
  void Note(const std::string& account_id, const Entry* entry);
  // The running decision's change to `account_id`, added to its journal if new.
  Change& Journaled(std::string_view account_id);
  // The accounts a journal still names: the running decision's, or a held-over one's.
  std::unordered_set<std::string_view> Journaled() const;
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> accounts_;
  std::unordered_set<std::string, Hash, std::equal_to<>> unwritten_;  // current != stored
  Journal journal_;
  int64_t batch_ = 0;
  std::deque<std::pair<uint64_t, Journal>> held_;  // oldest first
  uint64_t next_held_ = 0;
};

// Writes the balances `cache` has not written yet, deferred on `conn` (compare-and-set against
// what the row held), journaled as the running decision's.
Status WriteBalances(pg::Connection& conn, BalanceCache& cache);

class PostgresTransaction final : public Transaction {
 public:
  // Precondition: `conn` has a transaction open for as long as this is used. `balances`: the
  // writer's cache (Move reads and keeps balances through it, reads of accounts write it first),
  // or null.
  explicit PostgresTransaction(pg::Connection& conn, BalanceCache* balances = nullptr)
      : conn_(conn), balances_(balances) {}

  Result<bool> InsertKey(const KeyRecord& record) override;
  Status ReserveNewKey(const KeyRecord& record) override;
  Result<std::optional<KeyRecord>> FindKey(std::string_view principal,
                                           std::string_view key) override;
  Status DeleteKey(std::string_view principal, std::string_view key) override;
  Result<bool> RecordArrival(const KeyRecord& key, const TraceEvent& event) override;
  Status InsertOperation(const Operation& op) override;
  Status UpdateOperation(const Operation& op) override;
  Result<bool> UpdateClaimedOperation(const Operation& op, int32_t expected_attempts) override;
  Status UpdateClaimedOperationOrFail(const Operation& op, int32_t expected_attempts) override;
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
  // An account's balances: from the cache when it has them, else read and kept.
  Result<std::optional<BalanceCache::Entry>> ReadBalances(std::string_view account_id);
  // Before a statement reads accounts rows: the cache's unwritten balances go first.
  Status WriteKeptBalances();
  // Waits for the database's answer to the decisions held over (undoing any that failed).
  Status ConfirmHeld();
  pg::Connection& conn_;
  BalanceCache* balances_;
};

}  // namespace agentpay
