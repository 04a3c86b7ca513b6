// SIGINT/SIGTERM (and, for serve, SIGHUP) for the long-running subcommands: blocked before any
// thread starts (threads inherit the mask), then awaited with sigwait on the main thread, which
// shuts down in order (or, on SIGHUP, reloads and waits again).
#pragma once

#include <csignal>

namespace agentpay {

class TerminationSignals {
 public:
  // Blocks SIGINT and SIGTERM (and SIGHUP with `reload`) in the calling thread and every thread it
  // starts from now on.
  explicit TerminationSignals(bool reload = false);
  // Returns the signal once SIGINT, SIGTERM or (with `reload`) SIGHUP arrives.
  int Wait() const;

 private:
  sigset_t signals_;
};

}  // namespace agentpay
