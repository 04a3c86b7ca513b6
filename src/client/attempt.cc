// Classifying answers to paid requests; see attempt.h.
#include "client/attempt.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "chain/bytes.h"
#include "core/json_depth.h"

namespace agentpay::client {

namespace {

// Answers read as JSON here (problems, operation views) are small; anything bigger or deeper is not
// one of them.
constexpr size_t kMaxJsonBytes = 64 * 1024;
constexpr int kMaxJsonDepth = 32;

std::optional<nlohmann::json> BodyObject(const ClientResponse& response) {
  if (response.body.size() > kMaxJsonBytes || !JsonNestingWithin(response.body, kMaxJsonDepth)) {
    return std::nullopt;
  }
  auto body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return std::nullopt;
  return body;
}

std::string StringField(const nlohmann::json& object, const char* name) {
  auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

}  // namespace

std::string ProblemCode(const ClientResponse& response) {
  auto body = BodyObject(response);
  return body ? StringField(*body, "code") : "";
}

std::string DescribeAnswer(const ClientResponse& response) {
  if (response.error == ClientError::kTls) return response.detail;  // names the host and why
  if (response.error != ClientError::kNone) return std::string(ClientErrorName(response.error));
  std::string code = ProblemCode(response);
  return "HTTP " + std::to_string(response.status) + (code.empty() ? "" : " " + code);
}

std::optional<OperationView> ReadOperation(const ClientResponse& response) {
  if (response.error != ClientError::kNone || response.status != 200) return std::nullopt;
  auto body = BodyObject(response);
  if (!body) return std::nullopt;
  OperationView view{ParseSettlement(StringField(*body, "settlement")),
                     ParseFulfillment(StringField(*body, "fulfillment")), ""};
  if (auto hash = chain::ParseHash32(StringField(*body, "tx_hash")); hash.ok()) {
    view.tx_hash = chain::Hex(*hash);
  }
  return view;
}

AttemptVerdict ClassifyAttempt(const ClientResponse& response) {
  if (response.error != ClientError::kNone) return AttemptVerdict::kRetry;
  const int status = response.status;
  if (status == 202) {
    return response.Header("Location") ? AttemptVerdict::kPoll : AttemptVerdict::kRetry;
  }
  if (status >= 200 && status < 300) return AttemptVerdict::kServed;
  if (status == 402) return AttemptVerdict::kPaymentRefused;
  if (status == 409) {
    // The gateway's x402 `failed`: the nonce is spent by another transaction, the payer may
    // have paid. Any other 409 (IETF: key in use) means "in progress".
    return ProblemCode(response) == "settlement_failed" ? AttemptVerdict::kUnknownFinal
                                                        : AttemptVerdict::kRetry;
  }
  if (status == 408 || status == 425 || status == 429 || status >= 500) {
    return AttemptVerdict::kRetry;
  }
  return AttemptVerdict::kRejected;
}

std::optional<int64_t> RetryAfterMs(const ClientResponse& response) {
  auto header = response.Header("Retry-After");
  if (!header) return std::nullopt;
  int64_t seconds = 0;
  auto [end, error] = std::from_chars(header->data(), header->data() + header->size(), seconds);
  if (error != std::errc() || end != header->data() + header->size() || seconds < 0) {
    return std::nullopt;  // an HTTP date: ignored, the backoff applies
  }
  return std::min<int64_t>(seconds, 3600) * 1000;
}

bool IsNonceUsedReason(const std::string& reason) {
  return reason.find("nonce_already_used") != std::string::npos;
}

bool IsVerificationReason(const std::string& reason) {
  return reason.rfind("invalid_", 0) == 0 || reason == "insufficient_funds";
}

}  // namespace agentpay::client
