// FakeRpcServer: one thread, one connection at a time, keep-alive, Content-Length bodies only.
#include "rpc_fake_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

namespace agentpay::chain::test_util {
namespace {

// Reads one request body; false on EOF, on stop, or on a request this server does not understand.
bool ReadRequestBody(int fd, const std::atomic<bool>& stop, std::string& buffer,
                     std::string* body) {
  while (!stop) {
    size_t end = buffer.find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t at = buffer.find("Content-Length: ");
      if (at == std::string::npos || at > end) return false;
      size_t length = std::strtoul(buffer.c_str() + at + 16, nullptr, 10);
      if (buffer.size() >= end + 4 + length) {
        *body = buffer.substr(end + 4, length);
        buffer.erase(0, end + 4 + length);
        return true;
      }
    }
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, 20) <= 0) continue;  // wake up now and then to notice stop
    char chunk[4096];
    ssize_t got = ::recv(fd, chunk, sizeof(chunk), 0);
    if (got <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(got));
  }
  return false;
}

void WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t wrote = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (wrote <= 0) return;
    sent += static_cast<size_t>(wrote);
  }
}

}  // namespace

FakeReply ResultReply(const nlohmann::json& request, nlohmann::json result) {
  nlohmann::json body = {{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", std::move(result)}};
  return FakeReply{200, body.dump(), false};
}

FakeReply ErrorReply(const nlohmann::json& request, nlohmann::json error) {
  nlohmann::json body = {{"jsonrpc", "2.0"}, {"id", request["id"]}, {"error", std::move(error)}};
  return FakeReply{200, body.dump(), false};
}

FakeRpcServer::FakeRpcServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::listen(listen_fd_, 16);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

FakeRpcServer::~FakeRpcServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::vector<std::string> FakeRpcServer::Methods() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return methods_;
}

void FakeRpcServer::Serve() {
  while (!stop_) {
    pollfd waiting{listen_fd_, POLLIN, 0};
    if (::poll(&waiting, 1, 20) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    ServeConnection(fd);
    ::close(fd);
  }
}

void FakeRpcServer::ServeConnection(int fd) {
  std::string buffer;
  std::string body;
  while (ReadRequestBody(fd, stop_, buffer, &body)) {
    nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      methods_.push_back(request.is_array() ? "batch" : request.value("method", ""));
    }
    FakeReply reply = handler_(request);
    if (reply.hang_up) return;
    WriteAll(fd, "HTTP/1.1 " + std::to_string(reply.status) +
                     " X\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body);
  }
}

}  // namespace agentpay::chain::test_util
