// The durable store: one interface, two backends (SQLite, PostgreSQL), one conformance
// suite (tests/store). A decision is one call to Store::Write: its reads and writes commit together or
// not at all, and Write returns only once the commit is durable (DESIGN rule 5).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/audit.h"
#include "core/idempotency.h"
#include "core/operation.h"
#include "core/result.h"
#include "core/settlement.h"
#include "core/wallet.h"
#include "core/world.h"

namespace agentpay {

struct AccountRecord {
  std::string id;
  std::string name;
  std::string api_key_hash;  // hex SHA-256 of the API key; the key itself is never stored
  Balances balances;
  int64_t created_ms = 0;
};

// One API key of an account (issue 13): an account may hold several at once (rotation: a new key
// is made, clients move to it, the old one is revoked), and a revoked key never authenticates again.
struct ApiKeyRecord {
  std::string id;  // "key_" + 16 hex digits: names the key in the admin API; not a secret
  std::string account_id;
  std::string key_hash;  // hex SHA-256 of the key; the key itself is never stored
  int64_t created_ms = 0;
  std::optional<int64_t> revoked_ms;  // set once, never cleared
  bool operator==(const ApiKeyRecord&) const = default;
};

// The id InsertAccount gives an account's first key (and migration 6 gave every existing key).
std::string FirstApiKeyId(std::string_view key_hash);

struct DepositRecord {
  std::string account_id;
  std::string reference;
  int64_t amount = 0;
  int64_t created_ms = 0;
};

// ListOperations: every field set narrows the list (all must match); newest first.
struct OperationFilter {
  std::optional<Intent> intent;
  std::optional<Settlement> settlement;
  std::optional<Fulfillment> fulfillment;
  std::optional<std::string> principal;        // "account:<id>" or "payer:<0x address>"
  std::optional<std::string> route;            // the route prefix it was paid on
  std::optional<std::string> idempotency_key;  // exactly
  std::optional<std::string> tx_hash;          // its x402 payment's transaction (lower-case)
  std::optional<std::string> before_id;        // paging: only ids below this one
  std::optional<int64_t> created_before_ms;    // only operations created before this time
  int limit = 100;
};

// What the operator console's overview shows first (ReadOverview).
struct StoreOverview {
  int64_t accounts = 0;
  int64_t held_count = 0;
  int64_t held_amount = 0;
  std::optional<int64_t> oldest_hold_created_ms;
  int64_t submitted = 0;  // x402 settlements broadcast, receipt not yet seen
  int64_t unknown = 0;    // x402 settlements whose outcome is unknown (202 given)
  std::optional<int64_t> oldest_settling_created_ms;
  int64_t open_alerts = 0;
  int64_t captured_since = 0;  // captures less refunds posted at or after `since_ms`
};

// One x402 payment (issue 3): the EIP-3009 authorization an operation is paid with, stored with the
// operation and unique per (payer, nonce), so one authorization pays for at most one operation;
// then, once the settlement decision signed it, the relayer transaction that carries it. The
// transaction is stored before its first broadcast: after a crash the same bytes go out again.
struct X402PaymentRecord {
  std::string operation_id;
  Authorization authorization;  // from and nonce lower-case hex, as signed
  std::string pay_to;           // lower-case 0x hex
  std::string signature_hex;    // 0x + 130 lower-case hex digits (r ‖ s ‖ v)
  int x402_version = 2;
  // Empty / -1 until the settlement decision (see SettlementRecord in core/settlement.h).
  std::string tx_hash;
  std::string raw_tx_hex;
  std::string relayer;  // lower-case 0x hex of the account that signed the transaction
  int64_t relayer_nonce = -1;
  int64_t submitted_ms = 0;  // when the current transaction was signed
  int64_t broadcasts = 0;
  // The signed transactions (lower-case 0x hex) this one replaced: the same relayer nonce and
  // calldata at a lower fee, oldest first. Any of them may still be the one the chain mines.
  std::vector<std::string> replaced_raw_txs;
  // Once settled: the block holding the receipt (number, 0x hash) and when it was seen, for the
  // reconciler's watch for reorganisations; -1 / "" / 0 before, and after a reorganisation.
  int64_t settled_block = -1;
  std::string settled_block_hash;
  int64_t settled_ms = 0;
  bool submitted() const { return !tx_hash.empty(); }
  bool operator==(const X402PaymentRecord&) const = default;
};

// The SettlementRecord of a payment. A settling payment not signed yet (a member of a batch still
// to be signed, or left unsigned by a crash) has its transaction fields empty.
SettlementRecord ToSettlementRecord(const X402PaymentRecord& record);

struct PruneOutcome {
  bool pruned = false;       // the stored result was still kept and is now dropped
  bool key_deleted = false;  // its key record still named the operation and is now deleted
};

// A payer's payment that may still move its money, reserved in the store so that every gateway of
// the database counts it (issue 36 item 8; core/payer_reservations.h). network "eip155:<id>",
// asset, payer and nonce lower-case 0x hex.
struct PayerReservationRecord {
  std::string network, asset, payer, nonce;
  std::string operation_id;
  int64_t amount = 0;
  int64_t valid_before_s = 0;
  bool operator==(const PayerReservationRecord&) const = default;
};
struct PayerReservationState {
  // The amounts of the payer's reservations dropped so far, summed: moved on by every drop, by
  // at most what a balance read before it may still show and the chain no longer holds.
  int64_t epoch = 0;
  int64_t reserved = 0;  // the sum of its reservations in force
  bool operator==(const PayerReservationState&) const = default;
};

// Tokens taken from one rate limit key in one window (gateway/rate_sync.h).
struct RateUsageRecord {
  std::string kind;  // "client", "account", "payer"
  std::string key;
  int64_t window_start_ms = 0;
  int64_t count = 0;  // AddRateUsage: the tokens to add; read: the total of every gateway
  bool operator==(const RateUsageRecord&) const = default;
};

// Everything one decision may read or write. Implementations run inside one database transaction.
// A write's error may be reported by the write itself, by a later call of the same decision, or
// only after the decision returned (the PostgreSQL writer sends writes without waiting for them):
// a decision returns every error it gets, and is then rolled back as a whole; one whose write
// fails after it returned is rolled back as a whole too, and its WriteDone gets that error. The
// outcome is the same either way.
class Transaction {
 public:
  virtual ~Transaction() = default;

  // Idempotency keys. InsertKey returns false (and changes nothing) when (principal, key) exists:
  // the reservation is atomic through the primary key, never check-then-insert.
  virtual Result<bool> InsertKey(const KeyRecord& record) = 0;
  // InsertKey for a key the caller has just seen absent (the usual case), without waiting for the
  // answer: a key that exists fails the decision with store_key_taken, possibly only after it
  // returned (see above); the caller then decides again with InsertKey.
  virtual Status ReserveNewKey(const KeyRecord& record);
  virtual Result<std::optional<KeyRecord>> FindKey(std::string_view principal,
                                                   std::string_view key) = 0;
  virtual Status DeleteKey(std::string_view principal, std::string_view key) = 0;
  // Appends `event` (ArrivalEvent) to the trace of the key's operation and counts it on the key,
  // unless the key already recorded kMaxRecordedArrivals or names another operation now; returns
  // whether it did.
  virtual Result<bool> RecordArrival(const KeyRecord& key, const TraceEvent& event) = 0;

  // Operations and their trace.
  virtual Status InsertOperation(const Operation& op) = 0;
  virtual Status UpdateOperation(const Operation& op) = 0;
  // Compare-and-set: writes `op` only if the stored operation is still in progress with attempt
  // `expected_attempts` (the caller's claim); returns whether it did.
  virtual Result<bool> UpdateClaimedOperation(const Operation& op, int32_t expected_attempts) = 0;
  // The same without waiting for the answer: a lost claim fails the decision with
  // store_claim_lost, possibly only after it returned (see above).
  virtual Status UpdateClaimedOperationOrFail(const Operation& op, int32_t expected_attempts);
  virtual Result<std::optional<Operation>> FindOperation(std::string_view id) = 0;
  virtual Result<std::vector<Operation>> ListOperations(const OperationFilter& filter) = 0;
  // x402 operations whose settlement is submitted or unknown with an id after `after_id` (""
  // for the first page), in id order, at most `limit` (> 0): ids begin with their creation time,
  // so this pages through all of them oldest first (the reconciler's cursor).
  virtual Result<std::vector<Operation>> ListSettlingOperations(std::string_view after_id,
                                                                int limit) = 0;
  // x402 operations waiting for a retry that has not come: settlement none (settle=after, nothing
  // submitted) and fulfillment pending_retry, with an id after `after_id`, in id order, at most
  // `limit` (> 0). The sweeper closes those whose authorization can no longer settle.
  virtual Result<std::vector<Operation>> ListUnpaidRetries(std::string_view after_id,
                                                           int limit) = 0;
  // Operations whose hold expired at or before now_ms, oldest expiry first.
  virtual Result<std::vector<Operation>> ListExpiredHolds(int64_t now_ms, int limit) = 0;
  virtual Status AppendEvent(const TraceEvent& event) = 0;
  virtual Result<std::vector<TraceEvent>> ListEvents(std::string_view operation_id) = 0;

  // x402 payments. InsertX402Payment returns false (and changes nothing) when the authorization
  // (payer, nonce) already pays for another operation.
  virtual Result<bool> InsertX402Payment(const X402PaymentRecord& record) = 0;
  virtual Result<std::optional<X402PaymentRecord>> FindX402Payment(
      std::string_view operation_id) = 0;
  // The payment this authorization (payer, nonce; lower-case hex as signed) already pays for, if
  // any: the gateway refuses a re-presented authorization from its own records, without a call
  // to the chain.
  virtual Result<std::optional<X402PaymentRecord>> FindX402PaymentByAuthorization(
      std::string_view payer, std::string_view nonce) = 0;
  // Writes the transaction fields (tx_hash … replaced_raw_txs) of an existing record.
  virtual Status UpdateX402Payment(const X402PaymentRecord& record) = 0;
  // The submitted payments whose transaction the relayer signed with this account nonce: one, or
  // a batch's members (one transaction), or none; the first signed first (then by operation id),
  // at most kMaxPaymentsPerTransaction + 1 (records.h).
  virtual Result<std::vector<X402PaymentRecord>> ListX402PaymentsAtRelayerNonce(
      std::string_view relayer, int64_t relayer_nonce) = 0;
  // Settled payments seen settled at or after since_ms (settled_ms), newest block first (then by
  // block hash and operation id, both descending), at most `limit` (> 0): the reconciler's watch
  // for reorganisations.
  virtual Result<std::vector<X402PaymentRecord>> ListRecentSettlements(int64_t since_ms,
                                                                       int limit) = 0;
  // The relayer account's next transaction nonce, kept durably: max(the stored next nonce,
  // chain_floor), and the stored next nonce becomes that plus one.
  virtual Result<int64_t> TakeRelayerNonce(std::string_view relayer, int64_t chain_floor) = 0;
  // The stored next nonce of the relayer account (0 before its first): every nonce below it was
  // taken by a decision, or skipped because the chain had used it already.
  virtual Result<int64_t> NextRelayerNonce(std::string_view relayer) = 0;

  // Payer reservations (issue 36 item 8). The payer's epoch and the sum of its reservations whose
  // valid_before_s is after lapsed_at_s (an authorization past validBefore plus the buffer can no
  // longer move money, whatever became of its operation).
  virtual Result<PayerReservationState> ReadPayerReservations(std::string_view network,
                                                              std::string_view asset,
                                                              std::string_view payer,
                                                              int64_t lapsed_at_s) = 0;
  // Precondition: amount > 0 and no reservation of this (network, asset, payer, nonce) or operation.
  virtual Status InsertPayerReservation(const PayerReservationRecord& record) = 0;
  // Drops the operation's reservation, if it has one, and moves its payer's epoch on by its
  // amount. The backends
  // call it themselves when an update makes an x402 operation's payment final
  // (!PaymentMayStillMove), in the decision that does so.
  virtual Status ReleasePayerReservation(std::string_view operation_id) = 0;

  // Rate limit usage shared by the gateways (gateway/rate_sync.h). Adds each record's count to its
  // row (created at 0) and stamps it updated_ms; returns the rows' totals, in order.
  virtual Result<std::vector<int64_t>> AddRateUsage(const std::vector<RateUsageRecord>& usage,
                                                    int64_t updated_ms) = 0;
  // Rows of windows at or after min_window_start_ms updated at or after updated_since_ms, at most
  // `limit` (> 0), least recently updated first.
  virtual Result<std::vector<RateUsageRecord>> ListRateUsage(int64_t min_window_start_ms,
                                                             int64_t updated_since_ms,
                                                             int limit) = 0;
  // Deletes the rows of windows before window_start_ms.
  virtual Status PruneRateUsage(int64_t window_start_ms) = 0;

  // Alerts for the admin, newest first.
  virtual Status InsertAlert(const Alert& alert) = 0;
  virtual Result<std::vector<Alert>> ListAlerts(int limit) = 0;
  // All alerts of one operation, oldest first.
  virtual Result<std::vector<Alert>> ListAlertsOf(std::string_view operation_id) = 0;
  // Compare-and-set: writes the resolution fields of `resolved` (resolved_ms, resolution, note)
  // only if the stored alert is still open; returns whether it did.
  virtual Result<bool> ResolveAlert(const Alert& resolved) = 0;

  // Retention (workers/pruner.h). Ids of final operations whose stored result is still kept and
  // whose retained_until_ms is at or before now_ms, oldest retention first.
  virtual Result<std::vector<std::string>> ListExpiredResults(int64_t now_ms, int limit) = 0;
  // Compare-and-set: if the operation's stored result is still kept, drops the stored response body
  // and deletes its key record if that record still names this operation (a forgotten key may
  // already name a newer one); otherwise changes nothing. The operation row (states, response
  // status), its postings, trace and alerts stay. Precondition (the caller's decision): final.
  virtual Result<PruneOutcome> PruneResult(const Operation& op) = 0;

  // Accounts. InsertAccount returns false when the id or the API key hash exists; otherwise it
  // also records api_key_hash as the account's first key (id FirstApiKeyId(hash)).
  virtual Result<bool> InsertAccount(const AccountRecord& account) = 0;
  virtual Result<std::optional<AccountRecord>> FindAccount(std::string_view id) = 0;
  // The account of the unrevoked key with this hash; nullopt for an unknown or revoked key.
  virtual Result<std::optional<AccountRecord>> FindAccountByKeyHash(std::string_view hash) = 0;

  // API keys. InsertApiKey returns false (and changes nothing) when the id or the hash exists.
  // Precondition: the account exists.
  virtual Result<bool> InsertApiKey(const ApiKeyRecord& key) = 0;
  // The account's keys, revoked ones included, oldest first.
  virtual Result<std::vector<ApiKeyRecord>> ListApiKeys(std::string_view account_id) = 0;
  // Compare-and-set: revokes the account's key `key_id` at `at_ms` if it is not revoked yet;
  // returns whether it did (false: no such key of this account, or revoked already).
  virtual Result<bool> RevokeApiKey(std::string_view account_id, std::string_view key_id,
                                    int64_t at_ms) = 0;
  virtual Result<std::vector<AccountRecord>> ListAccounts() = 0;
  // Accounts in id order after `after_id` ("" for the first page), at most `limit` (> 0).
  virtual Result<std::vector<AccountRecord>> ListAccountsPage(std::string_view after_id,
                                                              int limit) = 0;

  // Deposits, idempotent by (account, reference): InsertDeposit returns false when it exists.
  virtual Result<bool> InsertDeposit(const DepositRecord& deposit) = 0;
  virtual Result<std::optional<DepositRecord>> FindDeposit(std::string_view account_id,
                                                           std::string_view reference) = 0;

  // Money: applies a wallet move (core/wallet.h) to the account's balances and writes its two
  // postings, or changes nothing and returns the refusing outcome.
  virtual Result<MoveOutcome> Move(std::string_view account_id, MoveKind kind, int64_t amount,
                                   std::string_view operation_id, int64_t at_ms) = 0;
  virtual Result<std::vector<PostingRecord>> ListPostings(std::string_view operation_id) = 0;
  virtual Result<LedgerAudit> Audit() = 0;

  // The books audit (core/audit.h). Operations with their postings, alerts and sweeper releases,
  // in id order after `after_id` ("" for the first page), at most `limit` (> 0).
  virtual Result<std::vector<OperationBooks>> ListOperationBooks(std::string_view after_id,
                                                                 int limit) = 0;
  // Pairs of settled operations of one (principal, key), the second created while the first was
  // remembered; at most `limit`.
  virtual Result<std::vector<RepeatedCharge>> ListRepeatedCharges(int limit) = 0;
  // Authorizations (payer, nonce) and transaction hashes that more than one x402 payment names; at
  // most `limit` of each.
  virtual Result<std::vector<SharedPayment>> ListSharedPayments(int limit) = 0;
  // The console's overview: money held, unresolved settlements, open alerts, captured since.
  virtual Result<StoreOverview> ReadOverview(int64_t since_ms) = 0;
  // Settled x402 payments in operation id order after `after_id`, at most `limit` (> 0).
  virtual Result<std::vector<SettledPayment>> ListSettledPayments(std::string_view after_id,
                                                                  int limit) = 0;
};

// Whether an update to `op` drops its payer reservation (an x402 operation whose payment can no
// longer move money: core/payer_reservations.h PaymentMayStillMove).
bool ReleasesPayerReservation(const Operation& op);

// InsertAccount's second half, the same for every backend: records account.api_key_hash as the
// new account's first key (id FirstApiKeyId); store_conflict when another account's key has that
// hash, which refuses the account as a whole.
Status InsertFirstApiKey(Transaction& tx, const AccountRecord& account);

// Inside an arrival decision: records a repeated arrival of the key (ArrivalEvent) on its
// operation's trace when one is due; nothing otherwise (other outcomes, or the key's cap reached).
Status RecordRepeatedArrival(Transaction& tx, const KeyRecord& record, const Operation& op,
                             ArrivalOutcome outcome, int64_t now_ms);

using TransactionFn = std::function<Status(Transaction&)>;
using WriteDone = std::function<void(Status)>;
using ReadDone = std::function<void(Status)>;

// What an asynchronous read waits for before its `done` runs (Store::ReadAsync).
enum class ReadWait {
  kDurable,   // everything the snapshot can see is durable: an answer may be built from it
  kUnsynced,  // nothing: for a read that only chooses the next step (which waits itself)
};

struct StoreStats {
  uint64_t commits = 0;           // database commits
  uint64_t decisions = 0;         // Write calls committed (several may share one commit)
  uint64_t decisions_rolled_back = 0;
  uint64_t write_queue_depth = 0;
  // Syncs that made commits durable before they were acknowledged (one may cover several
  // commits, never fewer than one per acknowledged write that waited for it).
  uint64_t durability_syncs = 0;
  // Waits for a database server's answers (PostgreSQL; SQLite has none): of the writer's
  // connection, and of the readers' together.
  uint64_t writer_round_trips = 0;
  uint64_t reader_round_trips = 0;
  // Where the writer's wall time went, in nanoseconds: running the decisions of its batches
  // (PostgreSQL: with their round trips, the batch's start and its wait for the writers' lock
  // among them), committing them (PostgreSQL: the round trip in which the
  // server makes the commit durable), syncing the commit to the disk (SQLite's fdatasync), running
  // the decisions' completions. The rest of the time it waited for decisions. One writer serves
  // every decision in turn: its busy share says how near a gateway is to the most it can commit.
  uint64_t writer_decide_ns = 0;
  uint64_t writer_commit_ns = 0;
  uint64_t writer_sync_ns = 0;
  uint64_t writer_complete_ns = 0;
  // SQLite: the bytes the writer's commits wrote to the WAL (each changed page in full, with its
  // frame header). PostgreSQL: 0 (the server counts its own, pg_stat_wal).
  uint64_t wal_bytes = 0;
};

struct StoreOptions {
  size_t max_queued_writes = 10000;  // past this, Write fails with "store_overloaded"
  size_t max_batch = 256;            // decisions sharing one commit
  size_t max_readers = 16;           // read connections
};

class Store {
 public:
  virtual ~Store() = default;
  // Runs `fn` as one decision on the store's writer, then calls `done` with its outcome: if fn
  // returned an error its writes were rolled back and that status is passed on; otherwise `done`
  // runs once the commit is durable (or with a store error if the commit failed). All writes go
  // through here, so concurrent decisions share commits (group commit). `fn` must not block on
  // anything but the transaction; `done` runs on a store thread and must not block either.
  virtual void WriteAsync(TransactionFn fn, WriteDone done) = 0;
  // WriteAsync, waiting for `done`. Never call it from a `done` callback.
  Status Write(TransactionFn fn);
  // Runs `fn` on a consistent read-only snapshot, and returns once everything that snapshot can
  // see is durable: an answer built from it never reports a commit a power loss could erase.
  // Blocking (so are ReadUnsynced, AwaitDurable and Write): never on an event thread
  // (core/event_threads.h; each backend asserts it).
  virtual Status Read(const TransactionFn& fn) = 0;
  // Read without that wait, for a caller that either acts on what it read only after
  // AwaitDurable() or WhenDurable(), or only uses it to choose a write (whose acknowledgement
  // waits anyway).
  virtual Status ReadUnsynced(const TransactionFn& fn) = 0;
  // Waits until every commit made so far is durable.
  virtual void AwaitDurable() = 0;
  // AwaitDurable without the wait: `then` runs once every commit made so far is durable, at once
  // on the calling thread when they are already, otherwise on the store's writer thread after
  // the sync that makes them so (it must not block). Always runs exactly once.
  virtual void WhenDurable(std::function<void()> then) = 0;
  // A read without a wait on the caller's thread (reads are asynchronous like writes): `fn` runs
  // on a snapshot as a task of `readers` (an Executor whose threads may wait on the database),
  // then `done` gets its outcome, after what `wait` asks for, on that task's thread or (kDurable)
  // the writer's. When `readers` takes no more tasks, `done` gets store_overloaded at once, on
  // the calling thread. `fn` and `done` must not block on anything but the snapshot.
  void ReadAsync(Executor& readers, TransactionFn fn, ReadDone done,
                 ReadWait wait = ReadWait::kDurable);
  virtual StoreStats Stats() = 0;
  // Whether a read is a round trip to a database server (PostgreSQL) rather than a look at a local
  // file (SQLite). A caller that reads only to spare the writer a decision that usually goes ahead
  // anyway skips such a read (WalletPath::Start).
  virtual bool ReadsAreRemote() const = 0;

  // ---- Process liveness (issue 4: several gateway processes share one database) ----------------
  // Each gateway process registers an instance id at start and stamps it on the claims its attempts
  // take (Operation::claimed_by). Another process's crash recovery takes a claim over only once its
  // instance is no longer alive. Liveness is proven by something the operating system or the
  // database server releases by itself when the process dies (kill -9 included), never by a
  // heartbeat or a timestamp, and never by an in-memory lock:
  //  - SQLite (one host, as SQLite requires anyway): an exclusive flock(2) on
  //    `<db path>.instances/<id>.lock`, held through one descriptor (O_CLOEXEC) for as long as the
  //    registration lasts; the kernel drops it with the process. flock, not fcntl: its locks
  //    belong to the open file description, so closing some other descriptor of the file does not
  //    drop them, and a second descriptor opened in the same process conflicts like any other.
  //  - PostgreSQL: a session-level advisory lock (pg_try_advisory_lock on a 64-bit hash of the id)
  //    held by a connection of its own for the process lifetime; the server drops it when that
  //    session ends (a killed process's a few milliseconds later, once the server sees the closed
  //    connection). InstanceAlive looks for the granted lock in pg_locks.
  //
  // Registers `instance_id` (1-64 characters of [A-Za-z0-9_-]) as alive until ReleaseInstance or
  // the Store's destruction. Fails with "instance_taken" if a live owner holds it already.
  virtual Status RegisterInstance(const std::string& instance_id) = 0;
  // Ends a registration of this Store (a clean shutdown; tests use it to play a process that
  // died). An id this Store did not register is left alone.
  virtual Status ReleaseInstance(const std::string& instance_id) = 0;
  // Whether some live process (this one included) holds `instance_id`'s registration: false for an
  // id never registered, released, or whose owner died (the backend then forgets it).
  virtual Result<bool> InstanceAlive(const std::string& instance_id) = 0;
};

// Whether `id` may name a gateway instance: 1-64 characters of [A-Za-z0-9_-] (ids name lock files
// and keys, so nothing else is ever registered, and nothing else is ever alive).
bool ValidInstanceId(std::string_view id);

// Opens (creating and migrating as needed) the store named by `url`: "sqlite:PATH" or a
// PostgreSQL connection URI ("postgresql://user:password@host:port/database?…").
Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options = {});

// `url` fit for logs and error messages: a PostgreSQL URL's password (in the user part or a
// password= parameter) replaced by "***"; anything else unchanged.
std::string RedactedStoreUrl(std::string_view url);

// The status a TransactionFn returns to roll its decision back when the outcome is a domain one
// (insufficient funds, a lost race) rather than an error; the caller reads its own outcome.
Status Rollback();

bool IsRollback(const Status& status);

}  // namespace agentpay
