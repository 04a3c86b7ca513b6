// The real world behind the core's Clock and Random interfaces: the system clock and OpenSSL's CSPRNG.
#pragma once

#include "core/world.h"

namespace agentpay {

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override;
};

class SystemRandom final : public Random {
 public:
  void Fill(unsigned char* out, size_t size) override;
};

}  // namespace agentpay
