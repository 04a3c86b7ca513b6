// See system_world.h.
#include "cli/system_world.h"

#include <openssl/rand.h>

#include <chrono>

#include "core/check.h"

namespace agentpay {

int64_t SystemClock::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemRandom::Fill(unsigned char* out, size_t size) {
  // Identifiers and keys must be unguessable; without entropy the process cannot work safely.
  AGENTPAY_CHECK(RAND_bytes(out, static_cast<int>(size)) == 1);
}

}  // namespace agentpay
