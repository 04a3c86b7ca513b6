// JSON renderings of store records for the HTTP API (CONTRACT §3). Amounts are decimal strings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/operation.h"
#include "gateway/config.h"
#include "settlement/relayer_watch.h"
#include "store/store.h"

namespace agentpay {

// Serializes without throwing on invalid UTF-8 in user-supplied strings (they are replaced).
std::string DumpJson(const nlohmann::json& value);

nlohmann::json OperationJson(const Operation& op);
// OperationJson with `tx_hash` once its x402 payment was submitted: GET /v1/operations/{id}.
nlohmann::json OperationViewJson(const Operation& op,
                                 const std::optional<X402PaymentRecord>& payment);
nlohmann::json TraceJson(const std::vector<TraceEvent>& events);
nlohmann::json AccountJson(const AccountRecord& account);
nlohmann::json AlertJson(const Alert& alert);
// GET /admin/v1/audit (docs/protocol.md §9): the report, and the chain it was settled on.
nlohmann::json AuditJson(const AuditReport& report, const ChainConfig& chain, int64_t checked_ms);
nlohmann::json SettledPaymentJson(const SettledPayment& payment);
// GET /admin/v1/overview: ages in ms at `now_ms`; captured since `since_ms` (UTC midnight).
nlohmann::json OverviewJson(const StoreOverview& overview, int64_t now_ms, int64_t since_ms);
// The overview's relayer: its last reading (gas, mined nonce, transactions the node holds unmined)
// and the relayer nonces the store handed out (`nonces_taken`, read now).
nlohmann::json RelayerJson(const RelayerReading& reading, int64_t nonces_taken, int64_t now_ms);
// GET /admin/v1/operations/{id}: the operation view, its alerts, ledger postings and x402 payment.
nlohmann::json OperationDetailJson(const Operation& op, const std::vector<Alert>& alerts,
                                   const std::vector<PostingRecord>& postings,
                                   const std::optional<X402PaymentRecord>& payment);

}  // namespace agentpay
