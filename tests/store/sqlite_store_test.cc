// The SQLite backend's group commit when SQLite ends the batch's transaction by itself: on an I/O
// error, a full disk, no memory or an interrupt, SQLite may roll the whole transaction back in the
// middle of a decision. A trigger's RAISE(ROLLBACK) does exactly that on demand, so these tests
// plant one and check that no decision of such a batch is acknowledged or made durable, none is
// reported failed while its writes stay, the money is unchanged, and the store goes on.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/schema.h"
#include "store/store.h"

namespace agentpay {
namespace {

constexpr char kPayer[] = "acct_payer";
constexpr int64_t kStartingBalance = 100;

class SqliteGroupCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = std::filesystem::temp_directory_path() /
               ("agentpay-sqlite-store-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = (dir / (name + ".db")).string();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
    std::filesystem::remove_all(path_ + ".instances");
    auto store = OpenStore("sqlite:" + path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    Status funded = store_->Write([](Transaction& tx) -> Status {
      if (Status s = InsertAccount(tx, kPayer); !s.ok()) return s;
      return Deposit(tx, kStartingBalance);
    });
    ASSERT_TRUE(funded.ok()) << funded.ToString();
    PlantPoison();
  }

  void TearDown() override {
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(path_).parent_path(), ignored);
  }

  // An account named "poison" cannot be inserted: the trigger rolls the transaction back.
  void PlantPoison() {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char* error = nullptr;
    int rc = sqlite3_exec(db,
                          "CREATE TRIGGER poison BEFORE INSERT ON accounts WHEN NEW.id = 'poison' "
                          "BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END",
                          nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  static Status InsertAccount(Transaction& tx, const std::string& id) {
    auto inserted = tx.InsertAccount({id, id, "hash-" + id, {}, 2});
    return inserted.ok() ? Status::Ok() : inserted.status();
  }

  static Status Deposit(Transaction& tx, int64_t amount) {
    auto moved = tx.Move(kPayer, MoveKind::kDeposit, amount, "", 2);
    if (!moved.ok()) return moved.status();
    return *moved == MoveOutcome::kOk ? Status::Ok()
                                      : Status::Error(ErrorCode::kInvalidAmount, "refused");
  }

  // Runs `decisions` as one batch: the writer is held inside an earlier decision until all of them
  // are queued, so it takes them together. Returns their statuses in order.
  std::vector<Status> RunAsOneBatch(const std::vector<TransactionFn>& decisions) {
    std::promise<void> blocking, queued, blocker_done;
    std::shared_future<void> all_queued = queued.get_future().share();
    store_->WriteAsync(
        [&blocking, all_queued](Transaction&) {
          blocking.set_value();
          all_queued.wait();
          return Status::Ok();
        },
        [&](Status status) {
          EXPECT_TRUE(status.ok()) << status.ToString();
          blocker_done.set_value();
        });
    blocking.get_future().wait();  // the writer has taken the blocker's batch: ours comes next
    std::mutex mutex;
    std::condition_variable finished;
    std::vector<std::optional<Status>> results(decisions.size());
    size_t done = 0;
    for (size_t i = 0; i < decisions.size(); ++i) {
      store_->WriteAsync(decisions[i], [&, i](Status status) {
        std::lock_guard lock(mutex);
        results[i] = std::move(status);
        ++done;
        finished.notify_all();
      });
    }
    queued.set_value();
    blocker_done.get_future().wait();
    std::unique_lock lock(mutex);
    finished.wait(lock, [&] { return done == decisions.size(); });
    std::vector<Status> out;
    for (auto& result : results) out.push_back(std::move(*result));
    return out;
  }

  bool AccountExists(const std::string& id) {
    bool exists = false;
    Status read = store_->Read([&](Transaction& tx) -> Status {
      auto account = tx.FindAccount(id);
      if (!account.ok()) return account.status();
      exists = account->has_value();
      return Status::Ok();
    });
    EXPECT_TRUE(read.ok()) << read.ToString();
    return exists;
  }

  Balances PayerBalances() {
    Balances balances;
    Status read = store_->Read([&](Transaction& tx) -> Status {
      auto account = tx.FindAccount(kPayer);
      if (!account.ok()) return account.status();
      if (!account->has_value()) return Status::Error(ErrorCode::kStoreNotFound, kPayer);
      balances = (*account)->balances;
      return Status::Ok();
    });
    EXPECT_TRUE(read.ok()) << read.ToString();
    return balances;
  }

  void ExpectNothingOfTheBatchAndTheStoreGoesOn(const std::vector<Status>& results) {
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].error(), ErrorCode::kStoreUnavailable)
          << "decision " << i << ": " << results[i].ToString();
    }
    EXPECT_FALSE(AccountExists("before"));
    EXPECT_FALSE(AccountExists("poison"));
    EXPECT_FALSE(AccountExists("after"));
    EXPECT_EQ(PayerBalances(), (Balances{kStartingBalance, 0, 0}));
    LedgerAudit audit;
    Status audited = store_->Read([&](Transaction& tx) -> Status {
      auto read = tx.Audit();
      if (!read.ok()) return read.status();
      audit = *read;
      return Status::Ok();
    });
    ASSERT_TRUE(audited.ok()) << audited.ToString();
    EXPECT_EQ(audit.external_total, -kStartingBalance);
    // The writer is not left inside a transaction: the next decision commits.
    EXPECT_TRUE(store_->Write([](Transaction& tx) { return InsertAccount(tx, "later"); }).ok());
    EXPECT_TRUE(AccountExists("later"));
  }

  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(SqliteGroupCommit, ADecisionThatCannotBeRolledBackFailsTheWholeBatch) {
  // The poisoned decision sees its insert fail and returns the error; its ROLLBACK TO then fails,
  // because SQLite has rolled back the whole transaction, savepoints and all.
  std::vector<Status> results = RunAsOneBatch({
      [](Transaction& tx) {
        if (Status s = InsertAccount(tx, "before"); !s.ok()) return s;
        return Deposit(tx, 7);
      },
      [](Transaction& tx) { return InsertAccount(tx, "poison"); },
      [](Transaction& tx) {
        if (Status s = InsertAccount(tx, "after"); !s.ok()) return s;
        return Deposit(tx, 11);
      },
  });
  ExpectNothingOfTheBatchAndTheStoreGoesOn(results);
}

TEST_F(SqliteGroupCommit, ADecisionThatCannotBeReleasedFailsTheWholeBatch) {
  // The poisoned decision ignores the failed insert and succeeds; its RELEASE then fails.
  std::vector<Status> results = RunAsOneBatch({
      [](Transaction& tx) { return Deposit(tx, 7); },
      [](Transaction& tx) {
        (void)InsertAccount(tx, "poison");  // deliberately ignored: the case under test
        return Status::Ok();
      },
      [](Transaction& tx) {
        if (Status s = InsertAccount(tx, "after"); !s.ok()) return s;
        return Deposit(tx, 11);
      },
  });
  ExpectNothingOfTheBatchAndTheStoreGoesOn(results);
}

TEST_F(SqliteGroupCommit, AnOrdinaryFailedDecisionStillRollsBackOnlyItself) {
  // The control: a decision that fails without SQLite ending the transaction leaves the others.
  std::vector<Status> results = RunAsOneBatch({
      [](Transaction& tx) { return Deposit(tx, 7); },
      [](Transaction& tx) -> Status {
        if (Status s = InsertAccount(tx, "before"); !s.ok()) return s;
        return Rollback();
      },
      [](Transaction& tx) { return Deposit(tx, 11); },
  });
  EXPECT_TRUE(results[0].ok()) << results[0].ToString();
  EXPECT_TRUE(IsRollback(results[1])) << results[1].ToString();
  EXPECT_TRUE(results[2].ok()) << results[2].ToString();
  EXPECT_FALSE(AccountExists("before"));
  EXPECT_EQ(PayerBalances(), (Balances{kStartingBalance + 18, 0, 0}));
}

}  // namespace
}  // namespace agentpay

namespace agentpay {
namespace {

// Migration 6 (issue 13): a database made before API keys had a table of their own keeps every
// account's key working, now as a row of api_keys that can be revoked.
TEST(SqliteMigration, ExistingAccountsKeepTheirKeyAsARevocableRow) {
  auto dir = std::filesystem::temp_directory_path() /
             ("agentpay-sqlite-migration-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "v5.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  std::filesystem::remove_all(path + ".instances");
  {
    // The schema as a binary of migration 5 left it, with one account in it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql =
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL);";
    for (const Migration& migration : Migrations()) {
      if (migration.version > 5) continue;
      sql += std::string(migration.sqlite) + ";INSERT INTO schema_migrations VALUES (" +
             std::to_string(migration.version) + ", 'old');";
    }
    sql += "INSERT INTO accounts (id, name, api_key_hash, created_ms) "
           "VALUES ('acct_old', 'old', 'hash-old', 3);";
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }
  auto store = OpenStore("sqlite:" + path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Write([](Transaction& tx) -> Status {
    EXPECT_EQ((*tx.FindAccountByKeyHash("hash-old"))->id, "acct_old");
    auto keys = tx.ListApiKeys("acct_old");
    EXPECT_EQ(keys->size(), 1u);
    EXPECT_EQ(keys->at(0),
              (ApiKeyRecord{FirstApiKeyId("hash-old"), "acct_old", "hash-old", 3, std::nullopt}));
    EXPECT_TRUE(*tx.RevokeApiKey("acct_old", FirstApiKeyId("hash-old"), 4));
    EXPECT_FALSE(tx.FindAccountByKeyHash("hash-old")->has_value());
    return Status::Ok();
  }).ok());
  store->reset();
  std::filesystem::remove_all(dir);
}

// SQLite's connections hold a read lock on the -shm file's "DMS" byte (offset 128 in the unix VFS)
// while they use the shared memory: another process that finds it free takes the memory for
// unused and resets it. Opening a store makes several connections; making the files private
// once opened and closed a descriptor of the -shm, and closing any descriptor of a file drops
// every POSIX lock the process holds on it. Another process (a test reading the books) then reset
// the memory under the gateway, which died of SIGBUS. The lock is checked from a child process:
// F_GETLK does not report a process's own locks.
TEST(SqliteLocks, AnOpenStoreKeepsItsLockOnTheSharedMemory) {
  auto dir = std::filesystem::temp_directory_path() /
             ("agentpay-sqlite-locks-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "gw.db").string();
  auto store = OpenStore("sqlite:" + path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)
                  ->Write([](Transaction& tx) {
                    return tx.AppendEvent({"op", 1, TraceActor::kGateway, "b", "c"});
                  })
                  .ok());
  const std::string shm = path + "-shm";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open(shm.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) ::_exit(2);
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    probe.l_start = 128;
    probe.l_len = 1;
    if (::fcntl(fd, F_GETLK, &probe) != 0) ::_exit(3);
    ::_exit(probe.l_type == F_RDLCK ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: nobody holds the shared memory's lock; 2, 3: the probe failed";
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace agentpay
