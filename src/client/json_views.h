// The JSON forms of the client library's results and options: what `agentpay pay --json`,
// `agentpay pay budget --json` and `reconcile --json` print, and what the C ABI
// (include/agentpay/client_c.h, the Python package's binding) takes and returns. One place for
// both, so that the CLI and the bindings never describe a result differently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agentpay/client.h"
#include "core/result.h"

namespace agentpay::client {

// The result of Pay. `binary_body`: also "body_base64" (the body's bytes; "body" is text, any
// bytes that are not UTF-8 replaced) and "response_headers" (a list of [name, value]).
nlohmann::json PayResultJson(const PayResult& result, bool binary_body);
nlohmann::json BudgetReportJson(const BudgetReport& report);
nlohmann::json ReconcileReportJson(const ReconcileReport& report);

// PayOptions from a JSON object: the fields of PayOptions by name ("url", "method", "body" or
// "body_base64", "headers" as [[name, value], ...], "api_key" or "buyer_key", "task", "step",
// "idempotency_key", "budget_db", "budget", "max_attempts", "timeout_ms", "attempt_timeout_ms",
// "x402_version", "assets", "networks", "payees", "max_amount", "chain_rpc", "ca_file"). Unknown
// fields, wrong types and values out of range are refused with the field named (invalid_request);
// what Pay itself checks (the URL, the credential, the spend controls' syntax) is left to it.
Result<PayOptions> PayOptionsFromJson(const nlohmann::json& json);
Result<ReconcileOptions> ReconcileOptionsFromJson(const nlohmann::json& json);

}  // namespace agentpay::client
