// Boost.Beast listener and sessions (after Beast's advanced server example): a thin session that
// reads one request at a time with limits and timeouts, hands it to the worker pool, and writes the
// answer.
#include "http/server.h"

#include <pthread.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "core/event_threads.h"
#include "http/tls_context.h"
#include "http/wire_stream.h"
#include "http/worker_pool.h"

namespace agentpay {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// What Stop needs of a session of either kind (plain or TLS).
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Ends the connection on the session's own strand.
  virtual void PostClose() = 0;
  // Since when (steady clock, ns) the connection has waited for a request head, if it may be
  // evicted for a new one (ServerLimits::evict_idle_when_full); nullopt: it may not.
  virtual std::optional<int64_t> EvictableSinceNs() const = 0;
  // Closes the connection if it still waits for the head it waited for `since_ns`; whether it did.
  virtual bool TryEvict(int64_t since_ns) = 0;
};

// What the listener and its sessions share. The io_context lives here, not in the listener: a
// Respond handed to the handler owns its session, and may be dropped after the listener is gone
// (an attached duplicate's timer on another thread, say). The session's socket and timer must be
// destroyed while their io_context exists, so the last session keeps it alive.
struct Shared {
  net::io_context ioc;
  ServerLimits limits;
  AsyncHandler handler;
  ServerHooks hooks;
  std::unique_ptr<WorkerPool> pool;  // for a blocking handler only
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> tls_handshakes{0};
  std::atomic<uint64_t> tls_resumed{0};
  std::atomic<uint64_t> rejected_body_budget{0};
  std::atomic<uint64_t> evicted_idle{0};
  // Per client key: open connections and body bytes in flight. A key leaves the map with its last
  // connection and its last body byte, so the map is never larger than the connections open plus
  // the requests in flight.
  struct Client {
    size_t connections = 0;
    uint64_t body_bytes = 0;
  };
  std::mutex clients_mutex;
  std::unordered_map<std::string, Client> clients;
  uint64_t body_bytes = 0;  // in flight on the whole listener; guarded by clients_mutex
  // Every live session, so that Stop can close them; and whether Stop has begun, after which a
  // Respond sends nothing and no new request reaches the handler.
  std::mutex sessions_mutex;
  std::unordered_map<const SessionBase*, std::weak_ptr<SessionBase>> sessions;
  std::atomic<bool> stopped{false};

  Shared(const ServerLimits& l, AsyncHandler h)
      : ioc(static_cast<int>(l.io_threads)), limits(l), handler(std::move(h)) {}

  // Counts one more connection of `key`; false (nothing counted) when it has its maximum.
  bool AddClient(const std::string& key) {
    std::lock_guard lock(clients_mutex);
    Client& client = clients[key];
    if (client.connections >= limits.max_connections_per_client) {
      if (client.connections == 0 && client.body_bytes == 0) clients.erase(key);
      return false;
    }
    ++client.connections;
    return true;
  }
  void RemoveClient(const std::string& key) {
    std::lock_guard lock(clients_mutex);
    auto found = clients.find(key);
    if (found == clients.end()) return;
    --found->second.connections;
    if (found->second.connections == 0 && found->second.body_bytes == 0) clients.erase(found);
  }
  // Counts `bytes` more body bytes in flight for `key`; false (nothing counted) past either bound.
  bool ReserveBody(const std::string& key, uint64_t bytes) {
    std::lock_guard lock(clients_mutex);
    Client& client = clients[key];
    if (bytes > limits.max_body_bytes_in_flight -
                    std::min(body_bytes, limits.max_body_bytes_in_flight) ||
        bytes > limits.max_body_bytes_in_flight_per_client -
                    std::min(client.body_bytes, limits.max_body_bytes_in_flight_per_client)) {
      if (client.connections == 0 && client.body_bytes == 0) clients.erase(key);
      return false;
    }
    body_bytes += bytes;
    client.body_bytes += bytes;
    return true;
  }
  void ReleaseBody(const std::string& key, uint64_t bytes) {
    std::lock_guard lock(clients_mutex);
    AGENTPAY_CHECK(body_bytes >= bytes);
    body_bytes -= bytes;
    auto found = clients.find(key);
    AGENTPAY_CHECK(found != clients.end() && found->second.body_bytes >= bytes);
    found->second.body_bytes -= bytes;
    if (found->second.connections == 0 && found->second.body_bytes == 0) clients.erase(found);
  }
  uint64_t BodyBytesInFlight() {
    std::lock_guard lock(clients_mutex);
    return body_bytes;
  }
  // ServerLimits::evict_idle_when_full: closes the untrusted connection that has waited longest
  // for a request head; false when there is none.
  bool EvictOneIdle() {
    constexpr int kTries = 4;  // a candidate may start reading a request meanwhile
    for (int attempt = 0; attempt < kTries; ++attempt) {
      std::shared_ptr<SessionBase> oldest;
      int64_t oldest_since = 0;
      {
        std::lock_guard lock(sessions_mutex);
        for (const auto& [raw, weak] : sessions) {
          auto since = raw->EvictableSinceNs();
          if (!since || (oldest && *since >= oldest_since)) continue;
          if (auto session = weak.lock()) {
            oldest = std::move(session);
            oldest_since = *since;
          }
        }
      }
      if (!oldest) return false;
      if (oldest->TryEvict(oldest_since)) {
        ++evicted_idle;
        return true;
      }
    }
    return false;
  }
};

// A request body's share of the listener's body budget (Shared::ReserveBody), released when the
// last holder lets go: the session while it reads the body, then the request it built (through
// HttpRequest::body_lease) until the handler has answered and dropped it.
class BodyLease {
 public:
  BodyLease(std::shared_ptr<Shared> shared, std::string client_key, uint64_t bytes)
      : shared_(std::move(shared)), client_key_(std::move(client_key)), bytes_(bytes) {}
  ~BodyLease() {
    if (bytes_ > 0) shared_->ReleaseBody(client_key_, bytes_);
  }
  BodyLease(const BodyLease&) = delete;
  BodyLease& operator=(const BodyLease&) = delete;
  // Gives back what the body did not use (a chunked body reserved max_body_bytes).
  void ShrinkTo(uint64_t bytes) {
    if (bytes >= bytes_) return;
    shared_->ReleaseBody(client_key_, bytes_ - bytes);
    bytes_ = bytes;
  }

 private:
  std::shared_ptr<Shared> shared_;
  const std::string client_key_;
  uint64_t bytes_;
};

using RequestParser = http::request_parser<http::string_body>;

// The answer to a failed read: limits and malformed requests get a problem; nullopt means the
// connection is closed without one (the peer left, or a timeout).
std::optional<HttpResponse> ReadErrorAnswer(beast::error_code ec, const ServerLimits& limits) {
  if (ec == http::error::body_limit) {
    return ProblemResponse(
        413, ProblemCode::kLimitExceeded,
        "request body larger than " + std::to_string(limits.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return ProblemResponse(431, ProblemCode::kLimitExceeded, "request headers too large");
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    // Only a parse error gets an answer: the peer may still be listening.
    return ProblemResponse(400, ProblemCode::kBadRequest,
                           "malformed HTTP request: " + ec.message());
  }
  return std::nullopt;
}

// Reading a request head in steps, under one budget for the whole head. Beast 1.74 checks
// header_limit against the bytes it has not parsed yet in each call, and parses complete fields as
// they come: a head arriving in pieces that end on line boundaries would grow without bound (found
// by fuzz/http_request_fuzzer.cc). Each step gives Beast what is left of the budget.
enum class HeadStep { kDone, kNeedMore, kFailed };

// Feeds what `buffer` holds to `parser`; `head_bytes` counts what the parser has taken of this
// head so far. kFailed sets `ec` (header_limit when the budget is spent).
HeadStep FeedHead(RequestParser& parser, beast::flat_buffer& buffer, size_t& head_bytes,
                  size_t max_head_bytes, beast::error_code& ec) {
  while (buffer.size() > 0) {
    parser.header_limit(static_cast<uint32_t>(max_head_bytes - head_bytes));
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    head_bytes += used;
    // Beast applies the limit to the start line and to the fields apart, so one step can take up
    // to a start line more than it was given.
    if (head_bytes > max_head_bytes) {
      ec = http::error::header_limit;
      return HeadStep::kFailed;
    }
    if (!ec && parser.is_header_done()) return HeadStep::kDone;
    if (ec && ec != http::error::need_more) return HeadStep::kFailed;
    ec = {};
    if (head_bytes >= max_head_bytes) {
      ec = http::error::header_limit;
      return HeadStep::kFailed;
    }
    if (used == 0) break;  // a partial line: more bytes first
  }
  return HeadStep::kNeedMore;
}

// A read error while a head is incomplete: the end of the stream before any byte is the peer
// leaving between requests; after some, a request cut short.
beast::error_code HeadReadError(beast::error_code ec, bool got_bytes) {
  if (ec != net::error::eof) return ec;
  return got_bytes ? http::error::partial_message : http::error::end_of_stream;
}

constexpr size_t kHeadReadBytes = 4096;
// What a connection's read buffer may hold beyond a head's budget: a chunk-size line (with its
// extensions) or a trailer section must fit in it whole, and each read of a body takes at most
// this much. Bounds the memory of a connection whose bytes the parser cannot consume yet.
constexpr size_t kBodyReadBytes = 64 * 1024;

size_t ReadBufferLimit(const ServerLimits& limits) {
  return limits.max_header_bytes + kBodyReadBytes;
}

// RFC 9112 §6.3: a request whose Transfer-Encoding is anything but one "chunked" has no framing
// this server understands. Beast reads such a request as bodyless, so its body would be parsed as
// the next request on the connection (request smuggling past whatever sits in front of the
// gateway): it is refused with 400 and the connection closed. HTTP/1.0 has no transfer codings.
// CONNECT likewise: it has no content (RFC 9110 §9.3.6) and what follows its head is a tunnel's
// bytes, not HTTP, yet Beast frames it by Content-Length and reads what follows as the next
// request (found by fuzz/http_request_diff_fuzzer.cc). No listener here is a proxy: refused.
std::optional<HttpResponse> FramingRefusal(const http::request<http::string_body>& head) {
  if (head.method() == http::verb::connect) {
    return ProblemResponse(400, ProblemCode::kBadRequest,
                           "malformed HTTP request: CONNECT is not served (this is no proxy)");
  }
  const auto [first, last] = head.equal_range(http::field::transfer_encoding);
  if (first == last) return std::nullopt;
  const bool one_chunked =
      std::next(first) == last && head.version() == 11 &&
      HeaderNameEquals(std::string_view(first->value().data(), first->value().size()), "chunked");
  if (one_chunked) return std::nullopt;
  return ProblemResponse(400, ProblemCode::kBadRequest,
                         "malformed HTTP request: Transfer-Encoding must be exactly \"chunked\" "
                         "(HTTP/1.1); other transfer codings are not accepted");
}

// The request line and header fields of a parsed head, as the handler sees them. Taken when the
// head is complete, before the body: fields of a chunked body's trailer section, which Beast adds
// to the same message, never reach the handler (RFC 9110 §6.5.1 lets a recipient discard them;
// merged, a trailer could set a header, say Idempotency-Key, that no proxy in front ever saw).
std::shared_ptr<HttpRequest> HeadOf(const http::request<http::string_body>& message,
                                    const std::string& remote) {
  auto request = std::make_shared<HttpRequest>();
  request->method = std::string(message.method_string());
  request->target = std::string(message.target());
  request->headers.reserve(16);
  for (const auto& field : message) {
    request->headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  request->remote_address = remote;
  return request;
}

HttpResponse Overloaded() {
  HttpResponse busy =
      ProblemResponse(503, ProblemCode::kLimitExceeded, "the server is at capacity");
  busy.SetHeader("Retry-After", "1");
  return busy;
}

}  // namespace

std::string SerializeResponse(const HttpResponse& response, bool keep_alive) {
  const auto status = static_cast<http::status>(response.status);
  const bool bodyless = response.status < 200 || response.status == 204 || response.status == 304;
  bool has_length = false;
  std::string wire;
  wire.reserve(128 + response.body.size() + 64 * response.headers.size());
  wire += "HTTP/1.1 ";
  wire += std::to_string(response.status);
  wire += ' ';
  beast::string_view reason = http::obsolete_reason(status);
  wire.append(reason.data(), reason.size());
  wire += "\r\n";
  for (const auto& header : response.headers) {
    // A name or value that would end the header line early is never sent (response splitting).
    if (header.name.empty() || header.name.find_first_of("\r\n: ") != std::string::npos ||
        header.value.find_first_of("\r\n") != std::string::npos) {
      continue;
    }
    if (HeaderNameEquals(header.name, "Connection") ||
        HeaderNameEquals(header.name, "Transfer-Encoding")) {
      continue;  // framing is this function's business
    }
    if (HeaderNameEquals(header.name, "Content-Length")) has_length = true;
    wire += header.name;
    wire += ": ";
    wire += header.value;
    wire += "\r\n";
  }
  // A handler that set Content-Length itself answers a HEAD: the length, no body.
  const bool send_body = !bodyless && !has_length;
  if (send_body) {
    wire += "Content-Length: ";
    wire += std::to_string(response.body.size());
    wire += "\r\n";
  }
  if (!keep_alive) wire += "Connection: close\r\n";
  wire += "\r\n";
  if (send_body) wire += response.body;
  return wire;
}

namespace {

// A connection: Stream is beast::tcp_stream, or TlsStream when the listener serves HTTPS (then the
// handshake comes first, within the header timeout).
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(tcp::socket socket,
          std::shared_ptr<Shared> shared) requires std::is_same_v<Stream, beast::tcp_stream>
      : shared_(std::move(shared)), stream_(std::move(socket)) {
    Count();
  }
  Session(tcp::socket socket, std::shared_ptr<Shared> shared,
          std::shared_ptr<TlsIdentity::Impl> tls) requires std::is_same_v<Stream, TlsStream>
      : shared_(std::move(shared)),
        tls_(std::move(tls)),
        stream_(std::move(socket), tls_->context) {
    Count();
  }

  void Count() {
    ++shared_->connections;
    boost::system::error_code ec;
    auto endpoint = Lowest().socket().remote_endpoint(ec);
    if (!ec) remote_ = endpoint.address().to_string();
    client_key_ = ClientKey(remote_);
  }
  ~Session() {
    {
      std::lock_guard lock(shared_->sessions_mutex);
      shared_->sessions.erase(this);
    }
    if (counted_) shared_->RemoveClient(client_key_);
    --shared_->connections;
  }

  void Start(bool over_limit) {
    {
      std::lock_guard lock(shared_->sessions_mutex);
      shared_->sessions.emplace(this, std::weak_ptr<SessionBase>(this->weak_from_this()));
    }
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      Lowest().expires_at(accepted_ + std::chrono::milliseconds(shared_->limits.header_timeout_ms));
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this(), over_limit](beast::error_code ec) {
                                if (ec) return self->Close();
                                ++self->shared_->tls_handshakes;
                                if (SSL_session_reused(self->stream_.native_handle()) == 1) {
                                  ++self->shared_->tls_resumed;
                                }
                                self->Begin(over_limit);
                              });
    } else {
      Begin(over_limit);
    }
  }

  void PostClose() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

  bool TryEvict(int64_t since_ns) override {
    if (trusted_.load(std::memory_order_relaxed)) return false;
    int64_t expected = since_ns;
    if (!awaiting_head_since_ns_.compare_exchange_strong(expected, -1)) return false;
    PostClose();
    return true;
  }

  std::optional<int64_t> EvictableSinceNs() const override {
    if (trusted_.load(std::memory_order_relaxed)) return std::nullopt;
    const int64_t since = awaiting_head_since_ns_.load(std::memory_order_relaxed);
    if (since < 0) return std::nullopt;
    return since;
  }

  // Ends the connection; for Stop, on the session's strand.
  void Close() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // After the TLS handshake, if any: refuse over the limits, else read the first request.
  void Begin(bool over_limit) {
    std::string_view refused;
    if (over_limit) {
      refused = "too many open connections";
    } else if (!(counted_ = shared_->AddClient(client_key_))) {
      refused = "too many open connections from this client address";
    }
    if (!refused.empty()) {
      ++shared_->rejected;
      HttpResponse busy = ProblemResponse(503, ProblemCode::kLimitExceeded, refused);
      busy.SetHeader("Retry-After", "1");
      SendAndLinger(std::move(busy));
      return;
    }
    ReadRequest(/*first=*/true);
  }

  void ReadRequest(bool first) {
    awaiting_head_since_ns_.store(first ? accepted_ns_ : NowNs(), std::memory_order_relaxed);
    parser_.emplace();  // its header limit is set by FeedHead, step by step
    // The body limit is applied in OnHeader, after the head handler had its say: an unpaid request
    // announcing a huge body gets its 402, not a 413. (Not boost::none: Beast 1.74 compares the
    // announced length with the optional limit, and any length is "greater" than none.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (first || buffer_.size() > 0) return ReadHeader();
    // An idle keep-alive connection may wait idle_timeout_ms for the next request's first byte;
    // from that byte on, the header has header_timeout_ms.
    Lowest().expires_after(std::chrono::milliseconds(shared_->limits.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = this->shared_from_this()](beast::error_code ec, size_t size) {
                              if (ec) return self->Close();
                              self->buffer_.commit(size);
                              self->ReadHeader();
                            });
  }

  // The header first: a body over the limit is refused before it is read, and a client that sent
  // "Expect: 100-continue" (curl does for bodies over 1 KiB) gets its go-ahead at once.
  // The first request's header is due header_timeout_ms after the accept, TLS handshake included.
  void ReadHeader() {
    const auto timeout = std::chrono::milliseconds(shared_->limits.header_timeout_ms);
    if (requests_read_ == 0) {
      Lowest().expires_at(accepted_ + timeout);
    } else {
      Lowest().expires_after(timeout);
    }
    head_bytes_ = 0;
    ContinueHeader();
  }

  void ContinueHeader() {
    beast::error_code ec;
    switch (FeedHead(*parser_, buffer_, head_bytes_, shared_->limits.max_header_bytes, ec)) {
      case HeadStep::kDone:
        return OnHeader({});
      case HeadStep::kFailed:
        return OnHeader(ec);
      case HeadStep::kNeedMore:
        break;
    }
    stream_.async_read_some(
        buffer_.prepare(kHeadReadBytes),
        [self = this->shared_from_this()](beast::error_code read_ec, size_t size) {
          if (read_ec) {
            const bool got = self->head_bytes_ > 0 || self->buffer_.size() > 0;
            return self->OnHeader(HeadReadError(read_ec, got));
          }
          self->buffer_.commit(size);
          self->ContinueHeader();
        });
  }

  // Answers a read error: limits and malformed requests get a problem, anything else closes.
  bool ReadFailed(beast::error_code ec) {
    if (!ec) return false;
    if (auto answer = ReadErrorAnswer(ec, shared_->limits)) {
      Send(std::move(*answer), false);
    } else {
      Close();
    }
    return true;
  }

  void OnHeader(beast::error_code ec) {
    awaiting_head_since_ns_.store(-1, std::memory_order_relaxed);
    if (ReadFailed(ec)) return;
    const auto& message = parser_->get();
    if (auto refused = FramingRefusal(message)) return Send(std::move(*refused), false);
    request_ = HeadOf(message, remote_);
    if (shared_->hooks.trusted && !trusted_.load(std::memory_order_relaxed) &&
        shared_->hooks.trusted(*request_)) {
      trusted_.store(true, std::memory_order_relaxed);
    }
    if (parser_->is_done() || !shared_->hooks.head) return ReadBodyWithin();
    HeadDecision decision;
    try {
      decision = shared_->hooks.head(*request_, Deferred());
    } catch (const std::exception& error) {
      decision = HeadDecision::Answer(
          InternalErrorResponse(std::string("the head handler threw: ") + error.what()));
    }
    OnHeadDecision(std::move(decision));
  }

  // The HeadDone of this request: its decision goes back to the session's strand. Reads nothing
  // meanwhile; the read timeout keeps a decision that never comes from holding the connection.
  HeadDone Deferred() {
    return [self = this->shared_from_this()](HeadDecision decision) {
      AGENTPAY_CHECK(decision.kind != HeadDecision::Kind::kLater);
      net::post(self->stream_.get_executor(), [self, decision = std::move(decision)]() mutable {
        self->OnHeadDecision(std::move(decision));
      });
    };
  }

  void OnHeadDecision(HeadDecision decision) {
    switch (decision.kind) {
      case HeadDecision::Kind::kReadBody:
        request_->head_note = std::move(decision.note);
        return ReadBodyWithin();
      case HeadDecision::Kind::kAnswer:
        if (ConsumeBufferedBody()) return Send(std::move(decision.answer), /*keep_alive=*/true);
        return SendAndLinger(std::move(decision.answer));
      case HeadDecision::Kind::kLater:
        // Nothing is read until the decision arrives, within the time a body has.
        Lowest().expires_after(std::chrono::milliseconds(shared_->limits.read_timeout_ms));
        return;
    }
  }

  // Whether the request whose head was answered (a 402, say) came with its whole body already in
  // the read buffer, as most clients send a small body: then the parser takes it from there, the
  // next request starts where it ends, and the connection is kept. Reads nothing from the socket;
  // anything else (a chunked body, one not all arrived, one the client holds back for "Expect:
  // 100-continue", Connection: close) is left unread, and the answer closes the connection.
  bool ConsumeBufferedBody() {
    if (!parser_->keep_alive() || parser_->chunked()) return false;
    const auto length = parser_->content_length();
    if (!length || *length > buffer_.size()) return false;
    // The parser's body limit is unset here (ReadRequest): the length is at most what is buffered.
    beast::error_code ec;
    while (!parser_->is_done()) {
      const size_t used = parser_->put(buffer_.data(), ec);
      if (ec || used == 0) return false;
      buffer_.consume(used);
    }
    // A request read whole, as OnRead counts one: the next one's head has header_timeout_ms from
    // its own first byte, not from the connection's accept.
    ++shared_->requests;
    ++requests_read_;
    return true;
  }

  // The body, within the limits: its own size, then the listener's bytes in flight.
  void ReadBodyWithin() {
    if (parser_->is_done()) return OnRead({});
    // No body octet has been parsed yet (the header read stops at the header), so the limit may be
    // set now; an announced length over it is refused before anything of the body is read.
    const auto length = parser_->content_length();
    if (length && *length > shared_->limits.max_body_bytes) {
      ReadFailed(http::error::body_limit);
      return;
    }
    // A chunked body is counted at the most it may be until it is whole.
    const uint64_t reserve = length ? *length : shared_->limits.max_body_bytes;
    if (!shared_->ReserveBody(client_key_, reserve)) {
      ++shared_->rejected;
      ++shared_->rejected_body_budget;
      HttpResponse busy = ProblemResponse(503, ProblemCode::kLimitExceeded,
                                          "too many request bodies are being received; retry");
      busy.SetHeader("Retry-After", "1");
      return SendAndLinger(std::move(busy));
    }
    body_lease_ = std::make_shared<BodyLease>(shared_, client_key_, reserve);
    parser_->body_limit(shared_->limits.max_body_bytes);
    auto expect = parser_->get()[http::field::expect];
    if (expect.size() == 12 &&
        HeaderNameEquals(std::string_view(expect.data(), expect.size()), "100-continue")) {
      auto go_ahead =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(
          stream_, *go_ahead,
          [self = this->shared_from_this(), go_ahead](beast::error_code write_ec, size_t) {
            if (write_ec) return self->Close();
            self->ReadBody();
          });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(std::chrono::milliseconds(shared_->limits.read_timeout_ms));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    auto lease = std::move(body_lease_);  // released here unless the request takes it
    if (ReadFailed(ec)) return;
    if (shared_->stopped) return Close();  // a request read while stopping is not handled
    // The parser's verdict, not the message's: message::keep_alive() reads only the first
    // Connection field, so `close` in a second one left the connection open (RFC 9112 §9.6).
    const bool keep_alive = parser_->keep_alive();
    auto message = parser_->release();
    std::shared_ptr<HttpRequest> request = std::move(request_);
    request->body = std::move(message.body());
    if (lease) {
      lease->ShrinkTo(request->body.size());
      request->body_lease = std::move(lease);
    }
    // A big body grew the read buffer; an idle connection does not keep that memory.
    if (buffer_.size() == 0 && buffer_.capacity() > 2 * kHeadReadBytes) buffer_.shrink_to_fit();
    ++shared_->requests;
    ++requests_read_;
    Lowest().expires_never();
    Respond respond = [self = this->shared_from_this(), keep_alive](HttpResponse response) {
      // Under the lock: Stop's drain runs after the flag is set, so every answer posted before
      // it is sent or aborted there, and none is posted to an io_context nobody runs any more.
      std::lock_guard lock(self->shared_->sessions_mutex);
      if (self->shared_->stopped) return;
      net::post(self->stream_.get_executor(),
                [self, keep_alive, response = std::move(response)]() mutable {
                  self->Send(std::move(response), keep_alive);
                });
    };
    try {
      shared_->handler(std::move(request), std::move(respond));
    } catch (const std::exception& error) {
      Send(InternalErrorResponse(error.what()), false);
    }
  }

  void Send(HttpResponse response, bool keep_alive) {
    switch (response.disposition) {
      case Disposition::kDropConnection:
        return Close();
      case Disposition::kHang:
        return Hang();
      case Disposition::kRespond:
        break;
    }
    // The wire bytes in one buffer, written with one call: Beast's message and serializer cost
    // an allocation per header field and a walk over a buffer sequence per write.
    auto wire = std::make_shared<std::string>(SerializeResponse(response, keep_alive));
    Lowest().expires_after(std::chrono::milliseconds(shared_->limits.read_timeout_ms));
    net::async_write(
        stream_, net::buffer(*wire),
        [self = this->shared_from_this(), wire, keep_alive](beast::error_code ec, size_t) {
          if (ec || !keep_alive) return self->Close();
          self->ReadRequest(/*first=*/false);
        });
  }

  // Sends a last answer without reading the request (or the rest of it), then closes. Closing a
  // socket with unread bytes in it sends a reset that can destroy the answer before the client
  // reads it, so the sending side is shut first and what still arrives is discarded for a while.
  void SendAndLinger(HttpResponse response) {
    auto wire = std::make_shared<std::string>(SerializeResponse(response, /*keep_alive=*/false));
    Lowest().expires_after(std::chrono::milliseconds(shared_->limits.read_timeout_ms));
    net::async_write(stream_, net::buffer(*wire),
                     [self = this->shared_from_this(), wire](beast::error_code ec, size_t) {
                       if (ec) return self->Close();
                       beast::error_code ignored;
                       self->Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
                       const auto linger = std::chrono::milliseconds(kLingerMs);
                       self->Lowest().expires_after(linger);
                       self->Discard(std::chrono::steady_clock::now() + linger, 0);
                     });
  }

  // Reads and drops what the client still sends, until `until` or max_body_bytes. The deadline is
  // checked here too: Beast's timer fires only while a read waits, and a client that keeps
  // sending would keep every read from waiting.
  void Discard(std::chrono::steady_clock::time_point until, size_t discarded) {
    if (!discard_) discard_ = std::make_unique<std::array<char, kDiscardReadBytes>>();
    stream_.async_read_some(net::buffer(*discard_), [self = this->shared_from_this(), until,
                                                     discarded](beast::error_code ec, size_t size) {
      if (ec || discarded + size > self->shared_->limits.max_body_bytes ||
          std::chrono::steady_clock::now() >= until) {
        return self->Close();
      }
      self->Discard(until, discarded + size);
    });
  }

  // Holds the connection without answering until the peer closes it or the hang limit passes
  // (checked on every read as well, for the reason Discard gives).
  void Hang() {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(shared_->limits.hang_timeout_ms);
    Lowest().expires_at(until);
    HangUntil(until);
  }
  void HangUntil(std::chrono::steady_clock::time_point until) {
    stream_.async_read_some(net::buffer(sink_),
                            [self = this->shared_from_this(), until](beast::error_code ec, size_t) {
                              if (ec || std::chrono::steady_clock::now() >= until) {
                                return self->Close();
                              }
                              self->HangUntil(until);
                            });
  }

  std::shared_ptr<Shared> shared_;  // first: destroyed after stream_, whose io_context it holds
  std::shared_ptr<TlsIdentity::Impl> tls_;  // the context stream_ was made with (TLS only)
  Stream stream_;
  beast::flat_buffer buffer_{ReadBufferLimit(shared_->limits)};
  std::optional<RequestParser> parser_;
  size_t head_bytes_ = 0;  // of the request head being read, taken by the parser so far
  std::shared_ptr<HttpRequest> request_;   // the head being answered or whose body is read
  std::shared_ptr<BodyLease> body_lease_;  // while a body is read
  const std::chrono::steady_clock::time_point accepted_ = std::chrono::steady_clock::now();
  const int64_t accepted_ns_ = NowNs();
  // Since when the connection waits for a request head (-1: it does not; a request is read or
  // handled), and whether a head of it passed ServerHooks::trusted: what eviction looks at.
  std::atomic<int64_t> awaiting_head_since_ns_{accepted_ns_};
  std::atomic<bool> trusted_{false};
  uint64_t requests_read_ = 0;
  static constexpr size_t kFirstReadBytes = 1024;
  std::string remote_;
  std::string client_key_;
  bool counted_ = false;  // counted in shared_->clients
  char sink_[512];
  // What Discard reads into, made when a connection starts lingering (most never do).
  static constexpr size_t kDiscardReadBytes = 4096;
  std::unique_ptr<std::array<char, kDiscardReadBytes>> discard_;
};

class BeastServer final : public HttpServer {
 public:
  BeastServer(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)), acceptor_(net::make_strand(shared_->ioc)) {}

  ~BeastServer() override { Stop(); }

  Status Listen(const std::string& host, uint16_t port) {
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) {
      return Status::Error(ErrorCode::kInvalidConfig, "cannot listen on '" + host + "': not an IP");
    }
    tcp::endpoint endpoint(address, port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Error(
          ErrorCode::kListenFailed,
          "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (size_t i = 0; i < shared_->limits.io_threads; ++i) {
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "http-io");  // for top -H and bench/
        MarkEventThread("http-io");
        shared_->ioc.run();
      });
    }
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  ServerStats Stats() const override {
    ServerStats stats;
    stats.requests = shared_->requests.load();
    stats.rejected_overload = shared_->rejected.load();
    stats.open_connections = shared_->connections.load();
    stats.queued_requests = shared_->pool ? shared_->pool->Queued() : 0;
    stats.accepted_connections = shared_->accepted.load();
    stats.tls_handshakes = shared_->tls_handshakes.load();
    stats.tls_resumed = shared_->tls_resumed.load();
    stats.body_bytes_in_flight = shared_->BodyBytesInFlight();
    stats.rejected_body_budget = shared_->rejected_body_budget.load();
    stats.evicted_idle = shared_->evicted_idle.load();
    return stats;
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    {
      std::lock_guard lock(shared_->sessions_mutex);
      shared_->stopped = true;
    }
    shared_->ioc.stop();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
    // With no I/O thread left the acceptor can be closed here; a close posted to the stopped
    // io_context would never run and the port would keep accepting connections into the backlog.
    beast::error_code ignored;
    acceptor_.close(ignored);
    if (shared_->pool) shared_->pool->Stop();
    CloseSessions();
  }

 private:
  void Accept() {
    acceptor_.async_accept(
        net::make_strand(shared_->ioc), [this](beast::error_code ec, tcp::socket socket) {
          if (ec == net::error::operation_aborted || shared_->stopped) return;
          if (!ec) {
            ++shared_->accepted;
            bool over = shared_->connections.load() >= shared_->limits.max_connections;
            if (over && shared_->limits.evict_idle_when_full && shared_->EvictOneIdle())
              over = false;
            if (shared_->hooks.tls) {
              std::make_shared<Session<TlsStream>>(std::move(socket), shared_,
                                                   shared_->hooks.tls->Current())
                  ->Start(over);
            } else {
              std::make_shared<Session<beast::tcp_stream>>(std::move(socket), shared_)->Start(over);
            }
          }
          Accept();
        });
  }

  // Closes every open connection and runs what that completes, on this thread: afterwards no
  // handler in the io_context holds a session, and a session still owned by an unanswered
  // Respond elsewhere keeps the io_context (through Shared) until that Respond is dropped.
  void CloseSessions() {
    std::vector<std::shared_ptr<SessionBase>> open;
    {
      std::lock_guard lock(shared_->sessions_mutex);
      for (const auto& [raw, weak] : shared_->sessions) {
        if (auto session = weak.lock()) open.push_back(std::move(session));
      }
    }
    shared_->ioc.restart();
    for (auto& session : open) session->PostClose();
    open.clear();
    // Bounded: every operation ends with an error on a closed socket at once.
    shared_->ioc.run_for(std::chrono::milliseconds(kCloseSessionsMs));
  }
  static constexpr int64_t kCloseSessionsMs = 2000;

  std::shared_ptr<Shared> shared_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::StartAsync(const std::string& host, uint16_t port,
                                                           const ServerLimits& limits,
                                                           AsyncHandler handler,
                                                           ServerHooks hooks) {
  auto shared = std::make_shared<Shared>(limits, std::move(handler));
  shared->hooks = std::move(hooks);
  auto server = std::make_unique<BeastServer>(std::move(shared));
  Status status = server->Listen(host, port);
  if (!status.ok()) return status;
  return std::unique_ptr<HttpServer>(std::move(server));
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, uint16_t port,
                                                      const ServerLimits& limits, Handler handler) {
  auto shared = std::make_shared<Shared>(limits, nullptr);
  shared->pool = std::make_unique<WorkerPool>(limits.workers, limits.max_queued_requests);
  WorkerPool* pool = shared->pool.get();
  Shared* raw = shared.get();
  shared->handler = [pool, raw, handler = std::move(handler)](
                        std::shared_ptr<const HttpRequest> request, Respond respond) {
    auto run = [handler, request, respond] {
      HttpResponse response;
      try {
        response = handler(*request);
      } catch (const std::exception& error) {
        response = InternalErrorResponse(error.what());
      }
      respond(std::move(response));
    };
    if (!pool->TrySubmit(std::move(run))) {
      ++raw->rejected;
      respond(Overloaded());
    }
  };
  auto server = std::make_unique<BeastServer>(std::move(shared));
  Status status = server->Listen(host, port);
  if (!status.ok()) return status;
  return std::unique_ptr<HttpServer>(std::move(server));
}

RequestRead ReadRequestBytes(std::string_view wire, const ServerLimits& limits,
                             size_t chunk_bytes) {
  // The session's steps, synchronously: header (limits checked), framing, then body.
  WireStream stream(wire, chunk_bytes);
  beast::flat_buffer buffer(ReadBufferLimit(limits));
  RequestParser parser;
  parser.body_limit(limits.max_body_bytes);  // the header limit: FeedHead
  RequestRead read;
  beast::error_code ec;
  size_t head_bytes = 0;
  for (;;) {
    const HeadStep step = FeedHead(parser, buffer, head_bytes, limits.max_header_bytes, ec);
    if (step != HeadStep::kNeedMore) break;
    const size_t size = stream.read_some(buffer.prepare(kHeadReadBytes), ec);
    if (ec) {
      ec = HeadReadError(ec, head_bytes > 0 || buffer.size() > 0);
      break;
    }
    buffer.commit(size);
  }
  if (!ec) {
    if (auto refused = FramingRefusal(parser.get())) {
      read.answer = std::move(refused);
      return read;
    }
  }
  std::shared_ptr<HttpRequest> request;
  if (!ec) request = HeadOf(parser.get(), "");
  if (!ec && !parser.is_done()) http::read(stream, buffer, parser, ec);
  if (ec) {
    read.answer = ReadErrorAnswer(ec, limits);
    return read;
  }
  read.keep_alive = parser.keep_alive();  // as the session: every Connection field counts
  auto message = parser.release();
  request->body = std::move(message.body());
  read.request = std::move(request);
  return read;
}

Result<std::pair<std::string, uint16_t>> ParseListenAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return Status::Error(ErrorCode::kInvalidConfig, "expected HOST:PORT, got '" + address + "'");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string port_text = address.substr(colon + 1);
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535) {
      return Status::Error(ErrorCode::kInvalidConfig, "bad port in '" + address + "'");
    }
    port = port * 10 + (c - '0');
  }
  if (port > 65535) {
    return Status::Error(ErrorCode::kInvalidConfig, "bad port in '" + address + "'");
  }
  if (host == "localhost") host = "127.0.0.1";
  return std::make_pair(host, static_cast<uint16_t>(port));
}

}  // namespace agentpay
