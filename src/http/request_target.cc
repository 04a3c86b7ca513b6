// See request_target.h.
#include "http/request_target.h"

#include <vector>

#include "core/hex.h"
#include "http/path_reading.h"

namespace agentpay {
namespace {

Status Refuse(std::string message) {
  return Status::Error(ErrorCode::kInvalidTarget, std::move(message));
}

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// The path with unreserved characters decoded and other escapes upper-cased.
Result<std::string> DecodeUnreserved(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '\\') return Refuse("a '\\' in the path is not accepted");
    if (c == '#') return Refuse("a fragment ('#') is not part of a request target");
    if (c != '%') {
      out += c;
      continue;
    }
    const int high = i + 1 < path.size() ? HexDigitValue(path[i + 1]) : -1;
    const int low = i + 2 < path.size() ? HexDigitValue(path[i + 2]) : -1;
    if (high < 0 || low < 0) return Refuse("a '%' in the path must be followed by two hex digits");
    const auto byte = static_cast<unsigned char>(high * 16 + low);
    if (byte == '/' || byte == '\\' || byte == 0) {
      return Refuse("an encoded '/', '\\' or NUL (%2F, %5C, %00) in the path is not accepted");
    }
    if (Unreserved(byte)) {
      out += static_cast<char>(byte);
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
    i += 2;
  }
  return out;
}

}  // namespace

Result<std::string> NormalizeTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return Refuse(
        "the request target must be a path starting with '/' (origin-form); "
        "absolute-form, authority-form and '*' targets are not accepted");
  }
  const size_t mark = target.find('?');
  const std::string_view raw_path = target.substr(0, mark);
  const std::string_view query =
      mark == std::string_view::npos ? std::string_view() : target.substr(mark);
  if (query.find('#') != std::string_view::npos) {
    return Refuse("a fragment ('#') is not part of a request target");
  }
  auto decoded = DecodeUnreserved(raw_path);
  if (!decoded.ok()) return decoded.status();
  std::vector<std::string_view> segments;
  std::string_view rest = *decoded;
  bool trailing_slash = false;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the '/'
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    const bool dot = segment == "." || segment == "..";
    // An empty last segment or a dot segment at the end leaves a directory: "/a/" or "/a/b/..".
    trailing_slash = rest.empty() && (segment.empty() || dot);
    // What the gateway reads as a plain segment, some server may read as "..", or as more than
    // one segment: those are refused, whatever the routes (T10, T21).
    if (!dot) {
      if (SegmentHazard hazard = HazardOf(segment); hazard != SegmentHazard::kNone) {
        return Refuse(std::string(HazardReason(hazard)));
      }
    }
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  std::string out;
  out.reserve(decoded->size() + query.size() + 1);
  for (std::string_view segment : segments) {
    out += '/';
    out += segment;
  }
  if (out.empty() || trailing_slash) out += '/';
  out += query;
  return out;
}

}  // namespace agentpay
