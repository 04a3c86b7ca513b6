// The PostgreSQL backend of Store: versioned migrations, one writer connection that commits queued
// decisions together (group commit, each decision in its own savepoint, as SQLite's writer does),
// a bounded pool of read connections, and process liveness through session advisory locks.
//
// Several gateways share one database. Each batch takes a transaction-scoped advisory lock first,
// so that the decisions of all gateways run one batch at a time, as SQLite's writers do: every
// decision reads the latest committed state and no decision's read-then-write can interleave with
// another's, whatever the decision (the constraints, ON CONFLICT inserts and compare-and-set
// updates stay the rules; the lock makes them the only thing a decision must reason about). A
// batch holds the lock from its first statement to its COMMIT; the other gateways' batches grow
// meanwhile, so the lock costs throughput only where one database writer is the limit anyway.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/event_threads.h"
#include "store/backends.h"
#include "store/pg_connection.h"
#include "store/postgres_transaction.h"
#include "store/schema.h"
#include "store/store.h"
#include "store/write_queue.h"

namespace agentpay {
namespace {

// Advisory locks of AgentPay, in the two-int4 key space: (kLockClass, what).
constexpr int kLockClass = 0x41504159;  // "APAY"
constexpr int kWriterLock = 1;
constexpr int kMigrationLock = 2;
// Every statement of ours ends within this, or fails with store_unavailable: a hung server or a
// lock held by a stuck gateway never stalls a decision (or the writer) without bound.
constexpr int kStatementTimeoutMs = 10000;
constexpr int kConnectTimeoutS = 5;
// What takes back a decision whose savepoint is the innermost, and ends that savepoint.
constexpr const char* kUndoDecision[] = {"ROLLBACK TO SAVEPOINT decision",
                                         "RELEASE SAVEPOINT decision"};
// After a failed connection attempt the writer fails batches at once for this long, instead of
// waiting connect_timeout again for every batch while the server is away.
constexpr auto kReconnectPause = std::chrono::milliseconds(500);
// How often a registration whose session was lost is taken again: until then other gateways see
// this one dead and may take over its operations in flight.
constexpr auto kLivenessCheck = std::chrono::milliseconds(200);
// How long a batch begun behind the last COMMIT waits for its decisions (WriteAndCommit) before
// the writer ends it, and with it the writers' lock it may hold.
constexpr auto kLingerAhead = std::chrono::microseconds(1000);
// A writer counts itself alone on its database after this many batches in a row numbered one
// after another (no other gateway's batch in between): only then does it begin a next batch for
// decisions that are not queued yet (WriteAndCommit), since a lock it holds while it waits for
// them is a lock other gateways would wait for.
constexpr uint64_t kAloneAfterBatches = 32;

// Session settings every connection of ours starts with: commits durable before COMMIT returns
// (whatever the server's default), and bounded statements.
const std::string& SessionSetup() {
  static const std::string kSql = "SET synchronous_commit = on; SET statement_timeout = " +
                                  std::to_string(kStatementTimeoutMs) + ";";
  return kSql;
}

// What a reader connection's implicit transactions are (PostgresStore::ReadUnsynced).
const std::string& ReaderSetup() {
  static const std::string kSql =
      "SET default_transaction_isolation = 'repeatable read'; "
      "SET default_transaction_read_only = on;";
  return kSql;
}

Result<std::unique_ptr<pg::Connection>> Connect(const std::string& url) {
  auto conn = pg::Connection::Open(url, kConnectTimeoutS);
  if (!conn.ok()) return conn.status();
  if (Status s = (*conn)->Run(SessionSetup()); !s.ok()) return s;
  return conn;
}

std::string LockSql(const char* function, int what) {
  return std::string("SELECT ") + function + "(" + std::to_string(kLockClass) + ", " +
         std::to_string(what) + ")";
}

Status Migrate(pg::Connection& conn) {
  // One gateway migrates at a time; the others wait here and then find nothing left to do.
  if (Status s = conn.Run(LockSql("pg_advisory_lock", kMigrationLock)); !s.ok()) return s;
  auto migrate = [&]() -> Status {
    if (Status s = conn.Run("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER "
                            "PRIMARY KEY, description TEXT NOT NULL)");
        !s.ok()) {
      return s;
    }
    auto current_rows = conn.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    if (!current_rows.ok()) return current_rows.status();
    const int64_t current = current_rows->Int(0, 0);
    const auto& migrations = Migrations();
    if (current > migrations.back().version) {
      return Status::Error(
          ErrorCode::kStoreTooNew,
          "the database schema is version " + std::to_string(current) + ", newer than this binary");
    }
    for (const auto& migration : migrations) {
      if (migration.version <= current) continue;
      Status status = conn.Run("BEGIN");
      if (status.ok()) status = conn.Run(std::string(migration.postgres));
      if (status.ok()) {
        status = conn.Query("INSERT INTO schema_migrations (version, description) VALUES ($1, $2)",
                            pg::Params()
                                .Add(static_cast<int64_t>(migration.version))
                                .Add(migration.description))
                     .status();
      }
      if (status.ok()) status = conn.Run("COMMIT");
      if (!status.ok()) {
        (void)conn.Run("ROLLBACK");  // the migration's error is what counts
        return Status::Error(status.error(), "migration " + std::to_string(migration.version) +
                                                 ": " + status.message());
      }
    }
    return Status::Ok();
  };
  Status status = migrate();
  // Closing the connection would release the lock too; unlocking keeps it usable.
  (void)conn.Run(LockSql("pg_advisory_unlock", kMigrationLock));
  return status;
}

// The 64-bit advisory lock key of a gateway instance id (FNV-1a): the bigint key space, apart from
// the two-int4 keys above.
int64_t InstanceKey(const std::string& instance_id) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : "agentpay-instance:" + instance_id) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return static_cast<int64_t>(hash);
}

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string url, StoreOptions options, std::unique_ptr<pg::Connection> writer)
      : url_(std::move(url)), options_(options), writer_(std::move(writer)), queue_(options) {
    writer_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-writer");
      MarkEventThread("store-writer");  // it runs every decision's completion
      WriterLoop();
    });
    liveness_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-liveness");
      LivenessLoop();
    });
  }

  ~PostgresStore() override {
    queue_.Stop();
    writer_thread_.join();
    {
      std::lock_guard lock(liveness_mutex_);
      liveness_stopping_ = true;
    }
    liveness_stop_.notify_all();
    liveness_thread_.join();
  }

  void WriteAsync(TransactionFn fn, WriteDone done) override {
    queue_.Push(std::move(fn), std::move(done));
  }

  // The server made every commit durable before COMMIT returned (synchronous_commit = on), and a
  // snapshot sees committed transactions only: a read never reports what a crash could erase.
  Status Read(const TransactionFn& fn) override {
    AssertMayBlock("Store::Read");
    return ReadUnsynced(fn);
  }
  void AwaitDurable() override { AssertMayBlock("Store::AwaitDurable"); }
  void WhenDurable(std::function<void()> then) override { then(); }

  // A read is one implicit transaction on a reader connection (repeatable read, read only: the
  // session's defaults, ReaderSetup): its statements share one snapshot, with no BEGIN and no
  // COMMIT of their own, and its end goes out unawaited (pg::Connection::UseImplicitTransactions).
  Status ReadUnsynced(const TransactionFn& fn) override {
    AssertMayBlock("Store::ReadUnsynced");
    auto conn = AcquireReader();
    if (!conn.ok()) return conn.status();
    PostgresTransaction tx(**conn);
    Status status = RunDecision(fn, tx);
    // A statement deferred and never answered (a write, which the read-only transaction refuses)
    // is answered before the read is: its failure is the read's.
    if (Status deferred = (*conn)->Sync(); !deferred.ok() && status.ok()) status = deferred;
    // A read that asked nothing (the health probe) still asks: it says whether the server answers.
    if (status.ok() && !(*conn)->in_implicit_transaction()) {
      status = (*conn)->Query("SELECT 1").status();
    }
    ReleaseReader(std::move(*conn));
    return status;
  }

  bool ReadsAreRemote() const override { return true; }
  StoreStats Stats() override {
    std::lock_guard lock(mutex_);
    StoreStats stats = stats_;
    stats.write_queue_depth = queue_.depth();
    stats.durability_syncs = stats_.commits;  // the server syncs each commit before answering
    return stats;
  }

  // Liveness: a session advisory lock on the instance's key, held by a connection of its own for
  // as long as the registration lasts; the server drops it when that session ends (the process
  // died, or its connection did).
  Status RegisterInstance(const std::string& instance_id) override {
    if (!ValidInstanceId(instance_id)) {
      return Status::Error(ErrorCode::kInvalidConfig,
                           "an instance id is 1-64 characters of [A-Za-z0-9_-]");
    }
    auto conn = Connect(url_);
    if (!conn.ok()) return conn.status();
    auto taken = (*conn)->Query("SELECT pg_try_advisory_lock($1)",
                                pg::Params().Add(InstanceKey(instance_id)));
    if (!taken.ok()) return taken.status();
    if (taken->Text(0, 0) != "t") {
      return Status::Error(ErrorCode::kInstanceTaken,
                           "instance " + instance_id + " is registered by a live process");
    }
    std::lock_guard lock(instances_mutex_);
    instances_[instance_id] = std::make_unique<Registration>(std::move(*conn), instance_id);
    return Status::Ok();
  }

  Status ReleaseInstance(const std::string& instance_id) override {
    std::lock_guard lock(instances_mutex_);
    instances_.erase(instance_id);
    return Status::Ok();
  }

  Result<bool> InstanceAlive(const std::string& instance_id) override {
    AssertMayBlock("Store::InstanceAlive");
    if (!ValidInstanceId(instance_id)) return false;
    const uint64_t key = static_cast<uint64_t>(InstanceKey(instance_id));
    auto conn = AcquireReader();
    if (!conn.ok()) return conn.status();
    // A bigint advisory key shows in pg_locks as classid (high half), objid (low half), objsubid 1.
    auto held = (*conn)->Query(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
        pg::Params()
            .Add(static_cast<int64_t>(key >> 32))
            .Add(static_cast<int64_t>(key & 0xffffffffULL)));
    ReleaseReader(std::move(*conn));
    if (!held.ok()) return held.status();
    return held->Int(0, 0) > 0;
  }

 private:
  // A registered instance: its session and the advisory lock it holds. Ending it unlocks before
  // closing: the server ends a closed session's backend (and drops its locks) a moment later,
  // and until then another gateway would still see the instance alive.
  class Registration {
   public:
    Registration(std::unique_ptr<pg::Connection> conn, const std::string& instance_id)
        : conn_(std::move(conn)), key_(InstanceKey(instance_id)) {}
    ~Registration() {
      // Unlocked or not, the lock goes with the session that closes right after.
      if (conn_) (void)conn_->Query("SELECT pg_advisory_unlock($1)", pg::Params().Add(key_));
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

    // A session lost while this process lives (the server restarted, the network failed) took
    // the lock with it, and other gateways now see this one dead. Takes it again on a new
    // session; false while that fails.
    bool Renew(const std::string& url) {
      if (conn_ && conn_->LooksAlive()) return true;
      conn_.reset();
      auto conn = Connect(url);
      if (!conn.ok()) return false;
      auto taken = (*conn)->Query("SELECT pg_try_advisory_lock($1)", pg::Params().Add(key_));
      if (!taken.ok() || taken->Text(0, 0) != "t") return false;
      conn_ = std::move(*conn);
      std::fprintf(stderr, "agentpay store: this gateway's liveness lock is held again\n");
      return true;
    }

   private:
    std::unique_ptr<pg::Connection> conn_;
    int64_t key_;
  };

  // Every kLivenessCheck, the registrations whose session was lost are taken again.
  void LivenessLoop() {
    std::unique_lock lock(liveness_mutex_);
    while (!liveness_stop_.wait_for(lock, kLivenessCheck, [this] { return liveness_stopping_; })) {
      lock.unlock();
      {
        std::lock_guard registered(instances_mutex_);
        for (auto& [id, registration] : instances_) (void)registration->Renew(url_);
      }
      lock.lock();
    }
  }

  void WriterLoop() {
    const WriteQueue::Ahead ahead{[this] { return next_start_.has_value(); }, kLingerAhead,
                                  [this] { LetGoOfTheNextStart(); }};
    queue_.Serve([this](auto& batch) { CommitBatch(batch); }, &ahead);
  }

  // The writer's connection, reopened if the last one was lost; an error while the server is
  // away (attempts at most every kReconnectPause).
  Status EnsureWriter() {
    if (writer_ && writer_->LooksAlive()) return Status::Ok();
    writer_.reset();
    const auto now = std::chrono::steady_clock::now();
    if (now < next_connect_) {
      return Status::Error(ErrorCode::kStoreUnavailable,
                           "the database is unreachable: " + last_connect_error_);
    }
    auto conn = Connect(url_);
    if (!conn.ok()) {
      next_connect_ = now + kReconnectPause;
      if (!unreachable_) {
        // Once per outage, for the operator (public answers carry no store text).
        std::fprintf(stderr, "agentpay store: %s; answering 503 and retrying\n",
                     conn.status().message().c_str());
      }
      unreachable_ = true;
      last_connect_error_ = conn.status().message();
      return conn.status();
    }
    // The writer pipelines: statements whose answer a decision does not read go out with the
    // next one it does (pg_connection.h, Defer), so a decision costs a few round trips, not one
    // per statement.
    if (Status piped = (*conn)->EnterPipelineMode(); !piped.ok()) return piped;
    if (unreachable_) std::fprintf(stderr, "agentpay store: connected to PostgreSQL again\n");
    unreachable_ = false;
    writer_ = std::move(*conn);
    return Status::Ok();
  }

  struct BatchRun {
    std::vector<Status> results;
    uint64_t rolled_back = 0;
    Status broken;  // not ok: the transaction is gone; the decisions after it were not run
  };

  // Runs each decision in its own savepoint: a decision that fails (a domain rollback, a
  // constraint, a deferred write that failed) is undone alone, and the transaction goes on with
  // the next. A decision that succeeded is held over (pg_connection.h, HoldOver): its deferred
  // writes and its RELEASE go to the server with the next statement that needs an answer (a later
  // decision's read, a move that must wait, or the COMMIT), so that decisions that only write cost
  // no round trip of their own. Should one of them fail there, the connection undoes it, the
  // cache takes its moves back, and this marks it failed. `run` outlives the batch's COMMIT,
  // which may still find a held-over decision failed.
  void RunDecisions(std::vector<std::unique_ptr<QueuedDecision>>& batch, BatchRun& run) {
    run.results.reserve(batch.size());
    PostgresTransaction tx(*writer_, &balances_);
    for (auto& job : batch) {
      if (writer_->held_units() == pg::Connection::kMaxHeldUnits) {
        // As many as the connection holds over: confirmed first (failures are undone there).
        if (Status confirmed = writer_->Sync(); !confirmed.ok()) {
          run.broken = confirmed;
          return;
        }
      }
      if (!writer_->holding_over()) balances_.ConfirmHeld();
      // Sent with the decision's first statement.
      if (Status s = writer_->Defer("SAVEPOINT decision"); !s.ok()) {
        run.broken = s;
        return;
      }
      Status status = RunDecision(job->fn, tx);
      const size_t index = run.results.size();
      BalanceCache::Journal journal = balances_.EndDecision();
      if (status.ok()) {
        const uint64_t held = balances_.Hold(std::move(journal));
        status =
            writer_->HoldOver("RELEASE SAVEPOINT decision", {kUndoDecision[0], kUndoDecision[1]},
                              [this, &run, index, held](const Status& failure) {
                                run.results[index] = failure;
                                ++run.rolled_back;
                                balances_.UndoHeld(held);
                              });
        if (!status.ok()) balances_.UndoHeld(held);  // not held over: its moves go back now
      } else {
        (void)writer_->Sync();  // its deferred writes, whatever became of them: it is undone
        balances_.Undo(journal);  // its moves go with its savepoint
      }
      if (!status.ok()) {
        ++run.rolled_back;
        Status undone = writer_->Defer(kUndoDecision[0]);
        if (undone.ok()) undone = writer_->Defer(kUndoDecision[1]);
        if (undone.ok()) undone = writer_->Sync();
        if (!undone.ok()) {
          run.broken = Status::Error(ErrorCode::kStoreUnavailable,
                                     "a decision could not be rolled back: " + undone.message());
          return;
        }
      }
      run.results.push_back(std::move(status));
    }
  }

  // BEGIN, the writers' lock (see the top of this file), then the batch's number and, in the same
  // round trip, the accounts whose balances other gateways' batches wrote since this writer's last
  // one (each batch logs the accounts it wrote in accounts_written): the cache of balances takes
  // them and holds for the rest. Only when more than kRefreshRows changed, or the log no longer
  // reaches back to this writer's last batch (kLogKept), is it forgotten instead.
  //
  // When decisions were waiting as the last batch committed, its COMMIT's round trip began this
  // one already (WriteAndCommit): BEGIN, the lock if nobody held it, and the number. Otherwise, or
  // when another gateway's batch held the lock, what is missing goes in a round trip here.
  static constexpr int64_t kRefreshRows = 256;
  static std::string NumberAndChanged(std::string_view guard) {
    return "WITH b AS (SELECT nextval('writer_batches') AS batch" + std::string(guard) +
           ") SELECT b.batch, a.id, a.deposited, a.captured, a.held FROM b LEFT JOIN (SELECT id, "
           "deposited, captured, held FROM accounts WHERE id IN (SELECT unnest(account_ids) FROM "
           "accounts_written WHERE batch > $1) LIMIT " +
           std::to_string(kRefreshRows + 1) + ") a ON true";
  }
  // The log keeps the batches of the last kLogKept numbers: a writer deletes what is older in the
  // tail of a batch, once its numbers have moved kLogPruneEvery past its own last deletion
  // (WriteAndCommit). A writer whose last batch is further back forgets every balance it keeps.
  static constexpr int64_t kLogKept = 4096;
  static constexpr int64_t kLogPruneEvery = 256;
  pg::Params SinceLastBatch() const {
    // Before this writer's first batch it keeps nothing: nothing to refresh.
    return pg::Params().Add(last_batch_ < 0 ? INT64_MAX : last_batch_);
  }
  // Takes the batch's number and the balances changed since the last (NumberAndChanged's rows).
  void TakeNumber(const pg::Rows& number) {
    const int64_t batch = number.Int(0, 0);
    ++batches_;
    // Another gateway's batch ran since this writer's last, unless the only number skipped is
    // the one a start it let go of took (LetGoOfTheNextStart).
    const bool only_mine_skipped = skipped_batch_ == last_batch_ + 1 && batch == last_batch_ + 2;
    if (last_batch_ >= 0 && batch != last_batch_ + 1 && !only_mine_skipped) {
      others_seen_at_ = batches_;
    }
    skipped_batch_ = -1;
    // The numbers went back (the database was restored, or failed over to a standby that was
    // behind): the log since this writer's last batch says nothing, and its deletions start over.
    const bool went_back = batch <= last_batch_;
    if (went_back) pruned_below_ = 0;
    if (batch != last_batch_ + 1) {
      if (number.size() > kRefreshRows || batch - last_batch_ > kLogKept || went_back) {
        balances_.Clear();
      } else {
        for (int row = 0; row < number.size(); ++row) {
          if (number.IsNull(row, 1)) continue;  // nothing changed
          balances_.Refresh(number.Text(row, 1),
                            Balances{number.Int(row, 2), number.Int(row, 3), number.Int(row, 4)});
        }
      }
    }
    last_batch_ = batch;
    balances_.SetBatch(batch);
  }
  Status Begin() {
    static const std::string kLock = LockSql("pg_advisory_xact_lock", kWriterLock);
    static const std::string kNumberAndChanged = NumberAndChanged("");
    // The lock, when the batch began without it.
    auto lock = [&]() -> Status {
      Status locked = writer_->Defer(kLock);
      if (!locked.ok()) return locked;
      auto number = writer_->Query(kNumberAndChanged, SinceLastBatch());
      if (!number.ok()) return number.status();
      TakeNumber(*number);
      return Status::Ok();
    };
    if (auto started = std::exchange(next_start_, std::nullopt)) {
      if (started->ok() && writer_ && writer_->LooksAlive()) {
        if ((*started)->empty()) return lock();  // begun; another gateway's batch held the lock
        TakeNumber(**started);                   // begun and locked
        return Status::Ok();
      }
      // The start failed, after the last batch's COMMIT (which stands), or its connection was
      // lost while it waited (the server restarted): whatever it left is undone, and this batch
      // begins as if nothing had been sent, on a new connection if need be.
      RollBack();
    }
    auto begin = [&]() -> Status {
      Status begun = writer_->Defer("BEGIN");
      return begun.ok() ? lock() : begun;
    };
    Status begun = EnsureWriter();
    if (begun.ok()) begun = begin();
    if (!begun.ok() && writer_ && !writer_->healthy()) {
      // The connection was lost while idle (the server restarted): nothing ran on it, so once
      // more on a new one.
      begun = EnsureWriter();
      if (begun.ok()) begun = begin();
    }
    return begun;
  }

  // Ends the writer's transaction without committing; a connection where that fails is dropped
  // (the server rolls back whatever it held).
  void RollBack() {
    balances_.Clear();
    next_start_.reset();
    if (!writer_) return;
    Status rolled_back = writer_->Defer("ROLLBACK");
    if (rolled_back.ok()) rolled_back = writer_->Sync();
    if (!rolled_back.ok() || writer_->transaction_status() != PQTRANS_IDLE) writer_.reset();
  }

  // A batch begun behind the last COMMIT for decisions that did not come within kLingerAhead: its
  // transaction ends, and with it the writers' lock if it took it. What the writer keeps of the
  // balances stays right (the transaction wrote nothing; the batch's number it took is skipped,
  // so the next batch brings what other gateways wrote since the last one).
  void LetGoOfTheNextStart() {
    if (next_start_ && next_start_->ok() && !(*next_start_)->empty()) {
      skipped_batch_ = (*next_start_)->Int(0, 0);  // taken with the lock, never used
    }
    next_start_.reset();
    if (!writer_) return;
    Status ended = writer_->Defer("ROLLBACK");
    if (ended.ok()) ended = writer_->Sync();
    {
      std::lock_guard lock(mutex_);
      stats_.writer_round_trips += writer_->TakeRoundTrips();
    }
    if (!ended.ok() || writer_->transaction_status() != PQTRANS_IDLE) {
      writer_.reset();
      balances_.Clear();
    }
  }

  // The balances the batch moved and the COMMIT go in one round trip with the last decisions held
  // over. Should one of those fail there, its moves go back, the connection drops the balances
  // written with them and the COMMIT (pg::Connection::StartTail), and both go once more, written
  // from what is left (no decision is held over then: at most twice).
  //
  // With `start_next` (a next batch is likely: see CommitBatch) it begins in the same round trip,
  // behind the COMMIT: BEGIN, the writers' lock only if nobody holds it (a lock to wait for would
  // hold back the COMMIT's answer, and with it every completion of this batch), and, if taken,
  // the batch's number (pg::Connection::CommitThenStart; Begin takes it from there). A writer
  // alone on its database then pays one round trip a batch instead of two; several gateways hand
  // the lock on at each COMMIT as before, since a batch waiting for it takes it first. Should no
  // decision come within kLingerAhead, the writer lets go of it (LetGoOfTheNextStart): an idle
  // gateway keeps the lock from the others no longer than this batch's completions (which run
  // on this thread, and were always to be short) and that.
  Status WriteAndCommit(bool start_next) {
    static const std::vector<std::string> kStart = {
        "BEGIN", "SELECT set_config('agentpay.writer_locked', pg_try_advisory_xact_lock(" +
                     std::to_string(kLockClass) + ", " + std::to_string(kWriterLock) +
                     ")::text, true)"};
    // No rows (and no number taken) unless the lock was: read in a statement after the one that
    // took it, so that what it reads was committed before.
    static const std::string kNumberIfLocked =
        NumberAndChanged(" WHERE current_setting('agentpay.writer_locked') = 'true'");
    // Deletes from the log of accounts written what no writer reads any more (kLogKept), once
    // this writer's numbers have moved kLogPruneEvery past its own last deletion.
    const int64_t prune_below = last_batch_ - kLogKept;
    const bool prune = prune_below >= pruned_below_ + kLogPruneEvery;
    if (prune) pruned_below_ = prune_below;  // tried once: a failed one goes with the next
    for (int round = 0;; ++round) {
      AGENTPAY_CHECK(round < 2);
      writer_->StartTail();
      Status committed = Status::Ok();
      if (prune) {
        committed = writer_->Defer("DELETE FROM accounts_written WHERE batch < $1",
                                   pg::Params().Add(prune_below));
      }
      if (committed.ok()) committed = WriteBalances(*writer_, balances_);
      const BalanceCache::Journal written = balances_.EndDecision();
      if (committed.ok() && start_next) {
        auto ended = writer_->CommitThenStart("COMMIT", kStart, kNumberIfLocked, SinceLastBatch());
        committed = std::move(ended.committed);
        next_start_ = std::move(ended.next);
      } else {
        if (committed.ok()) committed = writer_->Defer("COMMIT");
        if (committed.ok()) committed = writer_->Sync();
      }
      if (!committed.ok() || !writer_->tail_dropped()) return committed;
      balances_.Undo(written);  // not written after all
    }
  }

  void CommitBatch(std::vector<std::unique_ptr<QueuedDecision>>& batch) {
    WriterLaps laps;
    Status begun = Begin();
    if (!begun.ok()) {
      RollBack();
      std::lock_guard lock(mutex_);
      stats_.decisions_rolled_back += batch.size();
      for (auto& job : batch) job->done(begun);
      return;
    }
    // The decisions that came while the batch began join it: Begin waits for the writers' lock
    // while other gateways' batches hold it (milliseconds with several gateways under load), and
    // each turn at the lock should carry every decision waiting for it, not leave those that
    // came meanwhile to a turn of their own.
    for (auto& job : queue_.TakeWaiting(batch.size())) batch.push_back(std::move(job));
    BatchRun run;
    RunDecisions(batch, run);
    const uint64_t decide_ns = laps.Lap();
    Status committed = run.broken;
    // A next batch is certain when decisions wait already, and likely when this batch's callers
    // were several (under load their next decisions follow the completions below): on that guess
    // only a writer alone on its database begins it, as a lock held for decisions that may not
    // come keeps other gateways waiting.
    const bool alone = batches_ - others_seen_at_ > kAloneAfterBatches;
    if (committed.ok()) {
      committed = WriteAndCommit(queue_.depth() > 0 || (alone && batch.size() > 1));
    }
    balances_.ConfirmHeld();  // the last decisions are settled, one way or the other
    if (!committed.ok()) {
      // Lost with the connection, or failed: nothing of the batch may be reported as done. (A
      // COMMIT whose answer was lost may still have committed: the decisions then stand in the
      // database as a crash after a commit leaves them, and recovery treats them the same way.)
      RollBack();
      committed = Status::Error(
          ErrorCode::kStoreUnavailable,
          (run.broken.ok() ? "commit failed: " : "batch rolled back: ") + committed.message());
    }
    {
      std::lock_guard lock(mutex_);
      if (committed.ok()) {
        ++stats_.commits;
        stats_.decisions += batch.size() - run.rolled_back;
      }
      stats_.decisions_rolled_back += committed.ok() ? run.rolled_back : batch.size();
      if (writer_) stats_.writer_round_trips += writer_->TakeRoundTrips();
      stats_.writer_decide_ns += decide_ns;
      stats_.writer_commit_ns += laps.Lap();  // the server synced before it answered the COMMIT
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!committed.ok()) {
        batch[i]->done(committed);
        continue;
      }
      batch[i]->done(std::move(run.results[i]));
    }
    const uint64_t complete_ns = laps.Lap();
    std::lock_guard lock(mutex_);
    stats_.writer_complete_ns += complete_ns;
  }

  Result<std::unique_ptr<pg::Connection>> AcquireReader() {
    {
      std::unique_lock lock(reader_mutex_);
      reader_free_.wait(
          lock, [this] { return !readers_.empty() || open_readers_ < options_.max_readers; });
      while (!readers_.empty()) {
        auto conn = std::move(readers_.back());
        readers_.pop_back();
        if (conn->LooksAlive()) return conn;
        --open_readers_;  // the server dropped it while it idled (a restart): a new one instead
      }
      ++open_readers_;
    }
    auto conn = Connect(url_);
    if (conn.ok()) {
      Status ready = (*conn)->Run(ReaderSetup());
      if (ready.ok()) ready = (*conn)->EnterPipelineMode();
      if (ready.ok()) (*conn)->UseImplicitTransactions();
      if (!ready.ok()) conn = ready;
    }
    if (!conn.ok()) {
      std::lock_guard lock(reader_mutex_);
      --open_readers_;
      reader_free_.notify_one();
    }
    return conn;
  }

  // Ends the reader's implicit transaction (unawaited), and keeps a healthy connection for the
  // next reader; closes any other.
  void ReleaseReader(std::unique_ptr<pg::Connection> conn) {
    const bool ended = conn->EndImplicitTransaction().ok();
    {
      std::lock_guard lock(mutex_);
      stats_.reader_round_trips += conn->TakeRoundTrips();
    }
    std::lock_guard lock(reader_mutex_);
    if (ended && conn->healthy() &&
        (conn->transaction_status() == PQTRANS_IDLE || conn->ending())) {
      readers_.push_back(std::move(conn));
    } else {
      conn.reset();
      --open_readers_;
    }
    reader_free_.notify_one();
  }

  const std::string url_;
  const StoreOptions options_;
  std::unique_ptr<pg::Connection> writer_;  // the writer thread's alone, as is all up to mutex_
  BalanceCache balances_;
  int64_t last_batch_ = -1;  // the number of this writer's last batch (Begin)
  int64_t pruned_below_ = 0;  // what this writer last deleted the log below (WriteAndCommit)
  // The next batch's start, sent behind the last COMMIT (WriteAndCommit): its number's rows (none
  // when the lock was not taken), or how it failed. Empty: the next batch begins from nothing.
  std::optional<Result<pg::Rows>> next_start_;
  // Whether another gateway's batches run beside this writer's (TakeNumber): the batches this
  // writer began, the count when it last saw another's in between, and the number a start it let
  // go of took (-1: none since its last batch).
  uint64_t batches_ = 0;
  uint64_t others_seen_at_ = 0;
  int64_t skipped_batch_ = -1;
  std::chrono::steady_clock::time_point next_connect_{};
  std::string last_connect_error_;
  bool unreachable_ = false;  // the last connection attempt failed

  std::mutex mutex_;
  WriteQueue queue_;
  StoreStats stats_;
  std::thread writer_thread_;

  std::mutex reader_mutex_;
  std::condition_variable reader_free_;
  std::vector<std::unique_ptr<pg::Connection>> readers_;
  size_t open_readers_ = 0;

  std::mutex instances_mutex_;
  std::unordered_map<std::string, std::unique_ptr<Registration>> instances_;

  std::mutex liveness_mutex_;
  std::condition_variable liveness_stop_;
  bool liveness_stopping_ = false;
  std::thread liveness_thread_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const StoreOptions& options) {
  auto conn = Connect(url);
  if (!conn.ok()) return conn.status();
  if (Status migrated = Migrate(**conn); !migrated.ok()) return migrated;
  // The migrating connection becomes the writer's, which pipelines (see EnsureWriter).
  if (Status piped = (*conn)->EnterPipelineMode(); !piped.ok()) return piped;
  return std::unique_ptr<Store>(new PostgresStore(url, options, std::move(*conn)));
}

}  // namespace agentpay
