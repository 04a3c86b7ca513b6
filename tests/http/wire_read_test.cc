// The listener's and the upstream client's reading of bytes (ReadRequestBytes, ReadResponseBytes:
// the code the fuzz targets in fuzz/ run), and interim (1xx) answers from a real upstream socket.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "http/client.h"
#include "http/server.h"

namespace agentpay {
namespace {

TEST(ReadRequestBytes, PiecesOfAnySizeGiveTheSameRequest) {
  const std::string wire =
      "POST /paid/x?city=Paris HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
  for (size_t chunk : {0u, 1u, 2u, 7u, 64u}) {
    RequestRead read = ReadRequestBytes(wire, ServerLimits{}, chunk);
    ASSERT_TRUE(read.request) << chunk;
    EXPECT_FALSE(read.answer);
    EXPECT_EQ(read.request->method, "POST");
    EXPECT_EQ(read.request->Path(), "/paid/x");
    EXPECT_EQ(read.request->Query(), "city=Paris");
    EXPECT_EQ(read.request->Header("idempotency-key"), "k1");
    EXPECT_EQ(read.request->body, "Wikipedia");
    EXPECT_TRUE(read.keep_alive);
  }
}

// Found by fuzz/http_request_fuzzer.cc (seed regression-chunked-one-byte-at-a-time): Beast 1.74
// asserted `n >= 5` in parse_chunk_header when the last chunk's bytes came one by one, and with
// assertions on that aborted the gateway process on the simplest chunked request.
TEST(ReadRequestBytes, ChunkedBodyArrivingOneByteAtATime) {
  for (const char* body : {"0\r\n\r\n", "4\r\nWiki\r\n0\r\n\r\n", "0\r\nX-T: 1\r\n\r\n"}) {
    const std::string wire =
        std::string("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n") + body;
    for (size_t chunk : {1u, 2u, 3u, 4u}) {
      RequestRead read = ReadRequestBytes(wire, ServerLimits{}, chunk);
      ASSERT_TRUE(read.request) << body << " in pieces of " << chunk;
    }
  }
  auto answer = ReadResponseBytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                                  ClientOptions{}, false, 1);
  EXPECT_EQ(answer.error, ClientError::kNone) << answer.detail;
}

TEST(ReadRequestBytes, LimitsAndMalformedRequestsGetTheSessionsAnswers) {
  ServerLimits limits;
  limits.max_body_bytes = 4;
  limits.max_header_bytes = 64;
  auto body = ReadRequestBytes("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde", limits, 0);
  ASSERT_TRUE(body.answer);
  EXPECT_EQ(body.answer->status, 413);
  auto chunked = ReadRequestBytes(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n", limits, 3);
  ASSERT_TRUE(chunked.answer);
  EXPECT_EQ(chunked.answer->status, 413);
  auto head =
      ReadRequestBytes("GET / HTTP/1.1\r\nX: " + std::string(100, 'y') + "\r\n\r\n", limits, 0);
  ASSERT_TRUE(head.answer);
  EXPECT_EQ(head.answer->status, 431);
  for (const char* bad : {"GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", "GET\r\n\r\n",
                          "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}) {
    auto read = ReadRequestBytes(bad, ServerLimits{}, 0);
    EXPECT_FALSE(read.request) << bad;
    ASSERT_TRUE(read.answer) << bad;
    EXPECT_EQ(read.answer->status, 400) << bad;
  }
  // A client that leaves mid-request gets no answer: the session just closes.
  auto cut =
      ReadRequestBytes("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", ServerLimits{}, 0);
  EXPECT_FALSE(cut.request);
  EXPECT_FALSE(cut.answer);
}

// Issue 36 item 3: a transfer coding this server cannot frame is refused (RFC 9112 §6.3: 400,
// then close), never read as a bodyless request whose body becomes the next request.
TEST(ReadRequestBytes, TransferCodingsOtherThanOneChunkedAreRefused) {
  const std::string smuggled = "GET /cheap/smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
  for (const std::string coding : {"gzip", "xchunked", "chunked, gzip", "gzip, chunked", "identity",
                                   "chunked;q=1", "", "chunked\r\nTransfer-Encoding: chunked"}) {
    const std::string wire =
        "POST /cheap HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: " + coding + "\r\n\r\n" + smuggled;
    for (size_t chunk : {0u, 5u}) {
      RequestRead read = ReadRequestBytes(wire, ServerLimits{}, chunk);
      EXPECT_FALSE(read.request) << coding;
      ASSERT_TRUE(read.answer) << coding;
      EXPECT_EQ(read.answer->status, 400) << coding;
      EXPECT_FALSE(read.keep_alive) << coding;
    }
  }
  // HTTP/1.0 has no transfer codings at all.
  auto old = ReadRequestBytes("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                              ServerLimits{}, 0);
  ASSERT_TRUE(old.answer);
  EXPECT_EQ(old.answer->status, 400);
  // The one coding that frames a request, in any letter case, still reads.
  auto chunked =
      ReadRequestBytes("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                       ServerLimits{}, 0);
  ASSERT_TRUE(chunked.request);
  EXPECT_EQ(chunked.request->body, "ok");
}

// Found by fuzz/http_request_diff_fuzzer.cc (seed regression-connect-framed-by-content-length):
// CONNECT has no content and what follows its head is a tunnel (RFC 9110 §9.3.6), yet Beast framed
// it by Content-Length and read the bytes after it as the next request, where http_parser (and a
// proxy in front) takes them for a tunnel's. No listener here is a proxy: refused, and closed.
TEST(ReadRequestBytes, ConnectIsRefusedNotFramed) {
  const std::string smuggled = "GET /cheap/smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
  for (const std::string length : {"", "Content-Length: 5\r\n", "Content-Length: 0\r\n"}) {
    const std::string wire = "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n" + length + "\r\n" +
                             (length.empty() ? "" : "hello") + smuggled;
    for (size_t chunk : {0u, 3u}) {
      RequestRead read = ReadRequestBytes(wire, ServerLimits{}, chunk);
      EXPECT_FALSE(read.request) << length;
      ASSERT_TRUE(read.answer) << length;
      EXPECT_EQ(read.answer->status, 400) << length;
      EXPECT_FALSE(read.keep_alive) << length;
    }
  }
}

// Found by fuzz/http_request_diff_fuzzer.cc (seed regression-close-in-second-connection-field):
// Beast's message::keep_alive() reads only the first Connection field, so `close` in a second one
// was ignored and the connection kept open (RFC 9112 §9.6, RFC 9110 §5.3: the fields combine).
TEST(ReadRequestBytes, CloseInAnyConnectionFieldEndsTheConnection) {
  for (const std::string fields : {"Connection: foo\r\nConnection: close\r\n",
                                   "Connection: keep-alive\r\nConnection: x, close\r\n",
                                   "Connection: close\r\nConnection: keep-alive\r\n"}) {
    RequestRead read =
        ReadRequestBytes("GET / HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n", ServerLimits{}, 0);
    ASSERT_TRUE(read.request) << fields;
    EXPECT_FALSE(read.keep_alive) << fields;
  }
  RequestRead open = ReadRequestBytes(
      "GET / HTTP/1.1\r\nConnection: foo\r\nConnection: bar\r\n\r\n", ServerLimits{}, 0);
  ASSERT_TRUE(open.request);
  EXPECT_TRUE(open.keep_alive);
}

// Issue 36 item 3: fields in a chunked body's trailer are dropped, never merged into the headers
// (an Idempotency-Key or any other field set where no proxy in front looks).
TEST(ReadRequestBytes, TrailerFieldsNeverBecomeHeaders) {
  const std::string wire =
      "POST /paid HTTP/1.1\r\nHost: a\r\nIdempotency-Key: from-the-head\r\n"
      "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
      "Idempotency-Key: from-the-trailer\r\nX-Trailer-Injected: 1\r\n\r\n";
  for (size_t chunk : {0u, 1u, 7u}) {
    RequestRead read = ReadRequestBytes(wire, ServerLimits{}, chunk);
    ASSERT_TRUE(read.request) << chunk;
    EXPECT_EQ(read.request->body, "ok");
    EXPECT_FALSE(read.request->Header("X-Trailer-Injected")) << chunk;
    size_t keys = 0;
    for (const auto& header : read.request->headers) {
      if (HeaderNameEquals(header.name, "Idempotency-Key")) {
        ++keys;
        EXPECT_EQ(header.value, "from-the-head");
      }
    }
    EXPECT_EQ(keys, 1u) << chunk;
  }
  // Without the header, a trailer does not supply it either.
  auto alone = ReadRequestBytes(
      "POST /paid HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
      "Idempotency-Key: from-the-trailer\r\n\r\n",
      ServerLimits{}, 0);
  ASSERT_TRUE(alone.request);
  EXPECT_FALSE(alone.request->Header("Idempotency-Key"));
}

// A chunk-size line or a trailer section longer than the read buffer is refused, not buffered
// without end.
TEST(ReadRequestBytes, EndlessChunkLinesAndTrailersAreRefused) {
  const std::string endless_trailer =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + std::string(200 * 1024, 'x');
  auto trailer = ReadRequestBytes(endless_trailer, ServerLimits{}, 4096);
  EXPECT_FALSE(trailer.request);
  ASSERT_TRUE(trailer.answer);
  EXPECT_EQ(trailer.answer->status, 400);
  const std::string endless_extension =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + std::string(200 * 1024, 'x');
  auto extension = ReadRequestBytes(endless_extension, ServerLimits{}, 4096);
  EXPECT_FALSE(extension.request);
  ASSERT_TRUE(extension.answer);
  EXPECT_EQ(extension.answer->status, 400);
}

TEST(ReadResponseBytes, InterimAnswersAreSkippedForTheFinalOne) {
  auto answer = ReadResponseBytes(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
      ClientOptions{}, false, 5);
  ASSERT_EQ(answer.error, ClientError::kNone) << answer.detail;
  EXPECT_EQ(answer.status, 201);
  EXPECT_EQ(answer.body, "ok");
  EXPECT_FALSE(answer.Header("Link"));
}

// Found by fuzz/http_response_fuzzer.cc (seed regression-status-051): Beast reads any three digits.
TEST(ReadResponseBytes, StatusesOutsideHttpsRangeAreProtocolErrors) {
  for (const char* status : {"000", "051", "099", "600", "999"}) {
    auto answer =
        ReadResponseBytes(std::string("HTTP/1.1 ") + status + " X\r\nContent-Length: 0\r\n\r\n",
                          ClientOptions{}, false, 0);
    EXPECT_EQ(answer.error, ClientError::kProtocol) << status;
  }
  EXPECT_EQ(
      ReadResponseBytes("HTTP/1.1 599 X\r\nContent-Length: 0\r\n\r\n", ClientOptions{}, false, 0)
          .status,
      599);
}

TEST(ReadResponseBytes, UnaskedUpgradeAndEndlessInterimAnswersAreProtocolErrors) {
  auto upgrade = ReadResponseBytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
                                   ClientOptions{}, false, 0);
  EXPECT_EQ(upgrade.error, ClientError::kProtocol);
  std::string many;
  for (int i = 0; i < 9; ++i) many += "HTTP/1.1 102 Processing\r\n\r\n";
  auto endless = ReadResponseBytes(many + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                                   ClientOptions{}, false, 0);
  EXPECT_EQ(endless.error, ClientError::kProtocol);
}

TEST(ReadResponseBytes, LimitsAndCutAnswers) {
  ClientOptions options;
  options.max_response_bytes = 4;
  EXPECT_EQ(
      ReadResponseBytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde", options, false, 0)
          .error,
      ClientError::kTooLarge);
  auto head =
      ReadResponseBytes("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n", ClientOptions{}, true, 0);
  EXPECT_EQ(head.error, ClientError::kNone) << head.detail;
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(
      ReadResponseBytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", ClientOptions{}, false, 0)
          .error,
      ClientError::kClosed);
  EXPECT_EQ(ReadResponseBytes("SSH-2.0-OpenSSH\r\n", ClientOptions{}, false, 0).error,
            ClientError::kProtocol);
}

// One keep-alive connection on a loopback port; each request (read up to its blank line) gets
// the next scripted reply.
class ScriptedUpstream {
 public:
  explicit ScriptedUpstream(std::vector<std::string> replies) : replies_(std::move(replies)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t length = sizeof address;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedUpstream() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    thread_.join();
  }
  Endpoint endpoint() const { return Endpoint{"127.0.0.1", port_, ""}; }
  int connections() const { return connections_; }

 private:
  void Serve() {
    for (size_t next = 0; next < replies_.size();) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      timeval timeout{2, 0};  // a failed test must not leave this thread waiting forever
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      std::string received;
      char buffer[4096];
      while (next < replies_.size()) {
        ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
        if (got <= 0) break;
        received.append(buffer, static_cast<size_t>(got));
        size_t end;
        while ((end = received.find("\r\n\r\n")) != std::string::npos && next < replies_.size()) {
          received.erase(0, end + 4);
          const std::string& reply = replies_[next++];
          (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
        }
      }
      ::close(fd);
    }
  }

  std::vector<std::string> replies_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Before: the 103 was taken as the answer (status 103, no body) and the real answer stayed on the
// pooled connection, to be read as the answer of the next call, which may be another payer's.
TEST(ClientInterimAnswers, EachCallGetsItsOwnFinalAnswer) {
  ScriptedUpstream upstream({
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst",
      "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond",
  });
  ClientRequest request;
  request.target = "/a";
  ClientResponse first = SendHttp(upstream.endpoint(), request, ClientOptions{});
  ASSERT_EQ(first.error, ClientError::kNone) << first.detail;
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "first");
  request.target = "/b";
  ClientResponse second = SendHttp(upstream.endpoint(), request, ClientOptions{});
  ASSERT_EQ(second.error, ClientError::kNone) << second.detail;
  EXPECT_EQ(second.body, "second");
  EXPECT_EQ(upstream.connections(), 1);  // one keep-alive connection served both
}

}  // namespace
}  // namespace agentpay
