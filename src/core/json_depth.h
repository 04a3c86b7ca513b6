// A guard run on untrusted JSON text before it is parsed: nlohmann's parser, destructor and dump
// are recursive, so a document nested deeper than a bound is refused before any tree is built.
#pragma once

#include <string_view>

namespace agentpay {

// True when no array or object in `text` (outside string literals) nests deeper than max_depth.
bool JsonNestingWithin(std::string_view text, int max_depth);

}  // namespace agentpay
