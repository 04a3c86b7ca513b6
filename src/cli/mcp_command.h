// `agentpay mcp`: the agent client as a Model Context Protocol server (client/mcp.h), over stdio or
// streamable HTTP, paying from one budget file with one credential and the limits of its flags.
// docs/mcp.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace agentpay {

// Registers the flags on `mcp`; returns the callable that runs the server and yields the exit code
// (0 stdin closed or a termination signal; 1 could not listen; 2 bad flags).
std::function<int()> AddMcpCommand(CLI::App& mcp);

}  // namespace agentpay
