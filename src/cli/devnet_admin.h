// The built-in devnet's controls over HTTP, for the demo and for trying "result unknown" by hand:
// GET /admin/v1/devnet shows the chain; POST sets automine and the mine delay, mines a block, or
// drops a pending transaction (as Anvil's anvil_setAutomine, evm_mine, anvil_dropTransaction).
// Served by `agentpay serve` beside the gateway's admin API, with the same admin token.
#pragma once

#include <optional>
#include <string>

#include "chain/devnet.h"
#include "http/message.h"

namespace agentpay {

// nullopt when the request is not for /admin/v1/devnet. Body of a POST, every field optional:
// {"automine": bool, "mine_delay_ms": int, "mine": true, "drop": "0x<tx hash>"}.
std::optional<HttpResponse> HandleDevnetAdmin(const HttpRequest& request, chain::Devnet& devnet,
                                              const std::string& admin_token);

}  // namespace agentpay
