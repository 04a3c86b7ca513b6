// `agentpay sim swarm`: runs seeds of the gateway simulator (src/sim/swarm.h) with a progress bar
// and a summary; exits 1 at the first seed that breaks an invariant, naming it and the step.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace agentpay {

// Registers the flags on `swarm`; the callable runs it: 0 every seed held, 1 a violation (the seed,
// the step and the invariant on stdout), 2 an invalid flag value.
std::function<int()> AddSwarmCommand(CLI::App& swarm);

}  // namespace agentpay
