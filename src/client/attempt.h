// What one answer to a paid request means for the agent client: served, retry with the same key and
// payment, follow a 202, or a refusal. Pure functions of the answer, so the policy is unit-tested.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/operation.h"
#include "http/client.h"

namespace agentpay::client {

enum class AttemptVerdict {
  kServed,          // 2xx other than 202: paid and served
  kRetry,           // connection error, timeout, 408, 425, 429, 5xx, 409 in progress: same again
  kPoll,            // 202 with a Location: follow it until the operation is final
  kPaymentRefused,  // 402 after a payment was presented
  kRejected,        // any other answer: final
  kUnknownFinal,    // final, but the money may have moved (x402 settlement_failed)
};
AttemptVerdict ClassifyAttempt(const ClientResponse& response);

// Retry-After in milliseconds when the answer carries one in delta-seconds (capped at an hour).
std::optional<int64_t> RetryAfterMs(const ClientResponse& response);

// What came back, in a few words: "timeout", "HTTP 502 fulfillment_pending".
std::string DescribeAnswer(const ClientResponse& response);

// The problem+json `code` of an answer, "" when none.
std::string ProblemCode(const ClientResponse& response);

// The operation view of an answer (GET /v1/operations/{id}: settlement, fulfillment, tx_hash),
// read defensively: nullopt unless it is a 200 whose body is a JSON object of sane size and depth.
struct OperationView {
  // nullopt: a state this client does not know (a newer gateway's), or none given.
  std::optional<Settlement> settlement;
  std::optional<Fulfillment> fulfillment;
  std::string tx_hash;  // lower-case 0x hex when the gateway gave a well-formed one, else ""
};
std::optional<OperationView> ReadOperation(const ClientResponse& response);

// True for the x402 reason codes that report the authorization's nonce as already used.
bool IsNonceUsedReason(const std::string& reason);
// True for the reasons a server gives while verifying a payment it then refuses before settling
// (signature, amounts, time window, balance...): "invalid_*", "insufficient_funds".
bool IsVerificationReason(const std::string& reason);

}  // namespace agentpay::client
