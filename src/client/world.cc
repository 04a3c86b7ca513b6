// The real world behind ClientWorld; see world.h.
#include "client/world.h"

#include <openssl/rand.h>

#include <chrono>
#include <thread>

#include "core/check.h"

namespace agentpay::client {
namespace {

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class SystemRandom final : public Random {
 public:
  void Fill(unsigned char* out, size_t size) override {
    // Authorization nonces must be unguessable; without entropy nothing may be signed.
    AGENTPAY_CHECK(RAND_bytes(out, static_cast<int>(size)) == 1);
  }
};

}  // namespace

ClientWorld& RealWorld() {
  static SystemClock clock;
  static SystemRandom random;
  static ClientWorld world{&clock, &random, [](int64_t milliseconds) {
                             if (milliseconds > 0) {
                               std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
                             }
                           }};
  return world;
}

}  // namespace agentpay::client
