// See system_world.h.
#include "cli/system_world.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <chrono>
#include <cstring>

#include "core/check.h"

namespace agentpay {

int64_t SystemClock::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemRandom::Fill(unsigned char* out, size_t size) {
  // Identifiers and keys must be unguessable; without entropy the process cannot work safely.
  // Small requests (an operation id per paid request) are served from a per-thread block of the
  // CSPRNG's output: one RAND_bytes call, with its locks, for many ids instead of one each. Bytes
  // handed out are wiped from the block; larger requests (keys) go to RAND_bytes directly.
  constexpr size_t kBlockBytes = 512;
  constexpr size_t kLargestBuffered = 64;
  if (size > kLargestBuffered) {
    AGENTPAY_CHECK(RAND_bytes(out, static_cast<int>(size)) == 1);
    return;
  }
  thread_local unsigned char block[kBlockBytes];
  thread_local size_t used = kBlockBytes;
  if (kBlockBytes - used < size) {
    AGENTPAY_CHECK(RAND_bytes(block, static_cast<int>(kBlockBytes)) == 1);
    used = 0;
  }
  std::memcpy(out, block + used, size);
  OPENSSL_cleanse(block + used, size);
  used += size;
}

}  // namespace agentpay
