// The built-in devnet's controls over HTTP, for the demo and for trying "result unknown" by hand:
// GET /admin/v1/devnet shows the chain; POST sets automine and the mine delay, mines a block, or
// drops a pending transaction (as Anvil's anvil_setAutomine, evm_mine, anvil_dropTransaction).
// Served on the admin listener beside the gateway's admin API (cli/admin_listener.h), with the
// same admin token and behind the same browser checks.
#pragma once

#include <optional>
#include <string>

#include "chain/devnet.h"
#include "http/message.h"

namespace agentpay {

// nullopt when the request is not for /admin/v1/devnet. Only the admin token may call it (401
// otherwise). GET answers {block_number, latest_block_timestamp, automine, mine_delay_ms,
// pending_transactions}. POST takes an object, every field optional: {"automine": bool,
// "mine_delay_ms": 0..3600000, "drop": "0x<tx hash>", "mine": bool}; it is checked whole first
// (400 invalid_request naming the bad or unknown field; nothing runs), then applied in that order,
// and answers the GET object plus "done": what it did.
std::optional<HttpResponse> HandleDevnetAdmin(const HttpRequest& request, chain::Devnet& devnet,
                                              const std::string& admin_token);

}  // namespace agentpay
