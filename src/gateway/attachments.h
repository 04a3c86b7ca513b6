// Duplicates attached to an operation in flight (CONTRACT §3: a concurrent duplicate attaches to
// the one in flight). Each waits without holding a thread: it re-reads the operation when a
// decision of this process finished an attempt of it, and at least every 100 ms (the attempt may
// finish in another gateway process sharing the store), until the operation has an answer or the
// attach wait ran out; then 202 operation_in_progress.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/operation.h"
#include "core/world.h"
#include "gateway/metrics.h"
#include "http/server.h"
#include "store/store.h"

namespace agentpay {

// The answer for an operation as re-read from the store, once it has one; nullopt: keep waiting.
using AnswerWhenDone = std::function<std::optional<HttpResponse>(const Operation&)>;
// The answer for a duplicate that stops waiting while the operation is still in flight (the wait
// ran out, no reader was free, the gateway is shutting down), given the operation as last seen and
// why. Default: 202 operation_in_progress with `detail`.
using AnswerStillPending = std::function<HttpResponse(const Operation&, const std::string& detail)>;

class Attachments {
 public:
  // `readers` runs the re-reads (they may block on the store); `timers` paces them.
  Attachments(Store& store, Timers& timers, Executor& readers, Metrics& metrics, int64_t wait_ms);

  // Answers `respond` (exactly once) when `answer_when_done` has an answer for the operation, or
  // after the wait with `still_pending`'s (default: 202 operation_in_progress).
  void Attach(const Operation& op, AnswerWhenDone answer_when_done, Respond respond,
              AnswerStillPending still_pending = nullptr);
  // A decision of this process ended or handed over an attempt of `operation_id`: its attached
  // duplicates look again now.
  void Completed(const std::string& operation_id);
  // Answers every duplicate still waiting (202 operation_in_progress) and lets nobody wait any
  // more: a timer or re-read of theirs that fires later finds them answered and touches nothing
  // else. Call it before the objects given to the constructor go (Gateway's destructor does).
  void Close();

 private:
  struct Waiter;
  void Check(const std::shared_ptr<Waiter>& waiter);
  void Schedule(const std::shared_ptr<Waiter>& waiter, int64_t delay_ms);
  void Submit(const std::shared_ptr<Waiter>& waiter);
  void Forget(const Waiter& waiter);

  Store& store_;
  Timers& timers_;
  Executor& readers_;
  Metrics& metrics_;
  const int64_t wait_ms_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<std::weak_ptr<Waiter>>> waiting_;  // by operation
  bool closed_ = false;  // guarded by mutex_
};

}  // namespace agentpay
