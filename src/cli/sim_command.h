// `agentpay sim`: one run of the request/effect model as JSON or a text timeline, or a sweep of
// runs drawn from a seed, tallied by policy (CONTRACT §7, ../shared/MODEL.md).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace agentpay {

// Registers the flags on `sim`; returns a callable that runs the command and gives its exit code:
// 0 done, 2 an invalid flag value (the message on stderr).
std::function<int()> AddSimCommand(CLI::App& sim);

}  // namespace agentpay
