// A JSON-RPC 2.0 client over blocking HTTP for EVM nodes. Its error codes keep apart what a
// payment system must never confuse: "the request was never sent" and "it may have been received".
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chain/bytes.h"
#include "core/result.h"
#include "http/client.h"

namespace agentpay::chain {

// Stable error codes of JsonRpcClient::Call (and of everything built on it):
//   rpc_unreachable  the connection or its TLS handshake failed: the request was never sent,
//                    retrying is safe.
//   rpc_timeout      the request was (or may have been) sent but no complete answer arrived: the
//                    deadline passed or the connection dropped. The node MAY HAVE ACTED on it (a
//                    transaction may be in its pool): reconcile, do not assume failure.
//   rpc_error        the node answered with a JSON-RPC error object (code, message, data kept).
//   rpc_malformed    an answer arrived but is not a usable JSON-RPC response (an HTTP status other
//                    than 200, 429 and 5xx; bad JSON, wrong id, too large, a result of the wrong
//                    shape). Treat as unknown.
//   rpc_unavailable  the node or its provider would not serve the call now: HTTP 429, HTTP 5xx
//                    without a JSON-RPC error object, or the error -32005 ("limit exceeded",
//                    EIP-1474). It may have received the request: treat as unknown; another
//                    endpoint may serve it (rpc_pool.h).
// They are ErrorCode::kRpcUnreachable and so on; these are their names, to compare with
// Status::code() where a name is what is at hand (logs, tests). Code compares Status::error().
inline constexpr std::string_view kRpcUnreachable = ErrorCodeName(ErrorCode::kRpcUnreachable);
inline constexpr std::string_view kRpcTimeout = ErrorCodeName(ErrorCode::kRpcTimeout);
inline constexpr std::string_view kRpcError = ErrorCodeName(ErrorCode::kRpcError);
inline constexpr std::string_view kRpcMalformed = ErrorCodeName(ErrorCode::kRpcMalformed);
inline constexpr std::string_view kRpcUnavailable = ErrorCodeName(ErrorCode::kRpcUnavailable);
// The JSON-RPC error code of "limit exceeded" (EIP-1474), a rate limit rather than an answer.
inline constexpr int64_t kRpcLimitExceededCode = -32005;

// Answers above this are refused (rpc_malformed): far above any receipt or block header we read.
inline constexpr uint64_t kDefaultMaxRpcResponseBytes = 4 * 1024 * 1024;
// Deeper JSON nesting is refused before parsing; EVM answers nest a few levels at most.
inline constexpr int kMaxRpcJsonDepth = 64;
// Node-supplied text copied into Status messages is cut to this many bytes.
inline constexpr size_t kMaxRpcMessageBytes = 512;

// The JSON-RPC error object of an rpc_error, for callers that need more than the Status message.
struct RpcErrorDetail {
  int64_t code = 0;
  std::string message;                       // as the node sent it (cut to kMaxRpcMessageBytes)
  std::optional<Bytes> data;                 // revert data when the node sent hex data
  std::optional<std::string> revert_reason;  // decoded Error(string), when data is one
};

// Decodes Solidity's Error(string) revert data (selector 0x08c379a0); nullopt for anything else.
std::optional<std::string> DecodeRevertReason(std::span<const uint8_t> data);

// One call of a batch (JsonRpcClient::CallBatch). Precondition: params is an array.
struct RpcCall {
  std::string method;
  nlohmann::json params;
};

// One call's answer within a batch: its result, or its failure as Call would report it (rpc_error
// with `error_detail` filled; rpc_malformed when the node's answer has nothing for it, or
// something unusable; rpc_unavailable for a rate limit).
struct RpcAnswer {
  Result<nlohmann::json> result;
  RpcErrorDetail error_detail;
};

// Calls past this many in one batch are the caller's to split: providers cap batches (one of them
// at 20), and a larger batch may be refused whole.
inline constexpr size_t kMaxRpcBatchCalls = 10;

// Thread-safe: calls from several threads may overlap (SendHttp keeps per-thread connections).
class JsonRpcClient {
 public:
  // Precondition: timeout_ms > 0. The timeout covers connect, send and the whole answer. An https
  // endpoint's certificate must chain to `trust` (null: the system's CA store).
  JsonRpcClient(Endpoint endpoint, int64_t timeout_ms,
                uint64_t max_response_bytes = kDefaultMaxRpcResponseBytes,
                std::shared_ptr<const TlsTrust> trust = nullptr);
  JsonRpcClient(const JsonRpcClient&) = delete;
  JsonRpcClient& operator=(const JsonRpcClient&) = delete;

  // Sends {"jsonrpc":"2.0","id":N,"method":…,"params":…} and returns the "result" member (which
  // may be null). Precondition: params is an array. On rpc_error the message reads
  // "<method>: <node message>[: <revert reason>] (rpc code <code>[, data 0x…])", and
  // error_detail, when given, receives the error object.
  Result<nlohmann::json> Call(std::string_view method, nlohmann::json params,
                              RpcErrorDetail* error_detail = nullptr);

  // Sends `calls` as one JSON-RPC batch (a JSON array: one HTTP request, one round trip) and
  // returns their answers in the order of `calls`, matched by id whatever order the node answered
  // in. The error, for the whole batch: a transport failure (as Call's: rpc_timeout means the node
  // may have acted on any of the calls), an HTTP 429 or 5xx (rpc_unavailable), an answer that is
  // not an array of JSON-RPC 2.0 answers to these ids (rpc_malformed), or a single error object in
  // place of the array: a node that does not take batches (rpc_error) or is rate limiting
  // (rpc_unavailable); such a node acted on none of them. Precondition: 1 to kMaxRpcBatchCalls
  // calls.
  Result<std::vector<RpcAnswer>> CallBatch(std::span<const RpcCall> calls);

  const Endpoint& endpoint() const { return endpoint_; }
  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  // POSTs `body`; the transport failures of `what` (a method's name, or "batch") as rpc_* codes.
  Result<ClientResponse> Post(std::string body, std::string_view what);

  Endpoint endpoint_;
  int64_t timeout_ms_;
  uint64_t max_response_bytes_;
  std::shared_ptr<const TlsTrust> trust_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace agentpay::chain
