// See route_table.h. Every server reads a prefix's segments alike but for case (Rails may read a
// path equal to "/v1.2" as "/v1": T21 leaves that to the operator), so a reading can only move a
// request to a deeper prefix: only those are tried, and only when some exist.
#include "http/route_table.h"

#include <deque>
#include <limits>
#include <optional>

#include "core/hex.h"
#include "http/path_reading.h"

namespace agentpay {
namespace {

Status Invalid(std::string message) {
  return Status::Error(ErrorCode::kInvalidConfig, std::move(message));
}

// The segments of a path ("/a/b/" is "a", "b", ""); none for "/".
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> segments;
  if (path == "/") return segments;
  while (!path.empty()) {
    path.remove_prefix(1);  // the '/'
    const size_t slash = path.find('/');
    segments.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return segments;
}

// The skeleton of a prefix segment that reads alike everywhere but for case: decoded, lower-cased.
std::string LowerDecoded(std::string_view segment) {
  std::string out;
  for (size_t i = 0; i < segment.size(); ++i) {
    char c = segment[i];
    const int high = c == '%' && i + 2 < segment.size() ? HexDigitValue(segment[i + 1]) : -1;
    const int low = high >= 0 ? HexDigitValue(segment[i + 2]) : -1;
    if (low >= 0) {
      c = static_cast<char>(high * 16 + low);
      i += 2;
    }
    out += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// The skeletons of a path's segments (path_reading.h), each read when first asked for: most
// candidate prefixes are ruled out by the first segment or two. Empty skeletons (";x", "%20") are
// left out: they only ever vanish, and a path of thousands of them would otherwise cost each
// candidate prefix thousands of steps. Without them each step of MayLieBelow moves its furthest
// reach one prefix segment on or ends it: it takes at most the prefix's depth in steps.
class PathSkeleton {
 public:
  explicit PathSkeleton(std::string_view path) : rest_(path == "/" ? std::string_view() : path) {}

  // The skeleton of the index-th segment that is not empty, or null past the last one. It stays
  // where it is while the PathSkeleton lives.
  const std::string* At(size_t index) {
    while (read_.size() <= index && !rest_.empty()) {
      rest_.remove_prefix(1);  // the '/'
      const size_t slash = rest_.find('/');
      SegmentReading reading = ReadSegment(rest_.substr(0, slash));
      rest_ = slash == std::string_view::npos ? std::string_view() : rest_.substr(slash);
      // A hazard never passes NormalizeTarget; were one here, it could read as anything.
      if (reading.hazard != SegmentHazard::kNone) {
        read_.emplace_back(1, kAnyRun);
      } else if (!reading.skeleton.empty()) {
        read_.push_back(std::move(reading.skeleton));
      }
    }
    return index < read_.size() ? &read_[index] : nullptr;
  }

  // Whether every segment after the index-th (as At counts) may vanish, leaving it the last.
  bool OnlyVanishingAfter(size_t index) {
    if (!kept_end_.has_value()) {
      At(std::numeric_limits<size_t>::max());  // reads every segment
      size_t end = read_.size();
      while (end > 0 && MayVanish(read_[end - 1])) --end;
      kept_end_ = end;  // from here on every segment may vanish
    }
    return index + 1 >= *kept_end_;
  }

 private:
  std::string_view rest_;
  std::deque<std::string> read_;    // a deque: reading on keeps earlier segments where they are
  std::optional<size_t> kept_end_;  // OnlyVanishingAfter's, once asked
};

// Whether some reading of the path's segments lies below the prefix's skeleton. reach[j]: some
// reading of the segments seen so far is the prefix's first j segments; a segment reads as the
// next prefix segment or, if it may vanish, as nothing. Read without its extension, a segment can
// only end the path (WithoutExtension), so that reading counts only for the prefix's last segment.
bool MayLieBelow(PathSkeleton& path, const std::vector<std::string>& prefix) {
  const size_t depth = prefix.size();
  if (depth == 0) return true;  // "/": every path lies below it
  std::vector<char> reach(depth + 1, 0), next(depth + 1, 0);
  reach[0] = 1;
  for (size_t index = 0; const std::string* segment = path.At(index); ++index) {
    if (reach[depth]) return true;
    if (reach[depth - 1]) {
      const std::optional<std::string_view> stem = WithoutExtension(*segment);
      if (stem && MayReadAs(*stem, prefix[depth - 1]) && path.OnlyVanishingAfter(index)) {
        return true;
      }
    }
    const bool vanishes = MayVanish(*segment);
    bool any = false;
    for (size_t j = 0; j <= depth; ++j) {
      next[j] = vanishes && reach[j];
      if (j > 0 && reach[j - 1] && MayReadAs(*segment, prefix[j - 1])) next[j] = 1;
      any = any || next[j];
    }
    if (!any) return false;
    reach.swap(next);
  }
  return reach[depth] != 0;
}

}  // namespace

Status CheckRoutePrefix(std::string_view prefix) {
  for (std::string_view segment : Segments(prefix)) {
    const SegmentReading reading = ReadSegment(segment);
    if (reading.hazard != SegmentHazard::kNone) {
      return Invalid("prefix " + std::string(prefix) + ": " +
                     std::string(HazardReason(reading.hazard)));
    }
    if (reading.skeleton != LowerDecoded(segment) || reading.skeleton.empty()) {
      return Invalid("prefix " + std::string(prefix) + ": the segment '" + std::string(segment) +
                     "' reads differently on some servers (';' parameters, a '::$' stream, a "
                     "trailing dot or space, an escaped '%', a non-ASCII character or a short "
                     "name such as 'expens~1'): give the prefix as the upstream's plain ASCII "
                     "path");
    }
  }
  return Status::Ok();
}

Result<RouteTable> RouteTable::Make(const std::vector<RoutePrefix>& routes) {
  std::vector<Entry> entries;
  entries.reserve(routes.size());
  for (const RoutePrefix& route : routes) {
    if (Status checked = CheckRoutePrefix(route.prefix); !checked.ok()) return checked;
    Entry entry{route.prefix, route.terms, {}};
    for (std::string_view segment : Segments(route.prefix)) {
      entry.skeleton.push_back(LowerDecoded(segment));
    }
    for (const Entry& other : entries) {
      if (other.skeleton == entry.skeleton) {
        return Invalid("prefixes " + other.prefix + " and " + entry.prefix +
                       " name the same path on servers that ignore letter case: keep one");
      }
    }
    entries.push_back(std::move(entry));
  }
  return RouteTable(std::move(entries));
}

RouteMatch RouteTable::Match(std::string_view path) const {
  const Entry* strict = nullptr;
  size_t strict_index = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    std::string_view prefix = entries_[i].prefix;
    const bool below =
        prefix == "/" || path == prefix ||
        (path.starts_with(prefix) && path.size() > prefix.size() && path[prefix.size()] == '/');
    if (below && (strict == nullptr || prefix.size() > strict->prefix.size())) {
      strict = &entries_[i];
      strict_index = i;
    }
  }
  const RouteMatch as_read = strict == nullptr ? RouteMatch{RouteOutcome::kUnmatched, 0}
                                               : RouteMatch{RouteOutcome::kMatched, strict_index};
  PathSkeleton skeleton(path);  // read only as far as some candidate asks
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& entry = entries_[i];
    if (strict != nullptr &&
        (entry.terms == strict->terms || entry.skeleton.size() <= strict->skeleton.size())) {
      continue;
    }
    if (MayLieBelow(skeleton, entry.skeleton)) return {RouteOutcome::kAmbiguous, i};
  }
  return as_read;
}

}  // namespace agentpay
