// See closest_name.h.
#include "cli/closest_name.h"

#include <algorithm>
#include <cctype>

namespace agentpay {
namespace {

char Fold(char c) {
  if (c == '-') return '_';
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Levenshtein distance over folded characters; names are short (config keys), so O(n*m) is fine.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitution = diagonal + (Fold(a[i - 1]) == Fold(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ClosestName(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(name, candidate);
    const size_t allowed = std::max<size_t>(3, std::max(name.size(), candidate.size()) / 3);
    // A name that starts the candidate ("require_idempotency" for "require_idempotency_key") is
    // a plausible typo however much is missing.
    const bool prefix = name.size() >= 4 && candidate.size() > name.size() &&
                        EditDistance(name, candidate.substr(0, name.size())) == 0;
    if ((distance <= allowed || prefix) && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string UnknownNameMessage(std::string_view what, std::string_view name,
                               const std::vector<std::string>& candidates) {
  std::string message = "unknown " + std::string(what) + " '" + std::string(name) + "'";
  if (std::string closest = ClosestName(name, candidates); !closest.empty()) {
    return message + "; did you mean '" + closest + "'?";
  }
  message += "; valid " + std::string(what) + "s: ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    message += (i ? ", " : "") + candidates[i];
  }
  return message;
}

}  // namespace agentpay
