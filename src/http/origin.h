// Web origins and the base URLs that browsers and x402 clients are shown, parsed strictly from
// configuration (--admin-origin, --public-url, the listeners' addresses) and from the Host and
// Origin headers, and compared in one normal form: lower case, default ports left out (RFC 6454).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace agentpay {

struct WebOrigin {
  bool https = false;
  std::string host;   // lower case; an IP address in its canonical form, IPv6 in brackets
  uint16_t port = 0;  // 80 or 443 when the text named none; never 0 once parsed
  // "https://host" or "http://host:port": the port left out when it is the scheme's default, as a
  // browser writes its Origin header.
  std::string Serialize() const;
  bool operator==(const WebOrigin&) const = default;
};

// "http(s)://HOST[:PORT]", with at most a single trailing '/' (an operator may copy a URL so).
// HOST is a DNS name (letters, digits, '-', '_', '.') or an IP address, IPv6 in brackets. Refused
// (kInvalidConfig, saying why): any other scheme, user information, a path, a query or fragment,
// port 0, an empty or malformed host. "null" (an opaque origin) is refused too.
Result<WebOrigin> ParseWebOrigin(std::string_view text);

// A public base URL, "http(s)://HOST[:PORT][/PATH]", normalised: scheme and host in lower case, the
// default port left out, no trailing '/'. PATH must already be a normalised path
// (http/request_target.h); a query, fragment or user information is refused.
Result<std::string> ParsePublicUrl(std::string_view text);

// The URL of a listener bound at `host`:`port` ("https://HOST:PORT" with `tls`), IPv6 in brackets.
std::string ListenerUrl(std::string_view host, uint16_t port, bool tls);

// The host of a Host header value ("name", "name:port", "[v6]:port", "1.2.3.4:port") in the form
// ParseWebOrigin gives it; nullopt when the value is not such a host.
std::optional<std::string> HostOfHeader(std::string_view value);

// An IPv4 address or a bracketed IPv6 address, as WebOrigin::host holds them.
bool IsIpAddressHost(std::string_view host);
// 127.0.0.0/8 or ::1, bracketed or not: the addresses of this machine only.
bool IsLoopbackAddress(std::string_view host);
// 0.0.0.0 or :: (bracketed or not): a listener on every address of the machine.
bool IsWildcardAddress(std::string_view host);

}  // namespace agentpay
