// The budget file over SQLite; see budget_db.h. Decisions are core/budget.h's; this file only reads
// the facts they need and writes their outcome, each in one BEGIN IMMEDIATE transaction taken in
// its turn.
#include "client/budget_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "sqlite/sqlite_db.h"

namespace agentpay::client {
namespace {

// 2: the budget names its asset (asset_* columns). Files of version 1 are migrated on open.
constexpr int kSchemaVersion = 2;
constexpr int kSchemaWithoutAsset = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS budget (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  total INTEGER NOT NULL CHECK (total >= 0),
  schema_version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  asset_state TEXT NOT NULL DEFAULT 'unbound' CHECK (asset_state IN ('unbound', 'bound', 'mixed')),
  asset_chain_id INTEGER,
  asset_address TEXT,
  asset_name TEXT,
  asset_decimals INTEGER);
CREATE TABLE IF NOT EXISTS reservations (
  key TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  method TEXT NOT NULL,
  url TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  state TEXT NOT NULL CHECK (state IN ('reserved', 'spent', 'released', 'unknown')),
  scheme TEXT NOT NULL CHECK (scheme IN ('wallet', 'x402')),
  x402_version INTEGER NOT NULL,
  payment_header TEXT NOT NULL,
  payer TEXT NOT NULL,
  nonce TEXT NOT NULL,
  asset TEXT NOT NULL,
  pay_to TEXT NOT NULL,
  chain_id INTEGER NOT NULL,
  valid_before_s INTEGER NOT NULL,
  operation_id TEXT NOT NULL,
  tx_hash TEXT NOT NULL,
  note TEXT NOT NULL,
  sends INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL);
)sql";

constexpr const char* kColumns =
    "key, fingerprint, method, url, amount, state, scheme, x402_version, payment_header, payer, "
    "nonce, asset, pay_to, chain_id, valid_before_s, operation_id, tx_hash, note, sends, "
    "lease_until_ms, created_ms, updated_ms";

StoredReservation ReadRow(const sqlite::Statement& s) {
  StoredReservation r;
  r.key = s.Text(0);
  r.fingerprint = s.Text(1);
  r.method = s.Text(2);
  r.url = s.Text(3);
  r.amount = s.Int(4);
  auto state = ParseReservationState(s.Text(5));
  AGENTPAY_CHECK(state.has_value());  // the CHECK constraint admits only the four names
  r.state = *state;
  r.scheme = s.Text(6);
  r.x402_version = static_cast<int>(s.Int(7));
  r.payment_header = s.Text(8);
  r.payer = s.Text(9);
  r.nonce = s.Text(10);
  r.asset = s.Text(11);
  r.pay_to = s.Text(12);
  r.chain_id = static_cast<uint64_t>(s.Int(13));
  r.valid_before_s = s.Int(14);
  r.operation_id = s.Text(15);
  r.tx_hash = s.Text(16);
  r.note = s.Text(17);
  r.sends = s.Int(18);
  r.lease_until_ms = s.Int(19);
  r.created_ms = s.Int(20);
  r.updated_ms = s.Int(21);
  return r;
}

// The file holds signed payment authorizations: readable by its owner only.
void CreatePrivateFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

// The asset columns, added to a table that a schema-1 binary created.
constexpr const char* kAssetColumns[] = {
    "asset_state TEXT NOT NULL DEFAULT 'unbound' CHECK (asset_state IN ('unbound', 'bound', "
    "'mixed'))",
    "asset_chain_id INTEGER", "asset_address TEXT", "asset_name TEXT", "asset_decimals INTEGER"};

std::string_view AssetStateName(BudgetAssetState state) {
  switch (state) {
    case BudgetAssetState::kUnbound:
      return "unbound";
    case BudgetAssetState::kBound:
      return "bound";
    case BudgetAssetState::kMixed:
      return "mixed";
  }
  AGENTPAY_CHECK(false);
}

Status WithCode(const Status& status, const std::string& path) {
  return Status::Error(status.error(), path + ": " + status.message());
}

}  // namespace

Reservation ToPublic(const StoredReservation& r) {
  Reservation out;
  out.key = r.key;
  out.state = std::string(ReservationStateName(r.state));
  out.amount = r.amount;
  out.method = r.method;
  out.url = r.url;
  out.scheme = r.scheme;
  out.x402_version = r.x402_version;
  out.payer = r.payer;
  out.nonce = r.nonce;
  out.asset = r.asset;
  out.pay_to = r.pay_to;
  out.chain_id = r.chain_id;
  out.valid_before_s = r.valid_before_s;
  out.operation_id = r.operation_id;
  out.transaction = r.tx_hash;
  out.note = r.note;
  out.sends = r.sends;
  out.created_ms = r.created_ms;
  out.updated_ms = r.updated_ms;
  return out;
}

BudgetDb::BudgetDb(std::unique_ptr<sqlite::Database> db, std::unique_ptr<WriteQueue> queue)
    : db_(std::move(db)), queue_(std::move(queue)) {}
BudgetDb::~BudgetDb() = default;

Result<std::unique_ptr<BudgetDb>> BudgetDb::OpenExisting(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) {
    return Status::Error(ErrorCode::kBudgetMissing, "no budget file at " + path);
  }
  return Open(path, std::nullopt, 0);
}

Result<std::unique_ptr<BudgetDb>> BudgetDb::Open(const std::string& path,
                                                 std::optional<int64_t> total, int64_t now_ms) {
  if (total && *total < 0) {
    return Status::Error(ErrorCode::kInvalidBudget, "the budget must be >= 0");
  }
  CreatePrivateFile(path);
  auto opened = sqlite::Database::Open(path, /*read_only=*/false);
  if (!opened.ok()) return opened.status();
  auto queue = WriteQueue::Open(path);
  if (!queue.ok()) return queue.status();
  std::unique_ptr<BudgetDb> budget(new BudgetDb(std::move(*opened), std::move(*queue)));
  sqlite3_busy_timeout(budget->db_->handle(), kBudgetBusyTimeoutMs);
  // WAL lets readers (`pay budget`) run beside a writer; FULL makes a reservation durable before
  // the payment it covers is signed. Switching to WAL is a no-op once the file is in WAL mode; on a
  // new file that other processes are opening too, EnterWalMode waits for the one converting it (a
  // bare PRAGMA journal_mode=WAL failed with "database is locked" there, busy timeout or not).
  if (Status s = budget->db_->EnterWalMode(); !s.ok()) return WithCode(s, path);
  if (Status s = budget->db_->Exec("PRAGMA synchronous=FULL"); !s.ok()) return WithCode(s, path);
  // Most opens find the file ready and only read it: no write lock, no turn in the queue.
  auto stored = budget->ReadyTotal();
  if (stored.ok() && !stored->has_value()) stored = budget->Initialize(total, now_ms);
  if (!stored.ok()) return WithCode(stored.status(), path);
  if (!stored->has_value()) {
    return Status::Error(ErrorCode::kBudgetRequired,
                         path + " has no budget yet: give --budget ATOMIC to create it");
  }
  if (total && *total != **stored) {
    return Status::Error(ErrorCode::kBudgetMismatch, path + " was created with a budget of " +
                                                         std::to_string(**stored) + ", not " +
                                                         std::to_string(*total));
  }
  return budget;
}

// The total of a file that needs nothing written: its tables exist and its budget row is of this
// version. Otherwise nullopt, and Initialize decides under the write lock.
Result<std::optional<int64_t>> BudgetDb::ReadyTotal() {
  std::optional<int64_t> total;
  Status status = ReadTransaction([&]() -> Status {
    auto table =
        db_->Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'budget'");
    if (!table.ok()) return table.status();
    Status step;
    if (!table->Step(&step)) return step;  // a new file
    auto select = db_->Prepare("SELECT total, schema_version FROM budget WHERE id = 1");
    if (!select.ok()) return select.status();
    if (select->Step(&step) && select->Int(1) == kSchemaVersion) total = select->Int(0);
    return step;
  });
  if (!status.ok()) return status;
  return total;
}

// Creates the tables and the budget row (when `total` is given), or migrates an older file: one
// write transaction. nullopt when the file has no budget row and `total` was not given.
Result<std::optional<int64_t>> BudgetDb::Initialize(std::optional<int64_t> total, int64_t now_ms) {
  std::optional<int64_t> stored;
  Status status = Transaction([&]() -> Status {
    if (Status s = db_->Exec(kSchema); !s.ok()) return s;
    if (total) {
      auto insert = db_->Prepare(
          "INSERT OR IGNORE INTO budget (id, total, schema_version, created_ms) VALUES (1, ?, ?, "
          "?)");
      if (!insert.ok()) return insert.status();
      if (Status s = insert->Bind(1, *total).Bind(2, kSchemaVersion).Bind(3, now_ms).Run();
          !s.ok()) {
        return s;
      }
    }
    auto select = db_->Prepare("SELECT total, schema_version FROM budget WHERE id = 1");
    if (!select.ok()) return select.status();
    Status step;
    if (select->Step(&step)) {
      const int64_t version = select->Int(1);
      stored = select->Int(0);
      if (version == kSchemaWithoutAsset) return MigrateLocked();
      if (version != kSchemaVersion) {
        return Status::Error(ErrorCode::kBudgetSchema,
                             "unknown budget file version " + std::to_string(version));
      }
    }
    return step;
  });
  if (!status.ok()) return status;
  return stored;
}

// Schema 1 → 2, inside the opening transaction: the asset columns, then the binding that the
// file's x402 reservations imply (core MigrateBudgetAsset). Wallet reservations name no asset.
Status BudgetDb::MigrateLocked() {
  auto columns = db_->Prepare("SELECT name FROM pragma_table_info('budget')");
  if (!columns.ok()) return columns.status();
  bool has_asset_columns = false;
  Status step;
  while (columns->Step(&step)) has_asset_columns |= columns->Text(0) == "asset_state";
  if (!step.ok()) return step;
  if (!has_asset_columns) {
    for (const char* column : kAssetColumns) {
      if (Status s = db_->Exec(std::string("ALTER TABLE budget ADD COLUMN ") + column); !s.ok()) {
        return s;
      }
    }
  }
  auto assets = db_->Prepare(
      "SELECT DISTINCT chain_id, lower(asset) FROM reservations WHERE scheme = 'x402' ORDER BY "
      "created_ms, rowid");
  if (!assets.ok()) return assets.status();
  std::vector<std::pair<uint64_t, std::string>> used;
  while (assets->Step(&step))
    used.emplace_back(static_cast<uint64_t>(assets->Int(0)), assets->Text(1));
  if (!step.ok()) return step;
  const BudgetAssetBinding binding = MigrateBudgetAsset(used);
  auto update = db_->Prepare(
      "UPDATE budget SET schema_version = ?, asset_state = ?, asset_chain_id = ?, asset_address = "
      "? WHERE id = 1");
  if (!update.ok()) return update.status();
  update->Bind(1, kSchemaVersion).Bind(2, AssetStateName(binding.state));
  if (binding.state == BudgetAssetState::kBound) {
    update->Bind(3, static_cast<int64_t>(binding.asset.chain_id)).Bind(4, binding.asset.address);
  } else {
    update->BindNull(3).BindNull(4);
  }
  return update->Run();
}

Result<BudgetAssetBinding> BudgetDb::AssetLocked() {
  auto select = db_->Prepare(
      "SELECT asset_state, asset_chain_id, asset_address, asset_name, asset_decimals FROM budget "
      "WHERE id = 1");
  if (!select.ok()) return select.status();
  Status step;
  if (!select->Step(&step)) {
    return step.ok() ? Status::Error(ErrorCode::kStoreError, "no budget row") : step;
  }
  BudgetAssetBinding binding;
  const std::string state = select->Text(0);
  if (state == "mixed") binding.state = BudgetAssetState::kMixed;
  if (state == "bound" && !select->IsNull(1) && !select->IsNull(2)) {
    binding.state = BudgetAssetState::kBound;
    binding.asset.chain_id = static_cast<uint64_t>(select->Int(1));
    binding.asset.address = select->Text(2);
    if (!select->IsNull(3)) binding.asset.name = select->Text(3);
    if (auto decimals = select->OptionalInt(4))
      binding.asset.decimals = static_cast<int>(*decimals);
  }
  return binding;
}

Status BudgetDb::BindLocked(const BudgetAsset& asset) {
  auto update = db_->Prepare(
      "UPDATE budget SET asset_state = 'bound', asset_chain_id = ?, asset_address = lower(?), "
      "asset_name = ?, asset_decimals = ? WHERE id = 1 AND asset_state = 'unbound'");
  if (!update.ok()) return update.status();
  update->Bind(1, static_cast<int64_t>(asset.chain_id)).Bind(2, asset.address).Bind(3, asset.name);
  std::optional<int64_t> decimals;
  if (asset.decimals) decimals = *asset.decimals;
  update->Bind(4, decimals);
  return update->Run();
}

Result<BudgetAssetBinding> BudgetDb::Asset() { return AssetLocked(); }

std::string DescribeBinding(const BudgetAssetBinding& binding) {
  switch (binding.state) {
    case BudgetAssetState::kUnbound:
      return "not bound yet (the first payment binds it)";
    case BudgetAssetState::kMixed:
      return "several (a file from before budgets named their asset): start a new budget file";
    case BudgetAssetState::kBound: {
      std::string text =
          binding.asset.address + " on eip155:" + std::to_string(binding.asset.chain_id);
      std::string details = binding.asset.name;
      if (binding.asset.decimals) {
        details +=
            (details.empty() ? "" : ", ") + std::to_string(*binding.asset.decimals) + " decimals";
      }
      return details.empty() ? text : text + " (" + details + ")";
    }
  }
  AGENTPAY_CHECK(false);
}

Status BudgetDb::Transaction(const std::function<Status()>& body) {
  // Held until the transaction has ended, whichever way.
  auto turn = queue_->Wait(kBudgetBusyTimeoutMs);
  if (!turn.ok()) return turn.status();
  if (Status s = db_->Run("BEGIN IMMEDIATE"); !s.ok()) return s;
  Status status = body();
  if (status.ok()) status = db_->Run("COMMIT");
  // The first failure is the one to report. ROLLBACK fails when a failed COMMIT already rolled
  // back; should it fail with the transaction still open, the next BEGIN reports that.
  if (!status.ok()) (void)db_->Run("ROLLBACK");
  return status;
}

// A deferred BEGIN: the first SELECT starts a read snapshot that every later SELECT of the
// transaction shares. Nothing in it writes, so it never upgrades to a write lock (which SQLite does
// not wait for: see sqlite::Database::EnterWalMode).
Status BudgetDb::ReadTransaction(const std::function<Status()>& body) {
  if (Status s = db_->Run("BEGIN"); !s.ok()) return s;
  Status status = body();
  if (status.ok()) status = db_->Run("COMMIT");
  if (!status.ok()) (void)db_->Run("ROLLBACK");
  return status;
}

Result<std::optional<StoredReservation>> BudgetDb::FindLocked(const std::string& key) {
  auto select =
      db_->Prepare(std::string("SELECT ") + kColumns + " FROM reservations WHERE key = ?");
  if (!select.ok()) return select.status();
  select->Bind(1, key);
  Status step;
  if (select->Step(&step)) return std::optional<StoredReservation>(ReadRow(*select));
  if (!step.ok()) return step;
  return std::optional<StoredReservation>();
}

Result<BudgetFigures> BudgetDb::FiguresLocked() {
  auto select = db_->Prepare(
      "SELECT (SELECT total FROM budget WHERE id = 1), "
      "COALESCE(SUM(CASE WHEN state != 'released' THEN amount END), 0), "
      "COALESCE(SUM(CASE WHEN state = 'spent' THEN amount END), 0) FROM reservations");
  if (!select.ok()) return select.status();
  Status step;
  if (!select->Step(&step)) {
    return step.ok() ? Status::Error(ErrorCode::kStoreError, "no budget figures") : step;
  }
  return BudgetFigures{select->Int(0), select->Int(1), select->Int(2)};
}

Status BudgetDb::Write(const StoredReservation& r) {
  auto upsert = db_->Prepare(std::string("INSERT OR REPLACE INTO reservations (") + kColumns +
                             ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                             "?, ?, ?)");
  if (!upsert.ok()) return upsert.status();
  upsert->Bind(1, r.key).Bind(2, r.fingerprint).Bind(3, r.method).Bind(4, r.url);
  upsert->Bind(5, r.amount).Bind(6, ReservationStateName(r.state)).Bind(7, r.scheme);
  upsert->Bind(8, static_cast<int64_t>(r.x402_version)).Bind(9, r.payment_header);
  upsert->Bind(10, r.payer).Bind(11, r.nonce).Bind(12, r.asset).Bind(13, r.pay_to);
  upsert->Bind(14, static_cast<int64_t>(r.chain_id)).Bind(15, r.valid_before_s);
  upsert->Bind(16, r.operation_id).Bind(17, r.tx_hash).Bind(18, r.note).Bind(19, r.sends);
  upsert->Bind(20, r.lease_until_ms).Bind(21, r.created_ms).Bind(22, r.updated_ms);
  return upsert->Run();
}

Result<Claim> BudgetDb::ClaimExisting(const std::string& key, const std::string& fingerprint,
                                      int64_t now_ms, int64_t lease_until_ms) {
  // Only a resumption writes (its lease): a new key, the usual case, is read without the write
  // lock. Reserve decides again under the lock, so a key reserved in between is not missed.
  Result<Claim> claim = Status::Error(ErrorCode::kStoreError, "not read");
  auto decide = [&](bool renew) {
    return [&, renew]() -> Status {
      claim = ClaimLocked(key, fingerprint, now_ms, lease_until_ms, renew);
      return claim.ok() ? Status::Ok() : claim.status();
    };
  };
  if (Status s = ReadTransaction(decide(false)); !s.ok()) return s;
  if (claim->kind != ClaimKind::kResume) return claim;
  if (Status s = Transaction(decide(true)); !s.ok()) return s;
  return claim;
}

// ClaimExisting's decision in the caller's transaction; `renew` writes the resumed lease.
Result<Claim> BudgetDb::ClaimLocked(const std::string& key, const std::string& fingerprint,
                                    int64_t now_ms, int64_t lease_until_ms, bool renew) {
  Claim claim;
  auto existing = FindLocked(key);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    StoredReservation& row = **existing;
    if (row.fingerprint != fingerprint) {
      claim.kind = ClaimKind::kMismatch;
      claim.reservation = row;
    } else if (row.state != ReservationState::kReleased) {
      claim.kind = ClaimKind::kResume;
      row.lease_until_ms = std::max(row.lease_until_ms, lease_until_ms);
      row.updated_ms = now_ms;
      if (renew) {
        if (Status s = Write(row); !s.ok()) return s;
      }
      claim.reservation = row;
    }
  }
  auto figures = FiguresLocked();
  if (!figures.ok()) return figures.status();
  claim.figures = *figures;
  return claim;
}

Result<Claim> BudgetDb::Reserve(StoredReservation wanted, const BudgetAsset& asset,
                                const std::function<Status(StoredReservation&)>& sign,
                                int64_t now_ms, int64_t lease_until_ms) {
  AGENTPAY_CHECK(wanted.amount > 0);
  Claim claim;
  Status status = Transaction([&]() -> Status {
    auto existing = FindLocked(wanted.key);
    if (!existing.ok()) return existing.status();
    auto figures = FiguresLocked();
    if (!figures.ok()) return figures.status();
    std::optional<ReservationSnapshot> snapshot;
    if (existing->has_value()) {
      snapshot = ReservationSnapshot{(*existing)->state, (*existing)->fingerprint};
    }
    auto binding = AssetLocked();
    if (!binding.ok()) return binding.status();
    claim.binding = *binding;
    ReserveVerdict verdict = DecideReserve(snapshot, wanted.fingerprint, wanted.amount,
                                           figures->total, figures->committed);
    // A new reservation must be in the budget's unit; resuming one presents what was reserved.
    BudgetAssetVerdict asset_verdict = BudgetAssetVerdict::kSame;
    if (verdict == ReserveVerdict::kReserve || verdict == ReserveVerdict::kOverBudget) {
      asset_verdict = DecideBudgetAsset(*binding, asset.chain_id, asset.address);
    }
    if (asset_verdict == BudgetAssetVerdict::kOther ||
        asset_verdict == BudgetAssetVerdict::kMixed) {
      claim.kind = ClaimKind::kAssetMismatch;
      claim.figures = *figures;
      return Status::Ok();
    }
    switch (verdict) {
      case ReserveVerdict::kMismatch:
        claim.kind = ClaimKind::kMismatch;
        claim.reservation = **existing;
        break;
      case ReserveVerdict::kOverBudget:
        claim.kind = ClaimKind::kOverBudget;
        break;
      case ReserveVerdict::kResume: {
        claim.kind = ClaimKind::kResume;
        StoredReservation row = **existing;
        row.lease_until_ms = std::max(row.lease_until_ms, lease_until_ms);
        row.updated_ms = now_ms;
        if (Status s = Write(row); !s.ok()) return s;
        claim.reservation = row;
        break;
      }
      case ReserveVerdict::kReserve: {
        wanted.state = ReservationState::kReserved;
        wanted.sends = 0;
        wanted.lease_until_ms = lease_until_ms;
        wanted.created_ms = existing->has_value() ? (*existing)->created_ms : now_ms;
        wanted.updated_ms = now_ms;
        if (asset_verdict == BudgetAssetVerdict::kBind) {
          if (Status s = BindLocked(asset); !s.ok()) return s;
          auto bound = AssetLocked();
          if (!bound.ok()) return bound.status();
          claim.binding = *bound;
        }
        if (Status s = sign(wanted); !s.ok()) return s;
        if (Status s = Write(wanted); !s.ok()) return s;
        claim.kind = ClaimKind::kReserved;
        claim.reservation = wanted;
        break;
      }
    }
    auto after = FiguresLocked();
    if (!after.ok()) return after.status();
    AGENTPAY_CHECK(after->committed <= after->total);  // the budget is never exceeded
    claim.figures = *after;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return claim;
}

Status BudgetDb::RecordSend(const std::string& key, int64_t now_ms) {
  return Transaction([&]() -> Status {
    auto update =
        db_->Prepare("UPDATE reservations SET sends = sends + 1, updated_ms = ? WHERE key = ?");
    if (!update.ok()) return update.status();
    return update->Bind(1, now_ms).Bind(2, key).Run();
  });
}

Status BudgetDb::RecordEvidence(const std::string& key, const std::string& operation_id,
                                const std::string& tx_hash, int64_t now_ms) {
  return Transaction([&]() -> Status {
    auto update = db_->Prepare(
        "UPDATE reservations SET operation_id = CASE WHEN ? = '' THEN operation_id ELSE ? END, "
        "tx_hash = CASE WHEN ? = '' THEN tx_hash ELSE ? END, updated_ms = ? WHERE key = ?");
    if (!update.ok()) return update.status();
    return update->Bind(1, operation_id)
        .Bind(2, operation_id)
        .Bind(3, tx_hash)
        .Bind(4, tx_hash)
        .Bind(5, now_ms)
        .Bind(6, key)
        .Run();
  });
}

Result<StoredReservation> BudgetDb::Finish(const std::string& key, ReservationState learned,
                                           const std::string& note, int64_t now_ms) {
  StoredReservation result;
  Status status = Transaction([&]() -> Status {
    auto existing = FindLocked(key);
    if (!existing.ok()) return existing.status();
    if (!existing->has_value()) {
      return Status::Error(ErrorCode::kBudgetMissing, "no reservation " + key);
    }
    StoredReservation row = **existing;
    ReservationState next = AfterOutcome(row.state, learned);
    if (next != row.state || !note.empty()) row.note = note;
    row.state = next;
    row.lease_until_ms = 0;
    row.updated_ms = now_ms;
    if (Status s = Write(row); !s.ok()) return s;
    result = row;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return result;
}

Result<StoredReservation> BudgetDb::ApplyReconcile(const std::string& key,
                                                   ReservationState expected,
                                                   ReconcileVerdict verdict, const std::string& why,
                                                   int64_t now_ms) {
  StoredReservation result;
  Status status = Transaction([&]() -> Status {
    auto existing = FindLocked(key);
    if (!existing.ok()) return existing.status();
    if (!existing->has_value()) {
      return Status::Error(ErrorCode::kBudgetMissing, "no reservation " + key);
    }
    StoredReservation row = **existing;
    result = row;
    // A `pay` that took the lease since the facts were read decides for itself.
    if (row.state != expected || row.lease_until_ms > now_ms) return Status::Ok();
    ReservationState learned = ReservationState::kUnknown;
    if (verdict == ReconcileVerdict::kMarkSpent) learned = ReservationState::kSpent;
    if (verdict == ReconcileVerdict::kMarkReleased) learned = ReservationState::kReleased;
    row.state = AfterOutcome(row.state, learned);
    row.note = why;
    row.updated_ms = now_ms;
    if (Status s = Write(row); !s.ok()) return s;
    result = row;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return result;
}

Result<std::optional<StoredReservation>> BudgetDb::Find(const std::string& key) {
  // A read transaction of its own: one consistent snapshot.
  std::optional<StoredReservation> found;
  Status status = Transaction([&]() -> Status {
    auto row = FindLocked(key);
    if (!row.ok()) return row.status();
    found = *row;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return found;
}

Result<std::vector<StoredReservation>> BudgetDb::List() { return ListLocked(); }

Result<std::vector<StoredReservation>> BudgetDb::ListLocked() {
  auto select = db_->Prepare(std::string("SELECT ") + kColumns +
                             " FROM reservations ORDER BY created_ms, rowid");
  if (!select.ok()) return select.status();
  std::vector<StoredReservation> rows;
  Status step;
  while (select->Step(&step)) rows.push_back(ReadRow(*select));
  if (!step.ok()) return step;
  return rows;
}

Result<BudgetFigures> BudgetDb::Figures() { return FiguresLocked(); }

Result<BudgetSnapshot> BudgetDb::Snapshot() {
  BudgetSnapshot snapshot;
  Status status = ReadTransaction([&]() -> Status {
    auto rows = ListLocked();
    if (!rows.ok()) return rows.status();
    auto figures = FiguresLocked();
    if (!figures.ok()) return figures.status();
    auto binding = AssetLocked();
    if (!binding.ok()) return binding.status();
    snapshot = BudgetSnapshot{std::move(*rows), *figures, *binding};
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return snapshot;
}

}  // namespace agentpay::client
