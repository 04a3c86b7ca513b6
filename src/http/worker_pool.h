// A fixed set of threads running tasks from a bounded queue. TrySubmit refuses work past the bound,
// so overload turns into a 503 for the caller instead of unbounded memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/world.h"

namespace agentpay {

class WorkerPool final : public Executor {
 public:
  WorkerPool(size_t threads, size_t max_queued);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and the task is dropped) when the queue is full or the pool stopped.
  bool TrySubmit(std::function<void()> task) override;
  size_t Queued();
  // Finishes running tasks, drops queued ones and joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace agentpay
