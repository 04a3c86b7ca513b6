// `agentpay serve`: wires the store, the gateway and the listener, recovers interrupted operations
// before accepting traffic, and in --demo mode adds the in-process seller and a funded account.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/serve_config.h"

namespace agentpay {

int RunServe(const CLI::App& command, ServeOptions& options);

}  // namespace agentpay
