// Plain HTTP request and response values. Handlers are functions from HttpRequest to HttpResponse,
// testable without sockets; only server.cc and client.cc know Boost.Beast.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.h"

namespace agentpay {

struct HttpHeader {
  std::string name;
  std::string value;
  bool operator==(const HttpHeader&) const = default;
};

// Case-insensitive ASCII comparison, as HTTP header names require.
bool HeaderNameEquals(std::string_view a, std::string_view b);

// What a listener's head handler learnt of a request before its body was read, for the request
// handler to go on from (HeadDecision::ReadBody); each handler defines its own kind of note.
struct RequestNote {
  virtual ~RequestNote() = default;
};

struct HttpRequest {
  std::string method;
  std::string target;  // origin-form: path and optional "?query"
  std::vector<HttpHeader> headers;
  std::string body;
  std::string remote_address;
  // Whatever must live as long as the body does: the listener's count of body bytes in flight
  // (ServerLimits::max_body_bytes_in_flight) is given back when the last copy lets go of it.
  std::shared_ptr<const void> body_lease;
  // The head handler's note (HeadDecision::ReadBody), if it left one: the handler reads it with
  // std::dynamic_pointer_cast to its own kind and may trust it, since only the listener sets it.
  std::shared_ptr<const RequestNote> head_note;

  // The first header with this name, if any.
  std::optional<std::string_view> Header(std::string_view name) const;
  std::string_view Path() const;
  std::string_view Query() const;  // without the '?'
};

enum class Disposition {
  kRespond,         // send the response
  kDropConnection,  // close the connection without answering
  kHang,            // never answer; keep the connection open until the peer gives up
};

struct HttpResponse {
  int status = 200;
  std::vector<HttpHeader> headers;
  std::string body;
  Disposition disposition = Disposition::kRespond;

  // Replaces any header with this name.
  void SetHeader(std::string_view name, std::string value);
  std::optional<std::string_view> Header(std::string_view name) const;
};

// An application/problem+json response (RFC 9457) with a stable `code` (CONTRACT §3).
HttpResponse ProblemResponse(int status, ProblemCode code, std::string_view detail,
                             std::string_view operation_id = {});
HttpResponse JsonResponse(int status, std::string body);

// The 500 for a failure nobody planned for (a handler threw): its body carries a fresh error id
// (`error_id`, also in `detail`) and nothing of `reason`, which goes with the id to `log` (by
// default one line on stderr) for the operator. Exception text, SQL or paths never reach a client.
using InternalErrorLog = void (*)(std::string_view error_id, std::string_view reason);
HttpResponse InternalErrorResponse(std::string_view reason, InternalErrorLog log = nullptr);

// The key that limits count a client under (connections, rate): the address itself for IPv4 (an
// IPv4-mapped IPv6 address is its IPv4 host), its /64 network for IPv6 (one host usually holds a
// whole /64, so per-address limits would not limit it at all).
std::string ClientKey(std::string_view remote_address);

// application/x-www-form-urlencoded decoding of one query name or value: '+' is a space, %XX a
// byte; nullopt for a malformed escape.
std::optional<std::string> DecodeQueryComponent(std::string_view text);

}  // namespace agentpay
