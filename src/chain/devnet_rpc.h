// The built-in devnet's Ethereum JSON-RPC read endpoint, POST /devnet/rpc on the gateway's public
// listener: what `agentpay pay reconcile --chain-rpc`, viem's public client and x402 clients read.
// Anyone who can reach the listener may call it: it shows public chain data of a demo chain whose
// tokens are worth nothing, and it cannot write (no transaction is accepted through it).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "chain/devnet.h"
#include "http/message.h"

namespace agentpay::chain {

inline constexpr std::string_view kDevnetRpcPath = "/devnet/rpc";
// A larger body is refused with HTTP 413 before it is parsed.
inline constexpr size_t kDevnetRpcMaxBodyBytes = 128 * 1024;
// A batch of more calls is refused as a whole (-32600); an empty batch too.
inline constexpr size_t kDevnetRpcMaxBatch = 100;
// Once a batch's answers pass this size, its remaining calls answer -32005 instead of running.
inline constexpr size_t kDevnetRpcMaxResponseBytes = 4 * 1024 * 1024;
// Deeper JSON nesting is a parse error: no method takes more than a few levels.
inline constexpr int kDevnetRpcMaxJsonDepth = 16;

// JSON-RPC 2.0 error codes (the specification's, and EIP-1474's for the last three).
inline constexpr int kRpcParseError = -32700;
inline constexpr int kRpcInvalidRequest = -32600;
inline constexpr int kRpcMethodNotFound = -32601;
inline constexpr int kRpcInvalidParams = -32602;
inline constexpr int kRpcServerError = -32000;         // the chain could not answer
inline constexpr int kRpcMethodNotSupported = -32004;  // a write method: this endpoint reads
inline constexpr int kRpcLimitExceeded = -32005;       // block range, result count, response size
inline constexpr int kRpcExecutionReverted = 3;        // eth_call / eth_estimateGas reverted (geth)

// The JSON text answering one JSON-RPC body (a call or a batch); nullopt when nothing is to be
// sent back (only notifications, i.e. calls without an id). Never fails: every problem is a
// JSON-RPC error object.
std::optional<std::string> AnswerDevnetRpc(std::string_view body, Devnet& devnet);

// nullopt when the request is not for kDevnetRpcPath. POST only (405 otherwise, with Allow);
// 413 past kDevnetRpcMaxBodyBytes; 204 when only notifications came; else 200 with the answer.
std::optional<HttpResponse> HandleDevnetRpc(const HttpRequest& request, Devnet& devnet);

}  // namespace agentpay::chain
