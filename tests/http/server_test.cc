// The listener's own bounds on real sockets (issue 36): a head handler that decides later reads no
// body meanwhile, the body bytes in flight are bounded for the listener and per client, and a
// full listener with evict_idle_when_full gives way to a new caller but never drops a trusted one.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace agentpay {
namespace {

// A blocking client socket with a receive timeout.
class Socket {
 public:
  explicit Socket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~Socket() { ::close(fd_); }
  bool connected() const { return connected_; }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // What arrives until the peer closes, or until `until` is in what arrived, or the timeout.
  std::string Read(const std::string& until = "") {
    std::string got;
    char buffer[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_ = n == 0 || errno == ECONNRESET;
        return got;
      }
      got.append(buffer, static_cast<size_t>(n));
      if (!until.empty() && got.find(until) != std::string::npos) return got;
    }
  }
  bool closed() const { return closed_; }
  // One send; false once the peer is gone.
  bool TrySend(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) > 0;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

ServerHooks HeadHooks(HeadHandler head) {
  ServerHooks hooks;
  hooks.head = std::move(head);
  return hooks;
}

ServerHooks TrustHooks(TrustedCaller trusted) {
  ServerHooks hooks;
  hooks.trusted = std::move(trusted);
  return hooks;
}

std::string Post(const std::string& body, const std::string& extra = "") {
  return "POST /x HTTP/1.1\r\nHost: a\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Keeps every request it is given, unanswered, until Answer.
struct HoldingHandler {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::pair<std::shared_ptr<const HttpRequest>, Respond>> held;

  AsyncHandler Handler() {
    return [this](std::shared_ptr<const HttpRequest> request, Respond respond) {
      std::lock_guard lock(mutex);
      held.emplace_back(std::move(request), std::move(respond));
      arrived.notify_all();
    };
  }
  bool WaitFor(size_t count) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, std::chrono::seconds(5), [&] { return held.size() >= count; });
  }
  void AnswerAll() {
    std::vector<std::pair<std::shared_ptr<const HttpRequest>, Respond>> answering;
    {
      std::lock_guard lock(mutex);
      answering.swap(held);
    }
    for (auto& [request, respond] : answering) respond(HttpResponse{});
  }
};

TEST(HttpServerHead, ALaterDecisionReadsNoBodyUntilItComesAndAnAnswerClosesTheConnection) {
  std::mutex mutex;
  std::vector<HeadDone> pending;
  std::atomic<int> handled{0};
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, ServerLimits{},
      [&](std::shared_ptr<const HttpRequest> request, Respond respond) {
        ++handled;
        HttpResponse response;
        response.body = "read " + request->body;
        respond(std::move(response));
      },
      HeadHooks([&](const HttpRequest& head, HeadDone done) {
        std::lock_guard lock(mutex);
        pending.push_back(std::move(done));
        EXPECT_TRUE(head.body.empty());
        return HeadDecision::Later();
      }));
  ASSERT_TRUE(started.ok());
  auto& server = *started;
  auto heads_pending = [&](size_t count) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mutex);
        if (pending.size() == count) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  // One after the other, so that pending[0] is the first connection's. The refused one's body is
  // not all there (a whole small body would be taken from the read buffer and the connection kept:
  // the next test).
  Socket refused(server->port());
  refused.Send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nsecret body");
  ASSERT_TRUE(heads_pending(1));
  Socket accepted(server->port());
  accepted.Send(Post("good body"));
  ASSERT_TRUE(heads_pending(2));
  EXPECT_EQ(server->Stats().body_bytes_in_flight, 0u) << "a body was counted before the decision";
  pending[0](HeadDecision::Answer(ProblemResponse(401, ProblemCode::kUnauthorized, "no")));
  std::string answer = refused.Read();
  EXPECT_NE(answer.find("HTTP/1.1 401"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(refused.closed());
  pending[1](HeadDecision::ReadBody());
  answer = accepted.Read("read good body");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_EQ(handled.load(), 1);
}

// An answer from the head keeps the connection when the request's whole body came with its head
// (as clients send a small body: an unpaid request and its 402, then the paid retry on the same
// connection): the body is taken from the read buffer, and the next request starts right after it,
// even when both came in one send. A body not all there, or chunked, is not waited for: closed.
TEST(HttpServerHead, AnEarlyAnswerKeepsTheConnectionWhenTheWholeBodyCameWithTheHead) {
  std::atomic<int> heads{0};
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, ServerLimits{},
      [](std::shared_ptr<const HttpRequest> request, Respond respond) {
        HttpResponse response;
        response.body = "read " + request->body;
        respond(std::move(response));
      },
      HeadHooks([&](const HttpRequest& head, HeadDone) {
        ++heads;
        if (head.Header("X-Paid")) return HeadDecision::ReadBody();
        return HeadDecision::Answer(ProblemResponse(402, ProblemCode::kPaymentRequired, "pay"));
      }));
  ASSERT_TRUE(started.ok());
  Socket client((*started)->port());
  client.Send(Post("unpaid body") + Post("paid body", "X-Paid: 1\r\n"));
  std::string answers = client.Read("read paid body");
  EXPECT_NE(answers.find("HTTP/1.1 402"), std::string::npos) << answers;
  EXPECT_EQ(answers.find("Connection: close"), std::string::npos) << answers;
  EXPECT_NE(answers.find("HTTP/1.1 200"), std::string::npos) << answers;
  EXPECT_FALSE(client.closed());
  EXPECT_EQ(heads.load(), 2);
  // Again on the same connection, then a body that is not all there: answered, and closed.
  client.Send(Post("unpaid again"));
  std::string again = client.Read("payment_required\"}");
  EXPECT_NE(again.find("HTTP/1.1 402"), std::string::npos) << again;
  EXPECT_FALSE(client.closed());
  client.Send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhalf");
  std::string last = client.Read();
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  Socket chunked((*started)->port());
  chunked.Send(
      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n");
  last = chunked.Read();
  EXPECT_NE(last.find("HTTP/1.1 402"), std::string::npos) << last;
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  EXPECT_TRUE(chunked.closed());
}

// The request answered on its head counts as the connection's first: the next one's head has
// header_timeout_ms from its own first byte (it once kept the connection's first deadline, and a
// paid retry sent after it, its head in two reads, was dropped unanswered).
TEST(HttpServerHead, TheRequestAfterAnEarlyAnswerHasAHeaderDeadlineOfItsOwn) {
  ServerLimits limits;
  limits.header_timeout_ms = 300;
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, limits,
      [](std::shared_ptr<const HttpRequest> request, Respond respond) {
        HttpResponse response;
        response.body = "read " + request->body;
        respond(std::move(response));
      },
      HeadHooks([](const HttpRequest& head, HeadDone) {
        if (head.Header("X-Paid")) return HeadDecision::ReadBody();
        return HeadDecision::Answer(ProblemResponse(402, ProblemCode::kPaymentRequired, "pay"));
      }));
  ASSERT_TRUE(started.ok());
  Socket client((*started)->port());
  client.Send(Post("unpaid"));
  EXPECT_NE(client.Read("payment_required\"}").find("HTTP/1.1 402"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past the first deadline
  client.Send("POST /x HTTP/1.1\r\nHost: a\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  client.Send("X-Paid: 1\r\nContent-Length: 4\r\n\r\npaid");
  std::string answer = client.Read("read paid");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_EQ((*started)->Stats().requests, 2u);
}

// After an answer from the head, what the client still sends is discarded for kLingerMs at most,
// even when it never stops sending (Beast's own timer fires only while a read waits: a client that
// kept sending held its connection, found by security.body_memory).
TEST(HttpServerHead, AnEarlyAnswerLingersOnlyKLingerMsHoweverFastTheClientSends) {
  ServerLimits limits;
  limits.max_body_bytes = 1ULL << 40;  // the byte bound is not what ends it
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, limits,
      [](std::shared_ptr<const HttpRequest>, Respond respond) { respond(HttpResponse{}); },
      HeadHooks([](const HttpRequest&, HeadDone) {
        return HeadDecision::Answer(ProblemResponse(401, ProblemCode::kUnauthorized, "no"));
      }));
  ASSERT_TRUE(started.ok());
  Socket client((*started)->port());
  client.Send("POST /x HTTP/1.1\r\nContent-Length: 1099511627776\r\n\r\n");
  // The server shuts its side at once (the client reads the answer, then the end); it closes
  // the connection, and the client's sends start failing, only when the lingering ends.
  std::atomic<bool> sending{true};
  const auto began = std::chrono::steady_clock::now();
  std::atomic<int64_t> refused_after_ms{-1};
  std::thread flood([&] {
    const std::string chunk(64 * 1024, 'x');
    while (sending) {
      if (!client.TrySend(chunk)) {
        refused_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - began)
                               .count();
        return;
      }
    }
  });
  EXPECT_NE(client.Read().find("HTTP/1.1 401"), std::string::npos);
  for (int i = 0; i < 1000 && refused_after_ms < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sending = false;
  flood.join();
  ASSERT_GE(refused_after_ms.load(), 0) << "still connected after 10 s";
  EXPECT_LT(refused_after_ms.load(), kLingerMs + 3000);
  for (int i = 0; i < 500 && (*started)->Stats().open_connections != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*started)->Stats().open_connections, 0u);
}

TEST(HttpServerBodies, TheBytesInFlightAreBoundedForTheListenerAndPerClient) {
  HoldingHandler handler;
  ServerLimits limits;
  limits.max_body_bytes = 100;
  limits.max_body_bytes_in_flight = 150;
  limits.max_body_bytes_in_flight_per_client = 150;
  auto started = HttpServer::StartAsync("127.0.0.1", 0, limits, handler.Handler());
  ASSERT_TRUE(started.ok());
  auto& server = *started;
  Socket first(server->port());
  first.Send(Post(std::string(100, 'a')));
  ASSERT_TRUE(handler.WaitFor(1));
  EXPECT_EQ(server->Stats().body_bytes_in_flight, 100u);
  // 100 held (the request is not answered yet) + 60 > 150: refused before a byte is read.
  Socket second(server->port());
  second.Send(Post(std::string(60, 'b')));
  std::string answer = second.Read();
  EXPECT_NE(answer.find("HTTP/1.1 503"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("limit_exceeded"), std::string::npos) << answer;
  EXPECT_EQ(server->Stats().rejected_body_budget, 1u);
  // A chunked body counts as max_body_bytes until it is whole: refused as well.
  Socket chunked(server->port());
  chunked.Send("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n");
  EXPECT_NE(chunked.Read().find("HTTP/1.1 503"), std::string::npos);
  // 100 + 50 fits.
  Socket third(server->port());
  third.Send(Post(std::string(50, 'c')));
  ASSERT_TRUE(handler.WaitFor(2));
  EXPECT_EQ(server->Stats().body_bytes_in_flight, 150u);
  // Answered and dropped, the requests give their bytes back.
  handler.AnswerAll();
  for (int i = 0; i < 500 && server->Stats().body_bytes_in_flight != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server->Stats().body_bytes_in_flight, 0u);
  // A chunked body, once whole, holds what it is, not max_body_bytes.
  chunked.Read();
  Socket again(server->port());
  again.Send("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  ASSERT_TRUE(handler.WaitFor(1));
  EXPECT_EQ(server->Stats().body_bytes_in_flight, 3u);
  handler.AnswerAll();
}

TEST(HttpServerBodies, OneClientGetsItsShareOnly) {
  HoldingHandler handler;
  ServerLimits limits;
  limits.max_body_bytes = 100;
  limits.max_body_bytes_in_flight = 1000;
  limits.max_body_bytes_in_flight_per_client = 100;
  auto started = HttpServer::StartAsync("127.0.0.1", 0, limits, handler.Handler());
  ASSERT_TRUE(started.ok());
  Socket first((*started)->port());
  first.Send(Post(std::string(80, 'a')));
  ASSERT_TRUE(handler.WaitFor(1));
  Socket second((*started)->port());  // the same address: 80 + 80 > 100
  second.Send(Post(std::string(80, 'b')));
  EXPECT_NE(second.Read().find("HTTP/1.1 503"), std::string::npos);
  handler.AnswerAll();
}

TEST(HttpServerEviction, AFullListenerClosesTheOldestUntrustedWaitingConnection) {
  ServerLimits limits;
  limits.max_connections = 4;
  limits.evict_idle_when_full = true;
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, limits,
      [](std::shared_ptr<const HttpRequest>, Respond respond) { respond(HttpResponse{}); },
      TrustHooks([](const HttpRequest& head) {
        return head.Header("Authorization") == "Bearer operator";
      }));
  ASSERT_TRUE(started.ok());
  auto& server = *started;
  // The operator's connection, trusted once its first request shows the token.
  Socket operator_connection(server->port());
  operator_connection.Send("GET / HTTP/1.1\r\nAuthorization: Bearer operator\r\n\r\n");
  EXPECT_NE(operator_connection.Read("\r\n\r\n").find("200"), std::string::npos);
  auto open_connections = [&](uint64_t count) {
    for (int i = 0; i < 500 && server->Stats().open_connections != count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return server->Stats().open_connections == count;
  };
  // Half heads fill the listener, oldest first.
  std::vector<std::unique_ptr<Socket>> flood;
  auto add_half_head = [&] {
    flood.push_back(std::make_unique<Socket>(server->port()));
    flood.back()->Send("GET / HTTP/1.1\r\nX-Half: ");
    return open_connections(1 + flood.size() - static_cast<size_t>(server->Stats().evicted_idle));
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(add_half_head());
  // Full: a new caller evicts the half head that has waited longest, and is served.
  for (size_t round = 0; round < 3; ++round) {
    Socket newcomer(server->port());
    newcomer.Send("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    std::string answer = newcomer.Read();
    EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << round << answer;
    flood[round]->Read();
    EXPECT_TRUE(flood[round]->closed()) << round;
    ASSERT_TRUE(open_connections(3));
    ASSERT_TRUE(add_half_head());  // full again
  }
  EXPECT_EQ(server->Stats().evicted_idle, 3u);
  // The trusted connection was never the one to go.
  operator_connection.Send("GET / HTTP/1.1\r\nAuthorization: Bearer operator\r\n\r\n");
  EXPECT_NE(operator_connection.Read("\r\n\r\n").find("200"), std::string::npos);
}

TEST(HttpServerEviction, WithoutItAFullListenerRefuses) {
  ServerLimits limits;
  limits.max_connections = 2;
  auto started = HttpServer::StartAsync(
      "127.0.0.1", 0, limits,
      [](std::shared_ptr<const HttpRequest>, Respond respond) { respond(HttpResponse{}); });
  ASSERT_TRUE(started.ok());
  Socket a((*started)->port());
  a.Send("GET / HTTP/1.1\r\nX-Half: ");
  Socket b((*started)->port());
  b.Send("GET / HTTP/1.1\r\nX-Half: ");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Socket c((*started)->port());
  c.Send("GET / HTTP/1.1\r\n\r\n");
  EXPECT_NE(c.Read().find("HTTP/1.1 503"), std::string::npos);
  EXPECT_EQ((*started)->Stats().evicted_idle, 0u);
}

}  // namespace
}  // namespace agentpay
