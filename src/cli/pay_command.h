// `agentpay pay URL`, `agentpay pay budget` and `agentpay pay reconcile`: the agent client on the
// command line (CONTRACT §6), over the library in include/agentpay/client.h.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace agentpay {

// Registers the flags and the two subcommands on `pay`; returns a callable that runs whichever was
// given and yields the exit code (0 paid, 1 could not run, 2 rejected, 3 unknown, 4 over budget).
std::function<int()> AddPayCommand(CLI::App& pay);

}  // namespace agentpay
