// The decisions waiting for a store's writer thread, the same for every backend: bounded (past
// StoreOptions::max_queued_writes a decision fails at once with store_overloaded) and taken in
// batches of at most max_batch, so that decisions queued while a commit is under way share the
// next one (group commit). When each batch commits is the backend's business.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "store/store.h"

namespace agentpay {

struct QueuedDecision {
  TransactionFn fn;
  WriteDone done;
};

class WriteQueue {
 public:
  explicit WriteQueue(const StoreOptions& options) : options_(options) {}
  // Queues a decision, or calls `done` at once with store_overloaded when the queue is full.
  void Push(TransactionFn fn, WriteDone done);
  // Waits for queued decisions and takes up to max_batch of them, oldest first; empty once Stop()
  // was called and nothing is left.
  std::vector<std::unique_ptr<QueuedDecision>> TakeBatch();
  // TakeBatch, waiting at most `wait`: empty also when nothing came by then.
  std::vector<std::unique_ptr<QueuedDecision>> TakeBatchWithin(std::chrono::microseconds wait);
  // Without waiting, what is queued now, as much as a batch of `taken` decisions has room for
  // (max_batch - taken), oldest first: decisions that came while a batch began join it.
  std::vector<std::unique_ptr<QueuedDecision>> TakeWaiting(size_t taken);
  // The writer's loop: takes batch after batch and gives each to `commit`, until Stop() and
  // nothing is left. A batch is destroyed before the next wait: its closures hold what the
  // decisions' callers hold (a request and its body, a connection), and an idle store must not
  // keep the last batch's alive until the next decision comes.
  //
  // `ahead`, if given, is what a backend holds for its next batch between batches (PostgreSQL's
  // writer: a transaction begun behind the last COMMIT): while `holding()`, the loop waits at most
  // `linger` for a decision, and then calls `let_go()` before it waits on.
  struct Ahead {
    std::function<bool()> holding;
    std::chrono::microseconds linger;
    std::function<void()> let_go;
  };
  void Serve(const std::function<void(std::vector<std::unique_ptr<QueuedDecision>>&)>& commit,
             const Ahead* ahead = nullptr);
  void Stop();
  size_t depth();

 private:
  // Takes up to `room` queued decisions (the caller holds mutex_).
  std::vector<std::unique_ptr<QueuedDecision>> TakeQueued(size_t room);
  const StoreOptions options_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::unique_ptr<QueuedDecision>> queue_;  // guarded by mutex_
  bool stopping_ = false;                              // guarded by mutex_
};

// Runs one decision: its status, or internal_error if it threw (no exception leaves the store).
Status RunDecision(const TransactionFn& fn, Transaction& tx);

// The wall time of a writer's phases (StoreStats::writer_*_ns): each Lap is the nanoseconds since
// the one before it (or since construction); nanoseconds, so that short phases summed over many
// batches are not lost to rounding. For the metrics only: nothing decides by it.
class WriterLaps {
 public:
  WriterLaps() : last_(std::chrono::steady_clock::now()) {}
  uint64_t Lap() {
    const auto now = std::chrono::steady_clock::now();
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
    return ns > 0 ? static_cast<uint64_t>(ns) : 0;
  }

 private:
  std::chrono::steady_clock::time_point last_;
};

}  // namespace agentpay
