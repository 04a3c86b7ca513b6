// The real Timers (core/world.h): the steady clock, and one-shot timers on a thread of their own.
#pragma once

#include <memory>

#include "core/world.h"

namespace agentpay {

class AsioTimers final : public Timers {
 public:
  AsioTimers();
  // Stops the thread; timers still pending are dropped without running.
  ~AsioTimers() override;
  AsioTimers(const AsioTimers&) = delete;
  AsioTimers& operator=(const AsioTimers&) = delete;

  int64_t MonotonicMs() override;
  void After(int64_t delay_ms, std::function<void()> fn) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentpay
