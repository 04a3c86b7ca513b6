// The Beast-based HTTP client; see client.h. Each call runs the calling thread's own io_context until
// the exchange completes or the deadline passes, so it is blocking without blocking anyone else.
#include "http/client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "core/event_threads.h"
#include "http/tls_context.h"
#include "http/wire_stream.h"

namespace agentpay {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Idle keep-alive connections kept per endpoint (per thread). The gateway has up to one upstream
// call in flight per client connection; keeping fewer idle connections than calls in flight made
// the upstream accept (and the gateway connect) anew for most calls under load: with 4, about half
// the paid path's upstream cost was connection setup. 64 matches nginx's `keepalive 64` in bench/.
constexpr size_t kMaxIdlePerEndpoint = 64;
// Interim (1xx) answers skipped before the final one; past it the answer is a protocol error.
constexpr int kMaxInterimResponses = 8;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection: plain TCP, or TLS over TCP.
struct Connection {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& Lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  // For a TLS connection that carried a whole exchange and is now let go: OpenSSL marks the
  // session of a connection freed without a close_notify as not resumable; this one ended well.
  void Retire() {
    if (tls) SSL_set_shutdown(tls->native_handle(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  }
  // Runs `use` with the stream requests and answers travel on.
  template <class Use>
  void With(Use&& use) {
    if (tls) {
      use(*tls);
    } else {
      use(*plain);
    }
  }
};

// What is kept per endpoint and trust between calls: idle connections and, for TLS, the last
// session the server gave, so that a new connection resumes it instead of a full handshake.
struct SessionDeleter {
  void operator()(SSL_SESSION* session) const { SSL_SESSION_free(session); }
};
struct Pooled {
  std::vector<Connection> idle;
  std::unique_ptr<SSL_SESSION, SessionDeleter> tls_session;
};
using IdlePool = std::map<std::string, Pooled>;

struct ThreadState {
  net::io_context ioc;
  IdlePool pool;
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// A pooled connection is reusable when the peer has not closed it: a peek that would block means
// the socket is open and has nothing unread.
bool StillOpen(Connection& connection) {
  int fd = connection.Lowest().socket().native_handle();
  char byte;
  ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

ClientError Classify(const beast::error_code& ec, bool connected) {
  if (ec == beast::error::timeout) return connected ? ClientError::kTimeout : ClientError::kConnect;
  if (!connected) return ClientError::kConnect;
  if (ec == http::error::body_limit) return ClientError::kTooLarge;
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::broken_pipe ||
      ec == http::error::partial_message || ec == net::ssl::error::stream_truncated) {
    return ClientError::kClosed;
  }
  return ClientError::kProtocol;
}

http::request<http::string_body> BuildMessage(const Endpoint& endpoint, const ClientRequest& request,
                                              bool keep_alive) {
  http::request<http::string_body> message;
  message.method_string(request.method);
  message.target(request.target);
  message.version(11);
  for (const auto& header : request.headers) message.insert(header.name, header.value);
  message.set(http::field::host, endpoint.HostHeader());
  message.body() = request.body;
  message.keep_alive(keep_alive);
  message.prepare_payload();
  return message;
}

// Takes an idle connection to the endpoint that the peer has not closed, if there is one.
std::optional<Connection> TakeIdle(std::vector<Connection>& idle) {
  while (!idle.empty()) {
    Connection candidate = std::move(idle.back());
    idle.pop_back();
    if (StillOpen(candidate)) return candidate;
    candidate.Retire();
  }
  return std::nullopt;
}

using ResponseParser = http::response_parser<http::string_body>;

void ApplyOptions(ResponseParser& parser, const ClientOptions& options, bool head_request) {
  parser.body_limit(options.max_response_bytes);
  if (head_request) parser.skip(true);  // a HEAD answer has no body to read
}

// What a response header means for the call. An interim answer (1xx) is skipped: RFC 9110 §15.2
// has a client parse any number of them before the final one; taken as final, its bytes would
// leave the real answer on the connection for the next call to read. 101 was never asked for,
// and a status outside 100..599 is invalid (RFC 9110 §15; Beast reads any three digits): as a
// final answer the gateway would capture payment for it and relay a broken status line.
// Beast 1.74 does not apply body_limit when a header and its whole body arrive in one read, so
// the announced length is checked here, before the body is read.
struct HeadCheck {
  bool interim = false;
  beast::error_code ec;
};
HeadCheck CheckHead(const ResponseParser& parser, const ClientOptions& options,
                    int interim_seen) {
  const unsigned status = parser.get().result_int();
  if (status == 101 || status < 100 || status > 599) return {false, http::error::bad_status};
  if (status >= 100 && status < 200) {
    if (interim_seen >= kMaxInterimResponses) return {false, http::error::bad_status};
    return {true, {}};
  }
  auto length = parser.content_length();
  if (length && *length > options.max_response_bytes) return {false, http::error::body_limit};
  return {};
}

ClientResponse Failed(beast::error_code ec, bool connected) {
  ClientResponse response;
  response.error = Classify(ec, connected);
  response.detail = ec.message();
  return response;
}

ClientResponse Finish(ResponseParser& parser) {
  ClientResponse response;
  auto& reply = parser.get();
  response.status = static_cast<int>(reply.result_int());
  for (const auto& field : reply) {
    response.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  response.body = std::move(reply.body());
  return response;
}

}  // namespace

std::string_view ClientErrorName(ClientError error) {
  switch (error) {
    case ClientError::kNone: return "none";
    case ClientError::kConnect: return "connect";
    case ClientError::kTls:
      return "tls";
    case ClientError::kTimeout: return "timeout";
    case ClientError::kClosed: return "closed";
    case ClientError::kProtocol: return "protocol";
    case ClientError::kTooLarge: return "too_large";
  }
  return "unknown";
}

std::optional<std::string_view> ClientResponse::Header(std::string_view name) const {
  for (const auto& header : headers) {
    if (HeaderNameEquals(header.name, name)) return std::string_view(header.value);
  }
  return std::nullopt;
}

Result<Endpoint> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  Endpoint endpoint;
  std::string_view rest;
  if (url.substr(0, kHttps.size()) == kHttps) {
    endpoint.tls = true;
    endpoint.port = 443;
    rest = url.substr(kHttps.size());
  } else if (url.substr(0, kHttp.size()) == kHttp) {
    rest = url.substr(kHttp.size());
  } else {
    return Status::Error(ErrorCode::kInvalidConfig,
                         "expected an http:// or https:// URL, got '" + std::string(url) + "'");
  }
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) endpoint.base_path = std::string(rest.substr(slash));
  while (!endpoint.base_path.empty() && endpoint.base_path.back() == '/') {
    endpoint.base_path.pop_back();
  }
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    std::string_view port_text = authority.substr(colon + 1);
    int port = 0;
    if (port_text.empty() || port_text.size() > 5) {
      return Status::Error(ErrorCode::kInvalidConfig, "bad port in '" + std::string(url) + "'");
    }
    for (char c : port_text) {
      if (c < '0' || c > '9') return Status::Error(ErrorCode::kInvalidConfig, "bad port in URL");
      port = port * 10 + (c - '0');
    }
    if (port == 0 || port > 65535) {
      return Status::Error(ErrorCode::kInvalidConfig, "bad port in URL");
    }
    endpoint.port = static_cast<uint16_t>(port);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) {
    return Status::Error(ErrorCode::kInvalidConfig, "no host in '" + std::string(url) + "'");
  }
  endpoint.host = std::string(authority);
  return endpoint;
}

namespace {

// The pool's key: where, and whom the certificate must chain to.
std::string PoolKey(const Endpoint& endpoint, const TlsTrust* trust) {
  std::string key = endpoint.Origin();
  if (endpoint.tls) key += " " + std::to_string(reinterpret_cast<uintptr_t>(trust));
  return key;
}

// One request/response exchange on an io_context: reuses or opens a connection, writes, reads,
// and reports through `done` (on the io_context's thread). The connection goes back to `pool`
// when the answer allows keep-alive. Never re-sends a request once it left.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Done = std::function<void(ClientResponse)>;
  Exchange(net::io_context& ioc, IdlePool& pool, const Endpoint& endpoint,
           const ClientRequest& request, const ClientOptions& options, Done done)
      : ioc_(ioc),
        endpoint_(endpoint),
        options_(options),
        trust_(endpoint.tls ? (options.trust ? options.trust : TlsTrust::System()) : nullptr),
        pooled_(pool[PoolKey(endpoint, trust_.get())]),
        done_(std::move(done)),
        message_(BuildMessage(endpoint, request, options.keep_alive)),
        head_request_(request.method == "HEAD") {}

  void Start() {
    const auto deadline = std::chrono::milliseconds(options_.timeout_ms);
    if (auto idle = TakeIdle(pooled_.idle)) {
      connection_ = std::move(*idle);
      connected_ = true;
      connection_.Lowest().expires_after(deadline);
      return Write();
    }
    if (endpoint_.tls) {
      connection_.tls = std::make_unique<TlsStream>(ioc_, trust_->impl().context);
    } else {
      connection_.plain = std::make_unique<beast::tcp_stream>(ioc_);
    }
    connection_.Lowest().expires_after(deadline);
    const std::string& host = endpoint_.host;
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (!ec) return Connect({tcp::endpoint(address, endpoint_.port)});
    // A name: resolved without blocking the thread (other exchanges run on it), within the deadline.
    resolver_.emplace(ioc_);
    resolve_timer_.emplace(ioc_);
    resolve_timer_->expires_after(deadline);
    resolve_timer_->async_wait([self = shared_from_this()](beast::error_code timer_ec) {
      if (!timer_ec) self->resolver_->cancel();
    });
    resolver_->async_resolve(
        host, std::to_string(endpoint_.port),
        [self = shared_from_this()](beast::error_code resolve_ec, tcp::resolver::results_type found) {
          self->resolve_timer_->cancel();
          if (resolve_ec || found.empty()) {
            return self->FailBeforeSending(
                ClientError::kConnect,
                "cannot resolve " + self->endpoint_.host + ": " +
                    (resolve_ec == net::error::operation_aborted ? "timed out"
                                                                 : resolve_ec.message()));
          }
          std::vector<tcp::endpoint> addresses;
          for (const auto& entry : found) addresses.push_back(entry.endpoint());
          self->Connect(std::move(addresses));
        });
  }

 private:
  // Tries the addresses in turn until one accepts: "localhost" may be ::1 first, where a server
  // listening on 127.0.0.1 refuses.
  void Connect(std::vector<tcp::endpoint> addresses) {
    connection_.Lowest().async_connect(
        addresses, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return self->Fail(ec);
          if (self->endpoint_.tls) return self->Handshake();
          self->connected_ = true;
          self->Write();
        });
  }

  // TLS: the name goes out as SNI (unless it is an address) and the certificate must name it.
  void Handshake() {
    SSL* ssl = connection_.tls->native_handle();
    beast::error_code ec;
    net::ip::make_address(endpoint_.host, ec);  // an address has no SNI and is checked as one
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const bool named = ec ? X509_VERIFY_PARAM_set1_host(param, endpoint_.host.c_str(), 0) == 1 &&
                                SSL_set_tlsext_host_name(ssl, endpoint_.host.c_str()) == 1
                          : X509_VERIFY_PARAM_set1_ip_asc(param, endpoint_.host.c_str()) == 1;
    if (!named) {
      return FailBeforeSending(ClientError::kTls,
                               "TLS to " + endpoint_.Origin() + ": not a usable host name");
    }
    SSL_set_verify(ssl, SSL_VERIFY_PEER, nullptr);
    if (pooled_.tls_session) SSL_set_session(ssl, pooled_.tls_session.get());
    connection_.tls->async_handshake(
        net::ssl::stream_base::client, [self = shared_from_this()](beast::error_code ec) {
          if (ec) {
            if (ec == beast::error::timeout) return self->Fail(ec);
            return self->FailBeforeSending(
                ClientError::kTls,
                "TLS handshake with " + self->endpoint_.Origin() +
                    " failed: " + TlsFailureReason(self->connection_.tls->native_handle(), ec));
          }
          self->connected_ = true;
          self->Write();
        });
  }

  void Write() {
    connection_.With([this](auto& stream) {
      http::async_write(stream, message_,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->Fail(ec);
                          self->Read();
                        });
    });
  }

  // The header first, so the announced length is checked before the body is read.
  void Read() {
    parser_.emplace();
    ApplyOptions(*parser_, options_, head_request_);
    connection_.With([this](auto& stream) {
      http::async_read_header(stream, connection_.buffer, *parser_,
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->Fail(ec);
                                HeadCheck head =
                                    CheckHead(*self->parser_, self->options_, self->interim_seen_);
                                if (head.ec) return self->Fail(head.ec);
                                if (head.interim) {
                                  ++self->interim_seen_;
                                  return self->Read();
                                }
                                self->ReadBody();
                              });
    });
  }

  void ReadBody() {
    connection_.With([this](auto& stream) {
      http::async_read(stream, connection_.buffer, *parser_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->Fail(ec);
                         self->Succeed();
                       });
    });
  }

  void Fail(beast::error_code ec) { done_(Failed(ec, connected_)); }

  // Nothing was sent: the connection (kConnect) or its TLS handshake (kTls) failed.
  void FailBeforeSending(ClientError error, std::string detail) {
    ClientResponse response;
    response.error = error;
    response.detail = std::move(detail);
    done_(std::move(response));
  }

  void Succeed() {
    bool reusable = parser_->get().keep_alive() && options_.keep_alive;
    ClientResponse response = Finish(*parser_);
    if (connection_.tls) {
      // After an answer was read, the session holds whatever tickets the server sent.
      pooled_.tls_session.reset(SSL_get1_session(connection_.tls->native_handle()));
    }
    if (reusable && pooled_.idle.size() < kMaxIdlePerEndpoint) {
      connection_.Lowest().expires_never();
      pooled_.idle.push_back(std::move(connection_));
    } else {
      connection_.Retire();
    }
    done_(std::move(response));
  }

  net::io_context& ioc_;
  Endpoint endpoint_;
  ClientOptions options_;
  std::shared_ptr<const TlsTrust> trust_;  // for https only; kept alive while the stream uses it
  Pooled& pooled_;                         // std::map nodes do not move
  Done done_;
  http::request<http::string_body> message_;
  bool head_request_;
  std::optional<ResponseParser> parser_;  // one per answer read (interim ones included)
  int interim_seen_ = 0;
  Connection connection_;
  bool connected_ = false;
  std::optional<tcp::resolver> resolver_;           // while a host name is resolved
  std::optional<net::steady_timer> resolve_timer_;  // the deadline of that resolution
};

}  // namespace

ClientResponse ReadResponseBytes(std::string_view wire, const ClientOptions& options,
                                 bool head_request, size_t chunk_bytes) {
  // Exchange's steps after the request left, synchronously: header, length check, body.
  WireStream stream(wire, chunk_bytes);
  beast::flat_buffer buffer;
  for (int interim_seen = 0;; ++interim_seen) {
    ResponseParser parser;
    ApplyOptions(parser, options, head_request);
    beast::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    if (ec) return Failed(ec, /*connected=*/true);
    HeadCheck head = CheckHead(parser, options, interim_seen);
    if (head.ec) return Failed(head.ec, /*connected=*/true);
    if (head.interim) continue;
    http::read(stream, buffer, parser, ec);
    if (ec) return Failed(ec, /*connected=*/true);
    return Finish(parser);
  }
}

ClientResponse SendHttp(const Endpoint& endpoint, const ClientRequest& request,
                        const ClientOptions& options) {
  AssertMayBlock("SendHttp");
  ThreadState& state = State();
  ClientResponse response;
  std::make_shared<Exchange>(state.ioc, state.pool, endpoint, request, options,
                             [&response](ClientResponse answer) { response = std::move(answer); })
      ->Start();
  state.ioc.restart();
  state.ioc.run();
  return response;
}

struct AsyncHttpClient::Impl {
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  IdlePool pool;  // touched only on the client's thread
  std::thread thread{[this] {
    pthread_setname_np(pthread_self(), "upstream-client");  // for top -H and bench/
    MarkEventThread("upstream-client");
    ioc.run();
  }};
};

AsyncHttpClient::AsyncHttpClient() : impl_(std::make_unique<Impl>()) {}

AsyncHttpClient::~AsyncHttpClient() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

void AsyncHttpClient::Send(const Endpoint& endpoint, ClientRequest request,
                           const ClientOptions& options, Done done) {
  Impl* impl = impl_.get();
  net::post(impl->ioc, [impl, endpoint, request = std::move(request), options,
                        done = std::move(done)]() mutable {
    std::make_shared<Exchange>(impl->ioc, impl->pool, endpoint, request, options, std::move(done))
        ->Start();
  });
}

}  // namespace agentpay
