// See periodic.h.
#include "workers/periodic.h"

namespace agentpay {

PeriodicWorker::PeriodicWorker(int64_t interval_ms, std::function<void()> task)
    : interval_ms_(interval_ms), task_(std::move(task)), thread_([this] { Run(); }) {}

PeriodicWorker::~PeriodicWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeriodicWorker::Run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    task_();
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stopping_; });
  }
}

}  // namespace agentpay
