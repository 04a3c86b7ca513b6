// Runs a task every interval on its own thread until stopped; the shell's scheduler for workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace agentpay {

class PeriodicWorker {
 public:
  PeriodicWorker(int64_t interval_ms, std::function<void()> task);
  ~PeriodicWorker();  // stops and joins
  PeriodicWorker(const PeriodicWorker&) = delete;
  PeriodicWorker& operator=(const PeriodicWorker&) = delete;

 private:
  void Run();

  const int64_t interval_ms_;
  std::function<void()> task_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace agentpay
