// See swarm_world.h.
#include "sim/swarm_world.h"

#include "core/check.h"
#include "sim/sim_vfs.h"
#include "sqlite/sqlite_db.h"
#include "store/sqlite_transaction.h"
#include "store/write_queue.h"

namespace agentpay::sim {

// ---- SeededRandom ----

SeededRandom::SeededRandom(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& word : s_) {  // splitmix64
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    word = z ^ (z >> 31);
  }
}

uint64_t SeededRandom::Next() {
  const auto rotl = [](uint64_t v, int k) { return (v << k) | (v >> (64 - k)); };
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t SeededRandom::Below(uint64_t n) {
  AGENTPAY_CHECK(n > 0);
  return Next() % n;  // the bias is far below anything a run can show
}

int64_t SeededRandom::Between(int64_t low, int64_t high) {
  AGENTPAY_CHECK(low <= high);
  return low + static_cast<int64_t>(Below(static_cast<uint64_t>(high - low) + 1));
}

bool SeededRandom::Chance(int per_mille) { return static_cast<int>(Below(1000)) < per_mille; }

void SeededRandom::Fill(unsigned char* out, size_t size) {
  for (size_t i = 0; i < size; i += 8) {
    uint64_t word = Next();
    for (size_t j = i; j < size && j < i + 8; ++j) {
      out[j] = static_cast<unsigned char>(word);
      word >>= 8;
    }
  }
}

// ---- Scheduler ----

void Scheduler::After(int64_t delay_ms, uint64_t epoch, std::function<void()> fn) {
  AGENTPAY_CHECK(delay_ms >= 0);
  queue_.push(Event{now_ms_ + delay_ms, next_order_++, epoch, std::move(fn)});
}

bool Scheduler::RunNext(int64_t until_ms) {
  while (!queue_.empty()) {
    if (queue_.top().at_ms > until_ms) return false;
    Event event = queue_.top();  // the queue's top is const: copied, then popped
    queue_.pop();
    if (!Alive(event.epoch)) continue;
    now_ms_ = std::max(now_ms_, event.at_ms);
    ++steps_;
    event.fn();
    return true;
  }
  return false;
}

// ---- SimTimers, SimExecutor ----

void SimTimers::After(int64_t delay_ms, std::function<void()> fn) {
  scheduler_.After(std::max<int64_t>(0, delay_ms), scheduler_.gateway_epoch(), std::move(fn));
}

bool SimExecutor::TrySubmit(std::function<void()> task) {
  scheduler_.After(0, scheduler_.gateway_epoch(), [this, task = std::move(task)] {
    SimStore::Inline blocking(store_);
    task();
  });
  return true;
}

// ---- SimUpstream ----

std::string SimUpstream::BodyFor(const std::string& operation_id) {
  return "{\"work\":\"" + operation_id + "\"}";
}

void SimUpstream::CallAsync(const RouteConfig& route, std::shared_ptr<const HttpRequest>,
                            const std::string& operation_id, UpstreamDone done) {
  const int64_t timeout = route.timeout_ms;
  const uint64_t epoch = scheduler_.gateway_epoch();
  UpstreamOutcome outcome;
  int64_t delay = random_.Between(1, 30);
  bool works = true;
  int64_t draw = static_cast<int64_t>(random_.Below(1000));
  const auto take = [&draw](int per_mille) {
    draw -= per_mille;
    return draw < 0;
  };
  const bool done_before = work_.count(operation_id) > 0;
  auto [broken, first_call] = broken_.emplace(operation_id, false);
  if (first_call) {
    broken->second = random_.Chance(mix_.broken);
    if (broken->second) faults_.Count(FaultKind::kSellerBroken);
  }
  if (broken->second) {
    outcome.kind = UpstreamKind::kResponded;
    outcome.status = 503;
    outcome.body = "{\"error\":\"this one always fails\"}";
    scheduler_.After(delay, epoch,
                     [done = std::move(done), outcome = std::move(outcome)] { done(outcome); });
    return;
  }
  if (take(mix_.client_error) && !done_before) {
    // A refusal: only of work not done yet (the seller keeps the upstream idempotency key; once it
    // did the work it answers a retry with the result, never with a refusal).
    works = false;
    faults_.Count(FaultKind::kSeller4xx);
    outcome.kind = UpstreamKind::kResponded;
    outcome.status = random_.Chance(500) ? 400 : 404;
    outcome.body = "{\"error\":\"refused\"}";
  } else if (take(mix_.server_error)) {
    works = random_.Chance(500);  // a 5xx may come after the work was done
    faults_.Count(FaultKind::kSeller5xx);
    outcome.kind = UpstreamKind::kResponded;
    outcome.status = random_.Chance(500) ? 500 : 503;
    outcome.body = "{\"error\":\"failed\"}";
  } else if (take(mix_.hang)) {
    works = random_.Chance(500);
    faults_.Count(FaultKind::kSellerHang);
    delay = timeout;
    outcome.kind = UpstreamKind::kTimeout;
    outcome.detail = "no answer before the route's timeout";
  } else if (take(mix_.work_then_drop)) {
    faults_.Count(FaultKind::kSellerDrop);
    outcome.kind = UpstreamKind::kFailed;
    outcome.detail = "connection closed after the request";
  } else {
    if (take(mix_.slow)) {
      faults_.Count(FaultKind::kSellerSlow);
      delay = random_.Between(timeout / 2, timeout * 2);
    }
    if (delay >= timeout) {
      delay = timeout;
      outcome.kind = UpstreamKind::kTimeout;
      outcome.detail = "no answer before the route's timeout";
    } else {
      outcome.kind = UpstreamKind::kResponded;
      outcome.status = 200;
      outcome.content_type = "application/json";
      outcome.body = BodyFor(operation_id);
    }
  }
  if (works) ++work_[operation_id];
  scheduler_.After(delay, epoch,
                   [done = std::move(done), outcome = std::move(outcome)] { done(outcome); });
}

// ---- SimStore ----

struct SimStore::Impl {
  std::unique_ptr<SimVfs> vfs;
  std::unique_ptr<sqlite::Database> db;  // declared after the disk it lives on: closed first

  // Opens (or reopens after a crash) the database as the real store does: WAL, the writer's own
  // syncs (synchronous=NORMAL), migrations under FULL. Exclusive locking: one connection, no
  // shared memory.
  Status OpenDatabase() {
    db.reset();
    auto opened = sqlite::Database::OpenOnSimulatedDisk("agentpay-sim.db", vfs->name());
    if (!opened.ok()) return opened.status();
    db = std::move(*opened);
    // A killed process does not checkpoint on its way out; neither does this connection.
    sqlite3_db_config(db->handle(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    for (const char* pragma :
         {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
          "PRAGMA foreign_keys=ON", "PRAGMA temp_store=MEMORY"}) {
      if (Status s = db->Exec(pragma); !s.ok()) return s;
    }
    if (Status s = MigrateSqlite(*db); !s.ok()) return s;
    return db->Exec("PRAGMA synchronous=NORMAL");
  }
};

Result<std::unique_ptr<SimStore>> SimStore::Open(Scheduler& scheduler, SeededRandom& random,
                                                 int64_t max_commit_delay_ms) {
  auto impl = std::make_unique<Impl>();
  auto vfs = SimVfs::Register();
  if (!vfs.ok()) return vfs.status();
  impl->vfs = std::move(*vfs);
  if (Status s = impl->OpenDatabase(); !s.ok()) return s;
  impl->vfs->SyncAll();  // the migrated schema is on the disk before anything is served
  return std::unique_ptr<SimStore>(
      new SimStore(scheduler, random, max_commit_delay_ms, std::move(impl)));
}

SimStore::SimStore(Scheduler& scheduler, SeededRandom& random, int64_t max_commit_delay_ms,
                   std::unique_ptr<Impl> impl)
    : scheduler_(scheduler),
      random_(random),
      max_commit_delay_ms_(max_commit_delay_ms),
      impl_(std::move(impl)) {}

SimStore::~SimStore() { impl_->db.reset(); }

Status SimStore::Commit(const TransactionFn& fn) {
  sqlite::Database& db = *impl_->db;
  if (Status begun = db.Run("BEGIN IMMEDIATE"); !begun.ok()) return begun;
  SqliteTransaction tx(db);
  Status status = RunDecision(fn, tx);
  if (status.ok()) {
    status = db.Run("COMMIT");
    if (status.ok()) {
      ++version_;
      ++stats_.commits;
      ++stats_.decisions;
      return status;
    }
  }
  (void)db.Run("ROLLBACK");
  ++stats_.decisions_rolled_back;
  return status;
}

void SimStore::Sync() {
  impl_->vfs->SyncAll();
  ++stats_.durability_syncs;
}

void SimStore::WriteAsync(TransactionFn fn, WriteDone done) {
  if (inline_) {
    Status status = Commit(fn);
    Sync();
    done(std::move(status));
    return;
  }
  const uint64_t epoch = scheduler_.gateway_epoch();
  ++queued_;
  ++unacknowledged_;
  scheduler_.After(random_.Between(0, max_commit_delay_ms_), epoch,
                   [this, epoch, fn = std::move(fn), done = std::move(done)]() mutable {
                     --queued_;
                     Status status = Commit(fn);
                     // Synced by the next event, acknowledged after it: a crash may fall in
                     // between.
                     scheduler_.After(random_.Between(0, max_commit_delay_ms_), epoch,
                                      [this, done = std::move(done), status]() mutable {
                                        Sync();
                                        --unacknowledged_;
                                        done(std::move(status));
                                      });
                   });
}

Status SimStore::Read(const TransactionFn& fn) {
  Status status = ReadUnsynced(fn);
  AwaitDurable();
  return status;
}

void SimStore::AwaitDurable() { Sync(); }

void SimStore::WhenDurable(std::function<void()> then) {
  Sync();
  then();
}

Status SimStore::Crash(const std::string& instance_id) {
  live_instances_.erase(instance_id);
  writes_cut_ += unacknowledged_;
  unacknowledged_ = 0;
  queued_ = 0;  // every queued write was the dead process's
  impl_->db.reset();
  impl_->vfs->Crash();
  ++version_;
  return impl_->OpenDatabase();
}

Status SimStore::ReadUnsynced(const TransactionFn& fn) {
  sqlite::Database& db = *impl_->db;
  if (Status begun = db.Run("BEGIN"); !begun.ok()) return begun;
  SqliteTransaction tx(db);
  Status status = RunDecision(fn, tx);
  (void)db.Run("COMMIT");
  return status;
}

StoreStats SimStore::Stats() {
  StoreStats stats = stats_;
  stats.write_queue_depth = static_cast<uint64_t>(queued_);
  return stats;
}

Status SimStore::RegisterInstance(const std::string& instance_id) {
  live_instances_.insert(instance_id);
  return Status::Ok();
}

Status SimStore::ReleaseInstance(const std::string& instance_id) {
  live_instances_.erase(instance_id);
  return Status::Ok();
}

Result<bool> SimStore::InstanceAlive(const std::string& instance_id) {
  return live_instances_.count(instance_id) > 0;
}

}  // namespace agentpay::sim
