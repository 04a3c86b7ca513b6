// libFuzzer target for the gateway's reading of an upstream's answer: the bytes read by
// ReadResponseBytes exactly as an upstream call reads them (src/http/client.cc: the same Beast
// parser, limits and error classes), in pieces whose size the input chooses, then turned into the
// gateway's UpstreamOutcome (src/gateway/upstream.cc). An answer is final (not 1xx), its body
// within the limit, its header values single lines; a failure has a class and a detail.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/upstream.h"
#include "http/client.h"
#include "http/server.h"

namespace {

using namespace agentpay;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "http_response_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

void CheckAnswer(const ClientResponse& response, const ClientOptions& options, bool head) {
  Require(response.status >= 200 && response.status <= 999, "a final status");
  Require(response.body.size() <= options.max_response_bytes, "body within the limit");
  if (head) Require(response.body.empty(), "a HEAD answer has no body");
  for (const auto& header : response.headers) {
    Require(!header.name.empty(), "a header name");
    Require(header.name.find_first_of("\r\n:") == std::string::npos, "a clean header name");
    Require(header.value.find_first_of("\r\n") == std::string::npos, "value without CR/LF");
  }
  const UpstreamOutcome outcome = ToUpstreamOutcome(response);
  Require(outcome.kind == UpstreamKind::kResponded, "an answer is kResponded");
  Require(outcome.status == response.status, "the status is kept");
  Require(outcome.body == response.body, "the body is kept");
  // The gateway hands the upstream's content type to its own client: one clean line.
  HttpResponse replay = JsonResponse(outcome.status, outcome.body);
  replay.SetHeader("Content-Type", outcome.content_type);
  const std::string wire = SerializeResponse(replay, true);
  Require(wire.find("\r\n\r\n") != std::string::npos, "the replay serializes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: the size of the pieces the bytes arrive in (0: all at once). Byte 1: bit 0 a HEAD
  // request (no body read), bit 1 a small response limit.
  const size_t chunk_bytes = data[0];
  const bool head = data[1] & 1;
  ClientOptions options;
  if (data[1] & 2) options.max_response_bytes = 16;
  const std::string_view wire(reinterpret_cast<const char*>(data + 2), size - 2);

  const ClientResponse response = ReadResponseBytes(wire, options, head, chunk_bytes);
  if (response.error == ClientError::kNone) {
    CheckAnswer(response, options, head);
    const ClientResponse whole = ReadResponseBytes(wire, options, head, 0);
    Require(whole.error == ClientError::kNone && whole.status == response.status &&
                whole.body == response.body,
            "chunking does not change the answer");
  } else {
    Require(response.error == ClientError::kClosed || response.error == ClientError::kProtocol ||
                response.error == ClientError::kTooLarge,
            "a connected read fails as closed, protocol or too_large");
    Require(!response.detail.empty(), "a failure says why");
    const UpstreamOutcome outcome = ToUpstreamOutcome(response);
    Require(outcome.kind == UpstreamKind::kFailed, "a failed read is kFailed");
  }
  return 0;
}
