// `agentpay admin ...`: the admin API over HTTP (accounts, deposits, operations).
#pragma once

#include <CLI/CLI.hpp>

namespace agentpay {

// Registers the admin subcommands on `admin`; returns a callable that runs the chosen one.
std::function<int()> AddAdminCommands(CLI::App& admin);

}  // namespace agentpay
