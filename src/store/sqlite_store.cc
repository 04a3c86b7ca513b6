// The SQLite backend of Store: WAL synced before every acknowledgement, versioned migrations, and
// one writer thread that commits queued decisions together (group commit), each inside its own
// savepoint so that one decision's rollback never touches another's. The SQL of each record is
// SqliteTransaction's (sqlite_transaction.cc); this file decides when transactions run and commit.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/event_threads.h"
#include "sqlite/sqlite_db.h"
#include "store/backends.h"
#include "store/instance_locks.h"
#include "store/schema.h"
#include "store/sqlite_transaction.h"
#include "store/store.h"
#include "store/wal_write_vfs.h"
#include "store/write_queue.h"

namespace agentpay {

using sqlite::Database;

Status MigrateSqlite(Database& db) {
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
    return Status::Error(
        ErrorCode::kStoreTooNew,
        "the database schema is version " + std::to_string(current) + ", newer than this binary");
  }
  for (const auto& migration : migrations) {
    if (migration.version <= current) continue;
    if (!(status = db.Exec("BEGIN IMMEDIATE")).ok()) return status;
    status = db.Exec(std::string(migration.sqlite));
    if (status.ok()) {
      AGENTPAY_PREPARE(record, db,
                       "INSERT INTO schema_migrations (version, description) VALUES (?1, ?2)");
      status = record.Bind(1, static_cast<int64_t>(migration.version))
                   .Bind(2, migration.description)
                   .Run();
    }
    if (!status.ok()) {
      // The migration's error is what counts; OpenStore fails and closing the connection ends
      // the transaction if this ROLLBACK could not.
      (void)db.Exec("ROLLBACK");
      return Status::Error(status.error(), "migration " + std::to_string(migration.version) + ": " +
                                               status.message());
    }
    if (!(status = db.Exec("COMMIT")).ok()) return status;
  }
  return Status::Ok();
}

namespace {

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, StoreOptions options, std::unique_ptr<sqlite::WalWriteVfs> wal_vfs,
              std::unique_ptr<Database> writer, std::unique_ptr<Database> checkpointer, int wal_fd)
      : path_(std::move(path)),
        options_(options),
        wal_vfs_(std::move(wal_vfs)),
        writer_db_(std::move(writer)),
        checkpointer_db_(std::move(checkpointer)),
        instances_(path_ + ".instances"),
        queue_(options),
        wal_fd_(wal_fd) {
    // Checkpoints copy the WAL into the database file and fsync it: done inside a commit they
    // stalled the writer for milliseconds every thousand pages. The writer only reports the WAL's
    // size; a thread of its own checkpoints (PASSIVE: never blocks the writer or readers).
    sqlite3_wal_autocheckpoint(writer_db_->handle(), 0);
    sqlite3_wal_hook(writer_db_->handle(), &SqliteStore::OnWalCommit, this);
    // Named for top -H and debuggers (at most 15 characters).
    writer_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-writer");
      MarkEventThread("store-writer");  // it runs every decision's completion
      WriterLoop();
    });
    checkpoint_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-ckpt");
      CheckpointLoop();
    });
  }

  ~SqliteStore() override {
    queue_.Stop();
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
    queue_.Push(std::move(fn), std::move(done));
  }

  Status Read(const TransactionFn& fn) override {
    AssertMayBlock("Store::Read");
    Status status = ReadUnsynced(fn);
    // The snapshot may hold a commit whose WAL frames are written but not yet synced.
    AwaitDurable();
    return status;
  }

  void AwaitDurable() override {
    AssertMayBlock("Store::AwaitDurable");
    AwaitDurable(commits_started_.load(std::memory_order_acquire));
  }

  void WhenDurable(std::function<void()> then) override {
    const uint64_t sequence = commits_started_.load(std::memory_order_acquire);
    {
      // Checked again under the lock SyncWal publishes under: a sync between a check outside it
      // and the push would leave `then` waiting for the next commit, which may never come.
      std::lock_guard lock(durable_mutex_);
      if (durable_through_.load(std::memory_order_acquire) < sequence) {
        durable_waiters_.push_back({sequence, std::move(then)});
        return;
      }
    }
    then();
  }

  Status ReadUnsynced(const TransactionFn& fn) override {
    AssertMayBlock("Store::ReadUnsynced");
    auto db = AcquireReader();
    if (!db.ok()) return db.status();
    Status status = (*db)->Run("BEGIN");
    if (status.ok()) {
      SqliteTransaction tx(**db);
      status = RunDecision(fn, tx);
      // What was read stands either way. A connection left inside its read transaction would fail
      // every later BEGIN and pin its snapshot (no checkpoint past it): closing it ends both.
      if (Status ended = (*db)->Run("COMMIT"); !ended.ok()) {
        DiscardReader(std::move(*db));
        return status;
      }
    }
    ReleaseReader(std::move(*db));
    return status;
  }

  bool ReadsAreRemote() const override { return false; }
  StoreStats Stats() override {
    std::lock_guard lock(mutex_);
    StoreStats stats = stats_;
    stats.write_queue_depth = queue_.depth();
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
  // Group commit that follows the disk: one thread takes every decision queued so far, runs them
  // in one transaction, commits, makes the commit durable (fdatasync of the WAL) and only then
  // runs their completions. Decisions that arrive while it works wait in the queue and share the
  // next commit and sync: the busier the store, the larger the batches. No write lock is held
  // during the sync, so another process sharing the database gets its turn then. (A separate
  // syncer thread overlapped a sync with the next batch, but cost every batch two thread
  // hand-offs on the way to its answer; with batches following the syncs there was little to
  // overlap. Tried once more with the writer deciding and committing the next batch while a
  // syncer thread synced the last: on the paid path half the batches found nothing queued to
  // overlap, the writer still waited 0.2 ms a commit for the disk, its CPU per paid request did not
  // fall, and paid requests were not faster. agentpay_store_writer_microseconds_total shows the
  // split.)
  void WriterLoop() {
    queue_.Serve([this](auto& batch) { CommitBatch(batch); });
  }

  // What RunDecisions did with a batch.
  struct BatchRun {
    std::vector<Status> results;  // of the decisions run, in the batch's order
    uint64_t rolled_back = 0;     // decisions whose writes were rolled back to their savepoint
    // Not ok when a savepoint could not be rolled back or released, or the transaction was gone:
    // what the transaction holds is then unknown, and the decisions after it were not run.
    Status broken;
  };

  // Runs each decision of the batch in its own savepoint inside the open transaction. A failed
  // ROLLBACK TO or RELEASE stops the run: SQLite rolls the whole transaction back by itself on some
  // errors (I/O, full disk, out of memory, an interrupt, a trigger's RAISE(ROLLBACK)), and then the
  // next SAVEPOINT would begin a transaction of its own that its RELEASE commits: a decision made
  // durable that the batch's failed COMMIT would then report as failed.
  static BatchRun RunDecisions(Database& db, std::vector<std::unique_ptr<QueuedDecision>>& batch) {
    BatchRun run;
    run.results.reserve(batch.size());
    SqliteTransaction tx(db);
    for (auto& job : batch) {
      if (sqlite3_get_autocommit(db.handle()) != 0) {
        run.broken = Status::Error(ErrorCode::kStoreUnavailable, "the transaction was rolled back");
        return run;
      }
      Status status = db.Run("SAVEPOINT decision");
      if (!status.ok()) {  // the decision did not run: nothing to undo
        ++run.rolled_back;
        run.results.push_back(std::move(status));
        continue;
      }
      status = RunDecision(job->fn, tx);
      if (!status.ok()) {
        ++run.rolled_back;
        if (Status undone = db.Run("ROLLBACK TO decision"); !undone.ok()) {
          run.broken = Status::Error(ErrorCode::kStoreUnavailable,
                                     "a decision could not be rolled back: " + undone.message());
          return run;
        }
      }
      if (Status released = db.Run("RELEASE decision"); !released.ok()) {
        run.broken = Status::Error(ErrorCode::kStoreUnavailable,
                                   "a decision could not be released: " + released.message());
        return run;
      }
      run.results.push_back(std::move(status));
    }
    return run;
  }

  // Ends the writer's transaction without committing. ROLLBACK fails when SQLite has already
  // rolled the transaction back by itself; what counts is that none is open afterwards.
  static void RollBackBatch(Database& db) {
    Status rolled_back = db.Run("ROLLBACK");
    if (sqlite3_get_autocommit(db.handle()) == 0) {
      // Still inside it: every later BEGIN, so every later write, would fail. Nothing of it was
      // acknowledged; stop, and the next start recovers from the disk.
      std::fprintf(stderr, "agentpay store: cannot roll back a failed batch (%s); stopping\n",
                   rolled_back.ToString().c_str());
      std::abort();
    }
  }

  // Runs each decision in its own savepoint inside one transaction, then commits once. If the
  // batch's state became unknown (RunDecisions), nothing of it commits: it is rolled back and every
  // decision of it fails with a store error, as a decision does when the COMMIT fails.
  void CommitBatch(std::vector<std::unique_ptr<QueuedDecision>>& batch) {
    WriterLaps laps;
    Database& db = *writer_db_;
    Status begun = db.Run("BEGIN IMMEDIATE");
    if (!begun.ok()) {
      for (auto& job : batch) job->done(begun);
      return;
    }
    BatchRun run = RunDecisions(db, batch);
    const uint64_t decide_ns = laps.Lap();
    // Numbered before COMMIT: a reader that can see this commit also sees its number, and waits
    // for the sync that makes it durable (see Read).
    const uint64_t sequence = commits_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
    Status committed = run.broken.ok() ? db.Run("COMMIT") : run.broken;
    if (!committed.ok()) {
      RollBackBatch(db);
      committed = Status::Error(
          ErrorCode::kStoreUnavailable,
          (run.broken.ok() ? "commit failed: " : "batch rolled back: ") + committed.message());
    }
    // Durable before anyone hears of it: the commit's WAL frames are written (synchronous=NORMAL;
    // the VFS wrote any it had gathered when the commit was published, Flush makes sure), then
    // synced. A failed commit is synced too, so that readers waiting for its number go on.
    if (Status written = wal_vfs_->Flush(); !written.ok()) {
      std::fprintf(stderr, "agentpay store: %s; stopping\n", written.message().c_str());
      std::abort();
    }
    const uint64_t commit_ns = laps.Lap();
    SyncWal(sequence);  // with the answers that waited for it (WhenDurable)
    const uint64_t sync_ns = laps.Lap();
    {
      std::lock_guard lock(mutex_);
      if (committed.ok()) {
        ++stats_.commits;
        stats_.decisions += batch.size() - run.rolled_back;
      }
      stats_.decisions_rolled_back += run.broken.ok() ? run.rolled_back : batch.size();
      stats_.writer_decide_ns += decide_ns;
      stats_.writer_commit_ns += commit_ns;
      stats_.writer_sync_ns += sync_ns;
      stats_.wal_bytes = wal_vfs_->wal_bytes();
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!run.broken.ok()) {
        batch[i]->done(committed);  // whatever it wrote is gone with the batch
        continue;
      }
      const Status& result = run.results[i];
      batch[i]->done(result.ok() && !committed.ok() ? committed : result);
    }
    const uint64_t complete_ns = laps.Lap();
    std::lock_guard lock(mutex_);
    stats_.writer_complete_ns += complete_ns;
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
    std::vector<std::function<void()>> ready;
    {
      std::lock_guard lock(durable_mutex_);
      durable_through_.store(through, std::memory_order_release);
      // Waiters are few (one per answer waiting for durability), and pushed in any order.
      auto synced =
          std::partition(durable_waiters_.begin(), durable_waiters_.end(),
                         [through](const DurableWaiter& w) { return w.sequence > through; });
      for (auto it = synced; it != durable_waiters_.end(); ++it)
        ready.push_back(std::move(it->then));
      durable_waiters_.erase(synced, durable_waiters_.end());
    }
    durable_.notify_all();
    for (auto& then : ready) then();
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

  // Closes a reader instead of keeping it; its place goes to a new one when needed.
  void DiscardReader(std::unique_ptr<Database> db) {
    db.reset();
    {
      std::lock_guard lock(reader_mutex_);
      --open_readers_;
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
  WriteQueue queue_;
  StoreStats stats_;
  std::thread writer_thread_;

  const int wal_fd_;  // the WAL file, for the syncs that make commits durable
  std::atomic<uint64_t> commits_started_{0};
  std::atomic<uint64_t> durable_through_{0};
  std::atomic<uint64_t> syncs_{0};
  std::mutex durable_mutex_;
  std::condition_variable durable_;
  struct DurableWaiter {
    uint64_t sequence;  // runs once durable_through_ reaches it
    std::function<void()> then;
  };
  std::vector<DurableWaiter> durable_waiters_;  // guarded by durable_mutex_ (WhenDurable)

  std::mutex reader_mutex_;
  std::condition_variable reader_free_;
  std::vector<std::unique_ptr<Database>> readers_;
  size_t open_readers_ = 0;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const StoreOptions& options) {
  // SQLite's memory statistics take a global mutex on every allocation; nothing reads them.
  static const bool configured = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)configured;
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
  Status migrated = MigrateSqlite(**db);
  if (!migrated.ok()) return migrated;
  // Pre-release builds changed migration 1 in place; such a database has the right version number
  // but not the columns this binary reads. Say so instead of failing on the first query.
  if (!HasColumnsRead(**db)) {
    return Status::Error(ErrorCode::kStoreIncompatible,
                         path +
                             " was created by a pre-release build of AgentPay whose schema "
                             "differs; move it away and start again");
  }
  auto checkpointer = Database::Open(path, /*read_only=*/false);
  if (!checkpointer.ok()) return checkpointer.status();
  if (Status s = (*checkpointer)->Exec("PRAGMA synchronous=FULL"); !s.ok()) return s;
  // The WAL exists from the first write (the migrations' version check wrote or read through it);
  // it keeps its inode while any connection is open, so this descriptor syncs the right file.
  const std::string wal_path = path + "-wal";
  int wal_fd = ::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (wal_fd < 0) {
    return Status::Error(ErrorCode::kStoreUnavailable, "cannot open " + wal_path + " to sync it");
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
