// The budget file of `agentpay pay`: one SQLite database (WAL, synchronous=FULL) shared by any
// number of client processes. Every decision runs in its own BEGIN IMMEDIATE transaction, so
// concurrent processes serialize on the file and the sum of what counts never exceeds the total;
// they take their turns in arrival order (write_queue.h), so no writer waits for longer than the
// writers ahead of it take.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentpay/client.h"
#include "client/write_queue.h"
#include "core/budget.h"
#include "core/result.h"

namespace agentpay::sqlite {
class Database;
}

namespace agentpay::client {

// How long a writer waits for its turn (the writers ahead of it) and then for SQLite's lock,
// each, before giving up with "database is locked".
inline constexpr int kBudgetBusyTimeoutMs = 30000;

// One reservation as stored. The payment header is kept so that every retry, in this process or a
// later one, re-presents the very same signed authorization.
struct StoredReservation {
  std::string key;
  std::string fingerprint;
  std::string method, url;
  int64_t amount = 0;
  ReservationState state = ReservationState::kReserved;
  std::string scheme;  // "wallet" | "x402"
  int x402_version = 0;
  std::string payment_header;  // x402: the header value sent (PAYMENT-SIGNATURE or X-PAYMENT)
  std::string payer, nonce, asset, pay_to;  // x402: lower-case 0x hex
  uint64_t chain_id = 0;
  int64_t valid_before_s = 0;
  std::string operation_id, tx_hash, note;
  int64_t sends = 0;           // sends that may have reached the server
  int64_t lease_until_ms = 0;  // a running `pay` owns the reservation until then
  int64_t created_ms = 0, updated_ms = 0;
};

Reservation ToPublic(const StoredReservation& stored);

struct BudgetFigures {
  int64_t total = 0;
  int64_t committed = 0;  // over reservations that count (core/budget.h)
  int64_t spent = 0;
};

// Everything the file holds, as of one moment (see BudgetDb::Snapshot).
struct BudgetSnapshot {
  std::vector<StoredReservation> reservations;  // oldest first
  BudgetFigures figures;
  BudgetAssetBinding binding;
};

// kAssetMismatch: the price is in another asset than the budget counts in (or the budget, an
// older mixed file, has none); nothing was reserved or signed.
enum class ClaimKind { kResume, kMismatch, kNeedsPrice, kReserved, kOverBudget, kAssetMismatch };
struct Claim {
  ClaimKind kind = ClaimKind::kNeedsPrice;
  StoredReservation reservation;  // kResume, kReserved, kMismatch (the existing one)
  BudgetFigures figures;          // after the decision
  BudgetAssetBinding binding;     // the budget's asset after the decision
};

// "84532:0x… (USDC, 6 decimals)", "not bound yet" or "several (an older file)".
std::string DescribeBinding(const BudgetAssetBinding& binding);

class BudgetDb {
 public:
  // Opens or creates the file. `total` is required to create it and, when given for an existing
  // file, must equal its total (error code "budget_mismatch"; "budget_required" when missing).
  // A file of schema 1 (before budgets named their asset) is migrated in place, in the opening
  // transaction: bound to the one asset its x402 reservations use, unbound when it has none,
  // "mixed" (no new payment) when they use several (core MigrateBudgetAsset).
  static Result<std::unique_ptr<BudgetDb>> Open(const std::string& path,
                                                std::optional<int64_t> total, int64_t now_ms);
  // Opens an existing file only (error "budget_missing" when it does not exist).
  static Result<std::unique_ptr<BudgetDb>> OpenExisting(const std::string& path);
  ~BudgetDb();

  // A claim on `key` before the price is known: kResume (a live reservation, leased to the caller
  // until lease_until_ms), kMismatch, or kNeedsPrice (none, or released).
  Result<Claim> ClaimExisting(const std::string& key, const std::string& fingerprint,
                              int64_t now_ms, int64_t lease_until_ms);
  // The decision with the price known (core DecideReserve, then DecideBudgetAsset for a new
  // reservation): the price is `wanted.amount` atomic units of `asset`. On kReserve, a budget
  // without an asset is bound to `asset`, `sign` fills the payment fields of `wanted` (it runs
  // inside the transaction, so a signature exists only for a reservation that is committed with
  // it) and the row is written with a lease. kAssetMismatch and kOverBudget change nothing.
  Result<Claim> Reserve(StoredReservation wanted, const BudgetAsset& asset,
                        const std::function<Status(StoredReservation&)>& sign, int64_t now_ms,
                        int64_t lease_until_ms);
  // Counted before each send, so that a later refusal knows whether an earlier send may have
  // reached the server.
  Status RecordSend(const std::string& key, int64_t now_ms);
  Status RecordEvidence(const std::string& key, const std::string& operation_id,
                        const std::string& tx_hash, int64_t now_ms);
  // Applies what was learned (core AfterOutcome), ends the lease; returns the resulting row.
  Result<StoredReservation> Finish(const std::string& key, ReservationState learned,
                                   const std::string& note, int64_t now_ms);
  // Reconciliation: applies `verdict` unless a running `pay` holds the lease or the state moved
  // away from `expected` meanwhile; returns the row after the decision.
  Result<StoredReservation> ApplyReconcile(const std::string& key, ReservationState expected,
                                           ReconcileVerdict verdict, const std::string& why,
                                           int64_t now_ms);

  Result<std::optional<StoredReservation>> Find(const std::string& key);
  Result<std::vector<StoredReservation>> List();
  Result<BudgetFigures> Figures();
  Result<BudgetAssetBinding> Asset();
  // The reservations, the figures and the asset read in one read transaction, so that the figures
  // are the sums of exactly these rows however many processes write meanwhile (what `pay budget`
  // shows). It takes no write lock: writers go on beside it (WAL).
  Result<BudgetSnapshot> Snapshot();

 private:
  BudgetDb(std::unique_ptr<sqlite::Database> db, std::unique_ptr<WriteQueue> queue);
  Status Transaction(const std::function<Status()>& body);
  Status ReadTransaction(const std::function<Status()>& body);
  Result<std::vector<StoredReservation>> ListLocked();
  Result<Claim> ClaimLocked(const std::string& key, const std::string& fingerprint, int64_t now_ms,
                            int64_t lease_until_ms, bool renew);
  Result<std::optional<StoredReservation>> FindLocked(const std::string& key);
  Result<BudgetFigures> FiguresLocked();
  Result<BudgetAssetBinding> AssetLocked();
  Status BindLocked(const BudgetAsset& asset);
  Result<std::optional<int64_t>> ReadyTotal();
  Result<std::optional<int64_t>> Initialize(std::optional<int64_t> total, int64_t now_ms);
  Status MigrateLocked();
  Status Write(const StoredReservation& row);

  std::unique_ptr<sqlite::Database> db_;
  std::unique_ptr<WriteQueue> queue_;  // every write transaction waits for its turn in it
};

}  // namespace agentpay::client
