// The paid routes' prefixes and the one question asked of them on every request (T10, T21): which
// route the gateway's reading of a path buys, and whether a common upstream could read the same
// path as another route (http/path_reading.h). Such a target is refused, never guessed at.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace agentpay {

struct RoutePrefix {
  std::string prefix;  // "/", or a normalised path without '?' and without a trailing '/'
  // Routes with equal terms (price, upstream and the rest) are interchangeable: a reading that
  // moves a request from one to another buys the same thing at the same price.
  size_t terms = 0;
};

enum class RouteOutcome {
  kMatched,    // the path buys `route`, however a common server reads it
  kUnmatched,  // no route serves the path, however a common server reads it
  kAmbiguous,  // some reading of the path buys `route`, which the gateway's reading does not
};

struct RouteMatch {
  RouteOutcome outcome = RouteOutcome::kUnmatched;
  size_t route = 0;  // kMatched, kAmbiguous: an index into the table's routes
};

// Whether a prefix reads the same on every server but for letter case (path_reading.h): no ';',
// no "::$" stream, no segment ending in a dot or a space, no escaped '%', no non-ASCII character,
// no short name such as "expens~1". Refusals have code kInvalidConfig and say why.
Status CheckRoutePrefix(std::string_view prefix);

class RouteTable {
 public:
  // Refuses (kInvalidConfig) a prefix that CheckRoutePrefix refuses, and two prefixes that read
  // alike on some server ("/Expensive" and "/expensive", "/a%20b" and "/A%20B").
  static Result<RouteTable> Make(const std::vector<RoutePrefix>& routes);

  // The route of `path`, the path of a normalised target (NormalizeTarget) without its query:
  // the longest prefix that it equals or lies below, segment by segment, as the gateway reads it.
  // kAmbiguous when some reading of the path lies below a prefix of other terms that is deeper
  // than that one (or below any prefix, when the gateway's reading matches none).
  RouteMatch Match(std::string_view path) const;

 private:
  struct Entry {
    std::string prefix;
    size_t terms = 0;
    std::vector<std::string> skeleton;  // per segment: lower-cased, decoded
  };
  explicit RouteTable(std::vector<Entry> entries) : entries_(std::move(entries)) {}

  std::vector<Entry> entries_;
};

}  // namespace agentpay
