// Helpers over plain HTTP values; see message.h.
#include "http/message.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "core/hex.h"

namespace agentpay {

bool HeaderNameEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

namespace {
std::optional<std::string_view> FindHeader(const std::vector<HttpHeader>& headers,
                                           std::string_view name) {
  for (const auto& header : headers) {
    if (HeaderNameEquals(header.name, name)) return std::string_view(header.value);
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

std::string_view HttpRequest::Path() const {
  std::string_view view(target);
  return view.substr(0, view.find('?'));
}

std::string_view HttpRequest::Query() const {
  std::string_view view(target);
  auto mark = view.find('?');
  return mark == std::string_view::npos ? std::string_view() : view.substr(mark + 1);
}

void HttpResponse::SetHeader(std::string_view name, std::string value) {
  std::erase_if(headers, [&](const HttpHeader& header) { return HeaderNameEquals(header.name, name); });
  headers.push_back({std::string(name), std::move(value)});
}

std::optional<std::string_view> HttpResponse::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

HttpResponse ProblemResponse(int status, ProblemCode code, std::string_view detail,
                             std::string_view operation_id) {
  HttpResponse response;
  response.status = status;
  response.body = ProblemJson(status, code, detail, operation_id);
  response.SetHeader("Content-Type", "application/problem+json");
  return response;
}

HttpResponse InternalErrorResponse(std::string_view reason, InternalErrorLog log) {
  // The shell's own randomness: an id to find the log line by, not a secret.
  static thread_local std::mt19937_64 ids{std::random_device{}()};
  char id[24];
  std::snprintf(id, sizeof id, "err_%016llx", static_cast<unsigned long long>(ids()));
  if (log != nullptr) {
    log(id, reason);
  } else {
    std::fprintf(stderr, "agentpay: internal error %s: %.*s\n", id,
                 static_cast<int>(reason.size()), reason.data());
  }
  HttpResponse response = ProblemResponse(
      500, ProblemCode::kInternalError,
      std::string("internal error; the gateway's log has the reason under error id ") + id);
  auto body = nlohmann::json::parse(response.body);
  body["error_id"] = id;
  response.body = body.dump();
  return response;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  response.SetHeader("Content-Type", "application/json");
  return response;
}

std::string ClientKey(std::string_view remote_address) {
  std::string text(remote_address);
  in6_addr v6{};
  if (text.find(':') == std::string::npos || inet_pton(AF_INET6, text.c_str(), &v6) != 1) {
    return text;
  }
  // An IPv4-mapped address (::ffff:a.b.c.d) is that IPv4 host.
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char out[INET6_ADDRSTRLEN] = {};
  if (std::equal(kMapped, kMapped + 12, v6.s6_addr)) {
    in_addr v4{};
    std::copy(v6.s6_addr + 12, v6.s6_addr + 16, reinterpret_cast<unsigned char*>(&v4));
    if (inet_ntop(AF_INET, &v4, out, sizeof out) != nullptr) return out;
    return text;
  }
  std::fill(v6.s6_addr + 8, v6.s6_addr + 16, 0);
  if (inet_ntop(AF_INET6, &v6, out, sizeof out) == nullptr) return text;
  return std::string(out) + "/64";
}

std::optional<std::string> DecodeQueryComponent(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      if (i + 2 >= text.size()) return std::nullopt;
      int high = HexDigitValue(text[i + 1]), low = HexDigitValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return out;
}

}  // namespace agentpay
