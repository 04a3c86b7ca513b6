// `agentpay admin audit`: the gateway's books audit (GET /admin/v1/audit) printed as a table or
// JSON, and, with --chain-rpc, the chain check done here against a node the operator names:
// every settled x402 operation's transaction must show exactly one Transfer of the authorized
// value from the payer to payTo (the gateway's own node is not asked to vouch for itself).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace agentpay {

struct AuditCommandOptions {
  bool json = false;
  std::vector<std::string> chain_rpc;  // http(s) URLs of one chain's nodes (failover)
  std::string ca_file;                 // trusted for https nodes besides the system's store
};

// GETs an admin path ("/admin/v1/…") and returns its JSON answer, or nullopt when the call failed
// (already reported on stderr).
using AdminGet = std::function<std::optional<nlohmann::json>(const std::string& path)>;

// Exit status: 0 no violation, 1 a violation, 2 the audit could not be completed (the gateway or
// the chain's node unreachable or refusing, a node of another chain).
int RunAudit(const AuditCommandOptions& options, const AdminGet& get);

}  // namespace agentpay
