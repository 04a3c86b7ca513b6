// JSON renderings of store records for the HTTP API (CONTRACT §3). Amounts are decimal strings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/operation.h"
#include "store/store.h"

namespace agentpay {

// Serializes without throwing on invalid UTF-8 in user-supplied strings (they are replaced).
std::string DumpJson(const nlohmann::json& value);

nlohmann::json OperationJson(const Operation& op);
nlohmann::json TraceJson(const std::vector<TraceEvent>& events);
nlohmann::json AccountJson(const AccountRecord& account);
nlohmann::json AlertJson(const Alert& alert);

}  // namespace agentpay
