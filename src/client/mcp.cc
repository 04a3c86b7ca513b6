// See mcp.h.
#include "client/mcp.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "client/json_views.h"

namespace agentpay::client {
namespace {

using Json = nlohmann::json;

constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kParseError = -32700;
constexpr int64_t kMaxStep = (int64_t{1} << 53) - 1;  // what every JSON reader holds exactly
constexpr size_t kMaxUrlLength = 8192;
constexpr size_t kMaxHeaderBytes = 8192;
constexpr size_t kMaxReservationsShown = 50;

// The request headers a call may not set: the library's own (the credential, the key, the
// payment) and the framing.
constexpr std::array<std::string_view, 9> kOwnHeaders = {
    "authorization",  "idempotency-key",   "payment-signature", "x-payment",     "host",
    "content-length", "transfer-encoding", "connection",        "agentpay-payer"};

Json Error(const Json& id, int code, std::string message) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

Json Result(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// A tool's answer: the structured object, and the same as text for a model that reads text only.
Json ToolResult(std::string summary, Json structured, bool is_error) {
  std::string text = std::move(summary);
  text += "\n";
  text += structured.dump(2, ' ', false, Json::error_handler_t::replace);
  return Json{{"content", Json::array({{{"type", "text"}, {"text", std::move(text)}}})},
              {"structuredContent", std::move(structured)},
              {"isError", is_error}};
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Why the arguments of pay_request cannot be used, or nullopt; fills `options` from them.
std::optional<std::string> ReadPayArguments(const Json& args, const McpServerConfig& config,
                                            PayOptions& options) {
  if (!args.is_object()) return "arguments must be an object";
  for (const auto& [name, value] : args.items()) {
    if (name != "url" && name != "method" && name != "headers" && name != "body" &&
        name != "task" && name != "step" && name != "max_amount") {
      return "unknown argument \"" + name + "\"";
    }
  }
  if (!args.contains("url") || !args["url"].is_string() || args["url"].get<std::string>().empty() ||
      args["url"].get<std::string>().size() > kMaxUrlLength) {
    return "\"url\" must be the http(s) URL to call";
  }
  options.url = args["url"].get<std::string>();
  if (args.contains("method")) {
    const Json& method = args["method"];
    static constexpr std::array<std::string_view, 5> kMethods = {"GET", "POST", "PUT", "PATCH",
                                                                 "DELETE"};
    if (!method.is_string() ||
        std::find(kMethods.begin(), kMethods.end(), method.get<std::string>()) == kMethods.end()) {
      return "\"method\" must be GET, POST, PUT, PATCH or DELETE";
    }
    options.method = method.get<std::string>();
  } else {
    options.method = args.contains("body") ? "POST" : "GET";
  }
  if (args.contains("headers")) {
    const Json& headers = args["headers"];
    if (!headers.is_object() || headers.size() > kMcpMaxHeaders) {
      return "\"headers\" must be an object of at most " + std::to_string(kMcpMaxHeaders) +
             " names and string values";
    }
    for (const auto& [name, value] : headers.items()) {
      if (!value.is_string() || name.empty() ||
          name.size() + value.get<std::string>().size() > kMaxHeaderBytes) {
        return "\"headers\": the value of \"" + name + "\" must be a string (at most " +
               std::to_string(kMaxHeaderBytes) + " bytes with its name)";
      }
      const std::string lower = Lower(name);
      if (std::find(kOwnHeaders.begin(), kOwnHeaders.end(), lower) != kOwnHeaders.end()) {
        return "\"headers\": " + name +
               " is set by the payment itself (the credential, the key or the payment)";
      }
      options.headers.emplace_back(name, value.get<std::string>());
    }
  }
  if (args.contains("body")) {
    if (!args["body"].is_string() ||
        args["body"].get<std::string>().size() > kMcpMaxRequestBodyBytes) {
      return "\"body\" must be a string of at most " + std::to_string(kMcpMaxRequestBodyBytes) +
             " bytes";
    }
    options.body = args["body"].get<std::string>();
  }
  const bool has_task = args.contains("task"), has_step = args.contains("step");
  if (has_task != has_step) return "give \"task\" and \"step\" together, or neither";
  if (has_task) {
    const Json& task = args["task"];
    if (!task.is_string() || task.get<std::string>().empty() ||
        task.get<std::string>().size() > kMcpMaxTaskLength) {
      return "\"task\" must be a name of 1 to " + std::to_string(kMcpMaxTaskLength) + " characters";
    }
    const Json& step = args["step"];
    if (!step.is_number_integer() || step.get<int64_t>() < 0 || step.get<int64_t>() > kMaxStep) {
      return "\"step\" must be a whole number from 0";
    }
    options.task = task.get<std::string>();
    options.step = static_cast<uint64_t>(step.get<int64_t>());
  }
  if (args.contains("max_amount")) {
    const Json& max = args["max_amount"];
    if (!max.is_number_integer() || max.get<int64_t>() < 1) {
      return "\"max_amount\" must be a whole number of atomic units, at least 1";
    }
    // A call may lower the server's cap, never raise it.
    options.max_amount = std::min(max.get<int64_t>(), config.payment.max_amount);
  }
  return std::nullopt;
}

Json PayRequest(const Json& args, const McpServerConfig& config, const McpEffects& effects) {
  PayOptions options = config.payment;
  options.headers.clear();
  if (auto refused = ReadPayArguments(args, config, options)) {
    return ToolResult("refused: " + *refused + "; nothing was paid",
                      Json{{"outcome", "error"}, {"exit_code", 1}, {"message", *refused}}, true);
  }
  const PayResult result = effects.pay(options);
  Json json = PayResultJson(result, false);
  const bool cut = result.body.size() > kMcpMaxBodyBytes;
  json["body"] = cut ? result.body.substr(0, kMcpMaxBodyBytes) : result.body;
  json["body_truncated"] = cut;
  json["url"] = options.url;
  json["method"] = options.method;
  json["max_amount"] = std::to_string(options.max_amount);
  std::string summary = std::string(PayOutcomeName(result.outcome)) + ": " + result.message;
  if (result.http_status > 0) summary += " (HTTP " + std::to_string(result.http_status) + ")";
  return ToolResult(std::move(summary), std::move(json), result.exit_code != ExitCode::kPaid);
}

Json Budget(const McpServerConfig& config, const McpEffects& effects) {
  BudgetReport report = effects.budget(config.payment.budget_db);
  if (!report.error.empty()) {
    return ToolResult("the budget could not be read: " + report.error,
                      Json{{"error", report.error}}, true);
  }
  const size_t total = report.reservations.size();
  if (total > kMaxReservationsShown) {  // the newest ones
    report.reservations.erase(report.reservations.begin(),
                              report.reservations.end() - kMaxReservationsShown);
  }
  Json json = BudgetReportJson(report);
  json["reservations_shown"] = report.reservations.size();
  json["reservations_total"] = total;
  return ToolResult("budget: " + std::to_string(report.total - report.committed) +
                        " available of " + std::to_string(report.total) + " (" +
                        std::to_string(report.spent) + " spent)",
                    std::move(json), false);
}

Json Reconcile(const McpServerConfig& config, const McpEffects& effects) {
  const ReconcileReport report = effects.reconcile(config.reconcile);
  if (!report.error.empty()) {
    return ToolResult("reconcile could not run: " + report.error, Json{{"error", report.error}},
                      true);
  }
  return ToolResult(std::to_string(report.changes.size()) + " reservation(s) settled, " +
                        std::to_string(report.kept.size()) + " still open",
                    ReconcileReportJson(report), false);
}

Json Initialize(const Json& params, const McpServerConfig& config) {
  std::string version = kMcpProtocolVersions[0];
  if (params.is_object() && params.contains("protocolVersion") &&
      params["protocolVersion"].is_string()) {
    const std::string asked = params["protocolVersion"].get<std::string>();
    for (const char* known : kMcpProtocolVersions) {
      if (asked == known) version = asked;
    }
  }
  return Json{
      {"protocolVersion", version},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", {{"name", "agentpay"}, {"title", "AgentPay"}, {"version", config.version}}},
      {"instructions",
       "Pays for HTTP APIs that ask for payment (HTTP 402: x402 or an AgentPay wallet) from one "
       "budget with spend limits this server's operator set. Call pay_request to call a paid URL; "
       "give it a task name and a step number for each distinct action, and the SAME task and "
       "step when you retry that action: a retry then never pays twice. Call budget to see what "
       "is left, and reconcile later when a payment's outcome was unknown."}};
}

}  // namespace

Json McpTools() {
  const Json pay_schema = {
      {"type", "object"},
      {"properties",
       {{"url", {{"type", "string"}, {"description", "the http:// or https:// URL to call"}}},
        {"method",
         {{"type", "string"},
          {"enum", {"GET", "POST", "PUT", "PATCH", "DELETE"}},
          {"description", "the HTTP method (default GET, or POST when there is a body)"}}},
        {"headers",
         {{"type", "object"},
          {"additionalProperties", {{"type", "string"}}},
          {"description",
           "extra request headers, e.g. {\"Content-Type\": \"application/json\"} (not "
           "Authorization, Idempotency-Key or the payment headers: the payment sets those)"}}},
        {"body", {{"type", "string"}, {"description", "the request body, as text"}}},
        {"task",
         {{"type", "string"},
          {"minLength", 1},
          {"maxLength", kMcpMaxTaskLength},
          {"description",
           "a name for the job this call belongs to (e.g. \"q3-report\"); with step, it names "
           "the action, so that a retry of it is never paid twice"}}},
        {"step",
         {{"type", "integer"},
          {"minimum", 0},
          {"description",
           "the number of this action within the task: a new number for a new action, the same "
           "number to retry one whose answer you did not get"}}},
        {"max_amount",
         {{"type", "integer"},
          {"minimum", 1},
          {"description",
           "pay at most this many atomic units of the token for this call (it can only lower "
           "the server's own limit)"}}}}},
      {"required", {"url"}},
      {"additionalProperties", false}};
  const Json no_arguments = {
      {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  return Json::array(
      {{{"name", "pay_request"},
        {"title", "Call a paid API"},
        {"description",
         "Make one HTTP request to an API that may charge for it, and pay if it asks (HTTP 402), "
         "from this server's budget and within its limits. The price is read before anything is "
         "paid; an offer above the limits or the budget is refused without paying. Give task and "
         "step to name the action: retrying with the same task and step never pays twice (if an "
         "earlier answer was lost, the retry gets the stored result). Returns outcome (paid, free, "
         "rejected, unknown, paid_not_delivered, over_budget, refused, error), http_status, body, "
         "amount paid, operation_id, and for an unknown outcome the evidence (payer, nonce, "
         "transaction) that reconcile settles later."},
        {"inputSchema", pay_schema}},
       {{"name", "budget"},
        {"title", "Show the budget"},
        {"description",
         "Show the budget this server pays from: total, committed (reserved, spent or unknown), "
         "spent and available, in the token's atomic units, and the newest reservations with "
         "their state (reserved, spent, released, unknown). Costs nothing."},
        {"inputSchema", no_arguments}},
       {{"name", "reconcile"},
        {"title", "Settle unknown payments"},
        {"description",
         "Settle the payments whose outcome was unknown (pay_request's outcome unknown or "
         "paid_not_delivered) by asking the API's gateway or the chain. Money held for an unknown "
         "payment is released only once the chain shows it can never be used. Call it some "
         "minutes after an unknown outcome; it never pays anything."},
        {"inputSchema", no_arguments}}});
}

Json McpParseError() { return Error(nullptr, kParseError, "not JSON"); }

std::optional<Json> HandleMcpMessage(const Json& message, const McpServerConfig& config,
                                     const McpEffects& effects) {
  if (!message.is_object()) return Error(nullptr, kInvalidRequest, "expected a JSON-RPC object");
  const bool has_id = message.contains("id");
  const Json id = has_id ? message["id"] : Json(nullptr);
  const bool id_ok = !has_id || id.is_string() || id.is_number_integer();
  if (!message.contains("method")) {
    // A response to a request of ours (we send none), or junk.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return Error(id_ok ? id : Json(nullptr), kInvalidRequest, "no method");
  }
  if (message.value("jsonrpc", "") != "2.0" || !message["method"].is_string() || !id_ok) {
    return Error(id_ok ? id : Json(nullptr), kInvalidRequest, "not a JSON-RPC 2.0 request");
  }
  const std::string method = message["method"].get<std::string>();
  if (!has_id) return std::nullopt;  // a notification (initialized, cancelled, ...): no answer
  const Json params = message.contains("params") ? message["params"] : Json::object();
  if (method == "initialize") return Result(id, Initialize(params, config));
  if (method == "ping") return Result(id, Json::object());
  if (method == "tools/list") return Result(id, Json{{"tools", McpTools()}});
  if (method == "tools/call") {
    if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
      return Error(id, kInvalidParams, "tools/call needs the tool's name");
    }
    const std::string name = params["name"].get<std::string>();
    const Json args = params.contains("arguments") ? params["arguments"] : Json::object();
    if (name == "pay_request") return Result(id, PayRequest(args, config, effects));
    if ((name == "budget" || name == "reconcile") && (!args.is_object() || !args.empty())) {
      return Error(id, kInvalidParams, name + " takes no arguments");
    }
    if (name == "budget") return Result(id, Budget(config, effects));
    if (name == "reconcile") return Result(id, Reconcile(config, effects));
    return Error(id, kInvalidParams, "unknown tool \"" + name + "\"");
  }
  return Error(id, kMethodNotFound, "unknown method \"" + method + "\"");
}

}  // namespace agentpay::client
