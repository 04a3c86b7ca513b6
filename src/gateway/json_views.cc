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

nlohmann::json TraceJson(const std::vector<TraceEvent>& events) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& event : events) {
    list.push_back({{"at_ms", event.at_ms},
                    {"actor", event.actor},
                    {"kind", event.kind},
                    {"detail", event.detail}});
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

}  // namespace agentpay
