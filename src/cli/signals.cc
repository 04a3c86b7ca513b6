// See signals.h.
#include "cli/signals.h"

#include <pthread.h>

namespace agentpay {

TerminationSignals::TerminationSignals(bool reload) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  if (reload) sigaddset(&signals_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

int TerminationSignals::Wait() const {
  int received = 0;
  sigwait(&signals_, &received);
  return received;
}

}  // namespace agentpay
