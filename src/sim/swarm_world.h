// The world of one simulated run of `agentpay sim swarm`: simulated time, seeded randomness, and
// everything the real gateway is injected with (core/world.h, gateway/upstream.h, store/store.h),
// all driven by one event queue on one thread. The same seed gives the same run, event for event.
//
// Incarnations: the gateway's events (its timers, store commits and their acknowledgements,
// upstream answers, blocking tasks) belong to the gateway process that scheduled them. A simulated
// crash ends that process: its events never run, as a killed process's work never finishes; what
// it committed stays in the store. Events of the world itself (clients, the network) belong to no
// process (epoch 0) and always run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "core/world.h"
#include "gateway/upstream.h"
#include "sim/swarm.h"
#include "store/store.h"

namespace agentpay::sim {

// xoshiro256** seeded through splitmix64: fast, and the same numbers on every machine.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n). Precondition: n > 0.
  uint64_t Below(uint64_t n);
  // Uniform in [low, high]. Precondition: low <= high.
  int64_t Between(int64_t low, int64_t high);
  // True with probability per_mille / 1000.
  bool Chance(int per_mille);
  void Fill(unsigned char* out, size_t size) override;

 private:
  uint64_t s_[4];
};

// Simulated time and the events waiting in it, run in (time, order of scheduling) order.
class Scheduler {
 public:
  static constexpr uint64_t kWorld = 0;  // the epoch of clients and the network

  int64_t now_ms() const { return now_ms_; }
  // The running gateway process's epoch (0: none is running).
  uint64_t gateway_epoch() const { return gateway_epoch_; }
  void set_gateway_epoch(uint64_t epoch) { gateway_epoch_ = epoch; }
  uint64_t NewEpoch() { return ++last_epoch_; }
  // Ends an epoch: its events are dropped unrun.
  void Kill(uint64_t epoch) { dead_.insert(epoch); }
  bool Alive(uint64_t epoch) const { return epoch == kWorld || dead_.count(epoch) == 0; }

  // Precondition: delay_ms >= 0.
  void After(int64_t delay_ms, uint64_t epoch, std::function<void()> fn);
  // Runs the next live event (dropping dead ones on the way); false when none is left or the next
  // one is later than `until_ms`.
  bool RunNext(int64_t until_ms);
  size_t pending() const { return queue_.size(); }
  // Drops every event unrun (the end of a run: what they hold goes before the world they point
  // into).
  void Clear() { queue_ = {}; }
  uint64_t steps() const { return steps_; }

 private:
  struct Event {
    int64_t at_ms;
    uint64_t order;
    uint64_t epoch;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at_ms != b.at_ms ? a.at_ms > b.at_ms : a.order > b.order;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  int64_t now_ms_ = 0;
  uint64_t next_order_ = 0;
  uint64_t steps_ = 0;
  uint64_t gateway_epoch_ = 0;
  uint64_t last_epoch_ = 0;
  std::set<uint64_t> dead_;
};

// Wall-clock time: simulated time from a fixed origin, plus the clock steps the run makes (a
// wall clock may jump either way; the monotonic one never does).
class SimClock final : public Clock {
 public:
  explicit SimClock(const Scheduler& scheduler) : scheduler_(scheduler) {}
  int64_t NowMs() override { return kOriginMs + scheduler_.now_ms() + step_ms_; }
  void Step(int64_t ms) { step_ms_ += ms; }
  static constexpr int64_t kOriginMs = 1'800'000'000'000;

 private:
  const Scheduler& scheduler_;
  int64_t step_ms_ = 0;
};

// The gateway's timers: events of the running process.
class SimTimers final : public Timers {
 public:
  explicit SimTimers(Scheduler& scheduler) : scheduler_(scheduler) {}
  int64_t MonotonicMs() override { return scheduler_.now_ms(); }
  void After(int64_t delay_ms, std::function<void()> fn) override;

 private:
  Scheduler& scheduler_;
};

class SimStore;

// The gateway's blocking work: each task an event of the running process, run at once (blocking
// store writes complete inside it, see SimStore::Inline).
class SimExecutor final : public Executor {
 public:
  SimExecutor(Scheduler& scheduler, SimStore& store) : scheduler_(scheduler), store_(store) {}
  bool TrySubmit(std::function<void()> task) override;

 private:
  Scheduler& scheduler_;
  SimStore& store_;
};

// How the simulated seller behaves, in per mille of calls (the rest answer 200 at once).
struct SellerMix {
  int client_error = 0;    // 4xx
  int server_error = 0;    // 5xx
  int slow = 0;            // 2xx after a delay that may pass the route's timeout
  int hang = 0;            // never answers (the gateway's timeout ends the call)
  int work_then_drop = 0;  // does the work, then drops the connection
  int broken = 0;          // of operations: answered 503 on every call, their work never done
};

// The upstream seller: answers after a simulated delay, by the mix; counts the work it did per
// operation (the upstream idempotency key), which is what "the upstream may have done the work"
// means. It keeps that key as a seller should: once it did an operation's work it never refuses
// it (4xx) afterwards, though the network or its own failures may still lose an answer.
class SimUpstream final : public Upstream {
 public:
  SimUpstream(Scheduler& scheduler, SeededRandom& random, SellerMix mix)
      : scheduler_(scheduler), random_(random), mix_(mix) {}
  void CallAsync(const RouteConfig& route, std::shared_ptr<const HttpRequest> request,
                 const std::string& operation_id, UpstreamDone done) override;
  // Times the seller did the work of an operation (a well-behaved world keeps this at most 1
  // per charge, but the seller itself does not dedupe).
  const std::map<std::string, int>& work() const { return work_; }
  void SetMix(SellerMix mix) { mix_ = mix; }
  // The seller's misbehaviours so far (kSeller*).
  const FaultCounts& faults() const { return faults_; }
  static std::string BodyFor(const std::string& operation_id);

 private:
  Scheduler& scheduler_;
  SeededRandom& random_;
  SellerMix mix_;
  std::map<std::string, int> work_;
  std::map<std::string, bool> broken_;  // drawn at an operation's first call
  FaultCounts faults_;
};

// The real SQLite store code (store/sqlite_transaction.h, the same migrations) on a simulated disk
// (sim_vfs.h), with the writer's group commit replaced by events, in the real writer's order: a
// decision is committed (visible to reads) by an event of the process that asked for it, a few
// simulated milliseconds later; the write-ahead log is synced by the next; only then is the
// decision acknowledged. A crash drops what was still to come: a decision not yet committed is
// lost, and so is one committed but not yet synced (the disk goes back to its last sync, though a
// read may have seen it); one synced but not yet acknowledged stands, unknown to its caller.
class SimStore final : public Store {
 public:
  static Result<std::unique_ptr<SimStore>> Open(Scheduler& scheduler, SeededRandom& random,
                                                int64_t max_commit_delay_ms);
  ~SimStore() override;

  void WriteAsync(TransactionFn fn, WriteDone done) override;
  // Read = ReadUnsynced, then what it saw made durable (here at once, as the writer would soon).
  Status Read(const TransactionFn& fn) override;
  Status ReadUnsynced(const TransactionFn& fn) override;
  void AwaitDurable() override;
  // Synced now, as AwaitDurable does, then `then`.
  void WhenDurable(std::function<void()> then) override;
  StoreStats Stats() override;
  bool ReadsAreRemote() const override { return false; }
  Status RegisterInstance(const std::string& instance_id) override;
  Status ReleaseInstance(const std::string& instance_id) override;
  Result<bool> InstanceAlive(const std::string& instance_id) override;

  // While one is alive, writes commit and are acknowledged at once, inside the call: for code that
  // blocks on Store::Write (admin calls, workers, recovery at start), which a simulator runs as
  // one event.
  class Inline {
   public:
    explicit Inline(SimStore& store) : store_(store), was_(store.inline_) { store.inline_ = true; }
    ~Inline() { store_.inline_ = was_; }
    Inline(const Inline&) = delete;
    Inline& operator=(const Inline&) = delete;

   private:
    SimStore& store_;
    bool was_;
  };
  // A crash: the process's registration ends with it, and the disk goes back to its last sync;
  // the next process opens the database afresh (SQLite's recovery from the synced log).
  Status Crash(const std::string& instance_id);
  // Writes not yet acknowledged when a process died (kWriteCut), over every crash so far.
  int64_t writes_cut() const { return writes_cut_; }
  // Moves whenever what a read sees may have changed: each commit, each crash.
  uint64_t version() const { return version_; }

 private:
  struct Impl;
  SimStore(Scheduler& scheduler, SeededRandom& random, int64_t max_commit_delay_ms,
           std::unique_ptr<Impl> impl);
  Status Commit(const TransactionFn& fn);
  void Sync();

  Scheduler& scheduler_;
  SeededRandom& random_;
  const int64_t max_commit_delay_ms_;
  std::unique_ptr<Impl> impl_;
  bool inline_ = false;
  int64_t queued_ = 0;
  int64_t unacknowledged_ = 0;  // of the running process
  int64_t writes_cut_ = 0;
  uint64_t version_ = 0;
  StoreStats stats_;
  std::set<std::string> live_instances_;
};

}  // namespace agentpay::sim
