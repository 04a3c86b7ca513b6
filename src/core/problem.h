// AgentPay's application/problem+json answers (RFC 9457; docs/protocol.md lists each code with its
// status and meaning): the `code` enum with one table, ProblemCodeName, to the wire string, and the
// one writer of the body. Clients branch on these strings, so a released one never changes. A 402
// for a refused x402 payment carries the x402 reason instead (x402::ReasonCode, the x402
// vocabulary). Pure, so in core: http/ sends these bodies and settlement/ stores them for replay.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"

namespace agentpay {

enum class ProblemCode : uint8_t {
  kPaymentRequired,
  kUnauthorized,
  kInvalidIdempotencyKey,
  kIdempotencyKeyRequired,
  kInsufficientFunds,
  kIdempotencyKeyMismatch,
  kOperationInProgress,
  kFulfillmentPending,
  kLimitExceeded,
  kStoreUnavailable,
  kNotFound,
  kMethodNotAllowed,
  kInvalidRequest,
  kAdminDisabled,
  kDepositReferenceMismatch,
  kAmountOverflow,
  kX402NotEnabled,
  kMalformedPayment,
  kChainUnavailable,
  kSettlementUnknown,
  kSettlementFailed,
  kSettlementVoid,
  kBadRequest,
  kInternalError,
  kAlreadyResolved,
  kAuthorizationAlreadyUsed,
  kInvalidTarget,
  kAmbiguousTarget,
  kNoAlerts,
  kChainFeesTooHigh,
  kTooManyApiKeys,
  kCrossOriginRefused,
  kHostNotAllowed,
  kPayeeNotAllowed,  // the last (tests/http/message_test.cc walks them up to it)
};

// The wire string. The one table of them: -Wswitch (-Wall -Werror) refuses an enumerator without
// one, and tests/docs/test_self_contained.py reads it to check that docs/protocol.md has each.
constexpr std::string_view ProblemCodeName(ProblemCode code) {
  // One line per code, read as the table it is.
  // clang-format off
  switch (code) {
    case ProblemCode::kPaymentRequired: return "payment_required";
    case ProblemCode::kUnauthorized: return "unauthorized";
    case ProblemCode::kInvalidIdempotencyKey: return "invalid_idempotency_key";
    case ProblemCode::kIdempotencyKeyRequired: return "idempotency_key_required";
    case ProblemCode::kInsufficientFunds: return "insufficient_funds";
    case ProblemCode::kIdempotencyKeyMismatch: return "idempotency_key_mismatch";
    case ProblemCode::kOperationInProgress: return "operation_in_progress";
    case ProblemCode::kFulfillmentPending: return "fulfillment_pending";
    case ProblemCode::kLimitExceeded: return "limit_exceeded";
    case ProblemCode::kStoreUnavailable: return "store_unavailable";
    case ProblemCode::kNotFound: return "not_found";
    case ProblemCode::kMethodNotAllowed: return "method_not_allowed";
    case ProblemCode::kInvalidRequest: return "invalid_request";
    case ProblemCode::kAdminDisabled: return "admin_disabled";
    case ProblemCode::kDepositReferenceMismatch: return "deposit_reference_mismatch";
    case ProblemCode::kAmountOverflow: return "amount_overflow";
    case ProblemCode::kX402NotEnabled: return "x402_not_enabled";
    case ProblemCode::kMalformedPayment: return "malformed_payment";
    case ProblemCode::kChainUnavailable: return "chain_unavailable";
    case ProblemCode::kSettlementUnknown: return "settlement_unknown";
    case ProblemCode::kSettlementFailed: return "settlement_failed";
    case ProblemCode::kSettlementVoid: return "settlement_void";
    case ProblemCode::kBadRequest: return "bad_request";
    case ProblemCode::kInternalError: return "internal_error";
    case ProblemCode::kAlreadyResolved: return "already_resolved";
    case ProblemCode::kAuthorizationAlreadyUsed: return "authorization_already_used";
    case ProblemCode::kInvalidTarget: return "invalid_target";
    case ProblemCode::kAmbiguousTarget: return "ambiguous_target";
    case ProblemCode::kNoAlerts: return "no_alerts";
    case ProblemCode::kChainFeesTooHigh: return "chain_fees_too_high";
    case ProblemCode::kTooManyApiKeys: return "too_many_api_keys";
    case ProblemCode::kCrossOriginRefused: return "cross_origin_refused";
    case ProblemCode::kHostNotAllowed: return "host_not_allowed";
    case ProblemCode::kPayeeNotAllowed: return "payee_not_allowed";
  }
  // clang-format on
  AGENTPAY_CHECK(false && "ProblemCode out of range");
  return "";
}

// The reason phrase for a status code ("Payment Required"); "Status" for one not listed.
std::string_view StatusTitle(int status);

// The application/problem+json body of an answer with `status` and `code`: type, title, status,
// code, detail, and operation_id when not empty. Bytes that are not UTF-8 in `detail` or
// `operation_id` come out as U+FFFD.
std::string ProblemJson(int status, ProblemCode code, std::string_view detail,
                        std::string_view operation_id = {});

}  // namespace agentpay
