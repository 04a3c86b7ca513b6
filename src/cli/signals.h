// SIGINT/SIGTERM for the long-running subcommands: blocked before any thread starts (threads
// inherit the mask), then awaited with sigwait on the main thread, which shuts down in order.
#pragma once

#include <csignal>

namespace agentpay {

class TerminationSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread and every thread it starts from now on.
  TerminationSignals();
  // Returns once SIGINT or SIGTERM arrives.
  void Wait() const;

 private:
  sigset_t signals_;
};

}  // namespace agentpay
