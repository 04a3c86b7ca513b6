// The MCP server of the agent client (`agentpay mcp`, docs/mcp.md): the Model Context Protocol's
// JSON-RPC messages (initialize, ping, tools/list, tools/call) and three tools over the client
// library: pay_request, budget and reconcile. Pure: the shell (cli/mcp_command.cc) reads the
// messages (stdio lines, or HTTP POST bodies), injects the library's calls (McpEffects) and writes
// the answers. What a tool may spend is the server's configuration, never a tool's arguments: a
// call may lower the cap on one payment, not raise it, and cannot name another budget file or
// credential.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agentpay/client.h"

namespace agentpay::client {

// The protocol versions answered: the client's own when it is one of these, else the newest.
inline constexpr const char* kMcpProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};
// A pay_request's answer carries at most this much of the response body (the rest is cut, and
// the answer says so).
inline constexpr size_t kMcpMaxBodyBytes = 64 * 1024;
// Arguments past these are refused (invalid params).
inline constexpr size_t kMcpMaxRequestBodyBytes = 1024 * 1024;
inline constexpr size_t kMcpMaxHeaders = 64;
inline constexpr size_t kMcpMaxTaskLength = 200;

struct McpServerConfig {
  // The payments' settings: the credential, the budget file (and its total when it creates it),
  // the spend controls and max_amount (the cap a call can only lower), chain_rpc, ca_file,
  // attempts and timeouts. url, method, body, headers, task, step and the key come from a call.
  PayOptions payment;
  ReconcileOptions reconcile;  // budget_db, chain_rpc, ca_file, api_key: the same as payment's
  std::string version;         // the server's version (serverInfo)
};

// The library's calls, injected (the shell passes client::Pay, ReadBudget and Reconcile).
struct McpEffects {
  std::function<PayResult(const PayOptions&)> pay;
  std::function<BudgetReport(const std::string& budget_db)> budget;
  std::function<ReconcileReport(const ReconcileOptions&)> reconcile;
};

// The answer to one JSON-RPC message: a response for a request, nullopt for a notification (or a
// response sent to us). `message` need not be valid: anything that is not a JSON-RPC 2.0 request
// gets the JSON-RPC error it deserves (-32600 invalid request; -32601 unknown method; -32602 bad
// params, an unknown tool included). Tool calls that ran end in a result whose isError says
// whether the payment (or the read) succeeded.
std::optional<nlohmann::json> HandleMcpMessage(const nlohmann::json& message,
                                               const McpServerConfig& config,
                                               const McpEffects& effects);

// The answer to text that is not JSON at all: -32700 parse error, id null.
nlohmann::json McpParseError();

// The tools/list result: each tool's name, description and input schema.
nlohmann::json McpTools();

}  // namespace agentpay::client
