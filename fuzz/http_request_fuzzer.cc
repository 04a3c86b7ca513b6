// libFuzzer target for the request head and body parsing of the gateway's listener: the bytes a
// client sends, read by ReadRequestBytes exactly as a session reads them (src/http/server.cc: the
// same Beast parser, limits and answers), arriving in pieces whose size the input chooses. What
// is read must be safe to route and forward: no CR, LF or NUL in a name, value or target, the body
// within its limit, and the request built for the upstream carries no header the gateway drops.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/upstream.h"
#include "http/server.h"

namespace {

using namespace agentpay;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "http_request_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

bool HasLineBreakOrNul(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// A header line the serializer writes: only a valid one may get through, and only as one line.
void CheckSerialized(const HttpResponse& response) {
  const std::string wire = SerializeResponse(response, /*keep_alive=*/true);
  const size_t end = wire.find("\r\n\r\n");
  Require(end != std::string::npos, "a serialized response has a header end");
  size_t lines = 0;  // after the status line
  for (size_t at = wire.find("\r\n"); at < end; at = wire.find("\r\n", at + 2)) ++lines;
  Require(lines <= response.headers.size() + 2, "no header line is split in two");
  for (size_t at = 0; at < end; ++at) {
    Require((wire[at] == '\r') == (wire[at + 1] == '\n'), "CR and LF only as CRLF in the head");
    Require(wire[at] != '\0', "no NUL in the head");
  }
}

void CheckRequest(const HttpRequest& request, const ServerLimits& limits) {
  Require(!request.method.empty(), "a method");
  Require(!request.target.empty(), "a target");
  Require(!HasLineBreakOrNul(request.method), "method without CR/LF/NUL");
  Require(!HasLineBreakOrNul(request.target), "target without CR/LF/NUL");
  Require(request.target.find(' ') == std::string::npos, "target without spaces");
  Require(request.body.size() <= limits.max_body_bytes, "body within max_body_bytes");
  for (const auto& header : request.headers) {
    Require(!header.name.empty(), "a header name");
    Require(!HasLineBreakOrNul(header.name), "header name without CR/LF/NUL");
    Require(header.name.find(':') == std::string::npos, "header name without ':'");
    Require(header.value.find_first_of("\r\n") == std::string::npos, "value without CR/LF");
  }
  // Path and query split the target without losing a byte.
  const std::string_view path = request.Path();
  const std::string_view query = request.Query();
  Require(path.size() + (request.target.size() > path.size() ? 1 + query.size() : 0) ==
              request.target.size(),
          "target = path [? query]");

  // What the gateway sends upstream for it.
  RouteConfig route;
  route.upstream.base_path = "/base";
  const ClientRequest forward = BuildUpstreamRequest(route, request, "op_fuzz");
  Require(forward.target == "/base" + request.target, "upstream target under the base path");
  Require(forward.body == request.body, "body forwarded as is");
  size_t keys = 0;
  for (const auto& header : forward.headers) {
    if (HeaderNameEquals(header.name, "Idempotency-Key")) {
      ++keys;
      continue;
    }
    Require(ForwardedHeader(header.name), "no dropped header is forwarded");
  }
  Require(keys == 1, "exactly the gateway's Idempotency-Key goes upstream");

  // Values a handler may echo back (a key, a header) cannot split the answer's head.
  HttpResponse echo = JsonResponse(200, "{}");
  for (const auto& header : request.headers) echo.headers.push_back(header);
  echo.SetHeader("X-Echo-Target", request.target);
  CheckSerialized(echo);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: the size of the pieces the bytes arrive in (0: all at once). Byte 1: small limits, so
  // the limit answers are reached with short inputs.
  const size_t chunk_bytes = data[0];
  ServerLimits limits;
  if (data[1] & 1) limits.max_header_bytes = 200;
  if (data[1] & 2) limits.max_body_bytes = 16;
  const std::string_view wire(reinterpret_cast<const char*>(data + 2), size - 2);

  const RequestRead read = ReadRequestBytes(wire, limits, chunk_bytes);
  if (read.request) {
    Require(!read.answer, "a request or an answer, not both");
    CheckRequest(*read.request, limits);
    // The head is bounded by max_header_bytes however the bytes arrive (Beast alone checked the
    // limit per parse step: seeds regression-header-limit-by-chunking, -by-line-pieces).
    const size_t head_end = wire.find("\r\n\r\n");
    Require(head_end != std::string_view::npos && head_end + 4 <= limits.max_header_bytes,
            "a head within max_header_bytes");
    // The same bytes all at once give the same request, unless one of them is at that limit.
    const RequestRead whole = ReadRequestBytes(wire, limits, 0);
    const bool at_header_limit = whole.answer && whole.answer->status == 431;
    Require(at_header_limit ||
                (whole.request && whole.request->target == read.request->target &&
                 whole.request->body == read.request->body &&
                 whole.request->headers.size() == read.request->headers.size()),
            "chunking does not change the request");
  } else if (read.answer) {
    const int status = read.answer->status;
    Require(status == 400 || status == 413 || status == 431, "a read error is 400, 413 or 431");
    CheckSerialized(*read.answer);
  }
  return 0;
}
