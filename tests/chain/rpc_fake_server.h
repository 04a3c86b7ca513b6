// A scripted JSON-RPC node on a loopback port for tests of answers Anvil never gives: wrong ids,
// bad JSON, HTTP errors, hang-ups, oddly shaped results.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http/client.h"

namespace agentpay::chain::test_util {

struct FakeReply {
  int status = 200;
  std::string body;      // sent as is
  bool hang_up = false;  // close the connection after reading the request, answer nothing
};

// {"jsonrpc":"2.0","id":<request id>,"result":result}
FakeReply ResultReply(const nlohmann::json& request, nlohmann::json result);
// {"jsonrpc":"2.0","id":<request id>,"error":error}
FakeReply ErrorReply(const nlohmann::json& request, nlohmann::json error);

class FakeRpcServer {
 public:
  using Handler = std::function<FakeReply(const nlohmann::json& request)>;
  explicit FakeRpcServer(Handler handler);
  ~FakeRpcServer();
  FakeRpcServer(const FakeRpcServer&) = delete;
  FakeRpcServer& operator=(const FakeRpcServer&) = delete;

  Endpoint endpoint() const { return Endpoint{"127.0.0.1", port_, ""}; }
  // Methods received so far, in order ("batch" for a batch, which the handler gets whole).
  std::vector<std::string> Methods() const;

 private:
  void Serve();
  void ServeConnection(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<std::string> methods_;
  std::thread thread_;
};

}  // namespace agentpay::chain::test_util
