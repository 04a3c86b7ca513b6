// The one place a failed invariant ends the process.
#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace agentpay {
void CheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "agentpay: invariant failed: %s at %s:%d\n", condition, file, line);
  std::abort();
}
}  // namespace agentpay
