// JsonRpcClient and RpcChain against a scripted node: every answer that is not a clean JSON-RPC
// result maps to the right stable code, and RpcChain refuses results of the wrong shape.
#include <gtest/gtest.h>

#include <map>

#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "chain/rpc_chain.h"
#include "rpc_fake_server.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;
using test_util::ErrorReply;
using test_util::FakeReply;
using test_util::FakeRpcServer;
using test_util::HexBytes;
using test_util::ResultReply;

constexpr int64_t kTimeoutMs = 2000;
// Error(string) revert data for "FiatTokenV2: authorization is used or canceled".
constexpr std::string_view kUsedRevertData =
    "0x08c379a00000000000000000000000000000000000000000000000000000000000000020"
    "000000000000000000000000000000000000000000000000000000000000002e"
    "46696174546f6b656e56323a20617574686f72697a6174696f6e206973207573"
    "6564206f722063616e63656c6564000000000000000000000000000000000000";

Status CallStatus(FakeRpcServer::Handler handler, uint64_t max_bytes = kDefaultMaxRpcResponseBytes,
                  RpcErrorDetail* detail = nullptr) {
  FakeRpcServer server(std::move(handler));
  JsonRpcClient client(server.endpoint(), kTimeoutMs, max_bytes);
  Result<json> answer = client.Call("eth_blockNumber", json::array(), detail);
  return answer.ok() ? Status::Ok() : answer.status();
}

TEST(RevertReasonTest, DecodesErrorStringAndRefusesOtherData) {
  EXPECT_EQ(DecodeRevertReason(HexBytes(kUsedRevertData)),
            "FiatTokenV2: authorization is used or canceled");
  Bytes truncated = HexBytes(kUsedRevertData);
  truncated.resize(truncated.size() - 40);
  EXPECT_EQ(DecodeRevertReason(truncated), std::nullopt);
  Bytes other_selector = HexBytes(kUsedRevertData);
  other_selector[0] = 0x4e;  // Panic(uint256) starts 0x4e487b71
  EXPECT_EQ(DecodeRevertReason(other_selector), std::nullopt);
  EXPECT_EQ(DecodeRevertReason(Bytes{}), std::nullopt);
}

TEST(JsonRpcClientTest, ReturnsTheResultAndSendsAWellFormedRequest) {
  json seen;
  FakeRpcServer server([&](const json& request) {
    seen = request;
    return ResultReply(request, "0x2a");
  });
  JsonRpcClient client(server.endpoint(), kTimeoutMs);
  Result<json> answer = client.Call("eth_blockNumber", json::array({1, "x"}));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(*answer, "0x2a");
  EXPECT_EQ(seen["jsonrpc"], "2.0");
  EXPECT_EQ(seen["method"], "eth_blockNumber");
  EXPECT_EQ(seen["params"], json::array({1, "x"}));
  EXPECT_TRUE(seen["id"].is_number_unsigned());
}

TEST(JsonRpcClientTest, MalformedAnswersAreRpcMalformed) {
  const std::vector<FakeRpcServer::Handler> handlers = {
      [](const json&) {
        return FakeReply{200, "not json", false};
      },
      [](const json& r) {
        return FakeReply{
            200,
            json{{"jsonrpc", "2.0"}, {"id", r["id"].get<uint64_t>() + 1}, {"result", 1}}.dump(),
            false};
      },
      [](const json& r) {
        return FakeReply{200, json{{"id", r["id"]}, {"result", 1}}.dump(), false};
      },
      [](const json& r) {
        return FakeReply{200, json{{"jsonrpc", "2.0"}, {"id", r["id"]}}.dump(), false};
      },
      [](const json&) {
        return FakeReply{404, "not found", false};
      },
      [](const json&) {
        return FakeReply{200, std::string(100, '[') + std::string(100, ']'), false};
      },
      [](const json& r) {
        return ErrorReply(r, {{"message", "no code"}});
      },
  };
  for (size_t i = 0; i < handlers.size(); ++i) {
    Status status = CallStatus(handlers[i]);
    EXPECT_EQ(status.code(), kRpcMalformed) << "case " << i << ": " << status.ToString();
  }
  Status too_large =
      CallStatus([](const json& r) { return ResultReply(r, std::string(5000, 'a')); }, 1000);
  EXPECT_EQ(too_large.code(), kRpcMalformed) << too_large.ToString();
}

TEST(JsonRpcClientTest, ErrorObjectKeepsCodeMessageAndRevertReason) {
  RpcErrorDetail detail;
  // geth style: the reason is only in the data, nested in an object by some providers.
  Status status = CallStatus(
      [](const json& r) {
        return ErrorReply(r, {{"code", 3},
                              {"message", "execution reverted"},
                              {"data", {{"data", kUsedRevertData}}}});
      },
      kDefaultMaxRpcResponseBytes, &detail);
  EXPECT_EQ(status.code(), kRpcError);
  EXPECT_NE(status.message().find("execution reverted: FiatTokenV2: authorization is used"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(detail.code, 3);
  EXPECT_EQ(detail.message, "execution reverted");
  EXPECT_EQ(detail.data, HexBytes(kUsedRevertData));
  EXPECT_EQ(detail.revert_reason, "FiatTokenV2: authorization is used or canceled");
}

// A rate limit or a server error is "not served now", not an answer about the chain: another
// endpoint may serve the call (rpc_pool.h), and the request may have been received.
TEST(JsonRpcClientTest, RateLimitsAndServerErrorsAreUnavailable) {
  const std::vector<FakeRpcServer::Handler> handlers = {
      [](const json&) {
        return FakeReply{500, "internal error", false};
      },
      [](const json&) {
        return FakeReply{503, "<html>bad gateway</html>", false};
      },
      [](const json& r) {
        FakeReply reply = ErrorReply(r, {{"code", -32005}, {"message", "rate limited"}});
        reply.status = 429;
        return reply;
      },
      [](const json& r) {
        return ErrorReply(r, {{"code", -32005}, {"message", "limit exceeded"}});
      },
  };
  for (size_t i = 0; i < handlers.size(); ++i) {
    Status status = CallStatus(handlers[i]);
    EXPECT_EQ(status.code(), kRpcUnavailable) << "case " << i << ": " << status.ToString();
  }
  // A revert that a server sends with HTTP 500 is still the chain's answer.
  Status revert = CallStatus([](const json& r) {
    FakeReply reply = ErrorReply(r, {{"code", 3}, {"message", "execution reverted"}});
    reply.status = 500;
    return reply;
  });
  EXPECT_EQ(revert.code(), kRpcError) << revert.ToString();
}

TEST(JsonRpcClientTest, HangUpAfterTheRequestIsMaybeReceived) {
  Status status = CallStatus([](const json&) { return FakeReply{200, "", true}; });
  EXPECT_EQ(status.code(), kRpcTimeout) << status.ToString();
}

// A node whose every method answers from a table; unknown methods are "method not found".
FakeRpcServer::Handler Table(std::map<std::string, json> results) {
  return [results = std::move(results)](const json& request) {
    auto it = results.find(request.value("method", ""));
    if (it == results.end()) {
      return ErrorReply(request, {{"code", -32601}, {"message", "the method does not exist"}});
    }
    if (it->second.is_object() && it->second.contains("error")) {
      return ErrorReply(request, it->second["error"]);
    }
    return ResultReply(request, it->second);
  };
}

TEST(RpcChainParsingTest, QuantitiesAreStrict) {
  for (const json& bad :
       {json("14a34"), json("0x"), json(84532), json("0x-1"), json("0x10000000000000000")}) {
    FakeRpcServer server(Table({{"eth_chainId", bad}}));
    RpcChain chain(server.endpoint(), kTimeoutMs);
    Result<uint64_t> id = chain.ChainId();
    EXPECT_EQ(id.status().code(), kRpcMalformed) << bad.dump();
  }
}

TEST(RpcChainParsingTest, FeesFallBackToGasPriceWhenThePriorityFeeMethodIsMissing) {
  FakeRpcServer server(
      Table({{"eth_getBlockByNumber", {{"baseFeePerGas", "0x64"}, {"timestamp", "0x1"}}},
             {"eth_gasPrice", "0x96"}}));
  RpcChain chain(server.endpoint(), kTimeoutMs);
  Result<FeeData> fees = chain.Fees();
  ASSERT_TRUE(fees.ok()) << fees.status().ToString();
  EXPECT_EQ(fees->base_fee_per_gas, U256(100));
  EXPECT_EQ(fees->max_priority_fee_per_gas, U256(50));
  EXPECT_EQ(fees->max_fee_per_gas, U256(250));
}

TEST(RpcChainParsingTest, ReceiptsAndTransactionsMustBeForTheAskedHash) {
  const Hash32 asked = Keccak256("asked");
  json receipt = {{"transactionHash", Hex(Keccak256("other"))},
                  {"status", "0x1"},
                  {"blockNumber", "0x5"},
                  {"blockHash", Hex(asked)},
                  {"gasUsed", "0x5208"},
                  {"logs", json::array()},
                  {"contractAddress", nullptr}};
  json tx = {{"hash", Hex(Keccak256("other"))},
             {"nonce", "0x0"},
             {"from", "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"},
             {"blockNumber", nullptr}};
  FakeRpcServer server(
      Table({{"eth_getTransactionReceipt", receipt}, {"eth_getTransactionByHash", tx}}));
  RpcChain chain(server.endpoint(), kTimeoutMs);
  EXPECT_EQ(chain.GetReceipt(asked).status().code(), kRpcMalformed);
  EXPECT_EQ(chain.GetTransaction(asked).status().code(), kRpcMalformed);
}

TEST(RpcChainParsingTest, ReceiptStatusAndLogsAreValidated) {
  const Hash32 asked = Keccak256("asked");
  json receipt = {{"transactionHash", Hex(asked)}, {"status", "0x2"},     {"blockNumber", "0x5"},
                  {"blockHash", Hex(asked)},       {"gasUsed", "0x5208"}, {"logs", json::array()}};
  FakeRpcServer bad_status(Table({{"eth_getTransactionReceipt", receipt}}));
  EXPECT_EQ(RpcChain(bad_status.endpoint(), kTimeoutMs).GetReceipt(asked).status().code(),
            kRpcMalformed);
  receipt["status"] = "0x1";
  receipt["logs"] = json::array({{{"address", "0x12"}, {"topics", json::array()}, {"data", "0x"}}});
  FakeRpcServer bad_log(Table({{"eth_getTransactionReceipt", receipt}}));
  EXPECT_EQ(RpcChain(bad_log.endpoint(), kTimeoutMs).GetReceipt(asked).status().code(),
            kRpcMalformed);
}

TEST(RpcChainParsingTest, SendRecognisesAlreadyKnownAndRefusesAForeignHash) {
  FakeRpcServer known(Table(
      {{"eth_sendRawTransaction", {{"error", {{"code", -32000}, {"message", "already known"}}}}}}));
  EXPECT_EQ(RpcChain(known.endpoint(), kTimeoutMs).SendRawTransaction(Bytes{1, 2}).status().code(),
            kTxAlreadyKnown);
  // "nonce too low" for a transaction the node does not know: a different tx used the nonce.
  FakeRpcServer used(Table(
      {{"eth_sendRawTransaction", {{"error", {{"code", -32000}, {"message", "nonce too low"}}}}},
       {"eth_getTransactionByHash", nullptr}}));
  EXPECT_EQ(RpcChain(used.endpoint(), kTimeoutMs).SendRawTransaction(Bytes{1, 2}).status().code(),
            kRpcError);
  FakeRpcServer foreign(Table({{"eth_sendRawTransaction", Hex(Keccak256("other"))}}));
  EXPECT_EQ(
      RpcChain(foreign.endpoint(), kTimeoutMs).SendRawTransaction(Bytes{1, 2}).status().code(),
      kRpcMalformed);
}

}  // namespace
}  // namespace agentpay::chain
