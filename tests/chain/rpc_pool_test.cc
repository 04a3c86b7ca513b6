// RpcPool: several endpoints of one chain used as one (src/chain/rpc_pool.h), every row of its
// table against scripted loopback nodes, on a clock the test moves.
#include "chain/rpc_pool.h"

#include <gtest/gtest.h>

#include <atomic>

#include "chain/rpc_chain.h"
#include "rpc_fake_server.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;
using test_util::ErrorReply;
using test_util::FakeReply;
using test_util::FakeRpcServer;
using test_util::ResultReply;

constexpr int64_t kTimeoutMs = 1000;

// A node answering eth_blockNumber with `head` and everything else with "0x1".
FakeRpcServer::Handler Node(uint64_t head) {
  return [head](const json& request) {
    if (request.value("method", "") == "eth_blockNumber") {
      return ResultReply(request, U256(head).ToHexQuantity());
    }
    return ResultReply(request, "0x1");
  };
}

class RpcPoolTest : public ::testing::Test {
 protected:
  RpcPool Pool(std::vector<Endpoint> endpoints) {
    return RpcPool(std::move(endpoints), kTimeoutMs, nullptr, [this] { return now_ms_.load(); });
  }
  std::atomic<int64_t> now_ms_{1'000'000};
};

TEST_F(RpcPoolTest, AnAnswerOrANodesErrorComesFromTheFirstEndpoint) {
  FakeRpcServer first([](const json& r) {
    if (r.value("method", "") == "eth_call") {
      return ErrorReply(r, {{"code", 3}, {"message", "execution reverted"}});
    }
    return ResultReply(r, "0x7");
  });
  FakeRpcServer second([](const json& r) { return ResultReply(r, "0x8"); });
  RpcPool pool = Pool({first.endpoint(), second.endpoint()});
  EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x7");
  // A JSON-RPC error is the chain's answer: no other node is asked.
  EXPECT_EQ(pool.Call("eth_call", json::array()).status().code(), kRpcError);
  EXPECT_TRUE(second.Methods().empty());
}

TEST_F(RpcPoolTest, FailuresThatSayNothingAboutTheChainMoveOnAndRest) {
  const std::vector<FakeRpcServer::Handler> failures = {
      [](const json&) {
        return FakeReply{503, "busy", false};
      },
      [](const json& r) {
        FakeReply reply = ErrorReply(r, {{"code", -32005}, {"message", "rate limited"}});
        reply.status = 429;
        return reply;
      },
      [](const json&) {
        return FakeReply{200, "", true};
      },  // hang-up: maybe received
      [](const json&) {
        return FakeReply{200, "not json", false};
      },
  };
  for (size_t i = 0; i < failures.size(); ++i) {
    SCOPED_TRACE("failure " + std::to_string(i));
    FakeRpcServer first(failures[i]);
    FakeRpcServer second([](const json& r) { return ResultReply(r, "0x8"); });
    RpcPool pool = Pool({first.endpoint(), second.endpoint()});
    EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x8");
    EXPECT_EQ(first.Methods().size(), 1u);
    // The first rests 1 s: the next calls go straight to the second.
    EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x8");
    EXPECT_EQ(first.Methods().size(), 1u);
    now_ms_ += kRpcFirstRestMs;  // rested: asked first again, fails again, rests 2 s
    EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x8");
    EXPECT_EQ(first.Methods().size(), 2u);
    now_ms_ += kRpcFirstRestMs;
    EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x8");
    EXPECT_EQ(first.Methods().size(), 2u) << "the second rest is twice as long";
    EXPECT_EQ(second.Methods().size(), 4u);
  }
}

TEST_F(RpcPoolTest, ABatchMovesOnWholeAsACallWouldAndANodesRefusalDoesNot) {
  auto each = [](const json& request) {
    json answers = json::array();
    for (const json& call : request) answers.push_back(json::parse(ResultReply(call, "0x8").body));
    return FakeReply{200, answers.dump(), false};
  };
  const std::vector<RpcCall> calls = {{"eth_sendRawTransaction", json::array({"0x01"})},
                                      {"eth_sendRawTransaction", json::array({"0x02"})}};
  FakeRpcServer busy([](const json&) { return FakeReply{503, "busy", false}; });
  FakeRpcServer second(each);
  RpcPool pool = Pool({busy.endpoint(), second.endpoint()});
  auto answers = pool.CallBatch(calls);
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  EXPECT_EQ(*(*answers)[1].result, "0x8");
  EXPECT_EQ(busy.Methods(), std::vector<std::string>{"batch"});
  EXPECT_EQ(second.Methods(), std::vector<std::string>{"batch"});
  // The first rests, as after a call.
  ASSERT_TRUE(pool.CallBatch(calls).ok());
  EXPECT_EQ(busy.Methods().size(), 1u);
  // A node's own answer to the batch (it takes none) is an answer: no other node is asked.
  FakeRpcServer refuses([](const json&) {
    return FakeReply{200, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}})",
                     false};
  });
  FakeRpcServer other(each);
  RpcPool refusing = Pool({refuses.endpoint(), other.endpoint()});
  EXPECT_EQ(refusing.CallBatch(calls).status().code(), kRpcError);
  EXPECT_TRUE(other.Methods().empty());
}

TEST_F(RpcPoolTest, AnEndpointThatRecoversIsPreferredAgain) {
  std::atomic<bool> up{false};
  FakeRpcServer first([&](const json& r) {
    return up ? ResultReply(r, "0x7") : FakeReply{502, "bad gateway", false};
  });
  FakeRpcServer second([](const json& r) { return ResultReply(r, "0x8"); });
  RpcPool pool = Pool({first.endpoint(), second.endpoint()});
  EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x8");
  up = true;
  now_ms_ += kRpcFirstRestMs;
  EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x7");
  EXPECT_EQ(*pool.Call("eth_chainId", json::array()), "0x7");
}

TEST_F(RpcPoolTest, WhenEveryEndpointFailsAMaybeReceivedFailureWins) {
  FakeRpcServer hangs([](const json&) { return FakeReply{200, "", true}; });
  const Endpoint nowhere{"127.0.0.1", test_util::FreeLoopbackPort(), ""};
  // Never sent to the first, maybe received by the second: the call may have been received.
  RpcPool pool = Pool({nowhere, hangs.endpoint()});
  EXPECT_EQ(pool.Call("eth_sendRawTransaction", json::array({"0x01"})).status().code(),
            kRpcTimeout);
  // Both resting: both are still tried, and the answer is as uncertain as before.
  EXPECT_EQ(pool.Call("eth_sendRawTransaction", json::array({"0x01"})).status().code(),
            kRpcTimeout);
  EXPECT_EQ(hangs.Methods().size(), 2u);
  RpcPool unreachable = Pool({nowhere});
  EXPECT_EQ(unreachable.Call("eth_chainId", json::array()).status().code(), kRpcUnreachable);
}

TEST_F(RpcPoolTest, ALaggingNodeIsNotAskedForReceiptsWhileAnotherIsCurrent) {
  FakeRpcServer behind(Node(100));
  FakeRpcServer current(Node(110));
  RpcPool pool = Pool({behind.endpoint(), current.endpoint()});
  // Heads become known from eth_blockNumber answers, one from each endpoint.
  ASSERT_TRUE(pool.CallOn(0, "eth_blockNumber", json::array()).ok());
  ASSERT_TRUE(pool.CallOn(1, "eth_blockNumber", json::array()).ok());
  ASSERT_TRUE(pool.Call("eth_getTransactionReceipt", json::array({"0x00"})).ok());
  EXPECT_EQ(behind.Methods().back(), "eth_blockNumber") << "the lagging node was asked";
  EXPECT_EQ(current.Methods().back(), "eth_getTransactionReceipt");
  // Other calls keep the configured order.
  ASSERT_TRUE(pool.Call("eth_chainId", json::array()).ok());
  EXPECT_EQ(behind.Methods().back(), "eth_chainId");
  // A head not seen for kHeadFreshMs says nothing any more.
  now_ms_ += kHeadFreshMs + 1;
  ASSERT_TRUE(pool.Call("eth_getTransactionReceipt", json::array({"0x00"})).ok());
  EXPECT_EQ(behind.Methods().back(), "eth_getTransactionReceipt");
}

}  // namespace
}  // namespace agentpay::chain
