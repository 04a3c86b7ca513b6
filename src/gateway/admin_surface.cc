// See admin_surface.h.
#include "gateway/admin_surface.h"

#include <cctype>
#include <string>
#include <vector>

#include "core/hex.h"

namespace agentpay {
namespace {

// Percent-decoded (repeatedly, so "%2561" cannot hide an 'a' from a decoder that runs twice) and
// lower-cased. Bounded: each round shortens the text or stops.
std::string Decoded(std::string_view path) {
  std::string text(path);
  for (bool changed = true; changed;) {
    changed = false;
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() && HexDigitValue(text[i + 1]) >= 0 &&
          HexDigitValue(text[i + 2]) >= 0) {
        out += static_cast<char>(HexDigitValue(text[i + 1]) * 16 + HexDigitValue(text[i + 2]));
        i += 2;
        changed = true;
      } else {
        out += text[i];
      }
    }
    text = std::move(out);
  }
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The segments of `path` with empty and "." segments dropped and ".." applied (RFC 3986 5.2.4);
// backslashes count as slashes, as some proxies read them.
std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> segments;
  std::string current;
  auto flush = [&] {
    if (current == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!current.empty() && current != ".") {
      segments.push_back(current);
    }
    current.clear();
  };
  for (char c : path) {
    if (c == '/' || c == '\\') {
      flush();
    } else {
      current += c;
    }
  }
  flush();
  return segments;
}

}  // namespace

bool IsAdminSurfacePath(std::string_view path) {
  const std::vector<std::string> segments = Segments(Decoded(path));
  if (segments.empty()) return false;
  // A first segment such as "admin;x" or "metrics.txt" is refused too (some servers strip such
  // parameters); "administrators" is not one of ours and stays a paid path.
  const std::string& first = segments.front();
  for (std::string_view reserved : {"admin", "metrics", "console"}) {
    if (!first.starts_with(reserved)) continue;
    if (first.size() == reserved.size()) return true;
    const unsigned char next = static_cast<unsigned char>(first[reserved.size()]);
    if (!std::isalnum(next) && next != '_' && next != '-') return true;
  }
  return false;
}

bool IsAdminListenerPath(std::string_view path) {
  return path == "/healthz" || path == "/metrics" || path.starts_with("/admin/") ||
         path == "/console" || path.starts_with("/console/") || path == "/inspector" ||
         path.starts_with("/inspector/") || path == "/v1/sim";
}

}  // namespace agentpay
