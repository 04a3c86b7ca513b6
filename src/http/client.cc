// The Beast-based HTTP client; see client.h. Each call runs the calling thread's own io_context until
// the exchange completes or the deadline passes, so it is blocking without blocking anyone else.
#include "http/client.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <memory>

namespace agentpay {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxIdlePerEndpoint = 4;

struct Connection {
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
};

struct ThreadState {
  net::io_context ioc;
  std::map<std::string, std::vector<Connection>> idle;
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// A pooled connection is reusable when the peer has not closed it: a peek that would block means
// the socket is open and has nothing unread.
bool StillOpen(Connection& connection) {
  int fd = connection.stream->socket().native_handle();
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
      ec == http::error::partial_message) {
    return ClientError::kClosed;
  }
  return ClientError::kProtocol;
}

}  // namespace

std::string_view ClientErrorName(ClientError error) {
  switch (error) {
    case ClientError::kNone: return "none";
    case ClientError::kConnect: return "connect";
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
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Status::Error("invalid_config", "expected an http:// URL, got '" + std::string(url) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Endpoint endpoint;
  if (slash != std::string_view::npos) endpoint.base_path = std::string(rest.substr(slash));
  while (!endpoint.base_path.empty() && endpoint.base_path.back() == '/') {
    endpoint.base_path.pop_back();
  }
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    std::string_view port_text = authority.substr(colon + 1);
    int port = 0;
    if (port_text.empty() || port_text.size() > 5) {
      return Status::Error("invalid_config", "bad port in '" + std::string(url) + "'");
    }
    for (char c : port_text) {
      if (c < '0' || c > '9') return Status::Error("invalid_config", "bad port in URL");
      port = port * 10 + (c - '0');
    }
    if (port == 0 || port > 65535) return Status::Error("invalid_config", "bad port in URL");
    endpoint.port = static_cast<uint16_t>(port);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return Status::Error("invalid_config", "no host in '" + std::string(url) + "'");
  endpoint.host = std::string(authority);
  if (endpoint.host == "localhost") endpoint.host = "127.0.0.1";
  return endpoint;
}

ClientResponse SendHttp(const Endpoint& endpoint, const ClientRequest& request,
                        const ClientOptions& options) {
  ThreadState& state = State();
  const std::string pool_key = endpoint.HostHeader();
  const auto deadline = std::chrono::milliseconds(options.timeout_ms);
  ClientResponse response;

  Connection connection;
  auto& idle = state.idle[pool_key];
  while (!idle.empty()) {
    Connection candidate = std::move(idle.back());
    idle.pop_back();
    if (StillOpen(candidate)) {
      connection = std::move(candidate);
      break;
    }
  }
  bool connected = connection.stream != nullptr;
  beast::error_code result;

  http::request<http::string_body> message;
  message.method_string(request.method);
  message.target(request.target);
  message.version(11);
  for (const auto& header : request.headers) message.insert(header.name, header.value);
  message.set(http::field::host, endpoint.HostHeader());
  message.body() = request.body;
  message.keep_alive(options.keep_alive);
  message.prepare_payload();

  http::response_parser<http::string_body> parser;
  parser.body_limit(options.max_response_bytes);
  if (request.method == "HEAD") parser.skip(true);  // a HEAD answer has no body to read

  auto read_response = [&] {
    http::async_read(*connection.stream, connection.buffer, parser,
                     [&](beast::error_code ec, size_t) { result = ec; });
  };
  auto write_request = [&] {
    http::async_write(*connection.stream, message, [&](beast::error_code ec, size_t) {
      if (ec) {
        result = ec;
        return;
      }
      read_response();
    });
  };

  if (!connected) {
    connection.stream = std::make_unique<beast::tcp_stream>(state.ioc);
    connection.stream->expires_after(deadline);
    beast::error_code ec;
    auto address = net::ip::make_address(endpoint.host, ec);
    if (ec) {
      tcp::resolver resolver(state.ioc);
      auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
      if (ec || results.empty()) {
        response.error = ClientError::kConnect;
        response.detail = "cannot resolve " + endpoint.host;
        return response;
      }
      address = results.begin()->endpoint().address();
    }
    connection.stream->async_connect(tcp::endpoint(address, endpoint.port),
                                     [&](beast::error_code connect_error) {
                                       if (connect_error) {
                                         result = connect_error;
                                         return;
                                       }
                                       connected = true;
                                       write_request();
                                     });
  } else {
    connection.stream->expires_after(deadline);
    write_request();
  }
  state.ioc.restart();
  state.ioc.run();

  if (result) {
    response.error = Classify(result, connected);
    response.detail = result.message();
    return response;
  }
  auto& reply = parser.get();
  response.status = static_cast<int>(reply.result_int());
  for (const auto& field : reply) {
    response.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  bool reusable = reply.keep_alive() && options.keep_alive;
  response.body = std::move(reply.body());
  if (reusable && idle.size() < kMaxIdlePerEndpoint) {
    connection.stream->expires_never();
    idle.push_back(std::move(connection));
  }
  return response;
}

}  // namespace agentpay
