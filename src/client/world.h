// The world the agent client runs in: clock, randomness (nonces, jitter) and sleeping, injected so
// that retries and deadlines can be tested without waiting (DESIGN rule 1).
#pragma once

#include <cstdint>
#include <functional>

#include "core/world.h"

namespace agentpay::client {

struct ClientWorld {
  Clock* clock = nullptr;
  Random* random = nullptr;
  std::function<void(int64_t milliseconds)> sleep_ms;
};

// The system clock, OpenSSL's CSPRNG and a real sleep.
ClientWorld& RealWorld();

}  // namespace agentpay::client
