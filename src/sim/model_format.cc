// See model_format.h. The JSON names are those of CONTRACT §7; the text is for a person at a
// terminal.
#include "sim/model_format.h"

#include <charconv>
#include <cstdio>
#include <optional>

namespace agentpay::sim {
namespace {

Status Invalid(std::string_view name, std::string_view expected, const std::string& got) {
  return Status::Error(
      ErrorCode::kInvalidArgument,
      std::string(name) + " must be " + std::string(expected) + ", got '" + got + "'");
}

// Decimal, an optional '-' (so that a negative value is reported as out of range, not as text).
std::optional<int64_t> ParseInteger(const std::string& text) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  int64_t value = 0;
  auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop != end || text.empty()) return std::nullopt;
  return value;
}

std::optional<bool> ParseSwitch(const std::string& text) {
  if (text == "on" || text == "true") return true;
  if (text == "off" || text == "false") return false;
  return std::nullopt;
}

// Sets *value from the parameter `name` when it is given; leaves it (the default) when not.
Status ParseIntegerParam(const SimParamLookup& lookup, std::string_view name, int64_t* value) {
  std::optional<std::string> text = lookup(name);
  if (!text) return Status::Ok();
  std::optional<int64_t> parsed = ParseInteger(*text);
  if (!parsed) return Invalid(name, "a whole number of ms", *text);
  *value = *parsed;
  return Status::Ok();
}

// Sets the choices of *p that are given; leaves the others (the defaults).
Status ParseChoices(const SimParamLookup& lookup, SimParams* p) {
  if (auto text = lookup("fault")) {
    std::optional<Fault> fault = ParseFault(*text);
    if (!fault) {
      return Invalid("fault", "none, lost_response, transient_503 or rejected_400", *text);
    }
    p->fault = *fault;
  }
  for (auto [name, field] : {std::pair{"jitter", &p->jitter}, std::pair{"dedup", &p->dedup}}) {
    if (auto text = lookup(name)) {
      std::optional<bool> on = ParseSwitch(*text);
      if (!on) return Invalid(name, "on or off", *text);
      *field = *on;
    }
  }
  if (auto text = lookup("retry_key")) {
    std::optional<RetryKey> key = ParseRetryKey(*text);
    if (!key) return Invalid("retry_key", "stable or new", *text);
    p->retry_key = *key;
  }
  return Status::Ok();
}

std::string Describe(const SimParams& params, const SimEvent& e, int effects_so_far) {
  std::string a = "attempt " + std::to_string(e.attempt);
  std::string o = "operation " + std::to_string(e.operation);
  std::string k = e.key > 0 ? " (key " + KeyName(e.key) + ")" : "";
  switch (e.kind) {
    case EventKind::kSend:
      return a + " sent" + k;
    case EventKind::kAck:
      return a + " gets the success of " + o;
    case EventKind::kReceive503:
      return a + " gets 503: retryable";
    case EventKind::kReceive400:
      return a + " gets 400";
    case EventKind::kLateAck:
      return a + " gets a response too late" + (e.operation > 0 ? " (" + o + ")" : "") +
             ": it changes nothing";
    case EventKind::kTimeout:
      return a + " times out; the server is not told";
    case EventKind::kRetryScheduled: {
      int64_t delay_ms = RetryDelayMs(params, e.attempt - 1);
      return a + " will be sent at " + std::to_string(e.at_ms + delay_ms) + " (delay " +
             std::to_string(delay_ms) + " ms, key " + KeyName(e.key) + ")";
    }
    case EventKind::kSuccess:
      return "client stops: success";
    case EventKind::kRejected:
      return "client stops: rejected";
    case EventKind::kExhausted:
      return "client stops: exhausted, intent kept for reconciliation";
    case EventKind::kServerStart:
      return o + " starts for " + a + k;
    case EventKind::kAttach:
      return a + " attaches to " + o + ", in flight";
    case EventKind::kReplay:
      return a + " gets the stored success of " + o;
    case EventKind::kForget:
      return o + " is past retention: its key is forgotten" + k;
    case EventKind::kRespond503:
      return "503 to " + a + ", nothing started";
    case EventKind::kRespond400:
      return "400 to " + a + ", nothing started";
    case EventKind::kCommit:
      return o + " commits: effect " + std::to_string(effects_so_far) +
             (effects_so_far == 1 ? ", the one intended" : ", a duplicate of the one intended");
    case EventKind::kRespondSuccess:
      return "success of " + o + " sent to " + a;
    case EventKind::kResponseLost:
      return "the response to " + a + " is lost";
  }
  return "";
}

std::string ParamsLine(const SimParams& p) {
  char line[320];
  std::snprintf(line, sizeof line,
                "fault=%s service_ms=%lld timeout_ms=%lld max_attempts=%d initial_delay_ms=%lld "
                "jitter=%s dedup=%s retry_key=%s retention_ms=%lld",
                std::string(FaultName(p.fault)).c_str(), static_cast<long long>(p.service_ms),
                static_cast<long long>(p.timeout_ms), p.max_attempts,
                static_cast<long long>(p.initial_delay_ms), p.jitter ? "on" : "off",
                p.dedup ? "on" : "off", std::string(RetryKeyName(p.retry_key)).c_str(),
                static_cast<long long>(p.retention_ms));
  return line;
}

std::string ResultLines(const SimRun& run) {
  const SimResult& r = run.result;
  char text[400];
  std::snprintf(text, sizeof text,
                "result: %s after %d attempt(s), at %lld ms; the run ends at %lld ms\n"
                "        server operations %d, effects %d (intended %d), late acks %d, "
                "reconciliation flag %s\n",
                std::string(ClientOutcomeName(r.client_outcome)).c_str(), r.attempts,
                static_cast<long long>(run.client_done_ms), static_cast<long long>(run.end_ms),
                r.server_operations, r.effects, r.intended, r.late_acks,
                r.reconciliation_flag ? "yes" : "no");
  return text;
}

}  // namespace

std::string KeyName(int key) { return "k" + std::to_string(key); }

Result<SimParams> ParseSimParams(const SimParamLookup& lookup, const SimParams& defaults) {
  SimParams p = defaults;
  Status status = ParseChoices(lookup, &p);
  if (!status.ok()) return status;
  int64_t max_attempts = p.max_attempts;
  for (auto [name, field] :
       {std::pair{"service_ms", &p.service_ms}, std::pair{"timeout_ms", &p.timeout_ms},
        std::pair{"max_attempts", &max_attempts},
        std::pair{"initial_delay_ms", &p.initial_delay_ms},
        std::pair{"retention_ms", &p.retention_ms}}) {
    status = ParseIntegerParam(lookup, name, field);
    if (!status.ok()) return status;
  }
  // Checked before narrowing to int, so that a huge value is reported, not truncated.
  if (max_attempts < 1 || max_attempts > kMaxAttempts) {
    return Status::Error(ErrorCode::kInvalidArgument, "max_attempts must be between 1 and " +
                                                          std::to_string(kMaxAttempts) + ", got " +
                                                          std::to_string(max_attempts));
  }
  p.max_attempts = static_cast<int>(max_attempts);
  status = ValidateSimParams(p);
  if (!status.ok()) return status;
  return p;
}

nlohmann::ordered_json SimParamsToJson(const SimParams& p) {
  return {{"fault", FaultName(p.fault)},
          {"service_ms", p.service_ms},
          {"timeout_ms", p.timeout_ms},
          {"max_attempts", p.max_attempts},
          {"initial_delay_ms", p.initial_delay_ms},
          {"jitter", p.jitter},
          {"dedup", p.dedup ? "on" : "off"},
          {"retry_key", RetryKeyName(p.retry_key)},
          {"retention_ms", p.retention_ms}};
}

nlohmann::ordered_json SimResultToJson(const SimResult& r) {
  return {{"client_outcome", ClientOutcomeName(r.client_outcome)},
          {"attempts", r.attempts},
          {"server_operations", r.server_operations},
          {"effects", r.effects},
          {"intended", r.intended},
          {"late_acks", r.late_acks},
          {"reconciliation_flag", r.reconciliation_flag}};
}

nlohmann::ordered_json SimRunToJson(const SimRun& run) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const SimEvent& e : run.events) {
    nlohmann::ordered_json event = {
        {"at_ms", e.at_ms}, {"actor", ActorName(e.actor)}, {"kind", EventKindName(e.kind)}};
    if (e.attempt > 0) event["attempt"] = e.attempt;
    if (e.operation > 0) event["operation"] = e.operation;
    if (e.key > 0) event["key"] = KeyName(e.key);
    events.push_back(std::move(event));
  }
  return {{"params", SimParamsToJson(run.params)},
          {"events", std::move(events)},
          {"result", SimResultToJson(run.result)}};
}

std::string SimRunToText(const SimRun& run) {
  std::string text = ParamsLine(run.params) + "\n\n";
  int width = static_cast<int>(std::to_string(run.end_ms).size());
  if (width < 5) width = 5;
  char line[256];
  std::snprintf(line, sizeof line, "%*s  %-7s  %-15s  %s\n", width, "at_ms", "actor", "kind",
                "what happens");
  text += line;
  int effects = 0;
  for (const SimEvent& e : run.events) {
    if (e.kind == EventKind::kCommit) ++effects;
    std::snprintf(line, sizeof line, "%*lld  %-7s  %-15s  ", width, static_cast<long long>(e.at_ms),
                  std::string(ActorName(e.actor)).c_str(),
                  std::string(EventKindName(e.kind)).c_str());
    text += line + Describe(run.params, e, effects) + "\n";
  }
  return text + "\n" + ResultLines(run);
}

}  // namespace agentpay::sim
