// The HTTP listener: Boost.Beast sessions on a few I/O threads, and a bounded pool of worker threads
// that run the (blocking) handler. Every limit is named; past one the client gets 413/431/503 with a
// problem body, never a crash. docs/protocol.md ("Limits") describes them for users.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "http/message.h"
#include "http/tls.h"

namespace agentpay {

struct ServerLimits {
  size_t io_threads = 2;
  size_t workers = 64;                  // handlers running at once
  size_t max_queued_requests = 4096;    // parsed requests waiting for a worker; past it: 503
  size_t max_connections = 4096;        // open connections; past it: 503 and close
  // Open connections from one client (http/message.h ClientKey: an IPv4 address, an IPv6 /64);
  // past it: 503 + Retry-After and close, so one address cannot take every connection slot.
  size_t max_connections_per_client = 512;
  size_t max_header_bytes = 16 * 1024;  // past it: 431
  uint64_t max_body_bytes = 1024 * 1024;  // past it: 413
  int64_t read_timeout_ms = 30000;      // to receive a body once its header arrived; to write
  // A request's header must arrive whole within this, counted from the connection's accept (first
  // request) or from the first byte of the request (later ones): a slowloris is cut here.
  int64_t header_timeout_ms = 10000;
  int64_t idle_timeout_ms = 60000;  // a keep-alive connection waits this long for the next request
  int64_t hang_timeout_ms = 600000;     // Disposition::kHang keeps a connection at most this long
  // Request body bytes held by the whole listener at once: announced by the requests whose body
  // is being read, and held by the requests read but not yet answered (a chunked body counts as
  // max_body_bytes until it is whole). A body that would pass it is never read: 503 + Retry-After
  // and close. With max_connections it bounds what clients can make the process hold.
  uint64_t max_body_bytes_in_flight = 64 * 1024 * 1024;
  // The same bound for one client (ClientKey), so that one address cannot take it all.
  uint64_t max_body_bytes_in_flight_per_client = 16 * 1024 * 1024;
  // When max_connections is reached, a new connection closes the connection that has waited
  // longest for a request head (it may have sent part of one) and was never trusted
  // (ServerHooks::trusted), instead of being refused: a flood of half-sent heads cannot lock a
  // trusted caller out. For small listeners with a trusted audience (the admin listener).
  bool evict_idle_when_full = false;
};

struct ServerStats {
  uint64_t requests = 0;
  uint64_t rejected_overload = 0;  // queue full, too many connections (in all or per client)
  uint64_t open_connections = 0;
  uint64_t queued_requests = 0;
  uint64_t accepted_connections = 0;  // since start
  uint64_t tls_handshakes = 0;        // completed, since start (resumed ones included)
  uint64_t tls_resumed = 0;           // handshakes that resumed an earlier session
  uint64_t body_bytes_in_flight = 0;  // ServerLimits::max_body_bytes_in_flight's count, now
  uint64_t rejected_body_budget = 0;  // bodies refused by that bound, since start
  uint64_t evicted_idle = 0;          // connections closed by evict_idle_when_full, since start
};

// A blocking handler: the server runs it on its worker pool.
using Handler = std::function<HttpResponse(const HttpRequest&)>;
// The answer to one request; callable from any thread, exactly once.
using Respond = std::function<void(HttpResponse)>;
// A non-blocking handler: called on an I/O thread, it must return quickly and answer through
// `respond` later, from any thread. Blocking work belongs on a pool of its own.
using AsyncHandler = std::function<void(std::shared_ptr<const HttpRequest>, Respond)>;
// What a head handler decides about a request whose body is still to come (HeadHandler).
struct HeadDecision {
  enum class Kind {
    kReadBody,  // read the body and hand the whole request to the handler
    kAnswer,    // send `answer` without reading the body, then close the connection
    kLater,     // the decision comes through HeadDone (the head handler's only non-final kind)
  };
  Kind kind = Kind::kReadBody;
  HttpResponse answer;                      // kAnswer only
  std::shared_ptr<const RequestNote> note;  // kReadBody: becomes the request's head_note

  static HeadDecision ReadBody(std::shared_ptr<const RequestNote> note = nullptr) {
    return {Kind::kReadBody, {}, std::move(note)};
  }
  static HeadDecision Answer(HttpResponse response) {
    return {Kind::kAnswer, std::move(response), nullptr};
  }
  static HeadDecision Later() { return {Kind::kLater, {}, nullptr}; }
};
// Delivers the decision of a head handler that returned kLater: exactly once, from any thread,
// with kReadBody or kAnswer.
using HeadDone = std::function<void(HeadDecision)>;
// Called on an I/O thread with a request's head (body empty) as soon as it is parsed, when a body
// is still to come, before any byte of that body is read. An answer is sent at once and the
// connection closed ("Connection: close"; the server then discards what the client still sends for
// at most kLingerMs, and at most max_body_bytes (no more than it would have read anyway), so that
// the client reads the answer instead of a reset). Must not block: work that waits (a store read)
// runs elsewhere and reports through `done` (kLater); the connection reads nothing meanwhile.
using HeadHandler = std::function<HeadDecision(const HttpRequest& head, HeadDone done)>;
// Whether a request's head comes from a caller the listener keeps its connection for
// (ServerLimits::evict_idle_when_full): once one head of a connection passes, the connection is
// never evicted. Called on an I/O thread; must not block.
using TrustedCaller = std::function<bool(const HttpRequest& head)>;

// What a listener may do besides running its handler; each part is optional.
struct ServerHooks {
  HeadHandler head;
  std::shared_ptr<const TlsIdentity> tls;  // set: the listener serves HTTPS only
  TrustedCaller trusted;
};
inline constexpr int64_t kLingerMs = 1000;

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Binds HOST:PORT (port 0 picks a free port) and starts serving. The handler runs on worker threads.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& host, uint16_t port,
                                                   const ServerLimits& limits, Handler handler);
  // The same with a non-blocking handler; limits.workers is unused. With `hooks.tls`, the
  // listener serves HTTPS only, each connection with the identity current when it was accepted
  // (TlsIdentity::Reload changes it for the next ones); the handshake must end within
  // header_timeout_ms.
  static Result<std::unique_ptr<HttpServer>> StartAsync(const std::string& host, uint16_t port,
                                                        const ServerLimits& limits,
                                                        AsyncHandler handler,
                                                        ServerHooks hooks = {});
  virtual uint16_t port() const = 0;
  virtual ServerStats Stats() const = 0;
  // Stops accepting, closes connections and joins every thread. Idempotent.
  virtual void Stop() = 0;
};

// The bytes of `response` as an HTTP/1.1 answer: status line, the handler's headers (any whose name
// or value holds CR or LF is dropped, Connection and Transfer-Encoding are the server's), then
// Content-Length and the body, except for 1xx/204/304 or when the handler set Content-Length itself
// (a HEAD answer); "Connection: close" when the connection ends after it.
std::string SerializeResponse(const HttpResponse& response, bool keep_alive);

// What a session makes of the bytes a client sends, up to the end of its first request: the same
// Beast parser, limits and answers as on a socket, the bytes arriving in pieces of chunk_bytes (0:
// all at once). For tests and the fuzz target fuzz/http_request_fuzzer.cc.
struct RequestRead {
  std::shared_ptr<const HttpRequest> request;  // set when a whole request was read
  bool keep_alive = false;
  std::optional<HttpResponse> answer;  // else the answer sent (400, 413, 431); none: just closed
};
RequestRead ReadRequestBytes(std::string_view wire, const ServerLimits& limits, size_t chunk_bytes);

// Splits "HOST:PORT" (IPv6 as "[::1]:PORT"). Port 0 is allowed.
Result<std::pair<std::string, uint16_t>> ParseListenAddress(const std::string& address);

}  // namespace agentpay
