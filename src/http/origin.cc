// See origin.h.
#include "http/origin.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>

#include "http/request_target.h"

namespace agentpay {
namespace {

// Longer than any DNS name (253 bytes); Host headers may be longer still, and are refused.
constexpr size_t kMaxHostBytes = 253;

Status Bad(std::string why) { return Status::Error(ErrorCode::kInvalidConfig, std::move(why)); }

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// Without the brackets of an IPv6 address, if it has them.
std::string_view Unbracketed(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// The canonical form of a host: an IP address as inet_ntop writes it (IPv6 in brackets), else a
// DNS name in lower case. nullopt for anything else: no percent-encoding, IPv6 zone or empty label,
// so that two spellings of one host cannot compare different.
std::optional<std::string> CanonicalHost(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    const std::string inner(Unbracketed(host));
    in6_addr v6{};
    if (inet_pton(AF_INET6, inner.c_str(), &v6) != 1) return std::nullopt;
    char text[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, &v6, text, sizeof text) == nullptr) return std::nullopt;
    return "[" + std::string(text) + "]";
  }
  if (host.empty() || host.size() > kMaxHostBytes) return std::nullopt;
  std::string lower = Lower(host);
  for (char c : lower) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return std::nullopt;
    }
  }
  if (lower.front() == '.' || lower.back() == '.' || lower.find("..") != std::string::npos) {
    return std::nullopt;
  }
  in_addr v4{};
  if (inet_pton(AF_INET, lower.c_str(), &v4) == 1) {
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &v4, text, sizeof text) == nullptr) return std::nullopt;
    return std::string(text);
  }
  return lower;
}

struct Authority {
  std::string host;
  std::optional<uint16_t> port;
};

// "host", "host:port", "[v6]" or "[v6]:port"; ports 1 to 65535.
std::optional<Authority> ParseAuthority(std::string_view text) {
  std::string_view host = text;
  std::optional<std::string_view> port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(0, close + 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port_text = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  auto canonical = CanonicalHost(host);
  if (!canonical) return std::nullopt;
  Authority authority{std::move(*canonical), std::nullopt};
  if (port_text) {
    if (port_text->empty() || port_text->size() > 5) return std::nullopt;
    uint32_t port = 0;
    for (char c : *port_text) {
      if (c < '0' || c > '9') return std::nullopt;
      port = port * 10 + static_cast<uint32_t>(c - '0');
    }
    if (port == 0 || port > 65535) return std::nullopt;
    authority.port = static_cast<uint16_t>(port);
  }
  return authority;
}

// Whether `text` starts with "https://" (true) or "http://" (false), in any case; the rest after.
std::optional<std::pair<bool, std::string_view>> SplitScheme(std::string_view text) {
  for (const auto& [scheme, https] : {std::pair{std::string_view("https://"), true},
                                      std::pair{std::string_view("http://"), false}}) {
    if (text.size() >= scheme.size() && Lower(text.substr(0, scheme.size())) == scheme) {
      return std::pair{https, text.substr(scheme.size())};
    }
  }
  return std::nullopt;
}

WebOrigin OriginOf(bool https, Authority authority) {
  return {https, std::move(authority.host), authority.port.value_or(https ? 443 : 80)};
}

}  // namespace

std::string WebOrigin::Serialize() const {
  std::string text = (https ? "https://" : "http://") + host;
  if (port != (https ? 443 : 80)) text += ":" + std::to_string(port);
  return text;
}

Result<WebOrigin> ParseWebOrigin(std::string_view text) {
  const std::string quoted = "'" + std::string(text.substr(0, 300)) + "'";
  auto scheme = SplitScheme(text);
  if (!scheme) return Bad("expected http://HOST[:PORT] or https://HOST[:PORT], got " + quoted);
  std::string_view rest = scheme->second;
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return Bad(
        "an origin is a scheme, a host and a port, with no path, query, fragment or user "
        "name: got " +
        quoted);
  }
  auto authority = ParseAuthority(rest);
  if (!authority) return Bad("bad host or port in " + quoted);
  return OriginOf(scheme->first, std::move(*authority));
}

Result<std::string> ParsePublicUrl(std::string_view text) {
  const std::string quoted = "'" + std::string(text.substr(0, 300)) + "'";
  auto scheme = SplitScheme(text);
  if (!scheme) return Bad("expected http://HOST[:PORT][/PATH] or https://…, got " + quoted);
  std::string_view rest = scheme->second;
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad("a base URL has no query or fragment: got " + quoted);
  }
  const size_t slash = rest.find('/');
  const std::string_view authority_text = rest.substr(0, slash);
  if (authority_text.find('@') != std::string_view::npos) {
    return Bad("a base URL has no user name or password: got " + quoted);
  }
  auto authority = ParseAuthority(authority_text);
  if (!authority) return Bad("bad host or port in " + quoted);
  std::string path(slash == std::string_view::npos ? "" : rest.substr(slash));
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (!path.empty()) {
    auto normal = NormalizeTarget(path);
    if (!normal.ok() || *normal != path) {
      return Bad("the path of " + quoted +
                 " is not a normalised path (no '.', '..', '//', or escapes of letters, digits "
                 "and -._~)");
    }
  }
  return OriginOf(scheme->first, std::move(*authority)).Serialize() + path;
}

std::string ListenerUrl(std::string_view host, uint16_t port, bool tls) {
  const bool bare_v6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  const std::string shown = bare_v6 ? "[" + std::string(host) + "]" : std::string(host);
  return (tls ? "https://" : "http://") + shown + ":" + std::to_string(port);
}

std::optional<std::string> HostOfHeader(std::string_view value) {
  auto authority = ParseAuthority(value);
  if (!authority) return std::nullopt;
  return std::move(authority->host);
}

bool IsIpAddressHost(std::string_view host) {
  const std::string bare(Unbracketed(host));
  in_addr v4{};
  in6_addr v6{};
  if (bare.size() != host.size()) return inet_pton(AF_INET6, bare.c_str(), &v6) == 1;
  return inet_pton(AF_INET, bare.c_str(), &v4) == 1;
}

bool IsLoopbackAddress(std::string_view host) {
  const std::string bare(Unbracketed(host));
  in_addr v4{};
  if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool IsWildcardAddress(std::string_view host) {
  const std::string bare(Unbracketed(host));
  in_addr v4{};
  if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) return v4.s_addr == htonl(INADDR_ANY);
  in6_addr v6{};
  return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&v6);
}

}  // namespace agentpay
