// See json_views.h.
#include "gateway/json_views.h"

#include "core/money.h"

namespace agentpay {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json OperationJson(const Operation& op) {
  nlohmann::json json = {
      {"id", op.id},
      {"idempotency_key", op.idempotency_key},
      {"principal", op.principal},
      {"route", op.route},
      {"amount", FormatAmount(op.amount)},
      {"intent", IntentName(op.intent)},
      {"settlement", SettlementName(op.settlement)},
      {"fulfillment", FulfillmentName(op.fulfillment)},
      {"attempts", op.attempts},
      {"created_ms", op.created_ms},
      {"updated_ms", op.updated_ms},
  };
  if (op.hold_expires_ms) json["hold_expires_ms"] = *op.hold_expires_ms;
  if (op.response) json["response_status"] = op.response->status;
  return json;
}

nlohmann::json OperationViewJson(const Operation& op,
                                 const std::optional<X402PaymentRecord>& payment) {
  nlohmann::json json = OperationJson(op);
  if (payment && payment->submitted()) json["tx_hash"] = payment->tx_hash;
  return json;
}

nlohmann::json TraceJson(const std::vector<TraceEvent>& events) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& event : events) {
    nlohmann::json json = {{"at_ms", event.at_ms},
                           {"actor", TraceActorName(event.actor)},
                           {"kind", event.kind},
                           {"detail", event.detail}};
    // The structured facts, each present only where it applies.
    const TraceFacts& f = event.facts;
    if (f.attempt > 0) json["attempt"] = f.attempt;
    if (f.amount) json["amount"] = FormatAmount(*f.amount);
    if (f.http_status > 0) json["http_status"] = f.http_status;
    if (!f.tx_hash.empty()) json["tx_hash"] = f.tx_hash;
    if (f.block >= 0) json["block"] = f.block;
    if (!f.reason.empty()) json["reason"] = f.reason;
    list.push_back(std::move(json));
  }
  return {{"events", list}};
}

nlohmann::json AccountJson(const AccountRecord& account) {
  const Balances& b = account.balances;
  return {
      {"account_id", account.id},
      {"name", account.name},
      {"balance", FormatAmount(b.balance())},
      {"held", FormatAmount(b.held)},
      {"available", FormatAmount(b.available())},
      {"deposited", FormatAmount(b.deposited)},
      {"captured", FormatAmount(b.captured)},
  };
}

nlohmann::json AlertJson(const Alert& alert) {
  nlohmann::json json = {{"id", alert.id},
                         {"operation_id", alert.operation_id},
                         {"kind", alert.kind},
                         {"detail", alert.detail},
                         {"created_ms", alert.created_ms},
                         {"resolved", alert.resolved_ms.has_value()}};
  if (alert.resolved_ms) {
    json["resolved_ms"] = *alert.resolved_ms;
    json["resolution"] = alert.resolution;
    json["note"] = alert.note;
  }
  return json;
}

nlohmann::json AuditJson(const AuditReport& report, const ChainConfig& chain, int64_t checked_ms) {
  nlohmann::json checks = nlohmann::json::array();
  for (const AuditCheckResult& result : report.checks) {
    const AuditCheckInfo& info = AuditCheckInfoOf(result.check);
    checks.push_back({{"name", info.name},
                      {"rule", info.rule},
                      {"ran", result.ran},
                      {"examined", result.examined},
                      {"violations", result.violations}});
  }
  nlohmann::json listed = nlohmann::json::array();
  for (const AuditViolation& v : report.listed) {
    listed.push_back(
        {{"check", AuditCheckName(v.check)}, {"subject", v.subject}, {"detail", v.detail}});
  }
  const AuditTotals& t = report.totals;
  return {
      {"ok", report.ok()},
      {"checked_ms", checked_ms},
      {"violations", report.violations},
      {"checks", checks},
      {"listed", listed},
      {"totals",
       {{"accounts", t.accounts},
        {"operations", t.operations},
        {"deposited", FormatAmount(t.deposited)},
        {"balance", FormatAmount(t.balance)},
        {"held", FormatAmount(t.held)},
        {"captured", FormatAmount(t.captured)},
        {"x402_settled", t.x402_settled},
        {"charges", t.charges},
        {"alerts", t.alerts}}},
      {"chain", {{"chain_id", chain.chain_id}, {"asset", chain.asset}, {"pay_to", chain.pay_to}}}};
}

nlohmann::json SettledPaymentJson(const SettledPayment& payment) {
  return {{"operation_id", payment.operation_id},
          {"payer", payment.payer},
          {"pay_to", payment.pay_to},
          {"value", FormatAmount(payment.value)},
          {"tx_hash", payment.tx_hash},
          {"nonce", payment.nonce}};
}

namespace {
nlohmann::json AgeMs(const std::optional<int64_t>& since_ms, int64_t now_ms) {
  if (!since_ms) return nullptr;
  return std::max<int64_t>(0, now_ms - *since_ms);
}
}  // namespace

nlohmann::json OverviewJson(const StoreOverview& overview, int64_t now_ms, int64_t since_ms) {
  return {{"now_ms", now_ms},
          {"accounts", overview.accounts},
          {"held",
           {{"amount", FormatAmount(overview.held_amount)},
            {"holds", overview.held_count},
            {"oldest_age_ms", AgeMs(overview.oldest_hold_created_ms, now_ms)}}},
          {"settlements",
           {{"submitted", overview.submitted},
            {"unknown", overview.unknown},
            {"oldest_age_ms", AgeMs(overview.oldest_settling_created_ms, now_ms)}}},
          {"open_alerts", overview.open_alerts},
          {"captured_today", FormatAmount(overview.captured_since)},
          {"today_since_ms", since_ms}};
}

nlohmann::json RelayerJson(const RelayerReading& reading, int64_t nonces_taken, int64_t now_ms) {
  nlohmann::json json = {{"address", reading.relayer},
                         {"charges_gas", reading.charges_gas},
                         {"nonces_taken", nonces_taken},
                         {"read_age_ms", reading.read_ms > 0 ? nlohmann::json(std::max<int64_t>(
                                                                   0, now_ms - reading.read_ms))
                                                             : nlohmann::json(nullptr)},
                         {"error", reading.error}};
  json["balance_wei"] = reading.balance_wei ? nlohmann::json(reading.balance_wei->ToDecimal())
                                            : nlohmann::json(nullptr);
  if (reading.mined_nonce && reading.pending_nonce) {
    // The relayer's transactions the node holds unmined, both counts from the same reading.
    const uint64_t mined = *reading.mined_nonce;
    json["mined_nonce"] = mined;
    json["pending"] = *reading.pending_nonce > mined ? *reading.pending_nonce - mined : 0;
  } else {
    json["mined_nonce"] = nullptr;
    json["pending"] = nullptr;
  }
  return json;
}

nlohmann::json OperationDetailJson(const Operation& op, const std::vector<Alert>& alerts,
                                   const std::vector<PostingRecord>& postings,
                                   const std::optional<X402PaymentRecord>& payment) {
  nlohmann::json alert_list = nlohmann::json::array();
  for (const Alert& alert : alerts) alert_list.push_back(AlertJson(alert));
  nlohmann::json posting_list = nlohmann::json::array();
  for (const PostingRecord& p : postings) {
    posting_list.push_back({{"kind", MoveKindName(p.kind)},
                            {"debit", p.debit},
                            {"credit", p.credit},
                            {"amount", FormatAmount(p.amount)},
                            {"at_ms", p.at_ms}});
  }
  nlohmann::json json = {{"operation", OperationViewJson(op, payment)},
                         {"alerts", alert_list},
                         {"postings", posting_list}};
  if (payment) {
    const X402PaymentRecord& r = *payment;
    json["payment"] = {{"payer", r.authorization.from},
                       {"nonce", r.authorization.nonce_hex},
                       {"value", FormatAmount(r.authorization.value)},
                       {"valid_before_s", r.authorization.valid_before_s},
                       {"pay_to", r.pay_to},
                       {"x402_version", r.x402_version},
                       {"tx_hash", r.tx_hash},
                       {"relayer_nonce", r.relayer_nonce},
                       {"broadcasts", r.broadcasts},
                       {"settled_block", r.settled_block}};
  }
  return json;
}

}  // namespace agentpay
