// Idempotency keys and request fingerprints of the agent client: a key names one business action
// (CONTRACT §3) and is derived from the agent's task, step and credential so that a re-run finds
// it again and nobody else can.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentpay/client.h"

namespace agentpay::client {

// The key earlier versions derived for --task/--step: "task:" + the first 32 hex digits of
// SHA-256(task) + ":step:" + step. Anyone who knows the task text can compute it, so it is never
// chosen for a new step; a step the budget file already holds under it keeps it (a new key would
// make the gateway take a finished or in-flight step for a new action and charge again).
std::string LegacyTaskKey(std::string_view task, uint64_t step);

// What makes two requests "the same request" for one key: SHA-256 over method, URL, Content-Type
// and body, length-prefixed so that no two different requests share a fingerprint.
std::string RequestFingerprint(std::string_view method, std::string_view url,
                               std::string_view content_type, std::string_view body);

// The Content-Type among `headers`, "" when absent (case-insensitive name).
std::string ContentTypeOf(const std::vector<Header>& headers);

}  // namespace agentpay::client
