// The model's parameters and runs as text: parameters parsed by their snake_case names (the flags
// of `agentpay sim` and the query of GET /v1/sim, CONTRACT §7), the JSON of a run and a text
// timeline.
#pragma once

#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "sim/model.h"

namespace agentpay::sim {

// Every parameter name, in the order of CONTRACT §7.
inline constexpr std::array<std::string_view, 9> kSimParamNames = {
    "fault",  "service_ms", "timeout_ms", "max_attempts", "initial_delay_ms",
    "jitter", "dedup",      "retry_key",  "retention_ms"};

// Returns the text given for a parameter name, or nullopt when it was not given.
using SimParamLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Parameters from text; absent ones keep the value in `defaults`. Values: fault none|lost_response|
// transient_503|rejected_400; integers in decimal; jitter and dedup on|off|true|false; retry_key
// stable|new. An invalid_argument Status names the first bad parameter; ranges are checked too.
Result<SimParams> ParseSimParams(const SimParamLookup& lookup, const SimParams& defaults = {});

// {fault, service_ms, timeout_ms, max_attempts, initial_delay_ms, jitter: bool, dedup: "on"|"off",
//  retry_key, retention_ms}: the values as the flags take them.
nlohmann::ordered_json SimParamsToJson(const SimParams& params);
nlohmann::ordered_json SimResultToJson(const SimResult& result);
// {params, events: [{at_ms, actor, kind, attempt?, operation?, key?}], result} (CONTRACT §7).
nlohmann::ordered_json SimRunToJson(const SimRun& run);

// The parameters on one line, then one aligned line per event, then the result.
std::string SimRunToText(const SimRun& run);

// "k<key>"; key ≥ 1.
std::string KeyName(int key);

}  // namespace agentpay::sim
