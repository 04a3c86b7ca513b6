// The request target as routes see it (issue 13 item 6): one canonical origin-form for each
// resource, so that a route's prefix, its price, the request fingerprint and the path forwarded
// upstream all name the same thing. docs/protocol.md ("Paths") states the rules for users.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace agentpay {

// The normalised origin-form target ("/path" or "/path?query") of a request target:
// - only origin-form is accepted: an absolute-form ("http://host/x"), authority-form or
//   asterisk-form target is refused, never forwarded as is;
// - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded, every other
//   percent-encoding has its hex digits upper-cased; a '%' not followed by two hex digits is
//   refused;
// - an encoded '/' (%2F), '\' (%5C) or NUL (%00), a raw '\' or a '#' is refused: upstreams differ
//   on what they mean;
// - empty segments are dropped ("//a" is "/a");
// - dot segments are removed (RFC 3986 §5.2.4), never above the root; a segment that some server
//   reads as a dot segment ("..;x", ".;", "..%3B", "..%20", "%252E%252E") or as holding a
//   delimiter ("%252F", a fullwidth solidus, an overlong "%C0%AF") is refused (path_reading.h);
// - the query is kept as sent.
// Refusals have code ErrorCode::kInvalidTarget and say why.
Result<std::string> NormalizeTarget(std::string_view target);

}  // namespace agentpay
