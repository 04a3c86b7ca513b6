// AsioTimers: one io_context on one thread; each After is a steady_timer waiting on it.
#include "http/timers.h"

#include <pthread.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <thread>

#include "core/event_threads.h"

namespace agentpay {

namespace net = boost::asio;

struct AsioTimers::Impl {
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  std::thread thread{[this] {
    pthread_setname_np(pthread_self(), "timers");
    MarkEventThread("timers");
    ioc.run();
  }};
};

AsioTimers::AsioTimers() : impl_(std::make_unique<Impl>()) {}

AsioTimers::~AsioTimers() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

int64_t AsioTimers::MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void AsioTimers::After(int64_t delay_ms, std::function<void()> fn) {
  auto timer = std::make_shared<net::steady_timer>(impl_->ioc);
  timer->expires_after(std::chrono::milliseconds(delay_ms < 0 ? 0 : delay_ms));
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& error) {
    if (!error) fn();
  });
}

}  // namespace agentpay
