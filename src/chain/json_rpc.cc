// JsonRpcClient: maps SendHttp's outcomes onto the four rpc_* codes and validates the JSON-RPC
// envelope (version, id, exactly one of result/error) without letting a parse exception escape.
#include "chain/json_rpc.h"
#include "core/json_depth.h"

#include <algorithm>
#include <array>
#include <utility>

namespace agentpay::chain {
namespace {

using nlohmann::json;

constexpr std::array<uint8_t, 4> kErrorStringSelector = {0x08, 0xc3, 0x79, 0xa0};
// Hex of revert data shown in a Status message is cut here; the detail keeps all of it.
constexpr size_t kMaxDataHexInMessage = 300;

std::string Cut(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return std::string(text.substr(0, limit)) + "…";
}

// A 32-byte ABI word that must hold a small offset or length; nullopt when it does not fit.
std::optional<size_t> SmallWord(std::span<const uint8_t> data, size_t at) {
  if (at > data.size() || data.size() - at < 32) return std::nullopt;
  uint64_t value = 0;
  for (size_t i = 0; i < 32; ++i) {
    if (i < 24 && data[at + i] != 0) return std::nullopt;
    if (i >= 24) value = (value << 8) | data[at + i];
  }
  if (value > data.size()) return std::nullopt;
  return static_cast<size_t>(value);
}

Status TransportError(const ClientResponse& response, std::string_view method) {
  const std::string where = std::string(method) + ": ";
  switch (response.error) {
    case ClientError::kConnect:
      return Status::Error(ErrorCode::kRpcUnreachable,
                           where + "cannot connect (request not sent): " + response.detail);
    case ClientError::kTls:
      return Status::Error(ErrorCode::kRpcUnreachable,
                           where + "TLS failed (request not sent): " + response.detail);
    case ClientError::kTimeout:
      return Status::Error(ErrorCode::kRpcTimeout,
                           where +
                               "no answer before the deadline; the node may have received "
                               "the request: " +
                               response.detail);
    case ClientError::kClosed:
      return Status::Error(ErrorCode::kRpcTimeout,
                           where +
                               "connection closed before a complete answer; the node may "
                               "have received the request: " +
                               response.detail);
    case ClientError::kProtocol:
    case ClientError::kTooLarge:
      return Status::Error(ErrorCode::kRpcMalformed,
                           where + "unusable HTTP answer (" +
                               std::string(ClientErrorName(response.error)) +
                               "): " + response.detail);
    case ClientError::kNone:
      break;
  }
  return Status::Ok();
}

// Reads "data" of an error object: a hex string, or (some nodes) an object with a "data" string.
std::optional<Bytes> ErrorData(const json& error) {
  auto data = error.find("data");
  if (data == error.end()) return std::nullopt;
  const json* text = &*data;
  if (data->is_object()) {
    auto inner = data->find("data");
    if (inner == data->end()) return std::nullopt;
    text = &*inner;
  }
  if (!text->is_string()) return std::nullopt;
  Result<Bytes> bytes = ParseHex(text->get_ref<const std::string&>());
  if (!bytes.ok()) return std::nullopt;
  return std::move(*bytes);
}

Status ErrorObjectStatus(const json& error, std::string_view method, RpcErrorDetail* out) {
  auto code = error.find("code");
  auto message = error.find("message");
  if (!error.is_object() || code == error.end() || !code->is_number_integer() ||
      message == error.end() || !message->is_string()) {
    return Status::Error(ErrorCode::kRpcMalformed,
                         std::string(method) + ": error member is not a JSON-RPC error object");
  }
  RpcErrorDetail detail;
  detail.code = code->get<int64_t>();
  detail.message = Cut(message->get_ref<const std::string&>(), kMaxRpcMessageBytes);
  detail.data = ErrorData(error);
  if (detail.data) detail.revert_reason = DecodeRevertReason(*detail.data);
  std::string text = std::string(method) + ": " + detail.message;
  if (detail.revert_reason && detail.message.find(*detail.revert_reason) == std::string::npos) {
    text += ": " + Cut(*detail.revert_reason, kMaxRpcMessageBytes);
  }
  text += " (rpc code " + std::to_string(detail.code);
  if (detail.data) text += ", data " + Cut(Hex(*detail.data), kMaxDataHexInMessage);
  text += ")";
  if (out != nullptr) *out = std::move(detail);
  return Status::Error(ErrorCode::kRpcError, text);
}

// The error member of an answer, if it has one: the node's answer (rpc_error, `detail` filled),
// also in a non-200 answer (some servers send reverts with 500), unless it is a rate limit: -32005,
// or any error object in a 429.
std::optional<Status> ErrorMember(const json& envelope, std::string_view method, int http_status,
                                  RpcErrorDetail* detail) {
  auto error = envelope.find("error");
  if (error == envelope.end() || error->is_null()) return std::nullopt;
  RpcErrorDetail object;
  Status status = ErrorObjectStatus(*error, method, &object);
  if (status.error() == ErrorCode::kRpcError &&
      (object.code == kRpcLimitExceededCode || http_status == 429)) {
    return Status::Error(ErrorCode::kRpcUnavailable, status.message());
  }
  if (detail != nullptr) *detail = std::move(object);
  return status;
}

// Not served now (a rate limit, or a server or proxy error without a JSON-RPC answer), or not an
// answer at all; nullopt for HTTP 200.
std::optional<Status> HttpStatusError(const ClientResponse& response, std::string_view method) {
  const std::string where = std::string(method) + ": ";
  if (response.status == 429 || response.status >= 500) {
    return Status::Error(ErrorCode::kRpcUnavailable,
                         where + "HTTP " + std::to_string(response.status) +
                             " (not served now): " + Cut(response.body, kMaxRpcMessageBytes));
  }
  if (response.status != 200) {
    return Status::Error(ErrorCode::kRpcMalformed, where + "HTTP " +
                                                       std::to_string(response.status) + ": " +
                                                       Cut(response.body, kMaxRpcMessageBytes));
  }
  return std::nullopt;
}

// The result member of a JSON-RPC 2.0 answer (an object without an error) to call `id`.
Result<json> ResultMember(json& envelope, uint64_t id, std::string_view method) {
  const std::string where = std::string(method) + ": ";
  auto version = envelope.find("jsonrpc");
  auto answer_id = envelope.find("id");
  auto result = envelope.find("result");
  if (version == envelope.end() || *version != "2.0") {
    return Status::Error(ErrorCode::kRpcMalformed, where + "answer is not JSON-RPC 2.0");
  }
  if (answer_id == envelope.end() || !answer_id->is_number_unsigned() ||
      answer_id->get<uint64_t>() != id) {
    return Status::Error(ErrorCode::kRpcMalformed, where + "answer id does not match the request");
  }
  if (result == envelope.end()) {
    return Status::Error(ErrorCode::kRpcMalformed, where + "answer has neither result nor error");
  }
  return std::move(*result);
}

// The body as JSON, within the nesting limit; a discarded value when it is not JSON.
Result<json> ParseBody(const ClientResponse& response, std::string_view method) {
  if (!JsonNestingWithin(response.body, kMaxRpcJsonDepth)) {
    return Status::Error(ErrorCode::kRpcMalformed,
                         std::string(method) + ": answer nests too deeply");
  }
  return json::parse(response.body, nullptr, /*allow_exceptions=*/false);
}

Result<json> ParseEnvelope(const ClientResponse& response, uint64_t id, std::string_view method,
                           RpcErrorDetail* detail) {
  Result<json> envelope = ParseBody(response, method);
  if (!envelope.ok()) return envelope.status();
  const bool parsed = !envelope->is_discarded() && envelope->is_object();
  if (parsed) {
    if (auto error = ErrorMember(*envelope, method, response.status, detail)) return *error;
  }
  if (auto error = HttpStatusError(response, method)) return *error;
  if (!parsed) {
    return Status::Error(ErrorCode::kRpcMalformed,
                         std::string(method) + ": answer is not a JSON object");
  }
  return ResultMember(*envelope, id, method);
}

// The answers of a batch whose first call has id `first_id` (the others follow in order).
Result<std::vector<RpcAnswer>> ParseBatch(const ClientResponse& response, uint64_t first_id,
                                          std::span<const RpcCall> calls) {
  constexpr std::string_view kWhere = "batch";
  Result<json> body = ParseBody(response, kWhere);
  if (!body.ok()) return body.status();
  // One error object for the whole batch: a node that takes no batches, or a rate limit.
  if (!body->is_discarded() && body->is_object()) {
    if (auto error = ErrorMember(*body, kWhere, response.status, nullptr)) return *error;
  }
  if (auto error = HttpStatusError(response, kWhere)) return *error;
  if (body->is_discarded() || !body->is_array()) {
    return Status::Error(ErrorCode::kRpcMalformed, "batch: answer is not a JSON array");
  }
  // Each answer to one of our calls, once; anything else makes the whole answer unusable.
  std::vector<json*> by_call(calls.size(), nullptr);
  for (json& envelope : *body) {
    auto id = envelope.is_object() ? envelope.find("id") : envelope.end();
    if (id == envelope.end() || !id->is_number_unsigned() || id->get<uint64_t>() < first_id ||
        id->get<uint64_t>() - first_id >= calls.size() ||
        by_call[id->get<uint64_t>() - first_id] != nullptr) {
      return Status::Error(ErrorCode::kRpcMalformed,
                           "batch: an answer's id does not match one call of the request");
    }
    by_call[id->get<uint64_t>() - first_id] = &envelope;
  }
  std::vector<RpcAnswer> answers;
  answers.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    RpcAnswer answer{Status::Error(ErrorCode::kRpcMalformed,
                                   calls[i].method + ": the batch's answer has nothing for it"),
                     {}};
    if (json* envelope = by_call[i]; envelope != nullptr) {
      if (auto error = ErrorMember(*envelope, calls[i].method, 200, &answer.error_detail)) {
        answer.result = *error;
      } else {
        answer.result = ResultMember(*envelope, first_id + i, calls[i].method);
      }
    }
    answers.push_back(std::move(answer));
  }
  return answers;
}

}  // namespace

std::optional<std::string> DecodeRevertReason(std::span<const uint8_t> data) {
  if (data.size() < 4 ||
      !std::equal(kErrorStringSelector.begin(), kErrorStringSelector.end(), data.begin())) {
    return std::nullopt;
  }
  std::span<const uint8_t> body = data.subspan(4);
  std::optional<size_t> offset = SmallWord(body, 0);
  if (!offset) return std::nullopt;
  std::optional<size_t> length = SmallWord(body, *offset);
  if (!length || body.size() - *offset - 32 < *length) return std::nullopt;
  const auto* start = body.data() + *offset + 32;
  return std::string(reinterpret_cast<const char*>(start), *length);
}

JsonRpcClient::JsonRpcClient(Endpoint endpoint, int64_t timeout_ms, uint64_t max_response_bytes,
                             std::shared_ptr<const TlsTrust> trust)
    : endpoint_(std::move(endpoint)),
      timeout_ms_(timeout_ms),
      max_response_bytes_(max_response_bytes),
      trust_(std::move(trust)) {
  AGENTPAY_CHECK(timeout_ms > 0);
}

Result<ClientResponse> JsonRpcClient::Post(std::string body, std::string_view what) {
  ClientRequest request;
  request.method = "POST";
  request.target = endpoint_.base_path.empty() ? "/" : endpoint_.base_path;
  request.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  request.body = std::move(body);
  ClientOptions options;
  options.timeout_ms = timeout_ms_;
  options.max_response_bytes = max_response_bytes_;
  options.trust = trust_;
  ClientResponse response = SendHttp(endpoint_, request, options);
  if (response.error != ClientError::kNone) return TransportError(response, what);
  // Boost.Beast 1.74 skips body_limit when the header and the body arrive in one read (its eager
  // parse overwrites the error), so the limit is checked here again.
  if (response.body.size() > max_response_bytes_) {
    return Status::Error(ErrorCode::kRpcMalformed, std::string(what) + ": answer larger than " +
                                                       std::to_string(max_response_bytes_) +
                                                       " bytes");
  }
  return response;
}

Result<json> JsonRpcClient::Call(std::string_view method, json params,
                                 RpcErrorDetail* error_detail) {
  AGENTPAY_CHECK(params.is_array());
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  json envelope = {{"jsonrpc", "2.0"},
                   {"id", id},
                   {"method", std::string(method)},
                   {"params", std::move(params)}};
  Result<ClientResponse> response =
      Post(envelope.dump(-1, ' ', false, json::error_handler_t::replace), method);
  if (!response.ok()) return response.status();
  return ParseEnvelope(*response, id, method, error_detail);
}

Result<std::vector<RpcAnswer>> JsonRpcClient::CallBatch(std::span<const RpcCall> calls) {
  AGENTPAY_CHECK(!calls.empty() && calls.size() <= kMaxRpcBatchCalls);
  const uint64_t first_id = next_id_.fetch_add(calls.size(), std::memory_order_relaxed);
  json batch = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    AGENTPAY_CHECK(calls[i].params.is_array());
    batch.push_back({{"jsonrpc", "2.0"},
                     {"id", first_id + i},
                     {"method", calls[i].method},
                     {"params", calls[i].params}});
  }
  Result<ClientResponse> response =
      Post(batch.dump(-1, ' ', false, json::error_handler_t::replace), "batch");
  if (!response.ok()) return response.status();
  return ParseBatch(*response, first_id, calls);
}

}  // namespace agentpay::chain
