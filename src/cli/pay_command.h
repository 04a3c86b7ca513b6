// `agentpay pay URL`, `agentpay pay budget` and `agentpay pay reconcile`: the agent client on the
// command line, over the library in include/agentpay/client.h.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace agentpay {

// Registers the flags and the two subcommands on `pay`; returns a callable that runs whichever was
// given and yields the exit code (0 paid; 1 could not run, or the offer is outside the spend
// controls, nothing reserved; 2 rejected or a usage error; 3 unknown; 4 over budget).
std::function<int()> AddPayCommand(CLI::App& pay);

}  // namespace agentpay
