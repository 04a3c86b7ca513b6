// The valid name closest to a mistyped one, so that "unknown key 'admin-token-file'" can go on
// "did you mean 'admin_token_file'?". Pure; used by the config reader and the CLI's body checks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentpay {

// The candidate with the smallest edit distance to `name` (dashes and underscores compare equal,
// letters ignore case), or "" when none is close enough to be a plausible typo: within a third
// of the longer name's length, and at least 3 edits allowed.
std::string ClosestName(std::string_view name, const std::vector<std::string>& candidates);

// "unknown key 'x'" + "; did you mean 'y'?" when ClosestName finds one, else "; valid keys: a, b".
std::string UnknownNameMessage(std::string_view what, std::string_view name,
                               const std::vector<std::string>& candidates);

}  // namespace agentpay
