// See signals.h.
#include "cli/signals.h"

#include <pthread.h>

namespace agentpay {

TerminationSignals::TerminationSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

void TerminationSignals::Wait() const {
  int received = 0;
  sigwait(&signals_, &received);
}

}  // namespace agentpay
