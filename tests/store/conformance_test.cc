// The store conformance suite: every backend must pass these unchanged (Backends(): SQLite, and
// PostgreSQL on the server AGENTPAY_TEST_POSTGRES_URL names, or the URL in the file
// AGENTPAY_TEST_POSTGRES_URL_FILE names: ctest starts a private cluster, tests/pg/cluster.sh).
// Each test gets a fresh database of its own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "core/event_threads.h"
#include "sqlite/sqlite_db.h"
#include "store/ledger.h"
#include "store/pg_connection.h"
#include "store/store.h"

namespace agentpay {
namespace {

struct Backend {
  std::string name;
  // Returns a store URL for a fresh, empty database.
  std::function<std::string(const std::string& test_name)> fresh_url;
};

void PrintTo(const Backend& backend, std::ostream* out) { *out << backend.name; }

// The PostgreSQL server's URL for the tests, "" when none is configured.
std::string PostgresServerUrl() {
  if (const char* url = std::getenv("AGENTPAY_TEST_POSTGRES_URL"); url && *url) return url;
  const char* file = std::getenv("AGENTPAY_TEST_POSTGRES_URL_FILE");
  if (file == nullptr || *file == 0) return "";
  std::ifstream in(file);
  std::string url;
  std::getline(in, url);
  // Named but missing: the cluster did not start. An error, never a quiet skip.
  return url.empty() ? std::string("error:no URL in ") + file : url;
}

std::vector<Backend> Backends() {
  std::vector<Backend> backends;
  backends.push_back({"sqlite", [](const std::string& test_name) {
                        auto dir = std::filesystem::temp_directory_path() /
                                   ("agentpay-store-" + std::to_string(::getpid()));
                        std::filesystem::create_directories(dir);
                        auto path = dir / (test_name + ".db");
                        for (const char* suffix : {"", "-wal", "-shm", ".devnet"}) {
                          std::filesystem::remove(path.string() + suffix);
                        }
                        std::filesystem::remove_all(path.string() + ".instances");
                        return "sqlite:" + path.string();
                      }});
  backends.push_back({"postgres", [](const std::string& test_name) -> std::string {
                        std::string base = PostgresServerUrl();
                        if (base.empty()) return "";
                        // The URL names database "postgres"; each test gets "t_<name>" instead.
                        const std::string database = "t_" + test_name.substr(0, 60);
                        auto admin = pg::Connection::Open(base, 10);
                        if (!admin.ok()) return "error:" + admin.status().ToString();
                        Status made =
                            (*admin)->Run("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
                        if (made.ok()) made = (*admin)->Run("CREATE DATABASE " + database);
                        if (!made.ok()) return "error:" + made.ToString();
                        return base.substr(0, base.rfind('/') + 1) + database;
                      }});
  return backends;
}

class StoreConformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    url_ = GetParam().fresh_url(name);
    if (url_.empty()) {
      GTEST_SKIP() << "no PostgreSQL server: set AGENTPAY_TEST_POSTGRES_URL (ctest starts one)";
    }
    ASSERT_FALSE(url_.starts_with("error:")) << url_;
    auto store = OpenStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  void TearDown() override {
    if (store_) ExpectConserved();
    store_.reset();
    // A SQLite test's files go with it (ctest runs each test in a process of its own, each with a
    // directory of its own); PostgreSQL's databases go with the test cluster.
    if (url_.starts_with("sqlite:")) {
      std::error_code ignored;
      std::filesystem::remove_all(std::filesystem::path(url_.substr(7)).parent_path(), ignored);
    }
  }

  Status Write(const TransactionFn& fn) { return store_->Write(fn); }
  Status Read(const TransactionFn& fn) { return store_->Read(fn); }

  // Runs `sql` on the test's database behind the store's back, as another binary or a hand might:
  // SQLite through a connection of its own, PostgreSQL through one of libpq.
  Status RunBehindTheStore(const std::string& sql) {
    if (url_.starts_with("sqlite:")) {
      auto db = sqlite::Database::Open(url_.substr(7), /*read_only=*/false);
      if (!db.ok()) return db.status();
      return (*db)->Exec(sql);
    }
    auto conn = pg::Connection::Open(url_, 10);
    if (!conn.ok()) return conn.status();
    return (*conn)->Run(sql);
  }

  void AddAccount(const std::string& id, int64_t deposit) {
    ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
      auto inserted = tx.InsertAccount({id, "n-" + id, "hash-" + id, {}, 1});
      if (!inserted.ok()) return inserted.status();
      if (!*inserted) return Status::Error(ErrorCode::kStoreConflict, "exists");
      if (deposit > 0) {
        auto moved = tx.Move(id, MoveKind::kDeposit, deposit, "", 1);
        if (!moved.ok()) return moved.status();
        if (*moved != MoveOutcome::kOk) {
          return Status::Error(ErrorCode::kInvalidAmount, "deposit refused");
        }
      }
      return Status::Ok();
    }).ok());
  }

  Balances BalancesOf(const std::string& id) {
    Balances balances;
    EXPECT_TRUE(Read([&](Transaction& tx) -> Status {
      auto account = tx.FindAccount(id);
      if (!account.ok()) return account.status();
      if (!account->has_value()) return Status::Error(ErrorCode::kStoreNotFound, "no account");
      balances = (*account)->balances;
      return Status::Ok();
    }).ok());
    return balances;
  }

  LedgerAudit Audit() {
    LedgerAudit audit;
    EXPECT_TRUE(Read([&](Transaction& tx) -> Status {
      auto result = tx.Audit();
      if (!result.ok()) return result.status();
      audit = *result;
      return Status::Ok();
    }).ok());
    return audit;
  }

  void ExpectConserved() {
    LedgerAudit audit = Audit();
    int64_t balances = 0;
    for (const auto& account : audit.accounts) {
      EXPECT_TRUE(account.stored.Valid()) << account.account_id;
      EXPECT_EQ(account.stored, account.from_ledger) << account.account_id;
      EXPECT_EQ(account.wallet_net, account.stored.available()) << account.account_id;
      balances += account.stored.balance();
    }
    EXPECT_EQ(balances + audit.revenue_total, -audit.external_total);
  }

  // Queues `count` decisions at once from this thread (decision i runs `decide(tx, i)`), as
  // concurrent requests queue them, so that most share a batch; returns their outcomes.
  std::vector<Status> WriteAtOnce(int count,
                                  const std::function<Status(Transaction&, int)>& decide) {
    std::vector<Status> outcomes(count);
    std::atomic<int> done{0};
    for (int i = 0; i < count; ++i) {
      store_->WriteAsync([&decide, i](Transaction& tx) { return decide(tx, i); },
                         [&outcomes, &done, i](Status status) {
                           outcomes[i] = std::move(status);
                           ++done;
                         });
    }
    while (done.load() < count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return outcomes;
  }

  // A decision that holds `amount` on `account` for operation `op`; fails when refused.
  static TransactionFn Hold(const std::string& account, int64_t amount, const std::string& op) {
    return [account, amount, op](Transaction& tx) -> Status {
      auto moved = tx.Move(account, MoveKind::kHold, amount, op, 7);
      if (!moved.ok()) return moved.status();
      return *moved == MoveOutcome::kOk ? Status::Ok()
                                        : Status::Error(ErrorCode::kStoreError, "refused");
    };
  }

  // Queues `decide` on `store`; its outcome comes with the future.
  static std::future<Status> Queue(Store& store, TransactionFn decide) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> outcome = done->get_future();
    store.WriteAsync(std::move(decide), [done](Status status) { done->set_value(status); });
    return outcome;
  }

  // A decision queued to run only once `go` is set: `running` is ready when it runs, and its
  // batch stays open until `go`, so the decisions queued meanwhile wait for the next one.
  struct HeldOpen {
    std::future<void> running;
    std::future<Status> outcome;
  };
  HeldOpen QueueHeldOpen(TransactionFn decide, std::shared_future<void> go) {
    return QueueHeldOpen(*store_, std::move(decide), std::move(go));
  }
  static HeldOpen QueueHeldOpen(Store& store, TransactionFn decide, std::shared_future<void> go) {
    auto running = std::make_shared<std::promise<void>>();
    std::future<void> ran = running->get_future();
    return {std::move(ran),
            Queue(store, [running, go, decide = std::move(decide)](Transaction& tx) {
              running->set_value();
              go.wait();
              return decide(tx);
            })};
  }

  // Decision `first` alone in a batch held open until `b` and `c` are queued behind it (so that
  // they share the next batch); each decision succeeds.
  void BatchBehindAHeldOpenOne(TransactionFn first, TransactionFn b, TransactionFn c) {
    std::promise<void> queued;
    HeldOpen a = QueueHeldOpen(std::move(first), queued.get_future().share());
    a.running.wait();
    auto b_done = Queue(*store_, std::move(b));
    auto c_done = Queue(*store_, std::move(c));
    queued.set_value();
    EXPECT_TRUE(a.outcome.get().ok());
    EXPECT_TRUE(b_done.get().ok());
    EXPECT_TRUE(c_done.get().ok());
  }

  // The writers' lock (advisory key (kLockClass, 1): "APAY", 1) of this test's database, as
  // pg_locks shows it (which lists every database's locks: the tests beside this one have theirs).
  static constexpr const char* kWritersLock =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1095778649 AND "
      "objid = 1 AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = "
      "current_database()) AND ";
  // The writers' lock is held by some session.
  bool WritersLockHeld(pg::Connection& admin) {
    auto held = admin.Query(std::string(kWritersLock) + "granted");
    EXPECT_TRUE(held.ok()) << held.status().ToString();
    return !held.ok() || held->Int(0, 0) > 0;
  }
  // Waits until `count` sessions wait for the writers' lock: false if they never do within 5 s
  // (half a statement's timeout, so that a lock wait cannot time out first).
  bool AwaitWritersLockWaiters(pg::Connection& admin, int64_t count) {
    for (int tries = 0; tries < 500; ++tries) {
      auto waiting = admin.Query(std::string(kWritersLock) + "NOT granted");
      EXPECT_TRUE(waiting.ok()) << waiting.status().ToString();
      if (!waiting.ok()) return false;
      if (waiting->Int(0, 0) == count) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  static Operation SampleOperation(const std::string& id) {
    Operation op =
        NewWalletOperation({id, "account:a", "key-" + id, "fp", "/r", 7, 1000, 500, "gw_t"}, 10);
    return op;
  }

  std::string url_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreConformance, KeyReservationIsAtomic) {
  KeyRecord record{"account:a", "k", "op_1", "fp", 5};
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      KeyRecord mine = record;
      mine.operation_id = "op_" + std::to_string(i);
      Status status = Write([&](Transaction& tx) -> Status {
        auto inserted = tx.InsertKey(mine);
        if (!inserted.ok()) return inserted.status();
        if (*inserted) ++winners;
        return Status::Ok();
      });
      EXPECT_TRUE(status.ok()) << status.ToString();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(winners.load(), 1);
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto found = tx.FindKey("account:a", "k");
    if (!found.ok()) return found.status();
    EXPECT_TRUE(found->has_value());
    auto other_principal = tx.FindKey("account:b", "k");
    if (!other_principal.ok()) return other_principal.status();
    EXPECT_FALSE(other_principal->has_value());
    return Status::Ok();
  }).ok());
}

TEST_P(StoreConformance, KeyDeletionFreesTheKey) {
  KeyRecord record{"account:a", "k", "op_1", "fp", 5};
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto inserted = tx.InsertKey(record);
    return inserted.ok() ? Status::Ok() : inserted.status();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto found = tx.FindKey("account:a", "k");
    EXPECT_EQ(**found, record);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.DeleteKey("account:a", "k"); }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto inserted = tx.InsertKey(record);
    EXPECT_TRUE(inserted.ok() && *inserted);
    return Status::Ok();
  }).ok());
}

TEST_P(StoreConformance, OperationsRoundTrip) {
  Operation op = SampleOperation("op_rt");
  op.response = StoredResponse{201, "application/json", std::string("bin\0ary\xff", 8)};
  op.settlement = Settlement::kSettled;
  op.fulfillment = Fulfillment::kSucceeded;
  op.hold_expires_ms.reset();
  op.retained_until_ms = 123456;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertOperation(op); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto found = tx.FindOperation("op_rt");
    EXPECT_TRUE(found.ok() && found->has_value());
    EXPECT_EQ(**found, op);
    auto missing = tx.FindOperation("op_none");
    EXPECT_FALSE(missing->has_value());
    return Status::Ok();
  }).ok());
  op.fulfillment = Fulfillment::kPendingRetry;
  op.response.reset();
  op.attempts = 4;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateOperation(op); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_EQ(**tx.FindOperation("op_rt"), op);
    return Status::Ok();
  }).ok());
  Operation ghost = SampleOperation("op_ghost");
  EXPECT_FALSE(Write([&](Transaction& tx) { return tx.UpdateOperation(ghost); }).ok());
  // Inserting the same id twice is a constraint error, not a silent overwrite.
  EXPECT_FALSE(Write([&](Transaction& tx) { return tx.InsertOperation(op); }).ok());
}

// An update writes an operation's state, never its identity (whose payer, for which key and
// payload, on which route, for how much, since when): an update whose identity differs from the
// stored one finds no operation, changes nothing, and a claimed one is not won. (The update leaves
// those columns alone so that SQLite does not rewrite their indexes: bench/README.md.)
TEST_P(StoreConformance, AnUpdateNeverChangesAnOperationsIdentity) {
  const Operation stored = SampleOperation("op_ident");  // in progress, attempt 1
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertOperation(stored); }).ok());
  const std::vector<std::function<void(Operation&)>> changes = {
      [](Operation& op) { op.principal = "account:acct_other"; },
      [](Operation& op) { op.idempotency_key += "-other"; },
      [](Operation& op) { op.fingerprint = "f-other"; },
      [](Operation& op) { op.route = "/other"; },
      [](Operation& op) { op.amount += 1; },
      [](Operation& op) { op.created_ms += 1; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    Operation changed = stored;
    changes[i](changed);
    changed.fulfillment = Fulfillment::kSucceeded;
    changed.response = StoredResponse{200, "", "ok"};
    Status update = Write([&](Transaction& tx) { return tx.UpdateOperation(changed); });
    EXPECT_EQ(update.error(), ErrorCode::kStoreNotFound) << i;
    ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                  auto claimed = tx.UpdateClaimedOperation(changed, 1);
                  EXPECT_TRUE(claimed.ok() && !*claimed) << i;
                  return Status::Ok();
                }).ok());
    ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                  EXPECT_EQ(**tx.FindOperation("op_ident"), stored) << i;
                  return Status::Ok();
                }).ok());
  }
  Operation finished = stored;
  finished.fulfillment = Fulfillment::kSucceeded;
  finished.response = StoredResponse{200, "", "ok"};
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateOperation(finished); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                EXPECT_EQ(**tx.FindOperation("op_ident"), finished);
                return Status::Ok();
              }).ok());
}

TEST_P(StoreConformance, ClaimedUpdateIsACompareAndSet) {
  Operation op = SampleOperation("op_claim");  // in progress, attempt 1
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertOperation(op); }).ok());
  Operation done = op;
  done.fulfillment = Fulfillment::kSucceeded;
  done.response = StoredResponse{200, "", "ok"};
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto stale = tx.UpdateClaimedOperation(done, 2);  // a claim this attempt does not hold
    EXPECT_TRUE(stale.ok() && !*stale);
    auto held = tx.UpdateClaimedOperation(done, 1);
    EXPECT_TRUE(held.ok() && *held);
    auto again = tx.UpdateClaimedOperation(done, 1);  // no longer in progress
    EXPECT_TRUE(again.ok() && !*again);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_EQ(**tx.FindOperation("op_claim"), done);
    return Status::Ok();
  }).ok());
}

// The two writes that answer by failing the decision instead of returning whether they wrote:
// a key reserved as new that exists, and a claimed update whose claim is gone. Each fails its
// decision with its own code, whatever the decision wrote before it, and changes nothing.
TEST_P(StoreConformance, ReservedKeysAndClaimedUpdatesFailTheirDecisionWhenTheyCannotWrite) {
  AddAccount("acct_f", 100);
  Operation op = SampleOperation("op_f");
  KeyRecord key{"account:a", "kf", "op_f", "fp", 5};
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                if (Status s = tx.ReserveNewKey(key); !s.ok()) return s;
                return tx.InsertOperation(op);
              }).ok());
  KeyRecord again = key;
  again.operation_id = "op_f2";
  Status taken = Write([&](Transaction& tx) -> Status {
    auto moved = tx.Move("acct_f", MoveKind::kHold, 7, "op_f2", 6);
    if (!moved.ok()) return moved.status();
    if (Status s = tx.AppendEvent({"op_f2", 6, TraceActor::kGateway, "hold", ""}); !s.ok())
      return s;
    return tx.ReserveNewKey(again);
  });
  EXPECT_EQ(taken.error(), ErrorCode::kStoreKeyTaken) << taken.ToString();

  Operation done = op;
  done.fulfillment = Fulfillment::kSucceeded;
  Status lost = Write([&](Transaction& tx) -> Status {
    if (Status s = tx.AppendEvent({"op_f", 7, TraceActor::kGateway, "lost", ""}); !s.ok()) return s;
    if (Status s = tx.UpdateClaimedOperationOrFail(done, 2); !s.ok()) return s;  // not our claim
    auto moved = tx.Move("acct_f", MoveKind::kHold, 7, "op_f", 7);
    return moved.ok() ? Status::Ok() : moved.status();
  });
  EXPECT_EQ(lost.error(), ErrorCode::kStoreClaimLost) << lost.ToString();
  EXPECT_TRUE(
      Write([&](Transaction& tx) { return tx.UpdateClaimedOperationOrFail(done, 1); }).ok());
  EXPECT_EQ(
      Write([&](Transaction& tx) { return tx.UpdateClaimedOperationOrFail(done, 1); }).error(),
      ErrorCode::kStoreClaimLost);  // no longer in progress

  EXPECT_EQ(BalancesOf("acct_f"), (Balances{100, 0, 0}));
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                EXPECT_EQ((*tx.FindKey("account:a", "kf"))->operation_id, "op_f");
                EXPECT_TRUE(tx.ListEvents("op_f2")->empty());
                EXPECT_TRUE(tx.ListPostings("op_f2")->empty());
                EXPECT_TRUE(tx.ListEvents("op_f")->empty());
                EXPECT_EQ(**tx.FindOperation("op_f"), done);
                return Status::Ok();
              }).ok());
}

// Many decisions queued at once, as concurrent requests queue them: every third reserves a key
// another already holds. Each of those fails alone, with its hold and its event; every other
// decision stands, money and all, whichever of them shared a commit (PostgreSQL's writer sends
// decisions without waiting for each, and must undo a failed one among those after it).
TEST_P(StoreConformance, KeysReservedAtOnceFailAloneAndTakeOnlyTheirOwnMoney) {
  AddAccount("acct_k", 10000);
  ASSERT_TRUE(Write([&](Transaction& tx) {
                return tx.ReserveNewKey({"account:a", "held", "op_first", "fp", 5});
              }).ok());
  constexpr int kDecisions = 90;
  std::vector<Status> outcomes = WriteAtOnce(kDecisions, [](Transaction& tx, int i) -> Status {
    const std::string op = "op_k" + std::to_string(i);
    const std::string key = i % 3 == 1 ? "held" : "k" + std::to_string(i);
    if (Status s = tx.ReserveNewKey({"account:a", key, op, "fp", 5}); !s.ok()) return s;
    auto moved = tx.Move("acct_k", MoveKind::kHold, 10, op, 5);
    if (!moved.ok()) return moved.status();
    if (*moved != MoveOutcome::kOk) return Status::Error(ErrorCode::kStoreError, "refused");
    return tx.AppendEvent({op, 5, TraceActor::kGateway, "hold", ""});
  });
  int held = 0;
  for (int i = 0; i < kDecisions; ++i) {
    if (i % 3 == 1) {
      EXPECT_EQ(outcomes[i].error(), ErrorCode::kStoreKeyTaken) << i << outcomes[i].ToString();
    } else {
      EXPECT_TRUE(outcomes[i].ok()) << i << outcomes[i].ToString();
      held += 10;
    }
  }
  EXPECT_EQ(BalancesOf("acct_k"), (Balances{10000, 0, held}));
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                for (int i = 0; i < kDecisions; ++i) {
                  const std::string op = "op_k" + std::to_string(i);
                  const size_t expected = i % 3 == 1 ? 0u : 1u;
                  EXPECT_EQ(tx.ListEvents(op)->size(), expected) << i;
                  EXPECT_EQ(tx.ListPostings(op)->size(), expected) << i;
                }
                EXPECT_EQ((*tx.FindKey("account:a", "held"))->operation_id, "op_first");
                return Status::Ok();
              }).ok());
}

// A hold that only an earlier decision's release makes possible is decided on what that release
// became: when the release fails after its decision returned (its last write finds no row), the
// hold is refused, never granted on money that was not released. Queued at once, so that a
// writer that sends decisions without waiting has both in flight.
TEST_P(StoreConformance, AHoldNeverSpendsMoneyAnUndoneReleaseGaveBack) {
  AddAccount("acct_u", 100);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                auto moved = tx.Move("acct_u", MoveKind::kHold, 100, "op_u0", 5);
                if (!moved.ok()) return moved.status();
                return *moved == MoveOutcome::kOk ? Status::Ok()
                                                  : Status::Error(ErrorCode::kStoreError, "no");
              }).ok());
  for (int round = 0; round < 5; ++round) {
    std::vector<MoveOutcome> holds(3, MoveOutcome::kOk);
    std::vector<Status> outcomes = WriteAtOnce(3, [&](Transaction& tx, int i) -> Status {
      if (i == 0) {
        // Releases op_u0's 100, then fails on a write that finds no row.
        auto moved = tx.Move("acct_u", MoveKind::kRelease, 100, "op_u0", 6);
        if (!moved.ok()) return moved.status();
        if (*moved != MoveOutcome::kOk) return Status::Error(ErrorCode::kStoreError, "no");
        return tx.UpdateOperation(SampleOperation("op_missing_u"));
      }
      // Holds of 60, which only the release would leave room for.
      auto moved = tx.Move("acct_u", MoveKind::kHold, 60, "op_u" + std::to_string(i), 6);
      if (!moved.ok()) return moved.status();
      holds[i] = *moved;
      return *moved == MoveOutcome::kOk ? Status::Ok() : Rollback();
    });
    EXPECT_EQ(outcomes[0].error(), ErrorCode::kStoreNotFound) << round << outcomes[0].ToString();
    for (int i = 1; i < 3; ++i) {
      EXPECT_TRUE(IsRollback(outcomes[i])) << round << " " << i << outcomes[i].ToString();
      EXPECT_EQ(holds[i], MoveOutcome::kInsufficientFunds) << round << " " << i;
    }
    EXPECT_EQ(BalancesOf("acct_u"), (Balances{100, 0, 100})) << round;
  }
}

// A decision that reads accounts rows (which makes a writer that keeps balances write them first)
// and is then rolled back leaves the rows as they were, and the moves of the decisions before it
// still to be written: the books stay whole. Queued at once, so that both share a batch.
TEST_P(StoreConformance, ARolledBackReadOfAccountsKeepsTheMovesBeforeIt) {
  AddAccount("acct_w", 1000);
  for (int round = 0; round < 5; ++round) {
    std::vector<Status> outcomes = WriteAtOnce(2, [&](Transaction& tx, int i) -> Status {
      if (i == 0) {
        auto moved = tx.Move("acct_w", MoveKind::kHold, 10, "op_w" + std::to_string(round), 5);
        if (!moved.ok()) return moved.status();
        return *moved == MoveOutcome::kOk ? Status::Ok()
                                          : Status::Error(ErrorCode::kStoreError, "refused");
      }
      auto account = tx.FindAccount("acct_w");
      if (!account.ok()) return account.status();
      return Rollback();
    });
    EXPECT_TRUE(outcomes[0].ok()) << round << outcomes[0].ToString();
    EXPECT_TRUE(IsRollback(outcomes[1])) << round << outcomes[1].ToString();
    EXPECT_EQ(BalancesOf("acct_w"), (Balances{1000, 0, 10 * (round + 1)})) << round;
  }
}

// A read sees one snapshot from its first statement to its end, whatever commits meanwhile: a
// deposit committed between two of its reads shows in neither, and in the next read.
TEST_P(StoreConformance, AReadSeesOneSnapshotWhateverCommitsMeanwhile) {
  AddAccount("acct_s", 100);
  AddAccount("acct_t", 5);
  for (int round = 0; round < 3; ++round) {
    Balances first, second, other;
    ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                  auto account = tx.FindAccount("acct_s");
                  if (!account.ok()) return account.status();
                  first = (*account)->balances;
                  Status deposited = Write([&](Transaction& w) -> Status {
                    for (const char* id : {"acct_s", "acct_t"}) {
                      auto moved = w.Move(id, MoveKind::kDeposit, 50, "", 2);
                      if (!moved.ok()) return moved.status();
                    }
                    return Status::Ok();
                  });
                  if (!deposited.ok()) return deposited;
                  auto again = tx.FindAccount("acct_s");
                  if (!again.ok()) return again.status();
                  second = (*again)->balances;
                  auto t = tx.FindAccount("acct_t");
                  if (!t.ok()) return t.status();
                  other = (*t)->balances;
                  return Status::Ok();
                }).ok());
    EXPECT_EQ(first.deposited, 100 + 50 * round) << round;
    EXPECT_EQ(second, first) << round;
    EXPECT_EQ(other.deposited, 5 + 50 * round) << round;
    EXPECT_EQ(BalancesOf("acct_s").deposited, 150 + 50 * round) << round;
  }
}

// Reads are asynchronous like writes (Store::ReadAsync): `fn` runs as a task of the executor given,
// `done` gets its outcome once (after durability when asked), and an executor that takes no more
// tasks gets store_overloaded at once, with `fn` never run.
TEST_P(StoreConformance, AnAsynchronousReadRunsOnItsExecutorAndAnswersOnce) {
  AddAccount("acct_r", 70);
  // Runs each task on a thread of its own, as a pool would, and counts them.
  struct Threads final : Executor {
    bool TrySubmit(std::function<void()> task) override {
      if (refuse) return false;
      std::lock_guard lock(mutex);
      threads.emplace_back(std::move(task));
      return true;
    }
    void Join() {
      std::lock_guard lock(mutex);
      for (auto& t : threads) t.join();
      threads.clear();
    }
    bool refuse = false;
    std::mutex mutex;
    std::vector<std::thread> threads;
  } readers;
  for (ReadWait wait : {ReadWait::kDurable, ReadWait::kUnsynced}) {
    auto seen = std::make_shared<std::optional<Balances>>();
    auto answers = std::make_shared<std::atomic<int>>(0);
    std::promise<Status> outcome;
    const auto caller = std::this_thread::get_id();
    auto ran_on = std::make_shared<std::thread::id>();
    store_->ReadAsync(
        readers,
        [seen, ran_on](Transaction& tx) -> Status {
          *ran_on = std::this_thread::get_id();
          auto account = tx.FindAccount("acct_r");
          if (!account.ok()) return account.status();
          if (account->has_value()) *seen = (*account)->balances;
          return Status::Ok();
        },
        [&outcome, answers](Status status) {
          if (++*answers == 1) outcome.set_value(std::move(status));
        },
        wait);
    Status status = outcome.get_future().get();
    readers.Join();
    EXPECT_TRUE(status.ok()) << status.ToString();
    ASSERT_TRUE(seen->has_value());
    EXPECT_EQ((*seen)->deposited, 70);
    EXPECT_NE(*ran_on, caller);
    EXPECT_EQ(answers->load(), 1);
  }
  readers.refuse = true;
  bool ran = false;
  std::optional<Status> refused;
  store_->ReadAsync(
      readers,
      [&ran](Transaction&) {
        ran = true;
        return Status::Ok();
      },
      [&refused](Status status) { refused = std::move(status); });
  ASSERT_TRUE(refused.has_value());  // at once, on this thread
  EXPECT_EQ(refused->error(), ErrorCode::kStoreOverloaded);
  EXPECT_FALSE(ran);
}

// WhenDurable: with nothing waiting for the disk it runs at once on the caller's thread; while
// decisions commit from many threads, every `then` runs exactly once, and none is left waiting.
TEST_P(StoreConformance, WhenDurableRunsEachCallbackOnce) {
  bool at_once = false;
  store_->WhenDurable([&at_once] { at_once = true; });
  EXPECT_TRUE(at_once);
  AddAccount("acct_d", 0);
  constexpr int kThreads = 4, kEach = 50;
  std::atomic<int> ran{0}, written{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        store_->WriteAsync(
            [](Transaction& tx) -> Status {
              auto moved = tx.Move("acct_d", MoveKind::kDeposit, 1, "", 2);
              return moved.ok() ? Status::Ok() : moved.status();
            },
            [&written](Status) { ++written; });
        store_->WhenDurable([&ran] { ++ran; });
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 10000 && (ran.load() < kThreads * kEach || written.load() < kThreads * kEach);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(ran.load(), kThreads * kEach);
  EXPECT_EQ(written.load(), kThreads * kEach);
  // Once every write's acknowledgement came, its commit is durable: a callback asked now runs at
  // once.
  bool after = false;
  store_->WhenDurable([&after] { after = true; });
  EXPECT_TRUE(after);
  EXPECT_EQ(BalancesOf("acct_d").deposited, kThreads * kEach);
}

// A blocking read, write or durability wait on an event thread (core/event_threads.h: an HTTP I/O
// thread, a store's writer) is a bug that would stall every client of that thread: it aborts.
// (Fork-style death tests: a re-executed child would recreate this test's database under the
// parent's store; the child aborts before it needs any of the store's threads.)
TEST_P(StoreConformance, ABlockingCallOnAnEventThreadAborts) {
  auto noop = [](Transaction&) { return Status::Ok(); };
  EXPECT_DEATH(
      {
        MarkEventThread("http-io");
        (void)store_->Read(noop);
      },
      "Store::Read would wait on the event thread \"http-io\"");
  EXPECT_DEATH(
      {
        MarkEventThread("http-io");
        (void)store_->ReadUnsynced(noop);
      },
      "Store::ReadUnsynced would wait");
  EXPECT_DEATH(
      {
        MarkEventThread("store-writer");
        (void)store_->Write(noop);
      },
      "Store::Write would wait on the event thread \"store-writer\"");
  EXPECT_DEATH(
      {
        MarkEventThread("timers");
        store_->AwaitDurable();
      },
      "Store::AwaitDurable would wait");
  // The same calls on a thread that may block are fine.
  EXPECT_TRUE(store_->Read(noop).ok());
}

// A decision that inserts an account and is undone after it returned takes the account with it:
// a deposit on that account decided meanwhile finds no account, and no money moves on one that
// does not exist (TearDown audits the books).
TEST_P(StoreConformance, AMoveOnAnAccountWhoseInsertIsUndoneFindsNoAccount) {
  for (int round = 0; round < 3; ++round) {
    const std::string id = "acct_gone" + std::to_string(round);
    std::vector<Status> outcomes = WriteAtOnce(2, [&](Transaction& tx, int i) -> Status {
      if (i == 0) {
        auto inserted = tx.InsertAccount({id, "n-" + id, "hash-" + id, {}, 1});
        if (!inserted.ok()) return inserted.status();
        auto moved = tx.Move(id, MoveKind::kDeposit, 50, "", 1);
        if (!moved.ok()) return moved.status();
        // Fails once the decision is confirmed: a write that finds no row.
        return tx.UpdateOperation(SampleOperation("op_missing_" + id));
      }
      // A deposit: it succeeds whatever the decision before it becomes, but not on no account.
      auto moved = tx.Move(id, MoveKind::kDeposit, 10, "", 2);
      if (!moved.ok()) return moved.status();
      return *moved == MoveOutcome::kOk ? Status::Ok()
                                        : Status::Error(ErrorCode::kStoreError, "refused");
    });
    EXPECT_EQ(outcomes[0].error(), ErrorCode::kStoreNotFound) << round << outcomes[0].ToString();
    EXPECT_EQ(outcomes[1].error(), ErrorCode::kStoreNotFound) << round << outcomes[1].ToString();
    ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                  EXPECT_FALSE(tx.FindAccount(id)->has_value()) << round;
                  return Status::Ok();
                }).ok());
  }
}

TEST_P(StoreConformance, ListOperationsFilters) {
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (int i = 0; i < 5; ++i) {
      Operation op = SampleOperation("op_" + std::to_string(i));
      op.created_ms = 100 + i;
      if (i % 2 == 0) op.fulfillment = Fulfillment::kPendingRetry;
      if (Status s = tx.InsertOperation(op); !s.ok()) return s;
    }
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    OperationFilter filter;
    filter.fulfillment = Fulfillment::kPendingRetry;
    auto pending = tx.ListOperations(filter);
    EXPECT_EQ(pending->size(), 3u);
    EXPECT_EQ((*pending)[0].id, "op_4");  // newest first
    filter.limit = 1;
    EXPECT_EQ(tx.ListOperations(filter)->size(), 1u);
    OperationFilter settled;
    settled.settlement = Settlement::kSettled;
    EXPECT_TRUE(tx.ListOperations(settled)->empty());
    EXPECT_EQ(tx.ListOperations(OperationFilter{})->size(), 5u);
    return Status::Ok();
  }).ok());
}

X402PaymentRecord SamplePayment(const std::string& operation_id, const std::string& nonce_hex);

// The console's lookups: every filter narrows, they combine, paging goes back in id order.
TEST_P(StoreConformance, ListOperationsFiltersCombineAndPage) {
  const std::string tx_hash = "0x" + std::string(64, 'e');
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                for (int i = 0; i < 6; ++i) {
                  Operation op = SampleOperation("op_" + std::to_string(i));
                  op.created_ms = 100 + i;
                  op.principal = i < 4 ? "account:a" : "payer:0x" + std::string(40, 'b');
                  op.route = i % 2 == 0 ? "/even" : "/odd";
                  op.idempotency_key = "key " + std::to_string(i);  // a space: any visible text
                  if (i == 1) op.intent = Intent::kRejected;
                  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
                }
                X402PaymentRecord payment = SamplePayment("op_5", "0x" + std::string(64, '5'));
                auto inserted = tx.InsertX402Payment(payment);
                if (!inserted.ok()) return inserted.status();
                payment.tx_hash = tx_hash;
                return tx.UpdateX402Payment(payment);
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto ids = [&](const OperationFilter& filter) {
                  std::vector<std::string> out;
                  auto listed = tx.ListOperations(filter);
                  EXPECT_TRUE(listed.ok()) << listed.status().ToString();
                  if (listed.ok()) {
                    for (const Operation& op : *listed) out.push_back(op.id);
                  }
                  return out;
                };
                using Ids = std::vector<std::string>;
                OperationFilter filter;
                filter.principal = "account:a";
                EXPECT_EQ(ids(filter), (Ids{"op_3", "op_2", "op_1", "op_0"}));
                filter.route = "/even";
                EXPECT_EQ(ids(filter), (Ids{"op_2", "op_0"}));
                filter.before_id = "op_2";
                EXPECT_EQ(ids(filter), (Ids{"op_0"}));
                OperationFilter rejected;
                rejected.intent = Intent::kRejected;
                EXPECT_EQ(ids(rejected), (Ids{"op_1"}));
                OperationFilter key;
                key.idempotency_key = "key 4";
                EXPECT_EQ(ids(key), (Ids{"op_4"}));
                OperationFilter by_tx;
                by_tx.tx_hash = tx_hash;
                EXPECT_EQ(ids(by_tx), (Ids{"op_5"}));
                by_tx.tx_hash = "0x" + std::string(64, 'f');
                EXPECT_TRUE(ids(by_tx).empty());
                OperationFilter old;
                old.created_before_ms = 102;
                EXPECT_EQ(ids(old), (Ids{"op_1", "op_0"}));
                OperationFilter page;
                page.limit = 2;
                EXPECT_EQ(ids(page), (Ids{"op_5", "op_4"}));
                page.before_id = "op_4";
                EXPECT_EQ(ids(page), (Ids{"op_3", "op_2"}));
                return Status::Ok();
              }).ok());
}

// The console's overview and account pages: what is held and since when, unresolved settlements,
// open alerts, what was captured since a time; accounts page by page.
TEST_P(StoreConformance, OverviewAndAccountPages) {
  AddAccount("a", 1000);
  AddAccount("b", 1000);
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto empty = tx.ReadOverview(0);
                EXPECT_TRUE(empty.ok()) << empty.status().ToString();
                EXPECT_EQ(empty->accounts, 2);
                EXPECT_EQ(empty->held_count, 0);
                EXPECT_FALSE(empty->oldest_hold_created_ms.has_value());
                EXPECT_FALSE(empty->oldest_settling_created_ms.has_value());
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                const std::pair<const char*, Settlement> ops[] = {{"op_h1", Settlement::kHeld},
                                                                  {"op_h2", Settlement::kHeld},
                                                                  {"op_s", Settlement::kSubmitted},
                                                                  {"op_u", Settlement::kUnknown},
                                                                  {"op_c", Settlement::kSettled}};
                int64_t created = 50;
                for (const auto& [id, settlement] : ops) {
                  Operation op = SampleOperation(id);
                  op.settlement = settlement;
                  op.created_ms = created++;
                  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
                }
                for (const char* id : {"op_h1", "op_h2"}) {
                  auto moved = tx.Move("a", MoveKind::kHold, 7, id, 60);
                  if (!moved.ok()) return moved.status();
                }
                // Captured at 70 and 80, one refunded at 90: since 75, 7 captured less 7 refunded.
                for (int64_t at : {70, 80}) {
                  for (MoveKind kind : {MoveKind::kHold, MoveKind::kCapture}) {
                    auto moved = tx.Move("b", kind, 7, "op_c", at);
                    if (!moved.ok()) return moved.status();
                  }
                }
                auto refunded = tx.Move("b", MoveKind::kRefund, 7, "op_c", 90);
                if (!refunded.ok()) return refunded.status();
                return tx.InsertAlert({"alert_o", "op_h1", "k", "d", 1, std::nullopt, "", ""});
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto overview = tx.ReadOverview(75);
                EXPECT_TRUE(overview.ok()) << overview.status().ToString();
                EXPECT_EQ(overview->held_count, 2);
                EXPECT_EQ(overview->held_amount, 14);
                EXPECT_EQ(overview->oldest_hold_created_ms, 50);
                EXPECT_EQ(overview->submitted, 1);
                EXPECT_EQ(overview->unknown, 1);
                EXPECT_EQ(overview->oldest_settling_created_ms, 52);
                EXPECT_EQ(overview->open_alerts, 1);
                EXPECT_EQ(overview->captured_since, 0);
                EXPECT_EQ(tx.ReadOverview(0)->captured_since, 7);
                auto first = tx.ListAccountsPage("", 1);
                EXPECT_TRUE(first.ok());
                EXPECT_EQ(first->size(), 1u);
                EXPECT_EQ(first->front().id, "a");
                auto next = tx.ListAccountsPage("a", 10);
                EXPECT_EQ(next->size(), 1u);
                EXPECT_EQ(next->front().id, "b");
                EXPECT_EQ(next->front().balances.captured, 7);
                EXPECT_TRUE(tx.ListAccountsPage("b", 10)->empty());
                return Status::Ok();
              }).ok());
}

// The sweeper's cursor over unpaid x402 operations waiting for a retry: settlement none with
// fulfillment pending_retry only, id order, after a cursor.
TEST_P(StoreConformance, ListUnpaidRetriesPagesOldestFirst) {
  std::vector<std::string> waiting;
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                for (int i = 0; i < 12; ++i) {
                  char id[16];
                  std::snprintf(id, sizeof id, "op_%03d", 11 - i);  // inserted newest first
                  Operation op = SampleOperation(id);
                  op.settlement = i % 3 == 2 ? Settlement::kSettled : Settlement::kNone;
                  op.fulfillment = i % 2 == 0 ? Fulfillment::kPendingRetry : Fulfillment::kRejected;
                  if (op.settlement == Settlement::kNone &&
                      op.fulfillment == Fulfillment::kPendingRetry) {
                    waiting.push_back(id);
                  }
                  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
                }
                return Status::Ok();
              }).ok());
  std::sort(waiting.begin(), waiting.end());
  ASSERT_EQ(waiting.size(), 4u);
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                std::vector<std::string> seen;
                std::string cursor;
                for (;;) {
                  auto page = tx.ListUnpaidRetries(cursor, 3);
                  EXPECT_TRUE(page.ok());
                  if (!page.ok() || page->empty()) break;
                  EXPECT_LE(page->size(), 3u);
                  for (const Operation& op : *page) seen.push_back(op.id);
                  cursor = page->back().id;
                }
                EXPECT_EQ(seen, waiting);  // every one, once, oldest first
                EXPECT_TRUE(tx.ListUnpaidRetries("op_999", 3)->empty());
                return Status::Ok();
              }).ok());
}

// The reconciler's cursor: submitted and unknown operations together, id order, after a cursor,
// nothing else (not settled, not held, not none).
TEST_P(StoreConformance, ListSettlingOperationsPagesOldestFirst) {
  const Settlement states[] = {Settlement::kSubmitted, Settlement::kUnknown, Settlement::kSettled,
                               Settlement::kNone, Settlement::kUnknown, Settlement::kVoid,
                               Settlement::kSubmitted};
  std::vector<std::string> settling;
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (int i = 0; i < 21; ++i) {
      char id[16];
      std::snprintf(id, sizeof id, "op_%03d", 20 - i);  // inserted newest first
      Operation op = SampleOperation(id);
      op.settlement = states[i % 7];
      if (op.settlement == Settlement::kSubmitted || op.settlement == Settlement::kUnknown) {
        settling.push_back(id);
      }
      if (Status s = tx.InsertOperation(op); !s.ok()) return s;
    }
    return Status::Ok();
  }).ok());
  std::sort(settling.begin(), settling.end());
  ASSERT_EQ(settling.size(), 12u);
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    std::vector<std::string> seen;
    std::string cursor;
    int pages = 0;
    for (;;) {
      auto page = tx.ListSettlingOperations(cursor, 5);
      EXPECT_TRUE(page.ok());
      if (!page.ok() || page->empty()) break;
      EXPECT_LE(page->size(), 5u);
      ++pages;
      for (const Operation& op : *page) {
        EXPECT_TRUE(op.settlement == Settlement::kSubmitted ||
                    op.settlement == Settlement::kUnknown)
            << op.id;
        seen.push_back(op.id);
      }
      cursor = page->back().id;
    }
    EXPECT_EQ(seen, settling);  // every one, once, oldest first
    EXPECT_EQ(pages, 3);
    EXPECT_TRUE(tx.ListSettlingOperations("op_999", 5)->empty());
    EXPECT_EQ(tx.ListSettlingOperations("", 100)->size(), 12u);
    return Status::Ok();
  }).ok());
}

// Issue 36 item 8: the reservations every gateway of the database counts, dropped by the update
// that makes the payment final (whichever update does it), each drop moving the payer's epoch on.
TEST_P(StoreConformance, PayerReservationsAreSharedAndReleasedWithTheirPayment) {
  const std::string net = "eip155:84532", asset = "0xa5", payer = "0xp1";
  std::vector<Operation> ops;
  for (const char* id : {"op_r1", "op_r2", "op_r3"}) {
    Operation op = SampleOperation(id);
    op.principal = "payer:" + payer;
    op.settlement = Settlement::kSubmitted;
    ops.push_back(op);
  }
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (Status s = tx.InsertOperation(ops[i]); !s.ok()) return s;
      if (Status s = tx.InsertPayerReservation({net, asset, payer, "0xn" + std::to_string(i),
                                                ops[i].id, 100, 1000 + 100 * int64_t(i)});
          !s.ok()) {
        return s;
      }
    }
    // Another payer's and another asset's do not count.
    return tx.InsertPayerReservation({net, "0xother", payer, "0xn9", "op_other", 5, 5000});
  }).ok());
  auto state = [&](int64_t lapsed_at_s) {
    PayerReservationState out;
    EXPECT_TRUE(Read([&](Transaction& tx) -> Status {
      auto read = tx.ReadPayerReservations(net, asset, payer, lapsed_at_s);
      if (!read.ok()) return read.status();
      out = *read;
      return Status::Ok();
    }).ok());
    return out;
  };
  EXPECT_EQ(state(0), (PayerReservationState{0, 300}));
  EXPECT_EQ(state(1000), (PayerReservationState{0, 200}));  // validBefore 1000 lapsed
  EXPECT_EQ(state(1200), (PayerReservationState{0, 0}));
  // Still moving money (unknown): kept. Settled by a plain update: dropped, the epoch moves by 100.
  ops[0].settlement = Settlement::kUnknown;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateOperation(ops[0]); }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{0, 300}));
  ops[0].settlement = Settlement::kSettled;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateOperation(ops[0]); }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{100, 200}));
  // Void through a claimed update: dropped, the epoch moves by 100 more. A lost claim drops nothing.
  ops[1].settlement = Settlement::kVoid;
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto lost = tx.UpdateClaimedOperation(ops[1], ops[1].attempts + 7);
    if (!lost.ok()) return lost.status();
    EXPECT_FALSE(*lost);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{100, 200}));
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto won = tx.UpdateClaimedOperation(ops[1], ops[1].attempts);
    if (!won.ok()) return won.status();
    EXPECT_TRUE(*won);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{200, 100}));
  // A rolled-back decision's release leaves the reservation and the epoch.
  ops[2].settlement = Settlement::kFailed;
  EXPECT_FALSE(Write([&](Transaction& tx) -> Status {
                 if (Status s = tx.UpdateOperation(ops[2]); !s.ok()) return s;
                 return Status::Error(ErrorCode::kStoreConflict, "changed its mind");
               }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{200, 100}));
  // A wallet operation's update releases nothing (and finds nothing to release).
  Operation wallet = SampleOperation("op_w");
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertOperation(wallet); }).ok());
  wallet.settlement = Settlement::kReleased;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateOperation(wallet); }).ok());
  EXPECT_EQ(state(0), (PayerReservationState{200, 100}));
  // One reservation per authorization and per operation.
  EXPECT_FALSE(Write([&](Transaction& tx) {
                 return tx.InsertPayerReservation({net, asset, payer, "0xn2", "op_new", 1, 9});
               }).ok());
  EXPECT_FALSE(Write([&](Transaction& tx) {
                 return tx.InsertPayerReservation({net, asset, payer, "0xnew", "op_r3", 1, 9});
               }).ok());
}

// Issue 36 item 8: the rate limits' usage rows the gateways exchange (gateway/rate_sync.h).
TEST_P(StoreConformance, RateUsageAddsUpListsAndPrunes) {
  std::vector<int64_t> totals;
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto added = tx.AddRateUsage({{"client", "127.0.0.1", 60000, 3}, {"payer", "0xp", 60000, 1}},
                                 61000);
    if (!added.ok()) return added.status();
    totals = *added;
    return Status::Ok();
  }).ok());
  EXPECT_EQ(totals, (std::vector<int64_t>{3, 1}));
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto added = tx.AddRateUsage({{"payer", "0xp", 60000, 4}, {"client", "127.0.0.1", 0, 2}},
                                 62000);
    if (!added.ok()) return added.status();
    totals = *added;
    auto none = tx.AddRateUsage({}, 62000);
    if (!none.ok()) return none.status();
    EXPECT_TRUE(none->empty());
    return Status::Ok();
  }).ok());
  EXPECT_EQ(totals, (std::vector<int64_t>{5, 2}));
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto since = tx.ListRateUsage(60000, 62000, 10);  // updated at 62000, windows from 60000
    if (!since.ok()) return since.status();
    EXPECT_EQ(*since, (std::vector<RateUsageRecord>{{"payer", "0xp", 60000, 5}}));
    auto all = tx.ListRateUsage(0, 0, 10);
    if (!all.ok()) return all.status();
    EXPECT_EQ(all->size(), 3u);
    EXPECT_EQ(all->front(), (RateUsageRecord{"client", "127.0.0.1", 60000, 3}));  // oldest first
    EXPECT_EQ(tx.ListRateUsage(0, 0, 1)->size(), 1u);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.PruneRateUsage(60000); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_EQ(tx.ListRateUsage(0, 0, 10)->size(), 2u);
    return Status::Ok();
  }).ok());
}

TEST_P(StoreConformance, EventsKeepTheirOrder) {
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (int i = 0; i < 3; ++i) {
      if (Status s =
              tx.AppendEvent({"op_e", 50 - i, TraceActor::kGateway, "k" + std::to_string(i), "d"});
          !s.ok()) {
        return s;
      }
    }
    return tx.AppendEvent({"op_other", 1, TraceActor::kGateway, "x", ""});
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto events = tx.ListEvents("op_e");
    EXPECT_EQ(events->size(), 3u);
    EXPECT_EQ((*events)[0].kind, "k0");
    EXPECT_EQ((*events)[2].kind, "k2");
    return Status::Ok();
  }).ok());
}

// An event row whose actor this binary does not know (another version's, or a hand's) is a corrupt
// store, reported as such: never read as some other actor, never a crash.
TEST_P(StoreConformance, AnEventOfAnUnknownActorIsReportedAsCorrupt) {
  ASSERT_TRUE(Write([](Transaction& tx) {
                return tx.AppendEvent({"op_u", 1, TraceActor::kWorker, "hold_expired", ""});
              }).ok());
  ASSERT_TRUE(
      RunBehindTheStore("UPDATE operation_events SET actor = 'robot' WHERE operation_id = 'op_u'")
          .ok());
  Status read = Read([](Transaction& tx) -> Status { return tx.ListEvents("op_u").status(); });
  EXPECT_EQ(read.error(), ErrorCode::kStoreCorrupt) << read.ToString();
}

// A posting whose kind this binary does not know is a corrupt store, reported as such: neither the
// operation's postings nor the books are read around money whose meaning is unknown.
TEST_P(StoreConformance, APostingOfAnUnknownKindIsReportedAsCorrupt) {
  AddAccount("acct_k", 1000);
  ASSERT_TRUE(Write([](Transaction& tx) -> Status {
                auto moved = tx.Move("acct_k", MoveKind::kHold, 10, "op_k", 5);
                if (!moved.ok()) return moved.status();
                return *moved == MoveOutcome::kOk
                           ? Status::Ok()
                           : Status::Error(ErrorCode::kStoreError, "refused");
              }).ok());
  Status listed = Read([](Transaction& tx) -> Status { return tx.ListPostings("op_k").status(); });
  ASSERT_TRUE(listed.ok()) << listed.ToString();
  ASSERT_TRUE(
      RunBehindTheStore("UPDATE ledger_entries SET kind = 'bonus' WHERE operation_id = 'op_k'")
          .ok());
  listed = Read([](Transaction& tx) -> Status { return tx.ListPostings("op_k").status(); });
  EXPECT_EQ(listed.error(), ErrorCode::kStoreCorrupt) << listed.ToString();
  Status audited = Read([](Transaction& tx) -> Status { return tx.Audit().status(); });
  EXPECT_EQ(audited.error(), ErrorCode::kStoreCorrupt) << audited.ToString();
  // Put back, so that the books this test leaves still balance (TearDown checks them).
  ASSERT_TRUE(
      RunBehindTheStore("UPDATE ledger_entries SET kind = 'hold' WHERE operation_id = 'op_k'")
          .ok());
}

TEST_P(StoreConformance, EventsKeepTheirStructuredFacts) {
  TraceEvent full{
      "op_f",
      7,
      TraceActor::kChain,
      "settled",
      "receipt",
      TraceFacts().Attempt(2).Amount(1500).HttpStatus(202).TxHash("0xab").Block(9).Reason("why")};
  TraceEvent bare{"op_f", 8, TraceActor::kGateway, "note", ""};
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                if (Status s = tx.AppendEvent(full); !s.ok()) return s;
                return tx.AppendEvent(bare);
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto events = tx.ListEvents("op_f");
                if (!events.ok()) return events.status();
                EXPECT_EQ(*events, (std::vector<TraceEvent>{full, bare}));
                EXPECT_FALSE((*events)[1].facts.amount.has_value());  // none, not 0
                return Status::Ok();
              }).ok());
}

TEST_P(StoreConformance, RepeatedArrivalsAreRecordedUpToTheCap) {
  KeyRecord record{"account:a", "k", "op_r", "fp", 5};
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertKey(record).status(); }).ok());
  int recorded = 0;
  for (int i = 0; i < kMaxRecordedArrivals + 3; ++i) {
    ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                  auto done = tx.RecordArrival(
                      record, {"op_r", 10 + i, TraceActor::kClient, "replayed", "again"});
                  if (!done.ok()) return done.status();
                  recorded += *done ? 1 : 0;
                  return Status::Ok();
                }).ok());
  }
  // A key that names another operation now (forgotten and reserved again) records nothing.
  KeyRecord stale = record;
  stale.operation_id = "op_old";
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                auto done = tx.RecordArrival(
                    stale, {"op_old", 99, TraceActor::kClient, "replayed", "late"});
                if (!done.ok()) return done.status();
                EXPECT_FALSE(*done);
                return Status::Ok();
              }).ok());
  EXPECT_EQ(recorded, kMaxRecordedArrivals);
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                EXPECT_EQ(tx.ListEvents("op_r")->size(), static_cast<size_t>(kMaxRecordedArrivals));
                EXPECT_TRUE(tx.ListEvents("op_old")->empty());
                EXPECT_EQ((*tx.FindKey("account:a", "k"))->arrivals_recorded, kMaxRecordedArrivals);
                return Status::Ok();
              }).ok());
}

TEST_P(StoreConformance, AccountsAndDeposits) {
  AddAccount("acct_a", 0);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto duplicate = tx.InsertAccount({"acct_a", "x", "other-hash", {}, 1});
    EXPECT_FALSE(*duplicate);
    auto same_hash = tx.InsertAccount({"acct_b", "x", "hash-acct_a", {}, 1});
    EXPECT_FALSE(*same_hash);
    auto first = tx.InsertDeposit({"acct_a", "ref", 10, 2});
    EXPECT_TRUE(*first);
    auto again = tx.InsertDeposit({"acct_a", "ref", 11, 3});
    EXPECT_FALSE(*again);
    auto found = tx.FindDeposit("acct_a", "ref");
    EXPECT_EQ((*found)->amount, 10);
    auto by_hash = tx.FindAccountByKeyHash("hash-acct_a");
    EXPECT_EQ((*by_hash)->id, "acct_a");
    EXPECT_FALSE(tx.FindAccountByKeyHash("nope")->has_value());
    EXPECT_EQ(tx.ListAccounts()->size(), 1u);
    return Status::Ok();
  }).ok());
}

// Issue 13: an account holds several keys (rotation); a revoked key never authenticates again,
// and the other keys go on working.
TEST_P(StoreConformance, ApiKeysRotateAndRevoke) {
  AddAccount("acct_k", 0);
  AddAccount("acct_other", 0);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto keys = tx.ListApiKeys("acct_k");
    EXPECT_EQ(keys->size(), 1u);
    EXPECT_EQ(keys->at(0),
              (ApiKeyRecord{FirstApiKeyId("hash-acct_k"), "acct_k", "hash-acct_k", 1, std::nullopt}));
    EXPECT_TRUE(*tx.InsertApiKey({"key_second", "acct_k", "hash-second", 5, std::nullopt}));
    // Neither the id nor the hash can be taken twice, whichever account asks.
    EXPECT_FALSE(*tx.InsertApiKey({"key_second", "acct_other", "hash-x", 6, std::nullopt}));
    EXPECT_FALSE(*tx.InsertApiKey({"key_third", "acct_other", "hash-second", 6, std::nullopt}));
    EXPECT_FALSE(*tx.InsertApiKey({"key_fourth", "acct_other", "hash-acct_k", 6, std::nullopt}));
    EXPECT_EQ((*tx.FindAccountByKeyHash("hash-acct_k"))->id, "acct_k");
    EXPECT_EQ((*tx.FindAccountByKeyHash("hash-second"))->id, "acct_k");
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    // Another account cannot revoke this account's key, nor can an unknown id be revoked.
    EXPECT_FALSE(*tx.RevokeApiKey("acct_other", FirstApiKeyId("hash-acct_k"), 7));
    EXPECT_FALSE(*tx.RevokeApiKey("acct_k", "key_nope", 7));
    EXPECT_TRUE(*tx.RevokeApiKey("acct_k", FirstApiKeyId("hash-acct_k"), 8));
    EXPECT_FALSE(*tx.RevokeApiKey("acct_k", FirstApiKeyId("hash-acct_k"), 9));  // once only
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_FALSE(tx.FindAccountByKeyHash("hash-acct_k")->has_value());
    EXPECT_EQ((*tx.FindAccountByKeyHash("hash-second"))->id, "acct_k");
    auto keys = tx.ListApiKeys("acct_k");
    EXPECT_EQ(keys->size(), 2u);
    EXPECT_EQ(keys->at(0).revoked_ms, std::optional<int64_t>(8));  // the first revocation's time
    EXPECT_EQ(keys->at(1).revoked_ms, std::nullopt);
    EXPECT_EQ(tx.ListApiKeys("acct_other")->size(), 1u);
    EXPECT_TRUE(tx.ListApiKeys("acct_nobody")->empty());
    return Status::Ok();
  }).ok());
  // An account whose first key's hash is already some key's is refused whole: nothing written.
  Status refused = Write([&](Transaction& tx) -> Status {
    auto inserted = tx.InsertAccount({"acct_dup", "d", "hash-second", {}, 10});
    return inserted.ok() ? Status::Ok() : inserted.status();
  });
  EXPECT_FALSE(refused.ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_FALSE(tx.FindAccount("acct_dup")->has_value());
    return Status::Ok();
  }).ok());
}

TEST_P(StoreConformance, MovesPostDoubleEntryAndRefuseOverdraft) {
  AddAccount("acct_m", 1000);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    EXPECT_EQ(*tx.Move("acct_m", MoveKind::kHold, 600, "op_1", 2), MoveOutcome::kOk);
    EXPECT_EQ(*tx.Move("acct_m", MoveKind::kHold, 401, "op_2", 2), MoveOutcome::kInsufficientFunds);
    EXPECT_EQ(*tx.Move("acct_m", MoveKind::kCapture, 200, "op_1", 3), MoveOutcome::kOk);
    EXPECT_EQ(*tx.Move("acct_m", MoveKind::kRelease, 400, "op_1", 3), MoveOutcome::kOk);
    EXPECT_EQ(*tx.Move("acct_m", MoveKind::kRelease, 1, "op_1", 3), MoveOutcome::kNotHeld);
    EXPECT_FALSE(tx.Move("acct_missing", MoveKind::kHold, 1, "", 3).ok());
    return Status::Ok();
  }).ok());
  EXPECT_EQ(BalancesOf("acct_m"), (Balances{1000, 200, 0}));
  LedgerAudit audit = Audit();
  EXPECT_EQ(audit.external_total, -1000);
  EXPECT_EQ(audit.revenue_total, 200);
}

// A write that fails (here an update of an operation that does not exist) fails its decision with
// the write's error, and nothing else: the decisions sharing its commit keep theirs. A backend may
// report such an error at the write or later in the same decision (PostgreSQL's writer sends writes
// without waiting, pg_connection.h); the decision's outcome is the same either way.
TEST_P(StoreConformance, AFailedWriteFailsItsDecisionAlone) {
  std::vector<std::thread> threads;
  std::vector<Status> outcomes(30);
  for (int i = 0; i < 30; ++i) {
    threads.emplace_back([&, i] {
      outcomes[i] = Write([&](Transaction& tx) -> Status {
        auto inserted = tx.InsertKey({"account:w", "k" + std::to_string(i), "op", "fp", 1});
        if (!inserted.ok()) return inserted.status();
        if (i % 3 == 0) {
          Operation missing = SampleOperation("op_missing_" + std::to_string(i));
          if (Status s = tx.UpdateOperation(missing); !s.ok()) return s;
        }
        if (Status s =
                tx.AppendEvent({"op_w" + std::to_string(i), 1, TraceActor::kGateway, "k", ""});
            !s.ok()) {
          return s;
        }
        auto found = tx.FindKey("account:w", "k" + std::to_string(i));  // a read after the write
        if (!found.ok()) return found.status();
        return Status::Ok();
      });
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                for (int i = 0; i < 30; ++i) {
                  auto key = tx.FindKey("account:w", "k" + std::to_string(i));
                  auto events = tx.ListEvents("op_w" + std::to_string(i));
                  if (i % 3 == 0) {
                    EXPECT_EQ(outcomes[i].error(), ErrorCode::kStoreNotFound)
                        << i << outcomes[i].ToString();
                    EXPECT_FALSE(key->has_value()) << i;
                    EXPECT_TRUE(events->empty()) << i;
                  } else {
                    EXPECT_TRUE(outcomes[i].ok()) << i << outcomes[i].ToString();
                    EXPECT_TRUE(key->has_value()) << i;
                    EXPECT_EQ(events->size(), 1u) << i;
                  }
                }
                return Status::Ok();
              }).ok());
}

// The same when the failing write is a decision's last statement, in a batch of decisions moving
// money on one account, then on twelve: PostgreSQL's writer sends such a decision's writes with the
// next decision's first statement or with the balances and the commit (pg_connection.h, HoldOver,
// StartTail; a row per statement up to eight accounts, one statement for more), and must then undo
// it alone, money and all, write the balances it left, and tell the next decision those.
TEST_P(StoreConformance, AFailedLastWriteFailsItsDecisionAloneWithItsMoney) {
  for (const int accounts : {1, 12}) {
    SCOPED_TRACE(std::to_string(accounts) + " accounts");
    const std::string prefix = "acct_l" + std::to_string(accounts) + "_";
    auto account_of = [&](int i) { return prefix + std::to_string(i % accounts); };
    for (int a = 0; a < accounts; ++a) AddAccount(account_of(a), 1000);
    constexpr int kDecisions = 40;  // the last one fails: with the commit, if they share one
    std::vector<Status> outcomes = WriteAtOnce(kDecisions, [&](Transaction& tx, int i) -> Status {
      const std::string op = prefix + "op" + std::to_string(i);
      auto moved = tx.Move(account_of(i), MoveKind::kHold, 10, op, 5);
      if (!moved.ok()) return moved.status();
      if (*moved != MoveOutcome::kOk) return Status::Error(ErrorCode::kStoreError, "refused");
      if (Status s = tx.AppendEvent({op, 5, TraceActor::kGateway, "hold", ""}); !s.ok()) return s;
      if (i % 3 == 0) return tx.UpdateOperation(SampleOperation("op_missing_" + op));
      return Status::Ok();
    });
    std::vector<int64_t> held(accounts, 0);
    for (int i = 0; i < kDecisions; ++i) {
      if (i % 3 == 0) {
        EXPECT_EQ(outcomes[i].error(), ErrorCode::kStoreNotFound) << i << outcomes[i].ToString();
      } else {
        EXPECT_TRUE(outcomes[i].ok()) << i << outcomes[i].ToString();
        held[i % accounts] += 10;
      }
    }
    for (int a = 0; a < accounts; ++a) {
      EXPECT_EQ(BalancesOf(account_of(a)), (Balances{1000, 0, held[a]})) << account_of(a);
    }
    ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                  for (int i = 0; i < kDecisions; ++i) {
                    const std::string op = prefix + "op" + std::to_string(i);
                    EXPECT_EQ(tx.ListEvents(op)->size(), i % 3 == 0 ? 0u : 1u) << i;
                    EXPECT_EQ(tx.ListPostings(op)->size(), i % 3 == 0 ? 0u : 1u) << i;
                  }
                  return Status::Ok();
                }).ok());
    // The next decision starts from the balances the database holds.
    ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                  auto moved = tx.Move(account_of(1), MoveKind::kCapture, 10, prefix + "op1", 6);
                  if (!moved.ok()) return moved.status();
                  EXPECT_EQ(*moved, MoveOutcome::kOk);
                  return Status::Ok();
                }).ok());
    EXPECT_EQ(BalancesOf(account_of(1)), (Balances{1000, 10, held[1 % accounts] - 10}));
  }
}

// A decision reads the balances its own moves and the earlier decisions of its commit left, and
// so does the audit run inside a decision, however a backend writes its accounts rows.
TEST_P(StoreConformance, ADecisionReadsTheBalancesItsMovesLeft) {
  AddAccount("acct_s", 1000);
  std::vector<Status> outcomes = WriteAtOnce(12, [](Transaction& tx, int i) -> Status {
    auto moved = tx.Move("acct_s", MoveKind::kHold, 10, "op_s" + std::to_string(i), 5);
    if (!moved.ok()) return moved.status();
    if (i % 4 != 3) return Status::Ok();
    // Every fourth reads the account after its move, and takes the audit.
    auto account = tx.FindAccount("acct_s");
    if (!account.ok()) return account.status();
    EXPECT_EQ((*account)->balances, (Balances{1000, 0, 10 * (i + 1)})) << i;
    auto audit = tx.Audit();
    if (!audit.ok()) return audit.status();
    for (const AccountAudit& books : audit->accounts) {
      if (books.account_id != "acct_s") continue;
      EXPECT_EQ(books.stored, books.from_ledger) << i;
      EXPECT_EQ(books.stored, (Balances{1000, 0, 10 * (i + 1)})) << i;
    }
    return Status::Ok();
  });
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(outcomes[i].ok()) << i << outcomes[i].ToString();
  EXPECT_EQ(BalancesOf("acct_s"), (Balances{1000, 0, 120}));
}

// PostgreSQL's writer keeps balances between batches (postgres_transaction.h, BalanceCache). A
// deposit written into the database by something that does not number its batches (a gateway from
// before migration 11, an operator's SQL) leaves what it kept stale: the next batch that moves
// money on the account fails as a whole instead of writing wrong money, and the next reads the row.
TEST_P(StoreConformance, BalancesChangedBehindTheWritersBackFailABatchNeverTheBooks) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "only PostgreSQL's writer keeps balances";
  AddAccount("acct_b", 1000);
  auto hold = [&](const std::string& op) {
    return Write([&](Transaction& tx) -> Status {
      auto moved = tx.Move("acct_b", MoveKind::kHold, 10, op, 5);
      if (!moved.ok()) return moved.status();
      return *moved == MoveOutcome::kOk ? Status::Ok()
                                        : Status::Error(ErrorCode::kStoreError, "refused");
    });
  };
  ASSERT_TRUE(hold("op_b1").ok());  // the writer now keeps acct_b's balances
  // A deposit of 5 by hand, with its posting: the books stay whole.
  auto conn = pg::Connection::Open(url_, 10);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  const Posting posting = PostingFor(MoveKind::kDeposit);
  ASSERT_TRUE((*conn)
                  ->Run("BEGIN; UPDATE accounts SET deposited = deposited + 5 WHERE id = 'acct_b'; "
                        "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, "
                        "at_ms) VALUES (NULL, '" +
                        std::string(MoveKindName(MoveKind::kDeposit)) + "', '" +
                        LedgerAccountName(posting.debit_kind, "acct_b") + "', '" +
                        LedgerAccountName(posting.credit_kind, "acct_b") + "', 5, 6); COMMIT")
                  .ok());
  Status stale = hold("op_b2");
  EXPECT_EQ(stale.error(), ErrorCode::kStoreUnavailable) << stale.ToString();
  EXPECT_EQ(BalancesOf("acct_b"), (Balances{1005, 0, 10}));  // nothing of op_b2
  Status again = hold("op_b3");
  EXPECT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(BalancesOf("acct_b"), (Balances{1005, 0, 20}));
}

// Two stores on one database (two gateways) moving money on the same account in turn: each
// decision starts from what the other committed, whatever either keeps between its decisions.
TEST_P(StoreConformance, TwoStoresMovingMoneyOnOneAccountInTurnKeepTheSums) {
  AddAccount("acct_t", 1000);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (int i = 0; i < 30; ++i) {
    Store& store = i % 2 == 0 ? *store_ : **other;
    Status status = store.Write([&](Transaction& tx) -> Status {
      auto moved = tx.Move("acct_t", i % 3 == 2 ? MoveKind::kCapture : MoveKind::kHold, 5,
                           "op_t" + std::to_string(i), 7);
      if (!moved.ok()) return moved.status();
      return *moved == MoveOutcome::kOk ? Status::Ok()
                                        : Status::Error(ErrorCode::kStoreError, "refused");
    });
    EXPECT_TRUE(status.ok()) << i << " " << status.ToString();
  }
  // 20 holds of 5, 10 captures of 5 out of them.
  EXPECT_EQ(BalancesOf("acct_t"), (Balances{1000, 50, 50}));
}

// Issue 40: PostgreSQL's writer keeps balances between its batches, and a batch of another gateway
// in between no longer makes it forget them: the batch's first round trip brings the rows the
// others wrote since (each stamped with its batch). So a store moving money on an account in turn
// with another reads no balance of its own: each single-decision batch is its start and its
// commit, two round trips. Past kRefreshRows accounts changed it forgets them all instead, and
// reads what it needs again: the sums hold either way.
TEST_P(StoreConformance, AWriterKeepsBalancesAnotherGatewayChangedWithoutReadingThem) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "only PostgreSQL's writer keeps balances";
  AddAccount("acct_k", 1000);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto hold = [](Store& store, const std::string& account, const std::string& op) {
    return store.Write(Hold(account, 5, op));
  };
  // Both writers keep acct_k's balances once they have moved money on it.
  ASSERT_TRUE(hold(*store_, "acct_k", "op_k0").ok());
  ASSERT_TRUE(hold(**other, "acct_k", "op_k1").ok());
  const uint64_t mine = store_->Stats().writer_round_trips;
  const uint64_t theirs = (*other)->Stats().writer_round_trips;
  for (int i = 2; i < 22; ++i) {
    Store& store = i % 2 == 0 ? *store_ : **other;
    ASSERT_TRUE(hold(store, "acct_k", "op_k" + std::to_string(i)).ok()) << i;
  }
  EXPECT_EQ(store_->Stats().writer_round_trips - mine, 20u);
  EXPECT_EQ((*other)->Stats().writer_round_trips - theirs, 20u);
  EXPECT_EQ(BalancesOf("acct_k"), (Balances{1000, 0, 110}));
  // More accounts changed elsewhere than a batch's start brings: forgotten, read again, right.
  for (int i = 0; i < 300; ++i) AddAccount("acct_m" + std::to_string(i), 100);
  ASSERT_TRUE(hold(*store_, "acct_m7", "op_m7").ok());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(hold(**other, "acct_m" + std::to_string(i), "op_n" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(hold(*store_, "acct_m7", "op_m7b").ok());
  EXPECT_EQ(BalancesOf("acct_m7"), (Balances{100, 0, 15}));
  ASSERT_TRUE(hold(*store_, "acct_k", "op_k22").ok());
  EXPECT_EQ(BalancesOf("acct_k"), (Balances{1000, 0, 115}));
}

// Each PostgreSQL batch logs the accounts whose balances it wrote (accounts_written, migration 15:
// the balance rows themselves are updated in place, touching no index), and another gateway's
// next batch reads the log since its own last batch. The log keeps the last 4096 batch numbers;
// a writer whose last batch is further back forgets every balance it keeps, since what another
// gateway wrote in between may be deleted from the log. Here the other store moves money on
// acct_f, 5,000 numbers go by, and its next batch deletes acct_f's entries from the log: this
// store's next hold on acct_f must still start from the balances in the database.
TEST_P(StoreConformance, AWriterFurtherBehindThanTheLogOfWrittenAccountsForgetsWhatItKept) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "only PostgreSQL's writer keeps balances";
  AddAccount("acct_f", 1000);
  AddAccount("acct_e", 1000);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto admin = pg::Connection::Open(url_, 10);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  auto logged = [&](const std::string& account) -> int64_t {
    auto rows = (*admin)->Query("SELECT count(*) FROM accounts_written WHERE $1 = ANY(account_ids)",
                                pg::Params().Add(account));
    return rows.ok() ? rows->Int(0, 0) : -1;
  };
  ASSERT_TRUE(store_->Write(Hold("acct_f", 5, "op_f0")).ok());  // kept here from now on
  ASSERT_TRUE((*other)->Write(Hold("acct_f", 5, "op_f1")).ok());
  EXPECT_EQ(logged("acct_f"), 3);  // its deposit, then both holds
  ASSERT_TRUE(RunBehindTheStore("SELECT setval('writer_batches', "
                                "(SELECT last_value FROM writer_batches) + 5000)")
                  .ok());
  ASSERT_TRUE((*other)->Write(Hold("acct_e", 5, "op_e0")).ok());
  EXPECT_EQ(logged("acct_f"), 0);  // deleted: older than the log keeps
  EXPECT_EQ(logged("acct_e"), 1);  // the hold (its deposit is older than the log keeps)
  ASSERT_TRUE(store_->Write(Hold("acct_f", 5, "op_f2")).ok());
  EXPECT_EQ(BalancesOf("acct_f"), (Balances{1000, 0, 15}));
  ExpectConserved();
}

// Batch numbers that go back (a database restored, or failed over to a standby that was behind,
// while the gateways ran on) say nothing of what changed since a writer's last batch: it forgets
// what it kept. Here the sequence is set back behind the stores' backs, the other store moves
// money on acct_b in a batch numbered below this store's last, and this store's next hold on
// acct_b must start from the database.
TEST_P(StoreConformance, AWriterWhoseBatchNumbersWentBackForgetsWhatItKept) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "only PostgreSQL's writer keeps balances";
  AddAccount("acct_b", 1000);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_->Write(Hold("acct_b", 5, "op_b" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(RunBehindTheStore("SELECT setval('writer_batches', 1)").ok());
  ASSERT_TRUE((*other)->Write(Hold("acct_b", 5, "op_b_other")).ok());
  ASSERT_TRUE(store_->Write(Hold("acct_b", 5, "op_b5")).ok());
  EXPECT_EQ(BalancesOf("acct_b"), (Balances{1000, 0, 35}));
  ExpectConserved();
}

// Issue 40: a PostgreSQL writer whose next batch is likely (decisions wait already, or the batch
// had several) begins it in its COMMIT's round trip (BEGIN, the writers' lock if free, the
// batch's number), so alone on its database it pays one round trip a batch, not two. Here
// decision A holds its batch open until B is queued, and B its own until C is: A's batch is its
// start and its commit, B's and C's only their commits (four round trips for three batches; six
// without). Tests below: a start let go, the lock held by another gateway, and a start that fails
// after its COMMIT.
TEST_P(StoreConformance, AWriterBeginsItsNextBatchInItsCommitsRoundTrip) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "PostgreSQL's writer only";
  AddAccount("acct_p", 1000);
  auto hold = [](const std::string& op) { return Hold("acct_p", 10, op); };
  const StoreStats before = store_->Stats();
  std::promise<void> a_go, b_go;
  HeldOpen a = QueueHeldOpen(hold("op_pa"), a_go.get_future().share());
  a.running.wait();
  HeldOpen b = QueueHeldOpen(hold("op_pb"), b_go.get_future().share());
  a_go.set_value();
  b.running.wait();
  auto c = Queue(*store_, hold("op_pc"));
  b_go.set_value();
  EXPECT_TRUE(a.outcome.get().ok());
  EXPECT_TRUE(b.outcome.get().ok());
  EXPECT_TRUE(c.get().ok());
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.commits - before.commits, 3u);
  EXPECT_EQ(after.writer_round_trips - before.writer_round_trips, 4u);
  EXPECT_EQ(BalancesOf("acct_p"), (Balances{1000, 0, 30}));
}

// A writer alone on its database (32 batches in a row with no other gateway's in between) whose
// batch had several decisions begins the next behind its COMMIT even though none is queued yet;
// when none comes within a millisecond it lets go of it (a ROLLBACK, one more round trip), lock
// and all, and another gateway's batch goes at once. Here A holds its batch open until B and C
// are queued: A's batch costs two round trips, B and C's one, and the one begun behind it for
// nothing one.
TEST_P(StoreConformance, AWriterLetsGoOfABatchNoDecisionCameFor) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "PostgreSQL's writer only";
  AddAccount("acct_g", 1000);
  auto hold = [](const std::string& op) { return Hold("acct_g", 10, op); };
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(Write(hold("op_w" + std::to_string(i))).ok()) << i;
  auto admin = pg::Connection::Open(url_, 10);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  auto numbers_taken = [&]() -> int64_t {
    auto last = (*admin)->Query("SELECT last_value FROM writer_batches");
    EXPECT_TRUE(last.ok()) << last.status().ToString();
    return last.ok() ? last->Int(0, 0) : -1;
  };
  const int64_t numbers_before = numbers_taken();
  const StoreStats before = store_->Stats();
  BatchBehindAHeldOpenOne(hold("op_ga"), hold("op_gb"), hold("op_gc"));
  // Until the writer let go: the lock free and the ROLLBACK counted (at most five seconds).
  bool held = true;
  uint64_t round_trips = 0;
  for (int tries = 0; tries < 500; ++tries) {
    held = WritersLockHeld(**admin);
    round_trips = store_->Stats().writer_round_trips - before.writer_round_trips;
    if (!held && round_trips == 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(held);
  EXPECT_EQ(round_trips, 4u);
  EXPECT_EQ(store_->Stats().commits - before.commits, 2u);
  // The batch let go of had taken the lock and a number: three numbers for two batches.
  EXPECT_EQ(numbers_taken() - numbers_before, 3);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE((*other)->Write(hold("op_gd")).ok());
  EXPECT_EQ(BalancesOf("acct_g"), (Balances{1000, 0, 440}));
}

// Beside another gateway a writer begins a next batch behind its COMMIT only for decisions already
// queued: a lock held for decisions that may not come would keep the other gateway waiting. Here
// the two gateways' batches alternate first; then A holds its batch open until B and C are queued
// (A's batch begins theirs: two round trips, theirs one), nothing is queued behind B and C's, and
// D, written after, begins its own (two): five. Begun on the guess, D would have taken four (it
// came in time) or six (it came after the let-go).
TEST_P(StoreConformance, BesideAnotherGatewayAWriterBeginsOnlyBatchesAlreadyQueued) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "PostgreSQL's writer only";
  AddAccount("acct_n", 1000);
  auto hold = [](const std::string& op) { return Hold("acct_n", 10, op); };
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (int i = 0; i < 40; ++i) {
    Store& store = i % 2 == 0 ? *store_ : **other;
    ASSERT_TRUE(store.Write(hold("op_n" + std::to_string(i))).ok()) << i;
  }
  const StoreStats before = store_->Stats();
  BatchBehindAHeldOpenOne(hold("op_na"), hold("op_nb"), hold("op_nc"));
  EXPECT_TRUE(Write(hold("op_nd")).ok());
  EXPECT_EQ(store_->Stats().writer_round_trips - before.writer_round_trips, 5u);
  EXPECT_EQ(BalancesOf("acct_n"), (Balances{1000, 0, 440}));
}

// The next batch begun behind a COMMIT takes the writers' lock only if it is free: a gateway whose
// batch waits for it gets it first (PostgreSQL grants a released lock to its waiter), and the next
// batch then waits for it in a round trip of its own, and reads the balances that gateway wrote
// in a statement after the lock, never before: its moves start from them, and the sums hold. The
// other gateway's batch (D) is held open once it has the lock, so that it cannot have ended, and
// let the lock go, before the start behind A's COMMIT tries it.
TEST_P(StoreConformance, ABatchBegunBehindACommitLetsAWaitingGatewayGoFirst) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "PostgreSQL's writer only";
  AddAccount("acct_q", 1000);
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto hold = [](const std::string& op) { return Hold("acct_q", 10, op); };
  // Both writers keep acct_q's balances.
  ASSERT_TRUE(store_->Write(hold("op_q0")).ok());
  ASSERT_TRUE((*other)->Write(hold("op_q1")).ok());
  auto admin = pg::Connection::Open(url_, 10);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const StoreStats before = store_->Stats();
  std::promise<void> go;
  HeldOpen a = QueueHeldOpen(hold("op_qa"), go.get_future().share());
  a.running.wait();
  auto b = Queue(*store_, hold("op_qb"));
  std::promise<void> go_d;
  HeldOpen d = QueueHeldOpen(**other, hold("op_qd"), go_d.get_future().share());
  ASSERT_TRUE(AwaitWritersLockWaiters(**admin, 1)) << "the other writer never waited for the lock";
  go.set_value();
  EXPECT_TRUE(a.outcome.get().ok());
  // D's batch has the lock; B's waits for it.
  d.running.wait();
  EXPECT_TRUE(AwaitWritersLockWaiters(**admin, 1)) << "B's batch never waited for the lock";
  go_d.set_value();
  EXPECT_TRUE(d.outcome.get().ok());
  EXPECT_TRUE(b.get().ok());
  // A's batch two round trips; B's began without the lock: one to wait for it, one to commit.
  EXPECT_EQ(store_->Stats().writer_round_trips - before.writer_round_trips, 4u);
  EXPECT_EQ(BalancesOf("acct_q"), (Balances{1000, 0, 50}));
}

// A batch that waits for the writers' lock (another gateway's batch holds it) takes, once it has
// it, the decisions that came while it waited: one turn at the lock for all of them, not one for
// the first and another for the rest. Here a session of the test's holds the lock, the store's
// writer begins a batch of one hold and waits, three more holds come; all four commit together.
TEST_P(StoreConformance, DecisionsThatComeWhileABatchWaitsForTheLockJoinIt) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "only PostgreSQL's writers share a lock";
  AddAccount("acct_w", 1000);
  auto admin = pg::Connection::Open(url_, 10);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->Run("BEGIN").ok());
  ASSERT_TRUE((*admin)->Query("SELECT pg_advisory_xact_lock(1095778649, 1)").ok());
  const StoreStats before = store_->Stats();
  std::vector<std::future<Status>> holds;
  holds.push_back(Queue(*store_, Hold("acct_w", 10, "op_w0")));
  ASSERT_TRUE(AwaitWritersLockWaiters(**admin, 1)) << "the writer never waited for the lock";
  for (int i = 1; i < 4; ++i) {
    holds.push_back(Queue(*store_, Hold("acct_w", 10, "op_w" + std::to_string(i))));
  }
  ASSERT_TRUE((*admin)->Run("COMMIT").ok());
  for (auto& hold : holds) EXPECT_TRUE(hold.get().ok());
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.commits - before.commits, 1u);
  EXPECT_EQ(after.decisions - before.decisions, 4u);
  EXPECT_EQ(BalancesOf("acct_w"), (Balances{1000, 0, 40}));
}

// What follows a COMMIT in its round trip cannot undo it: when the next batch's start fails there
// (here the batches' sequence has run out), the committed batch is reported done, the next batch
// begins again from nothing (and fails the same way, changing nothing), and once the sequence is
// back every decision after it goes through.
TEST_P(StoreConformance, AStartThatFailsBehindACommitLeavesTheCommitStanding) {
  if (GetParam().name != "postgres") GTEST_SKIP() << "PostgreSQL's writer only";
  AddAccount("acct_s", 1000);
  auto hold = [](const std::string& op) { return Hold("acct_s", 10, op); };
  // The sequence gives one more number: A's batch's.
  ASSERT_TRUE(RunBehindTheStore("DO $$ BEGIN EXECUTE format('ALTER SEQUENCE writer_batches "
                                "MAXVALUE %s', (SELECT last_value + 1 FROM writer_batches)); "
                                "END $$")
                  .ok());
  std::promise<void> queued;
  HeldOpen a = QueueHeldOpen(hold("op_sa"), queued.get_future().share());
  a.running.wait();
  auto b = Queue(*store_, hold("op_sb"));
  queued.set_value();
  Status committed = a.outcome.get();
  EXPECT_TRUE(committed.ok()) << committed.ToString();
  Status refused = b.get();
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(BalancesOf("acct_s"), (Balances{1000, 0, 10}));  // A's hold, nothing of B's
  ASSERT_TRUE(RunBehindTheStore("ALTER SEQUENCE writer_batches NO MAXVALUE").ok());
  EXPECT_TRUE(Write(hold("op_sc")).ok());
  EXPECT_EQ(BalancesOf("acct_s"), (Balances{1000, 0, 20}));
}

// Issue 40: the writer says where its time went (agentpay_store_writer_microseconds_total): running
// decisions, committing, syncing (SQLite only: PostgreSQL's server syncs inside COMMIT), running
// completions. Each phase is a part of the writer's own time, so together they never exceed the
// time that passed. It also says what its commits wrote to the WAL
// (agentpay_store_wal_bytes_total).
TEST_P(StoreConformance, TheWriterSaysWhereItsTimeWent) {
  AddAccount("acct_w", 1000);
  const StoreStats before = store_->Stats();
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store_
                    ->Write([&](Transaction& tx) -> Status {
                      auto moved =
                          tx.Move("acct_w", MoveKind::kHold, 5, "op_w" + std::to_string(i), 7);
                      return moved.ok() ? Status::Ok() : moved.status();
                    })
                    .ok());
  }
  const auto elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
  const StoreStats after = store_->Stats();
  const uint64_t decide = after.writer_decide_ns - before.writer_decide_ns;
  const uint64_t commit = after.writer_commit_ns - before.writer_commit_ns;
  const uint64_t sync = after.writer_sync_ns - before.writer_sync_ns;
  const uint64_t complete = after.writer_complete_ns - before.writer_complete_ns;
  EXPECT_GT(decide, 0u);
  EXPECT_GT(commit + sync, 0u);
  if (GetParam().name == "postgres") {
    EXPECT_EQ(sync, 0u);
  }
  EXPECT_LE(decide + commit + sync + complete, static_cast<uint64_t>(elapsed_ns));
  EXPECT_EQ(BalancesOf("acct_w"), (Balances{1000, 0, 50}));
  // And what its commits wrote to SQLite's WAL: every page a commit changed in full, with its
  // 24-byte frame header (4 KiB pages), so at least a frame each and no more than 16 (an account
  // row, a posting, and the index pages above them). PostgreSQL counts its WAL itself: 0 here.
  const uint64_t wal = after.wal_bytes - before.wal_bytes;
  constexpr uint64_t kFrame = 4096 + 24;
  if (GetParam().name == "postgres") {
    EXPECT_EQ(wal, 0u);
  } else {
    EXPECT_GE(wal, 10 * kFrame);
    EXPECT_LE(wal, 10 * 16 * kFrame + 32);  // (+ the WAL's header, had it started again)
  }
}

TEST_P(StoreConformance, FailedDecisionRollsBackOnlyItself) {
  AddAccount("acct_r", 100);
  std::vector<std::thread> threads;
  std::atomic<int> committed{0};
  for (int i = 0; i < 40; ++i) {
    threads.emplace_back([&, i] {
      Status status = Write([&](Transaction& tx) -> Status {
        auto moved = tx.Move("acct_r", MoveKind::kHold, 1, "op_" + std::to_string(i), 5);
        if (!moved.ok()) return moved.status();
        if (Status s =
                tx.AppendEvent({"op_" + std::to_string(i), 5, TraceActor::kGateway, "hold", ""});
            !s.ok()) {
          return s;
        }
        // Every odd decision changes its mind after writing: none of its writes may survive.
        if (i % 2 == 1) return Rollback();
        return Status::Ok();
      });
      if (status.ok()) ++committed;
      if (i % 2 == 1) {
        EXPECT_TRUE(IsRollback(status));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(committed.load(), 20);
  EXPECT_EQ(BalancesOf("acct_r"), (Balances{100, 0, 20}));
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    for (int i = 0; i < 40; ++i) {
      auto events = tx.ListEvents("op_" + std::to_string(i));
      EXPECT_EQ(events->size(), i % 2 == 0 ? 1u : 0u) << i;
    }
    return Status::Ok();
  }).ok());
}

TEST_P(StoreConformance, EveryAcknowledgedWriteWaitedForASync) {
  // Sequential writes cannot share a sync: each is acknowledged only after one that covers it.
  const uint64_t before = store_->Stats().durability_syncs;
  for (int i = 0; i < 5; ++i) AddAccount("acct_sync" + std::to_string(i), 1);
  EXPECT_GE(store_->Stats().durability_syncs - before, 5u);
  // Concurrent writes may share syncs (group commit), but none is acknowledged without one.
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) {
    store_->WriteAsync([](Transaction&) { return Status::Ok(); },
                       [&](Status status) {
                         EXPECT_TRUE(status.ok());
                         ++done;
                       });
  }
  while (done.load() < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(store_->Stats().durability_syncs, before + 5);
}

// A decision's closures are let go once its completion has run, without waiting for the next
// decision: they hold what its caller holds (a request, its body, a connection), and an idle
// writer kept the last batch's alive until more work came (found by security.body_memory).
TEST_P(StoreConformance, AFinishedDecisionKeepsNothingOfItsCaller) {
  auto held = std::make_shared<int>(0);
  std::atomic<bool> done{false};
  store_->WriteAsync([held](Transaction&) { return Status::Ok(); },
                     [held, &done](Status status) {
                       EXPECT_TRUE(status.ok());
                       done = true;
                     });
  for (int i = 0; i < 5000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done);
  for (int i = 0; i < 5000 && held.use_count() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(held.use_count(), 1) << "the writer still holds the decision's closures";
}

TEST_P(StoreConformance, DataSurvivesReopen) {
  AddAccount("acct_d", 77);
  store_.reset();
  auto reopened = OpenStore(url_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(*reopened);
  EXPECT_EQ(BalancesOf("acct_d"), (Balances{77, 0, 0}));
}

// One decision that writes megabytes (stored answers of up to 1 MiB each are allowed): every byte
// of it is readable at once, from another connection, and after a reopen. (SQLite's unix VFS writes
// at most 128 KiB per call; a writer that gathers WAL writes must split larger runs.)
TEST_P(StoreConformance, ALargeDecisionIsReadableAndSurvivesReopen) {
  std::vector<Operation> ops;
  for (int i = 0; i < 24; ++i) {
    Operation op = SampleOperation("op_big" + std::to_string(i));
    op.response = StoredResponse{200, "application/octet-stream",
                                 std::string(100 * 1024 + i, static_cast<char>('a' + i % 26))};
    ops.push_back(op);
  }
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (const auto& op : ops) {
      if (Status s = tx.InsertOperation(op); !s.ok()) return s;
    }
    return Status::Ok();
  }).ok());
  auto expect_all = [&] {
    ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
      for (const auto& op : ops) {
        auto found = tx.FindOperation(op.id);
        if (!found.ok()) return found.status();
        EXPECT_TRUE(found->has_value()) << op.id;
        if (found->has_value()) {
          EXPECT_EQ((*found)->response, op.response) << op.id;
        }
      }
      return Status::Ok();
    }).ok());
  };
  expect_all();
  store_.reset();
  auto reopened = OpenStore(url_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(*reopened);
  expect_all();
}

TEST_P(StoreConformance, ReadsDoNotWrite) {
  AddAccount("acct_ro", 5);
  Status status = Read([&](Transaction& tx) -> Status {
    auto moved = tx.Move("acct_ro", MoveKind::kHold, 1, "", 1);
    return moved.ok() ? Status::Ok() : moved.status();
  });
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(BalancesOf("acct_ro"), (Balances{5, 0, 0}));
}

TEST_P(StoreConformance, ExpiredHoldsAlertsAndPostings) {
  AddAccount("acct_h", 100);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (int i = 0; i < 3; ++i) {
      Operation op = SampleOperation("op_h" + std::to_string(i));
      op.hold_expires_ms = 1000 + i;
      if (i == 2) op.settlement = Settlement::kSettled;  // not held: never listed
      if (Status s = tx.InsertOperation(op); !s.ok()) return s;
    }
    if (auto moved = tx.Move("acct_h", MoveKind::kHold, 5, "op_h0", 7); !moved.ok()) {
      return moved.status();
    }
    return tx.InsertAlert({"alert_1", "op_h0", "hold_expired_after_possible_work", "d", 50,
                           std::nullopt, "", ""});
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto expired = tx.ListExpiredHolds(1000, 10);
    EXPECT_EQ(expired->size(), 1u);
    auto more = tx.ListExpiredHolds(5000, 10);
    EXPECT_EQ(more->size(), 2u);
    EXPECT_EQ((*more)[0].id, "op_h0");  // oldest expiry first
    EXPECT_EQ(tx.ListExpiredHolds(5000, 1)->size(), 1u);
    auto alerts = tx.ListAlerts(10);
    EXPECT_EQ(alerts->size(), 1u);
    EXPECT_EQ((*alerts)[0].operation_id, "op_h0");
    EXPECT_FALSE((*alerts)[0].resolved_ms.has_value());
    auto postings = tx.ListPostings("op_h0");
    EXPECT_EQ(postings->size(), 1u);
    EXPECT_EQ((*postings)[0].kind, MoveKind::kHold);
    EXPECT_EQ((*postings)[0].debit, "wallet:acct_h");
    EXPECT_EQ((*postings)[0].credit, "hold:acct_h");
    EXPECT_EQ((*postings)[0].amount, 5);
    return Status::Ok();
  }).ok());
  // Duplicate alert ids are refused.
  EXPECT_FALSE(Write([&](Transaction& tx) {
    return tx.InsertAlert({"alert_1", "op_h1", "k", "d", 51, std::nullopt, "", ""});
  }).ok());
}

TEST_P(StoreConformance, AlertsResolveOnceAndListPerOperation) {
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (auto [id, op, at] : {std::tuple{"alert_b", "op_r", 20}, std::tuple{"alert_a", "op_r", 10},
                              std::tuple{"alert_c", "op_other", 15}}) {
      if (Status s = tx.InsertAlert({id, op, "k", "d", at, std::nullopt, "", ""}); !s.ok()) {
        return s;
      }
    }
    return Status::Ok();
  }).ok());
  Alert resolved{"alert_a", "op_r", "k", "d", 10, 99, "written_off", "checked with the seller"};
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto first = tx.ResolveAlert(resolved);
    EXPECT_TRUE(first.ok() && *first);
    Alert other = resolved;
    other.resolved_ms = 100;
    other.resolution = "refunded";
    auto second = tx.ResolveAlert(other);  // already resolved: the first resolution stays
    EXPECT_TRUE(second.ok() && !*second);
    auto missing = tx.ResolveAlert(Alert{"alert_none", "op_r", "k", "d", 1, 5, "no_action", ""});
    EXPECT_TRUE(missing.ok() && !*missing);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto alerts = tx.ListAlertsOf("op_r");
    EXPECT_TRUE(alerts.ok());
    EXPECT_EQ(alerts->size(), 2u);
    EXPECT_EQ((*alerts)[0], resolved);  // oldest first
    EXPECT_EQ((*alerts)[1].id, "alert_b");
    EXPECT_FALSE((*alerts)[1].resolved_ms.has_value());
    EXPECT_EQ((*alerts)[1].note, "");
    EXPECT_TRUE(tx.ListAlertsOf("op_none")->empty());
    EXPECT_EQ(tx.ListAlerts(10)->size(), 3u);
    return Status::Ok();
  }).ok());
}

// A refund returns captured money from revenue to the wallet with two postings; the audit (run by
// TearDown too) recomputes captured as captures less refunds, and the sums still match deposits.
TEST_P(StoreConformance, RefundReturnsCapturedMoneyThroughTheLedger) {
  AddAccount("acct_r", 1000);
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (MoveKind kind : {MoveKind::kHold, MoveKind::kCapture}) {
      auto moved = tx.Move("acct_r", kind, 300, "op_ref", 5);
      if (!moved.ok()) return moved.status();
      EXPECT_EQ(*moved, MoveOutcome::kOk);
    }
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto too_much = tx.Move("acct_r", MoveKind::kRefund, 301, "op_ref", 6);
    EXPECT_TRUE(too_much.ok() && *too_much == MoveOutcome::kNotCaptured);
    auto refunded = tx.Move("acct_r", MoveKind::kRefund, 300, "op_ref", 6);
    EXPECT_TRUE(refunded.ok() && *refunded == MoveOutcome::kOk);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(BalancesOf("acct_r"), (Balances{1000, 0, 0}));
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto postings = tx.ListPostings("op_ref");
    EXPECT_EQ(postings->size(), 3u);
    EXPECT_EQ((*postings)[2].kind, MoveKind::kRefund);
    EXPECT_EQ((*postings)[2].debit, "revenue");
    EXPECT_EQ((*postings)[2].credit, "wallet:acct_r");
    return Status::Ok();
  }).ok());
  LedgerAudit audit = Audit();
  EXPECT_EQ(audit.revenue_total, 0);
  EXPECT_EQ(audit.external_total, -1000);
  ASSERT_EQ(audit.accounts.size(), 1u);
  EXPECT_EQ(audit.accounts[0].from_ledger, (Balances{1000, 0, 0}));
  EXPECT_EQ(audit.accounts[0].wallet_net, 1000);
}

// Retention: only kept results past their retention are listed; pruning drops the body and the
// key record that still names the operation, never a newer operation's key.
TEST_P(StoreConformance, ExpiredResultsArePrunedWithTheirKeys) {
  auto final_op = [](const std::string& id, int64_t retained_until_ms) {
    Operation op = SampleOperation(id);
    op.settlement = Settlement::kSettled;
    op.fulfillment = Fulfillment::kSucceeded;
    op.response = StoredResponse{200, "application/json", "{}"};
    op.retained_until_ms = retained_until_ms;
    return op;
  };
  Operation old_op = final_op("op_old", 100), newer = final_op("op_new", 500);
  Operation reused = final_op("op_reused", 90);  // its key now names another operation
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    for (const Operation* op : {&old_op, &newer, &reused}) {
      if (Status s = tx.InsertOperation(*op); !s.ok()) return s;
    }
    if (Status s = tx.InsertOperation(SampleOperation("op_open")); !s.ok()) return s;  // no result
    for (auto [key, op] : {std::pair{old_op.idempotency_key, "op_old"},
                           std::pair{newer.idempotency_key, "op_new"},
                           std::pair{reused.idempotency_key, "op_successor"}}) {
      auto inserted = tx.InsertKey({"account:a", key, op, "fp", 1});
      if (!inserted.ok()) return inserted.status();
    }
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_EQ(*tx.ListExpiredResults(99, 10), (std::vector<std::string>{"op_reused"}));
    EXPECT_EQ(*tx.ListExpiredResults(100, 10), (std::vector<std::string>{"op_reused", "op_old"}));
    EXPECT_EQ(tx.ListExpiredResults(100, 1)->size(), 1u);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto pruned = tx.PruneResult(old_op);
    EXPECT_TRUE(pruned.ok() && pruned->pruned && pruned->key_deleted);
    auto again = tx.PruneResult(old_op);  // already pruned: nothing changes
    EXPECT_TRUE(again.ok() && !again->pruned && !again->key_deleted);
    auto kept_key = tx.PruneResult(reused);
    EXPECT_TRUE(kept_key.ok() && kept_key->pruned && !kept_key->key_deleted);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_TRUE(tx.ListExpiredResults(1000, 10)->size() == 1u);  // only op_new is left
    EXPECT_FALSE(tx.FindKey("account:a", old_op.idempotency_key)->has_value());
    auto successor = tx.FindKey("account:a", reused.idempotency_key);
    EXPECT_TRUE(successor->has_value() && (*successor)->operation_id == "op_successor");
    auto row = tx.FindOperation("op_old");
    EXPECT_TRUE(row->has_value());
    EXPECT_EQ((*row)->fulfillment, Fulfillment::kSucceeded);
    EXPECT_EQ((*row)->response->status, 200);
    EXPECT_EQ((*row)->response->body, "");
    return Status::Ok();
  }).ok());
}

X402PaymentRecord SamplePayment(const std::string& operation_id, const std::string& nonce_hex) {
  X402PaymentRecord record;
  record.operation_id = operation_id;
  record.authorization = Authorization{"0x" + std::string(40, 'a'), nonce_hex, 0, 1800000000, 1000};
  record.pay_to = "0x" + std::string(40, 'b');
  record.signature_hex = "0x" + std::string(130, 'c');
  record.x402_version = 2;
  return record;
}

TEST_P(StoreConformance, X402PaymentsAreUniquePerAuthorization) {
  const std::string nonce = "0x" + std::string(64, '1');
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto first = tx.InsertX402Payment(SamplePayment("op_x1", nonce));
    EXPECT_TRUE(first.ok() && *first);
    // The same authorization for another operation is refused; another nonce is not.
    auto reused = tx.InsertX402Payment(SamplePayment("op_x2", nonce));
    EXPECT_TRUE(reused.ok() && !*reused);
    auto other = tx.InsertX402Payment(SamplePayment("op_x2", "0x" + std::string(64, '2')));
    EXPECT_TRUE(other.ok() && *other);
    return Status::Ok();
  }).ok());
  X402PaymentRecord submitted = SamplePayment("op_x1", nonce);
  submitted.tx_hash = "0x" + std::string(64, 'd');
  submitted.raw_tx_hex = "0x02f8";
  submitted.relayer_nonce = 7;
  submitted.submitted_ms = 123;
  submitted.broadcasts = 1;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateX402Payment(submitted); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    auto found = tx.FindX402Payment("op_x1");
    EXPECT_TRUE(found.ok() && found->has_value());
    EXPECT_EQ(**found, submitted);
    EXPECT_TRUE((*found)->submitted());
    auto second = tx.FindX402Payment("op_x2");
    EXPECT_FALSE((*second)->submitted());
    EXPECT_FALSE(tx.FindX402Payment("op_none")->has_value());
    // Found by its authorization: payer and nonce, both as signed.
    auto by_authorization = tx.FindX402PaymentByAuthorization("0x" + std::string(40, 'a'), nonce);
    EXPECT_TRUE(by_authorization.ok() && by_authorization->has_value());
    EXPECT_EQ((*by_authorization)->operation_id, "op_x1");
    EXPECT_FALSE(tx.FindX402PaymentByAuthorization("0x" + std::string(40, 'a'),
                                                   "0x" + std::string(64, '3'))
                     ->has_value());
    EXPECT_FALSE(
        tx.FindX402PaymentByAuthorization("0x" + std::string(40, 'e'), nonce)->has_value());
    return Status::Ok();
  }).ok());
  // Updating a payment that does not exist is an error, not a silent no-op.
  EXPECT_FALSE(Write([&](Transaction& tx) {
    return tx.UpdateX402Payment(SamplePayment("op_missing", nonce));
  }).ok());
  // A replacement keeps the transactions it replaced, oldest first, beside the current one.
  X402PaymentRecord replaced = submitted;
  replaced.replaced_raw_txs = {"0x02f8", "0x02f9aa"};
  replaced.raw_tx_hex = "0x02fabb";
  replaced.tx_hash = "0x" + std::string(64, 'e');
  replaced.broadcasts = 3;
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.UpdateX402Payment(replaced); }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto found = tx.FindX402Payment("op_x1");
                EXPECT_TRUE(found.ok() && found->has_value());
                EXPECT_EQ(**found, replaced);
                auto by_nonce = tx.ListX402PaymentsAtRelayerNonce("", 7);
                EXPECT_TRUE(by_nonce.ok() && by_nonce->size() == 1);
                EXPECT_EQ(by_nonce->at(0).replaced_raw_txs, replaced.replaced_raw_txs);
                return Status::Ok();
              }).ok());
}

// A batch's members (--settle-batch-max) share one transaction: its bytes and relayer nonce. The
// audit lists a transaction as shared only when its payments disagree on those, or there are more
// than a batch holds; and the payments at one relayer nonce are all of the batch's members.
TEST_P(StoreConformance, ABatchsMembersShareTheirTransactionWithoutAViolation) {
  const std::string hash = "0x" + std::string(64, 'f');
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                for (int i = 0; i < 3; ++i) {
                  const std::string id = "op_b" + std::to_string(i);
                  X402PaymentRecord payment =
                      SamplePayment(id, "0x" + std::string(63, '0') + std::to_string(i + 1));
                  auto inserted = tx.InsertX402Payment(payment);
                  if (!inserted.ok()) return inserted.status();
                  payment.tx_hash = hash;
                  payment.relayer_nonce = 9;
                  payment.submitted_ms = 100 + i;
                  if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
                }
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto shared = tx.ListSharedPayments(10);
                EXPECT_TRUE(shared.ok());
                EXPECT_TRUE(shared->empty()) << (*shared)[0].what;
                auto members = tx.ListX402PaymentsAtRelayerNonce("", 9);
                EXPECT_TRUE(members.ok());
                EXPECT_EQ(members->size(), 3u);
                for (size_t i = 0; i < members->size(); ++i) {
                  EXPECT_EQ((*members)[i].operation_id, "op_b" + std::to_string(i));
                }
                EXPECT_TRUE(tx.ListX402PaymentsAtRelayerNonce("", 10)->empty());
                return Status::Ok();
              }).ok());
}

// The books audit's reads (store.h): each operation with what names it, repeated charges of one
// key, payments sharing an authorization or a transaction, settled payments for the chain check.
TEST_P(StoreConformance, AuditReadsTheBooks) {
  AddAccount("a", 1000);
  auto wallet_op = [](const std::string& id, const std::string& key, int64_t created_ms) {
    Operation op = SampleOperation(id);
    op.idempotency_key = key;
    op.created_ms = created_ms;
    return op;
  };
  // op_1 and op_2: one key charged twice (op_1 remembered forever); op_3: held, its hold
  // released by the sweeper once with an alert, then held again.
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                for (const auto& [id, created] :
                     {std::pair<std::string, int64_t>{"op_1", 10}, {"op_2", 20}}) {
                  Operation op = wallet_op(id, "k1", created);
                  op.settlement = Settlement::kSettled;
                  op.fulfillment = Fulfillment::kSucceeded;
                  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
                  for (MoveKind kind : {MoveKind::kHold, MoveKind::kCapture}) {
                    auto moved = tx.Move("a", kind, 7, id, created);
                    if (!moved.ok()) return moved.status();
                  }
                }
                Operation held = wallet_op("op_3", "k3", 30);
                if (Status s = tx.InsertOperation(held); !s.ok()) return s;
                for (MoveKind kind : {MoveKind::kHold, MoveKind::kRelease, MoveKind::kHold}) {
                  auto moved = tx.Move("a", kind, 7, "op_3", 30);
                  if (!moved.ok()) return moved.status();
                }
                if (Status s =
                        tx.AppendEvent({"op_3", 31, TraceActor::kWorker, "hold_expired", "r"});
                    !s.ok())
                  return s;
                if (Status s =
                        tx.InsertAlert({"alert_1", "op_3", "hold_expired_after_possible_work", "r",
                                        31, std::nullopt, "", ""});
                    !s.ok()) {
                  return s;
                }
                // x402: op_x1 settled, op_x2 not, both naming one transaction hash with
                // different bytes (no batch: a batch's members share its bytes and nonce).
                for (const char* id : {"op_x1", "op_x2"}) {
                  Operation op = wallet_op(id, id, 40);
                  op.principal = "x402:0x" + std::string(40, 'a');
                  op.settlement =
                      std::string(id) == "op_x1" ? Settlement::kSettled : Settlement::kSubmitted;
                  if (Status s = tx.InsertOperation(op); !s.ok()) return s;
                  X402PaymentRecord payment = SamplePayment(
                      id, "0x" + std::string(63, '0') + (std::string(id) == "op_x1" ? "1" : "2"));
                  auto inserted = tx.InsertX402Payment(payment);
                  if (!inserted.ok()) return inserted.status();
                  payment.tx_hash = "0x" + std::string(64, 'd');
                  if (std::string(id) == "op_x2") payment.raw_tx_hex = "0x02ff";
                  if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
                }
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                auto first = tx.ListOperationBooks("", 2);
                EXPECT_TRUE(first.ok());
                EXPECT_EQ(first->size(), 2u);
                auto rest = tx.ListOperationBooks(first->back().id, 10);
                EXPECT_TRUE(rest.ok());
                std::map<std::string, OperationBooks> books;
                for (const auto* page : {&*first, &*rest}) {
                  for (const OperationBooks& op : *page) books[op.id] = op;
                }
                EXPECT_EQ(books.size(), 5u);
                const OperationBooks& charged = books["op_1"];
                EXPECT_EQ(charged.settlement, Settlement::kSettled);
                EXPECT_EQ(charged.held, 7);
                EXPECT_EQ(charged.captured, 7);
                EXPECT_EQ(charged.captures, 1);
                EXPECT_EQ(charged.released, 0);
                EXPECT_EQ(charged.alerts, 0);
                const OperationBooks& held = books["op_3"];
                EXPECT_EQ(held.held, 14);
                EXPECT_EQ(held.released, 7);
                EXPECT_EQ(held.alerts, 1);
                EXPECT_EQ(held.expiry_alerts, 1);
                EXPECT_EQ(held.sweeper_releases, 1);
                EXPECT_EQ(held.hold_expires_ms, SampleOperation("op_3").hold_expires_ms);

                auto repeats = tx.ListRepeatedCharges(10);
                EXPECT_TRUE(repeats.ok());
                EXPECT_EQ(repeats->size(), 1u);
                if (repeats->size() == 1) {
                  EXPECT_EQ((*repeats)[0].first_id, "op_1");
                  EXPECT_EQ((*repeats)[0].second_id, "op_2");
                  EXPECT_EQ((*repeats)[0].idempotency_key, "k1");
                  EXPECT_EQ((*repeats)[0].second_created_ms, 20);
                }
                auto shared = tx.ListSharedPayments(10);
                EXPECT_TRUE(shared.ok());
                EXPECT_EQ(shared->size(), 1u);
                if (shared->size() == 1) {
                  EXPECT_EQ((*shared)[0].what, "transaction 0x" + std::string(64, 'd'));
                  EXPECT_EQ((*shared)[0].operations, 2);
                }
                auto settled = tx.ListSettledPayments("", 10);
                EXPECT_TRUE(settled.ok());
                EXPECT_EQ(settled->size(), 1u);
                if (settled->size() == 1) {
                  EXPECT_EQ((*settled)[0].operation_id, "op_x1");
                  EXPECT_EQ((*settled)[0].payer, "0x" + std::string(40, 'a'));
                  EXPECT_EQ((*settled)[0].value, 1000);
                  EXPECT_EQ((*settled)[0].tx_hash, "0x" + std::string(64, 'd'));
                  EXPECT_EQ((*settled)[0].nonce, "0x" + std::string(63, '0') + "1");
                }
                EXPECT_TRUE(tx.ListSettledPayments("op_x1", 10)->empty());
                return Status::Ok();
              }).ok());
  // Once op_1 is forgotten before op_2 began, the key's second charge is no repeat.
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
                auto op = tx.FindOperation("op_1");
                if (!op.ok()) return op.status();
                Operation forgotten = **op;
                forgotten.retained_until_ms = 20;
                return tx.UpdateOperation(forgotten);
              }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                EXPECT_TRUE(tx.ListRepeatedCharges(10)->empty());
                return Status::Ok();
              }).ok());
}

TEST_P(StoreConformance, RecentSettlementsAreListedNewestBlockFirst) {
  // Three settled payments in blocks 7, 9, 9 (seen at 100, 200, 300) and one not settled.
  struct Settled {
    std::string id;
    int64_t block, at_ms;
  };
  const std::vector<Settled> settled = {{"op_s1", 7, 100}, {"op_s3", 9, 300}, {"op_s2", 9, 200}};
  auto store_them = [&](Transaction& tx) -> Status {
    for (size_t i = 0; i < settled.size(); ++i) {
      X402PaymentRecord record =
          SamplePayment(settled[i].id, "0x" + std::string(63, '0') + char('1' + i));
      auto inserted = tx.InsertX402Payment(record);
      if (!inserted.ok()) return inserted.status();
      record.tx_hash = "0x" + std::string(64, 'd');
      record.raw_tx_hex = "0x02f8";
      record.settled_block = settled[i].block;
      record.settled_block_hash = "0x" + std::string(64, char('0' + settled[i].block));
      record.settled_ms = settled[i].at_ms;
      if (Status s = tx.UpdateX402Payment(record); !s.ok()) return s;
    }
    auto unsettled = tx.InsertX402Payment(SamplePayment("op_s4", "0x" + std::string(64, '9')));
    return unsettled.ok() ? Status::Ok() : unsettled.status();
  };
  ASSERT_TRUE(Write(store_them).ok());
  auto check = [&](Transaction& tx) -> Status {
    auto ids = [&](int64_t since, int limit) {
      std::vector<std::string> out;
      auto listed = tx.ListRecentSettlements(since, limit);
      EXPECT_TRUE(listed.ok());
      for (const X402PaymentRecord& r : *listed) out.push_back(r.operation_id);
      return out;
    };
    EXPECT_EQ(ids(0, 10), (std::vector<std::string>{"op_s3", "op_s2", "op_s1"}));
    EXPECT_EQ(ids(150, 10), (std::vector<std::string>{"op_s3", "op_s2"}));
    EXPECT_EQ(ids(0, 1), (std::vector<std::string>{"op_s3"}));
    EXPECT_EQ(ids(301, 10), std::vector<std::string>{});
    auto first = tx.ListRecentSettlements(0, 1);
    EXPECT_EQ((*first)[0].settled_block, 9);
    EXPECT_EQ((*first)[0].settled_block_hash, "0x" + std::string(64, '9'));
    EXPECT_EQ((*first)[0].settled_ms, 300);
    return Status::Ok();
  };
  ASSERT_TRUE(Read(check).ok());
}

TEST_P(StoreConformance, RelayerNonceIsTakenOnceAndNeverGoesBack) {
  std::vector<int64_t> taken;
  auto take = [&](int64_t floor) {
    ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
      auto nonce = tx.TakeRelayerNonce("0xrelayer", floor);
      if (!nonce.ok()) return nonce.status();
      taken.push_back(*nonce);
      return Status::Ok();
    }).ok());
  };
  take(5);  // first use: the chain's count
  take(0);  // a lagging node does not move it back
  take(3);
  take(10);  // the chain moved ahead (another sender): follow it
  EXPECT_EQ(taken, (std::vector<int64_t>{5, 6, 7, 10}));
  // A rolled-back decision does not consume a nonce.
  EXPECT_FALSE(Write([&](Transaction& tx) -> Status {
    auto nonce = tx.TakeRelayerNonce("0xrelayer", 0);
    EXPECT_EQ(*nonce, 11);
    return Rollback();
  }).ok());
  take(0);
  EXPECT_EQ(taken.back(), 11);
  // Read without taking: the next one, and 0 for a relayer that never took one.
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
                EXPECT_EQ(*tx.NextRelayerNonce("0xrelayer"), 12);
                EXPECT_EQ(*tx.NextRelayerNonce("0xother"), 0);
                return Status::Ok();
              }).ok());
  take(0);
  EXPECT_EQ(taken.back(), 12);
}

// Process liveness (issue 4): a gateway process proves through the store that it is alive, so that
// another process's crash recovery leaves its claims alone.
TEST_P(StoreConformance, InstanceLivenessFollowsTheRegistration) {
  EXPECT_FALSE(*store_->InstanceAlive("gw_never"));
  ASSERT_TRUE(store_->RegisterInstance("gw_one").ok());
  EXPECT_TRUE(*store_->InstanceAlive("gw_one"));
  EXPECT_EQ(store_->RegisterInstance("gw_one").code(), "instance_taken");
  // Another Store on the same database (another gateway process) sees it and cannot take it.
  auto other = OpenStore(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(*(*other)->InstanceAlive("gw_one"));
  EXPECT_EQ((*other)->RegisterInstance("gw_one").code(), "instance_taken");
  ASSERT_TRUE((*other)->RegisterInstance("gw_two").ok());
  EXPECT_TRUE(*store_->InstanceAlive("gw_two"));
  // Released: dead for everyone; destroying a Store ends its registrations.
  ASSERT_TRUE(store_->ReleaseInstance("gw_one").ok());
  EXPECT_FALSE(*store_->InstanceAlive("gw_one"));
  EXPECT_FALSE(*(*other)->InstanceAlive("gw_one"));
  EXPECT_TRUE(store_->ReleaseInstance("gw_one").ok());  // again: nothing to do
  other->reset();
  EXPECT_FALSE(*store_->InstanceAlive("gw_two"));
  // Ids name files (or lock keys): anything but [A-Za-z0-9_-]{1,64} is refused, and never alive.
  for (const std::string& bad :
       std::vector<std::string>{"", "../gw", "gw/x", "gw x", std::string(65, 'a')}) {
    EXPECT_FALSE(store_->RegisterInstance(bad).ok()) << bad;
    EXPECT_FALSE(*store_->InstanceAlive(bad)) << bad;
  }
  ASSERT_TRUE(store_->RegisterInstance("gw_one").ok());  // a released id may be taken again
  EXPECT_TRUE(*store_->InstanceAlive("gw_one"));
}

// The real thing: a process registers, is killed (SIGKILL: nothing of its own runs), and its
// instance is dead as soon as the kernel (SQLite's flock) or the server (PostgreSQL notices the
// closed connection within milliseconds) has dropped what it held: no lease or timeout to wait for.
TEST_P(StoreConformance, InstanceOfAKilledProcessIsDead) {
  // Fork from a single-threaded process: the fixture's store and its threads go first.
  store_.reset();
  int ready[2];
  int hold[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(hold[1]);
    auto store = OpenStore(url_);
    char registered = store.ok() && (*store)->RegisterInstance("gw_child").ok() ? 'y' : 'n';
    if (::write(ready[1], &registered, 1) != 1) ::_exit(2);
    char never = 0;
    while (::read(hold[0], &never, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(hold[0]);
  char registered = 0;
  ASSERT_EQ(::read(ready[0], &registered, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(registered, 'y');
  auto reopened = OpenStore(url_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(*reopened);
  EXPECT_TRUE(*store_->InstanceAlive("gw_child"));
  EXPECT_EQ(store_->RegisterInstance("gw_child").code(), "instance_taken");
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ::close(hold[1]);
  EXPECT_TRUE(WIFSIGNALED(wait_status));
  const auto killed = std::chrono::steady_clock::now();
  while (*store_->InstanceAlive("gw_child") &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(*store_->InstanceAlive("gw_child"));
  EXPECT_FALSE(*store_->InstanceAlive("gw_child"));  // and stays dead
  // Its id is free again (an id is never reused in practice: 64 random bits).
  EXPECT_TRUE(store_->RegisterInstance("gw_child").ok());
}

TEST_P(StoreConformance, ClaimantRoundTrips) {
  Operation op = SampleOperation("op_claimant");
  ASSERT_EQ(op.claimed_by, "gw_t");
  ASSERT_TRUE(Write([&](Transaction& tx) { return tx.InsertOperation(op); }).ok());
  Operation resumed = op;
  resumed.attempts = 2;
  resumed.claimed_by = "gw_other";
  ASSERT_TRUE(Write([&](Transaction& tx) -> Status {
    auto claimed = tx.UpdateClaimedOperation(resumed, 1);
    EXPECT_TRUE(claimed.ok() && *claimed);
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(Read([&](Transaction& tx) -> Status {
    EXPECT_EQ((*tx.FindOperation("op_claimant"))->claimed_by, "gw_other");
    return Status::Ok();
  }).ok());
}

TEST(StoreUrl, PasswordsNeverReachALog) {
  EXPECT_EQ(RedactedStoreUrl("postgresql://gw:s3cret@db.internal:5432/agentpay"),
            "postgresql://gw:***@db.internal:5432/agentpay");
  EXPECT_EQ(RedactedStoreUrl("postgres://gw@db/agentpay?sslmode=require&password=s3cret&x=1"),
            "postgres://gw@db/agentpay?sslmode=require&password=***&x=1");
  EXPECT_EQ(RedactedStoreUrl("postgresql://db/agentpay"), "postgresql://db/agentpay");
  EXPECT_EQ(RedactedStoreUrl("sqlite:./a:b@c.db"), "sqlite:./a:b@c.db");
}

TEST(StoreUrl, AnUnknownSchemeIsRefusedWithoutEchoingIt) {
  auto store = OpenStore("mysql://root:s3cret@db/x");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().error(), ErrorCode::kInvalidConfig);
  EXPECT_EQ(store.status().message().find("s3cret"), std::string::npos);
}

TEST(StoreUrl, AnUnreachableServerIsStoreUnavailable) {
  auto store = OpenStore("postgresql://agentpay:x@127.0.0.1:1/agentpay");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().error(), ErrorCode::kStoreUnavailable) << store.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace agentpay
