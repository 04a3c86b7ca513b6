// See include/agentpay/client_c.h. A thin layer: JSON in, the library's call, JSON out; nothing
// here decides anything about a payment.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "agentpay/client.h"
#include "agentpay/client_c.h"
#include "client/json_views.h"

namespace {

using Json = nlohmann::json;
namespace client = agentpay::client;

constexpr const char* kVersion = AGENTPAY_VERSION;  // the CMake project's version

char* Copy(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, text.data(), text.size() + 1);
  return out;
}

char* Answer(const Json& json) {
  return Copy(json.dump(-1, ' ', false, Json::error_handler_t::replace));
}

char* Error(std::string message) { return Answer(Json{{"error", std::move(message)}}); }

char* PayError(std::string message) {
  client::PayResult result;  // exit code 1, outcome error: nothing was reserved or paid
  result.message = std::move(message);
  return Answer(client::PayResultJson(result, true));
}

client::Progress ProgressOf(agentpay_progress_fn progress, void* context) {
  if (progress == nullptr) return {};
  return [progress, context](std::string_view line) {
    progress(line.data(), static_cast<uint64_t>(line.size()), context);
  };
}

// Parsed JSON, or nullopt for text that is not JSON (or NULL).
std::optional<Json> Parse(const char* text) {
  if (text == nullptr) return std::nullopt;
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

}  // namespace

extern "C" {

char* agentpay_pay(const char* options_json, agentpay_progress_fn progress, void* context) {
  try {
    auto json = Parse(options_json);
    if (!json) return PayError("the options are not JSON");
    auto options = client::PayOptionsFromJson(*json);
    if (!options.ok()) return PayError(options.status().message());
    return Answer(
        client::PayResultJson(client::Pay(*options, ProgressOf(progress, context)), true));
  } catch (const std::exception& e) {  // the library never throws; nothing crosses the C ABI
    return PayError(std::string("internal error: ") + e.what());
  }
}

char* agentpay_budget(const char* budget_db) {
  try {
    if (budget_db == nullptr) return Error("no budget file given");
    client::BudgetReport report = client::ReadBudget(budget_db);
    if (!report.error.empty()) return Error(report.error);
    return Answer(client::BudgetReportJson(report));
  } catch (const std::exception& e) {
    return Error(std::string("internal error: ") + e.what());
  }
}

char* agentpay_reconcile(const char* options_json, agentpay_progress_fn progress, void* context) {
  try {
    auto json = Parse(options_json);
    if (!json) return Error("the options are not JSON");
    auto options = client::ReconcileOptionsFromJson(*json);
    if (!options.ok()) return Error(options.status().message());
    client::ReconcileReport report = client::Reconcile(*options, ProgressOf(progress, context));
    if (!report.error.empty()) return Error(report.error);
    return Answer(client::ReconcileReportJson(report));
  } catch (const std::exception& e) {
    return Error(std::string("internal error: ") + e.what());
  }
}

char* agentpay_derive_key(const char* credential, const char* task, uint64_t step) {
  if (credential == nullptr || task == nullptr) return nullptr;
  return Copy(client::DeriveKey(credential, task, step));
}

void agentpay_free(char* text) { std::free(text); }

const char* agentpay_version(void) { return kVersion; }

}  // extern "C"
