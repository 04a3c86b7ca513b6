// The progress bar of long CLI runs (sim --sweep, sim swarm) on stderr.
#pragma once

#include <cstdint>
#include <string_view>

namespace agentpay {

// Redraws "[#####...]  42%  420/1000 UNIT" in place on stderr, and ends the line once done reaches
// total. For a terminal only: callers draw it when isatty(STDERR_FILENO).
void DrawProgress(uint64_t done, uint64_t total, std::string_view unit);

}  // namespace agentpay
