// See json_views.h.
#include "client/json_views.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/money.h"
#include "x402/base64.h"

namespace agentpay::client {
namespace {

using Json = nlohmann::json;

Json Changes(const std::vector<ReconcileChange>& changes) {
  Json out = Json::array();
  for (const ReconcileChange& c : changes) {
    out.push_back({{"key", c.key}, {"from", c.from}, {"to", c.to}, {"why", c.why}});
  }
  return out;
}

Status Refuse(const std::string& field, const std::string& why) {
  return Status::Error(ErrorCode::kInvalidConfig, "\"" + field + "\": " + why);
}

// A JSON object's fields, each read once by name and type; what is left over is refused.
class Fields {
 public:
  explicit Fields(const Json& json) : json_(json) {}

  Status Text(const char* name, std::string* out) {
    if (!Take(name)) return Status::Ok();
    const Json& v = json_.at(name);
    if (!v.is_string()) return Refuse(name, "expected a string");
    *out = v.get<std::string>();
    return Status::Ok();
  }
  Status OptionalText(const char* name, std::optional<std::string>* out) {
    if (!Take(name) || json_.at(name).is_null()) return Status::Ok();
    std::string text;
    seen_.pop_back();
    if (Status s = Text(name, &text); !s.ok()) return s;
    *out = std::move(text);
    return Status::Ok();
  }
  Status Integer(const char* name, int64_t low, int64_t high, int64_t* out) {
    if (!Take(name)) return Status::Ok();
    const Json& v = json_.at(name);
    if (!v.is_number_integer()) return Refuse(name, "expected a whole number");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(high)) {
      return Refuse(name, "out of range");
    }
    const int64_t value = v.get<int64_t>();
    if (value < low || value > high) {
      return Refuse(name, "must be " + std::to_string(low) + " to " + std::to_string(high));
    }
    *out = value;
    return Status::Ok();
  }
  Status TextList(const char* name, std::vector<std::string>* out) {
    if (!Take(name)) return Status::Ok();
    const Json& v = json_.at(name);
    if (!v.is_array()) return Refuse(name, "expected a list of strings");
    for (const Json& item : v) {
      if (!item.is_string()) return Refuse(name, "expected a list of strings");
      out->push_back(item.get<std::string>());
    }
    return Status::Ok();
  }
  Status Headers(const char* name, std::vector<Header>* out) {
    if (!Take(name)) return Status::Ok();
    const Json& v = json_.at(name);
    if (!v.is_array()) return Refuse(name, "expected a list of [name, value] pairs");
    for (const Json& pair : v) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
        return Refuse(name, "expected a list of [name, value] pairs");
      }
      out->emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
    }
    return Status::Ok();
  }
  bool Has(const char* name) const { return json_.contains(name); }
  // Every field not read above.
  Status NoOthers() const {
    for (const auto& [name, value] : json_.items()) {
      if (std::find(seen_.begin(), seen_.end(), name) == seen_.end()) {
        return Refuse(name, "not a known option");
      }
    }
    return Status::Ok();
  }

 private:
  bool Take(const char* name) {
    seen_.emplace_back(name);
    return json_.contains(name);
  }
  const Json& json_;
  std::vector<std::string> seen_;
};

constexpr int64_t kMaxMs = 24LL * 3600 * 1000;
constexpr int64_t kMaxAmountValue = std::numeric_limits<int64_t>::max();

}  // namespace

Json PayResultJson(const PayResult& r, bool binary_body) {
  Json evidence = {{"payer", r.evidence.payer},
                   {"nonce", r.evidence.nonce},
                   {"transaction", r.evidence.transaction}};
  if (r.evidence.authorization_used) {
    evidence["authorization_used"] = *r.evidence.authorization_used;
  }
  Json json{
      {"outcome", PayOutcomeName(r.outcome)},
      {"exit_code", static_cast<int>(r.exit_code)},
      {"message", r.message},
      {"key", r.key},
      {"amount", FormatAmount(r.amount)},
      {"reservation_state", r.reservation_state},
      {"http_status", r.http_status},
      {"replayed", r.replayed},
      {"attempts", r.attempts},
      {"operation_id", r.operation_id},
      {"reason", r.reason},
      {"body", r.body},
      {"evidence", evidence},
      {"budget",
       {{"total", FormatAmount(r.budget_total)}, {"committed", FormatAmount(r.budget_committed)}}}};
  if (binary_body) {
    json["body_base64"] = x402::Base64Encode(r.body);
    Json headers = Json::array();
    for (const Header& h : r.response_headers) headers.push_back({h.first, h.second});
    json["response_headers"] = std::move(headers);
  }
  return json;
}

Json BudgetReportJson(const BudgetReport& report) {
  const BudgetAssetView& asset = report.asset;
  Json asset_json = {{"state", asset.state}};
  if (asset.state == "bound") {
    asset_json["network"] = "eip155:" + std::to_string(asset.chain_id);
    asset_json["address"] = asset.address;
    asset_json["name"] = asset.name;
    asset_json["decimals"] = asset.decimals ? Json(*asset.decimals) : Json(nullptr);
  }
  Json rows = Json::array();
  for (const Reservation& r : report.reservations) {
    rows.push_back({{"key", r.key},
                    {"state", r.state},
                    {"amount", FormatAmount(r.amount)},
                    {"method", r.method},
                    {"url", r.url},
                    {"scheme", r.scheme},
                    {"x402_version", r.x402_version},
                    {"payer", r.payer},
                    {"nonce", r.nonce},
                    {"asset", r.asset},
                    {"pay_to", r.pay_to},
                    {"chain_id", r.chain_id},
                    {"valid_before_s", r.valid_before_s},
                    {"operation_id", r.operation_id},
                    {"transaction", r.transaction},
                    {"note", r.note},
                    {"sends", r.sends},
                    {"created_ms", r.created_ms},
                    {"updated_ms", r.updated_ms}});
  }
  return Json{{"asset", asset_json},
              {"total", FormatAmount(report.total)},
              {"committed", FormatAmount(report.committed)},
              {"spent", FormatAmount(report.spent)},
              {"available", FormatAmount(report.total - report.committed)},
              {"reservations", rows}};
}

Json ReconcileReportJson(const ReconcileReport& report) {
  return Json{{"changes", Changes(report.changes)},
              {"kept", Changes(report.kept)},
              {"total", FormatAmount(report.total)},
              {"committed", FormatAmount(report.committed)}};
}

Result<PayOptions> PayOptionsFromJson(const Json& json) {
  if (!json.is_object()) return Refuse("options", "expected a JSON object");
  PayOptions o;
  Fields f(json);
  int64_t step = -1, budget = -1, max_attempts = o.max_attempts, version = o.x402_version;
  for (Status s : {f.Text("url", &o.url),
                   f.Text("method", &o.method),
                   f.Text("body", &o.body),
                   f.Headers("headers", &o.headers),
                   f.Text("api_key", &o.api_key),
                   f.Text("buyer_key", &o.buyer_key),
                   f.OptionalText("task", &o.task),
                   f.Integer("step", 0, kMaxAmountValue, &step),
                   f.Text("idempotency_key", &o.idempotency_key),
                   f.Text("budget_db", &o.budget_db),
                   f.Integer("budget", 0, kMaxAmountValue, &budget),
                   f.Integer("max_attempts", 1, 100, &max_attempts),
                   f.Integer("timeout_ms", 1, kMaxMs, &o.timeout_ms),
                   f.Integer("attempt_timeout_ms", 1, kMaxMs, &o.attempt_timeout_ms),
                   f.Integer("x402_version", 0, 2, &version),
                   f.TextList("assets", &o.assets),
                   f.TextList("networks", &o.networks),
                   f.TextList("payees", &o.payees),
                   f.Integer("max_amount", 1, kMaxAmountValue, &o.max_amount),
                   f.Text("chain_rpc", &o.chain_rpc),
                   f.Text("ca_file", &o.ca_file)}) {
    if (!s.ok()) return s;
  }
  std::string body_base64;
  if (Status s = f.Text("body_base64", &body_base64); !s.ok()) return s;
  if (Status s = f.NoOthers(); !s.ok()) return s;
  if (f.Has("body") && f.Has("body_base64")) {
    return Refuse("body_base64", "give either body or body_base64, not both");
  }
  if (f.Has("body_base64")) {
    auto body = x402::Base64Decode(body_base64);
    if (!body.ok()) return Refuse("body_base64", body.status().message());
    o.body = std::move(*body);
  }
  if (step >= 0) o.step = static_cast<uint64_t>(step);
  if (budget >= 0) o.budget = budget;
  o.max_attempts = static_cast<int>(max_attempts);
  o.x402_version = static_cast<int>(version);
  return o;
}

Result<ReconcileOptions> ReconcileOptionsFromJson(const Json& json) {
  if (!json.is_object()) return Refuse("options", "expected a JSON object");
  ReconcileOptions o;
  Fields f(json);
  for (Status s : {f.Text("budget_db", &o.budget_db), f.Text("chain_rpc", &o.chain_rpc),
                   f.Text("ca_file", &o.ca_file), f.Text("api_key", &o.api_key),
                   f.Integer("expiry_buffer_seconds", 0, 86400, &o.expiry_buffer_seconds),
                   f.Integer("timeout_ms", 1, kMaxMs, &o.timeout_ms), f.NoOthers()}) {
    if (!s.ok()) return s;
  }
  return o;
}

}  // namespace agentpay::client
