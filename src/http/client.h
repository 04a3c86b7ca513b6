// A blocking HTTP/1.1 client for upstream calls and tools, over TCP or TLS, with a whole-call
// deadline and a response size limit. Each calling thread keeps its own idle keep-alive connections
// (and, per endpoint, the TLS session to resume when a new one is needed); a pooled connection the
// peer already closed is discarded before use, and a request is never re-sent after it left.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "http/message.h"
#include "http/tls.h"

namespace agentpay {

struct Endpoint {
  std::string host;  // a DNS name or an IP address, as the URL gave it
  uint16_t port = 80;
  std::string base_path;  // without a trailing '/'; "" for the root
  bool tls = false;       // https: the certificate must name `host` and chain to a trusted CA
  std::string HostHeader() const { return host + ":" + std::to_string(port); }
  // "https://host:port" or "http://host:port", for messages and as the connection pool's key.
  std::string Origin() const { return (tls ? "https://" : "http://") + HostHeader(); }
};

// Parses "http://HOST[:PORT][/PATH]" (port 80 by default) and "https://HOST[:PORT][/PATH]" (443).
Result<Endpoint> ParseHttpUrl(std::string_view url);

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";
  std::vector<HttpHeader> headers;
  std::string body;
};

enum class ClientError {
  kNone,
  kConnect,   // could not connect: the request was never sent
  kTls,       // the TLS handshake failed (detail names the origin and why): never sent
  kTimeout,   // the deadline passed after the request may have been sent
  kClosed,    // the peer closed or reset the connection before a complete answer
  kProtocol,  // the answer was not valid HTTP
  kTooLarge,  // the answer's body exceeded the limit
};
std::string_view ClientErrorName(ClientError error);

struct ClientResponse {
  ClientError error = ClientError::kNone;
  std::string detail;
  int status = 0;
  std::vector<HttpHeader> headers;
  std::string body;
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct ClientOptions {
  int64_t timeout_ms = 10000;
  uint64_t max_response_bytes = 8 * 1024 * 1024;
  bool keep_alive = true;
  // Whom an https endpoint's certificate must chain to; null: the system's CA store.
  std::shared_ptr<const TlsTrust> trust;
};

// What a call makes of the bytes an upstream answers with, once its request left: the same parser,
// limits and error classes as on a socket, the bytes arriving in pieces of chunk_bytes (0: all at
// once; the end of the bytes is the peer closing). For tests and fuzz/http_response_fuzzer.cc.
ClientResponse ReadResponseBytes(std::string_view wire, const ClientOptions& options,
                                 bool head_request, size_t chunk_bytes);

ClientResponse SendHttp(const Endpoint& endpoint, const ClientRequest& request,
                        const ClientOptions& options);

// The same exchange without blocking: calls run on the client's own I/O thread, which keeps the
// idle keep-alive connections, and `done` runs on that thread (it must not block). Destruction
// stops the thread; calls still in flight are abandoned without calling `done`.
class AsyncHttpClient {
 public:
  using Done = std::function<void(ClientResponse)>;
  AsyncHttpClient();
  ~AsyncHttpClient();
  AsyncHttpClient(const AsyncHttpClient&) = delete;
  AsyncHttpClient& operator=(const AsyncHttpClient&) = delete;

  void Send(const Endpoint& endpoint, ClientRequest request, const ClientOptions& options,
            Done done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentpay
