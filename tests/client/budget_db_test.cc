// The budget file (src/client/budget_db.h): creation and the fixed total, reservations, resumption,
// outcomes, reconciliation around a live lease, the sum never exceeding the total when many
// threads and many processes reserve at once on one file, a writer's turn among processes that keep
// writing, and a new file opened while another process holds its lock.
#include "client/budget_db.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "sqlite/sqlite_db.h"

namespace agentpay::client {
namespace {

const BudgetAsset kAsset{84532, "0x5fbdb2315678afecb367f032d93f642f64180aa3", "USDC", std::nullopt};

class BudgetDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/agentpay-budget-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/budget.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static StoredReservation Wanted(const std::string& key, int64_t amount) {
    StoredReservation r;
    r.key = key;
    r.fingerprint = "fp-" + key;
    r.method = "GET";
    r.url = "http://127.0.0.1:1/x";
    r.amount = amount;
    r.scheme = "wallet";
    return r;
  }
  static Status NoSign(StoredReservation&) { return Status::Ok(); }

  std::string dir_, path_;
};

TEST_F(BudgetDbTest, TheTotalIsFixedWhenTheFileIsCreated) {
  auto missing = BudgetDb::Open(path_, std::nullopt, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), "budget_required");
  ASSERT_TRUE(BudgetDb::Open(path_, 5000, 1).ok());
  EXPECT_TRUE(BudgetDb::Open(path_, 5000, 2).ok());
  EXPECT_TRUE(BudgetDb::Open(path_, std::nullopt, 2).ok());
  auto other = BudgetDb::Open(path_, 6000, 2);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), "budget_mismatch");
  struct stat info {};
  ASSERT_EQ(stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "signed authorizations are readable by the owner only";
  EXPECT_EQ(BudgetDb::OpenExisting(dir_ + "/none.db").status().code(), "budget_missing");
}

TEST_F(BudgetDbTest, ReservesUntilTheTotalThenRefuses) {
  auto db = BudgetDb::Open(path_, 2500, 1);
  ASSERT_TRUE(db.ok());
  int signed_count = 0;
  auto sign = [&](StoredReservation& r) {
    ++signed_count;
    r.payment_header = "header-" + r.key;
    return Status::Ok();
  };
  for (const char* key : {"a", "b"}) {
    auto claim = (*db)->Reserve(Wanted(key, 1000), kAsset, sign, 10, 100);
    ASSERT_TRUE(claim.ok());
    EXPECT_EQ(claim->kind, ClaimKind::kReserved);
    EXPECT_EQ(claim->reservation.payment_header, std::string("header-") + key);
  }
  auto over = (*db)->Reserve(Wanted("c", 1000), kAsset, sign, 10, 100);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->kind, ClaimKind::kOverBudget);
  EXPECT_EQ(signed_count, 2) << "nothing is signed for a reservation that is refused";
  EXPECT_FALSE((*db)->Find("c")->has_value());
  auto fits = (*db)->Reserve(Wanted("d", 500), kAsset, sign, 10, 100);
  EXPECT_EQ(fits->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Figures()->committed, 2500);
}

TEST_F(BudgetDbTest, AnExistingKeyResumesWithItsPaymentAndNeverSignsAgain) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  int signed_count = 0;
  auto sign = [&](StoredReservation& r) {
    r.payment_header = "first-signature-" + std::to_string(++signed_count);
    return Status::Ok();
  };
  ASSERT_EQ((*db)->Reserve(Wanted("k", 1000), kAsset, sign, 10, 100)->kind, ClaimKind::kReserved);
  auto again = (*db)->Reserve(Wanted("k", 1000), kAsset, sign, 20, 200);
  ASSERT_EQ(again->kind, ClaimKind::kResume);
  EXPECT_EQ(again->reservation.payment_header, "first-signature-1");
  EXPECT_EQ(signed_count, 1);
  auto claim = (*db)->ClaimExisting("k", "fp-k", 30, 300);
  EXPECT_EQ(claim->kind, ClaimKind::kResume);
  EXPECT_EQ(claim->reservation.lease_until_ms, 300);
  EXPECT_EQ((*db)->ClaimExisting("k", "other", 30, 300)->kind, ClaimKind::kMismatch);
  EXPECT_EQ((*db)->ClaimExisting("new", "fp-new", 30, 300)->kind, ClaimKind::kNeedsPrice);
}

TEST_F(BudgetDbTest, AFailedSignatureLeavesNoReservation) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  auto failing = [](StoredReservation&) { return Status::Error(ErrorCode::kSigningFailed, "no"); };
  EXPECT_FALSE((*db)->Reserve(Wanted("k", 10), kAsset, failing, 1, 2).ok());
  EXPECT_FALSE((*db)->Find("k")->has_value());
  EXPECT_EQ((*db)->Figures()->committed, 0);
}

TEST_F(BudgetDbTest, OutcomesNeverDowngradeAndReleaseFreesTheBudget) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  ASSERT_EQ((*db)->Reserve(Wanted("a", 600), kAsset, NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kSpent, "", 3)->state, ReservationState::kSpent);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kUnknown, "", 4)->state, ReservationState::kSpent);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kReleased, "", 4)->state,
            ReservationState::kSpent);
  ASSERT_EQ((*db)->Reserve(Wanted("b", 400), kAsset, NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Reserve(Wanted("c", 1), kAsset, NoSign, 1, 2)->kind, ClaimKind::kOverBudget);
  EXPECT_EQ((*db)->Finish("b", ReservationState::kReleased, "refused", 5)->state,
            ReservationState::kReleased);
  EXPECT_EQ((*db)->Figures()->committed, 600);
  EXPECT_EQ((*db)->Figures()->spent, 600);
  // A released key may be reserved again (a new payment: the old one can never land).
  auto renewed = (*db)->Reserve(Wanted("b", 300), kAsset, NoSign, 6, 7);
  EXPECT_EQ(renewed->kind, ClaimKind::kReserved);
  EXPECT_EQ(renewed->reservation.sends, 0);
  EXPECT_EQ((*db)->Figures()->committed, 900);
}

TEST_F(BudgetDbTest, ReconcileLeavesALeasedReservationAlone) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  ASSERT_EQ((*db)->Reserve(Wanted("a", 100), kAsset, NoSign, 1, /*lease_until_ms=*/1000)->kind,
            ClaimKind::kReserved);
  auto during = (*db)->ApplyReconcile("a", ReservationState::kReserved,
                                      ReconcileVerdict::kMarkReleased, "x", /*now_ms=*/500);
  EXPECT_EQ(during->state, ReservationState::kReserved) << "a running pay holds the lease";
  auto moved = (*db)->ApplyReconcile("a", ReservationState::kUnknown,
                                     ReconcileVerdict::kMarkReleased, "x", 2000);
  EXPECT_EQ(moved->state, ReservationState::kReserved) << "the state moved since it was read";
  auto after = (*db)->ApplyReconcile("a", ReservationState::kReserved,
                                     ReconcileVerdict::kMarkReleased, "expired", 2000);
  EXPECT_EQ(after->state, ReservationState::kReleased);
  EXPECT_EQ(after->note, "expired");
}

// Each worker reserves `keys` distinct keys of `amount`, on its own connection; returns the count.
int ReserveMany(const std::string& path, const std::string& prefix, int keys, int64_t amount) {
  auto db = BudgetDb::Open(path, std::nullopt, 1);
  if (!db.ok()) return -1;
  int reserved = 0;
  for (int i = 0; i < keys; ++i) {
    StoredReservation r;
    r.key = prefix + "-" + std::to_string(i);
    r.fingerprint = "fp";
    r.method = "GET";
    r.url = "http://x/";
    r.amount = amount;
    r.scheme = "x402";
    auto claim = (*db)->Reserve(
        r, kAsset, [](StoredReservation&) { return Status::Ok(); }, 1, 2);
    if (!claim.ok()) return -1;
    if (claim->kind == ClaimKind::kReserved) ++reserved;
  }
  return reserved;
}

TEST_F(BudgetDbTest, ThreadsNeverExceedTheTotal) {
  constexpr int64_t kTotal = 500, kAmount = 7;
  ASSERT_TRUE(BudgetDb::Open(path_, kTotal, 1).ok());
  std::vector<std::thread> threads;
  std::atomic<int> reserved{0}, failures{0};
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      int got = ReserveMany(path_, "thread" + std::to_string(t), 10, kAmount);
      if (got < 0) {
        ++failures;
      } else
        reserved += got;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(reserved.load(), kTotal / kAmount);  // 71 of the 120 asked
  auto figures = BudgetDb::Open(path_, kTotal, 1).value()->Figures();
  EXPECT_EQ(figures->committed, (kTotal / kAmount) * kAmount);
}

TEST_F(BudgetDbTest, ProcessesNeverExceedTheTotal) {
  constexpr int64_t kTotal = 555, kAmount = 10;
  constexpr int kProcesses = 6, kKeys = 20;
  ASSERT_TRUE(BudgetDb::Open(path_, kTotal, 1).ok());
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int got = ReserveMany(path_, "process" + std::to_string(p), kKeys, kAmount);
      _exit(got < 0 ? 255 : got);
    }
    children.push_back(pid);
  }
  int reserved = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 255) << "a child could not use the budget file";
    reserved += WEXITSTATUS(status);
  }
  EXPECT_EQ(reserved, kTotal / kAmount);  // 55 of the 120 asked
  auto db = BudgetDb::Open(path_, kTotal, 1);
  EXPECT_EQ((*db)->Figures()->committed, (kTotal / kAmount) * kAmount);
  EXPECT_EQ((*db)->List()->size(), static_cast<size_t>(kTotal / kAmount));
}

// A writer process for AWriterTakesItsTurn...: `count` reservations of 1 unit under new keys, one
// write transaction after the other, once the parent closes `gate`. Each time, `committed` before
// the reservation (read first) and in its own transaction tells how many transactions of others
// committed while it waited. Exits with the most of them (at most 254), or 255 on an error.
[[noreturn]] void WriteInTurns(const std::string& path, int id, int count, int gate) {
  char go;
  (void)!::read(gate, &go, 1);  // returns at end of file, when the parent closes the gate
  auto db = BudgetDb::Open(path, std::nullopt, 1);
  if (!db.ok()) _exit(255);
  int64_t most = 0;
  for (int n = 0; n < count; ++n) {
    StoredReservation r;
    r.key = "writer" + std::to_string(id) + "-" + std::to_string(n);
    r.fingerprint = "fp";
    r.method = "GET";
    r.url = "http://127.0.0.1:1/x";
    r.amount = 1;
    r.scheme = "wallet";
    auto before = (*db)->Figures();
    auto claim = (*db)->Reserve(
        r, kAsset, [](StoredReservation&) { return Status::Ok(); }, 1, 2);
    if (!before.ok() || !claim.ok() || claim->kind != ClaimKind::kReserved) _exit(255);
    most = std::max(most, claim->figures.committed - before->committed - 1);
  }
  _exit(static_cast<int>(std::min<int64_t>(most, 254)));
}

// Issue 36, under load: SQLite hands its write lock to whichever waiter tries when it comes free,
// and a waiter backs off to one try every 100 ms, so the processes that kept writing took it again
// and again while another waited: past the 30 s busy timeout ("database is locked") in
// integration.budget_stress. Writers now take turns in arrival order: while one waits, each of
// the others commits about once (the turn it holds when the waiter joins the queue, and whatever
// it commits in the moment before), never for as long as it likes.
TEST_F(BudgetDbTest, AWriterTakesItsTurnAmongProcessesThatKeepWriting) {
  constexpr int kWriters = 5, kEach = 40;
  ASSERT_TRUE(BudgetDb::Open(path_, 1'000'000'000, 1).ok());
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> writers;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      WriteInTurns(path_, w, kEach, gate[0]);
    }
    writers.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // all start now
  std::vector<int> overtaken;
  for (pid_t pid : writers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 255) << "a writer could not reserve";
    overtaken.push_back(WEXITSTATUS(status));
  }
  for (int most : overtaken) {
    EXPECT_LE(most, 3 * (kWriters - 1))
        << "the most transactions of others that committed while one writer waited, per writer: "
        << ::testing::PrintToString(overtaken);
  }
  auto figures = BudgetDb::Open(path_, std::nullopt, 1).value()->Figures();
  EXPECT_EQ(figures->committed, kWriters * kEach);
}

// The default VFS with one difference: it says when a connection sleeps in its busy handler, i.e.
// the moment it waits for a lock that another connection holds. Registered as the default for one
// test, so that BudgetDb's own connections use it.
class SleepWatch {
 public:
  SleepWatch() {
    base_ = sqlite3_vfs_find(nullptr);
    vfs_ = *base_;
    vfs_.zName = "agentpay-sleep-watch";
    vfs_.xSleep = &SleepWatch::Sleep;
    watch_ = this;
    sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
  }
  ~SleepWatch() {
    sqlite3_vfs_unregister(&vfs_);
    watch_ = nullptr;
  }
  void Notify() {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
  }
  // Until a connection waits for a lock, or `done` says there is nothing left to wait for.
  bool AwaitSleepOr(const std::atomic<bool>& done) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return slept_ || done.load(); });
    return slept_;
  }

 private:
  static int Sleep(sqlite3_vfs*, int microseconds) {
    SleepWatch* watch = watch_;
    {
      std::lock_guard lock(watch->mutex_);
      watch->slept_ = true;
    }
    watch->changed_.notify_all();
    return watch->base_->xSleep(watch->base_, microseconds);
  }

  static inline SleepWatch* watch_ = nullptr;
  sqlite3_vfs* base_ = nullptr;
  sqlite3_vfs vfs_{};
  std::mutex mutex_;
  std::condition_variable changed_;
  bool slept_ = false;
};

// Another process that holds the write lock of a new (empty, so not yet WAL) file, as a `pay`
// switching it to WAL does, until told to let go.
class LockHolder {
 public:
  explicit LockHolder(const std::string& path) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      sqlite3* db = nullptr;
      const bool held =
          sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK &&
          sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
      (void)!::write(ready[1], held ? "h" : "e", 1);
      char byte;
      (void)!::read(release[0], &byte, 1);  // returns at EOF: the parent closed its end
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      sqlite3_close(db);
      _exit(held ? 0 : 1);
    }
    ::close(ready[1]);
    ::close(release[0]);
    ready_ = ready[0];
    release_ = release[1];
  }
  ~LockHolder() { Release(); }
  // Waits until the holder has the lock (or failed to take it).
  bool Holding() {
    char byte = 0;
    return pid_ > 0 && ::read(ready_, &byte, 1) == 1 && byte == 'h';
  }
  void Release() {
    if (pid_ <= 0) return;
    ::close(release_);
    ::close(ready_);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int ready_ = -1, release_ = -1;
};

// Issue 36: of 8 `agentpay pay` processes creating one budget file, 6 failed with "database is
// locked". Switching a new file to WAL reads it and then upgrades to a write lock, and SQLite does
// not wait for that upgrade: whoever read while another process held the write lock failed at
// once, busy timeout or not. Here another process holds the write lock of the new, still empty
// file; the open must wait for it (seen as a sleep in the busy handler), then succeed.
TEST_F(BudgetDbTest, OpeningANewFileWaitsForAnotherWriterInsteadOfFailing) {
  int created = ::open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);  // as `pay` creates it
  ASSERT_GE(created, 0);
  ::close(created);
  LockHolder holder(path_);
  ASSERT_TRUE(holder.Holding());
  SleepWatch watch;
  std::atomic<bool> done{false};
  Result<std::unique_ptr<BudgetDb>> opened = Status::Error(ErrorCode::kStoreError, "not run");
  std::thread opener([&] {
    opened = BudgetDb::Open(path_, 5000, 1);
    done = true;
    watch.Notify();
  });
  const bool waited = watch.AwaitSleepOr(done);
  holder.Release();
  opener.join();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_TRUE(waited) << "the open waited for the other writer";
  EXPECT_EQ((*opened)->Figures()->total, 5000);
}

// --- the budget's asset --------------------------------------------------------------------------

TEST_F(BudgetDbTest, TheFirstReservationBindsTheAssetAndAnotherIsRefused) {
  auto db = BudgetDb::Open(path_, 5000, 1);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kUnbound);
  BudgetAsset mixed_case = kAsset;
  mixed_case.address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
  mixed_case.decimals = 6;
  auto first = (*db)->Reserve(Wanted("a", 1000), mixed_case, NoSign, 1, 2);
  ASSERT_EQ(first->kind, ClaimKind::kReserved);
  auto bound = (*db)->Asset();
  ASSERT_EQ(bound->state, BudgetAssetState::kBound);
  EXPECT_EQ(bound->asset.chain_id, 84532u);
  EXPECT_EQ(bound->asset.address, kAsset.address) << "stored lower-case";
  EXPECT_EQ(bound->asset.name, "USDC");
  EXPECT_EQ(bound->asset.decimals, 6);
  EXPECT_EQ(first->binding.state, BudgetAssetState::kBound);
  EXPECT_EQ(DescribeBinding(*bound),
            "0x5fbdb2315678afecb367f032d93f642f64180aa3 on eip155:84532 (USDC, 6 decimals)");

  BudgetAsset other_token = kAsset;
  other_token.address = "0x0000000000000000000000000000000000000001";
  BudgetAsset other_chain = kAsset;
  other_chain.chain_id = 8453;
  for (const BudgetAsset& other : {other_token, other_chain}) {
    int signed_count = 0;
    auto sign = [&](StoredReservation&) {
      ++signed_count;
      return Status::Ok();
    };
    auto refused = (*db)->Reserve(Wanted("b", 1000), other, sign, 3, 4);
    ASSERT_TRUE(refused.ok());
    EXPECT_EQ(refused->kind, ClaimKind::kAssetMismatch);
    EXPECT_EQ(signed_count, 0) << "nothing signed";
    EXPECT_EQ((*db)->List()->size(), 1u) << "nothing reserved";
    EXPECT_EQ((*db)->Figures()->committed, 1000);
    EXPECT_EQ((*db)->Asset()->asset.address, kAsset.address) << "the binding stands";
    EXPECT_FALSE((*db)->Find("b")->has_value());
  }
  // Resuming an existing key reserves nothing new: the asset is not asked again.
  EXPECT_EQ((*db)->Reserve(Wanted("a", 1000), other_token, NoSign, 5, 6)->kind, ClaimKind::kResume);
}

TEST_F(BudgetDbTest, NothingReservedBindsNothing) {
  auto db = BudgetDb::Open(path_, 500, 1);
  EXPECT_EQ((*db)->Reserve(Wanted("over", 1000), kAsset, NoSign, 1, 2)->kind,
            ClaimKind::kOverBudget);
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kUnbound) << "over budget binds nothing";
  auto failing = [](StoredReservation&) { return Status::Error(ErrorCode::kSigningFailed, "x"); };
  EXPECT_FALSE((*db)->Reserve(Wanted("k", 10), kAsset, failing, 1, 2).ok());
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kUnbound) << "rolled back with the signature";
  BudgetAsset other = kAsset;
  other.address = "0x0000000000000000000000000000000000000001";
  EXPECT_EQ((*db)->Reserve(Wanted("k", 10), other, NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Asset()->asset.address, other.address);
}

// Processes racing on a new file with prices in two assets: the file is bound once, and every
// reservation it took is in that one asset (the binding commits with the first reservation).
TEST_F(BudgetDbTest, ProcessesRacingOnANewFileBindItToOneAsset) {
  ASSERT_TRUE(BudgetDb::Open(path_, 1'000'000, 1).ok());
  BudgetAsset other = kAsset;
  other.address = "0x0000000000000000000000000000000000000001";
  constexpr int kProcesses = 6, kKeys = 10;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto db = BudgetDb::Open(path_, std::nullopt, 1);
      if (!db.ok()) _exit(255);
      const BudgetAsset& mine = p % 2 == 0 ? kAsset : other;
      int reserved = 0;
      for (int i = 0; i < kKeys; ++i) {
        StoredReservation r = Wanted("p" + std::to_string(p) + "-" + std::to_string(i), 10);
        r.asset = mine.address;  // the row remembers whose run it was
        auto claim = (*db)->Reserve(r, mine, NoSign, 1, 2);
        if (!claim.ok()) _exit(255);
        if (claim->kind == ClaimKind::kReserved) ++reserved;
      }
      _exit(reserved);
    }
    children.push_back(pid);
  }
  int reserved = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 255);
    reserved += WEXITSTATUS(status);
  }
  auto db = BudgetDb::Open(path_, std::nullopt, 1);
  auto binding = (*db)->Asset();
  ASSERT_EQ(binding->state, BudgetAssetState::kBound);
  EXPECT_EQ(reserved, kProcesses / 2 * kKeys) << "exactly the runs in the winning asset reserved";
  auto rows = (*db)->List();
  ASSERT_EQ(rows->size(), static_cast<size_t>(reserved));
  for (const StoredReservation& row : *rows) EXPECT_EQ(row.asset, binding->asset.address);
}

// A budget file as the version before budgets named their asset wrote it (schema 1).
void WriteSchema1File(
    const std::string& path,
    const std::vector<std::tuple<std::string, std::string, uint64_t, std::string>>& rows) {
  auto db = sqlite::Database::Open(path, /*read_only=*/false);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
CREATE TABLE budget (id INTEGER PRIMARY KEY CHECK (id = 1), total INTEGER NOT NULL CHECK (total >= 0),
  schema_version INTEGER NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE reservations (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, method TEXT NOT NULL,
  url TEXT NOT NULL, amount INTEGER NOT NULL CHECK (amount > 0),
  state TEXT NOT NULL CHECK (state IN ('reserved', 'spent', 'released', 'unknown')),
  scheme TEXT NOT NULL CHECK (scheme IN ('wallet', 'x402')), x402_version INTEGER NOT NULL,
  payment_header TEXT NOT NULL, payer TEXT NOT NULL, nonce TEXT NOT NULL, asset TEXT NOT NULL,
  pay_to TEXT NOT NULL, chain_id INTEGER NOT NULL, valid_before_s INTEGER NOT NULL,
  operation_id TEXT NOT NULL, tx_hash TEXT NOT NULL, note TEXT NOT NULL, sends INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);
INSERT INTO budget VALUES (1, 10000, 1, 1);
)sql")
                  .ok());
  int n = 0;
  for (const auto& [key, scheme, chain_id, asset] : rows) {
    auto insert = (*db)->Prepare(
        "INSERT INTO reservations VALUES (?, 'fp', 'GET', 'http://x/', 100, 'spent', ?, 2, '', "
        "'', '', ?, '', ?, 0, '', '', '', 1, 0, ?, ?)");
    ASSERT_TRUE(insert.ok());
    insert->Bind(1, key).Bind(2, scheme).Bind(3, asset).Bind(4, static_cast<int64_t>(chain_id));
    const int64_t created_ms = ++n;
    insert->Bind(5, created_ms).Bind(6, created_ms);
    ASSERT_TRUE(insert->Run().ok());
  }
}

TEST_F(BudgetDbTest, AnOlderFileIsMigratedToTheAssetItsPaymentsUsed) {
  const std::string upper = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
  WriteSchema1File(
      path_,
      {{"w", "wallet", 0, ""}, {"a", "x402", 84532, upper}, {"b", "x402", 84532, kAsset.address}});
  auto db = BudgetDb::Open(path_, std::nullopt, 1);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto binding = (*db)->Asset();
  ASSERT_EQ(binding->state, BudgetAssetState::kBound);
  EXPECT_EQ(binding->asset.chain_id, 84532u);
  EXPECT_EQ(binding->asset.address, kAsset.address);
  EXPECT_EQ((*db)->List()->size(), 3u) << "the reservations are kept";
  EXPECT_EQ((*db)->Figures()->total, 10000);
  BudgetAsset other = kAsset;
  other.chain_id = 1;
  EXPECT_EQ((*db)->Reserve(Wanted("n", 10), other, NoSign, 1, 2)->kind, ClaimKind::kAssetMismatch);
  EXPECT_EQ((*db)->Reserve(Wanted("n", 10), kAsset, NoSign, 1, 2)->kind, ClaimKind::kReserved);
  db->reset();
  EXPECT_TRUE(BudgetDb::Open(path_, 10000, 2).ok()) << "a migrated file opens again as is";
}

TEST_F(BudgetDbTest, AnOlderFileWithoutPaymentsBindsOnItsNextOne) {
  WriteSchema1File(path_, {{"w", "wallet", 0, ""}});
  auto db = BudgetDb::Open(path_, 10000, 1);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kUnbound);
  EXPECT_EQ((*db)->Reserve(Wanted("n", 10), kAsset, NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kBound);
}

TEST_F(BudgetDbTest, AnOlderMixedFileTakesNoNewPaymentButResumesItsOwn) {
  WriteSchema1File(path_, {{"a", "x402", 84532, kAsset.address}, {"b", "x402", 1, kAsset.address}});
  auto db = BudgetDb::Open(path_, std::nullopt, 1);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->Asset()->state, BudgetAssetState::kMixed);
  EXPECT_EQ((*db)->Reserve(Wanted("n", 10), kAsset, NoSign, 1, 2)->kind, ClaimKind::kAssetMismatch);
  EXPECT_EQ((*db)->List()->size(), 2u);
  auto claim = (*db)->ClaimExisting("a", "fp", 3, 4);
  EXPECT_EQ(claim->kind, ClaimKind::kResume);
}

TEST_F(BudgetDbTest, ANewerFileIsRefused) {
  ASSERT_TRUE(BudgetDb::Open(path_, 100, 1).ok());
  {
    auto raw = sqlite::Database::Open(path_, false);
    ASSERT_TRUE((*raw)->Exec("UPDATE budget SET schema_version = 3").ok());
  }
  auto db = BudgetDb::Open(path_, std::nullopt, 1);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), "budget_schema");
}

}  // namespace
}  // namespace agentpay::client
