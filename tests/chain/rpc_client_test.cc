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

// The answer to one call of a batch, as ResultReply/ErrorReply would send it alone.
json Envelope(const FakeReply& reply) { return json::parse(reply.body); }

Result<std::vector<RpcAnswer>> Batch(FakeRpcServer::Handler handler, size_t calls = 3) {
  FakeRpcServer server(std::move(handler));
  JsonRpcClient client(server.endpoint(), kTimeoutMs);
  std::vector<RpcCall> batch;
  for (size_t i = 0; i < calls; ++i) batch.push_back({"eth_blockNumber", json::array({i})});
  return client.CallBatch(batch);
}

TEST(JsonRpcClientTest, ABatchIsOneRequestWhoseAnswersMatchTheirCallsByIdInAnyOrder) {
  json seen;
  FakeRpcServer server([&](const json& request) {
    seen = request;
    // Answered last to first, the middle call refused with the node's error.
    json answers = json::array();
    for (auto it = request.rbegin(); it != request.rend(); ++it) {
      answers.push_back((*it)["method"] == "eth_call"
                            ? Envelope(ErrorReply(*it, {{"code", 3},
                                                        {"message", "execution reverted"},
                                                        {"data", std::string(kUsedRevertData)}}))
                            : Envelope(ResultReply(*it, (*it)["params"][0])));
    }
    return FakeReply{200, answers.dump(), false};
  });
  JsonRpcClient client(server.endpoint(), kTimeoutMs);
  const std::vector<RpcCall> calls = {{"eth_blockNumber", json::array({"a"})},
                                      {"eth_call", json::array({"b"})},
                                      {"eth_chainId", json::array({"c"})}};
  Result<std::vector<RpcAnswer>> answers = client.CallBatch(calls);
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  ASSERT_EQ(answers->size(), 3u);
  EXPECT_EQ(*(*answers)[0].result, "a");
  EXPECT_EQ((*answers)[1].result.status().code(), kRpcError);
  EXPECT_EQ((*answers)[1].error_detail.code, 3);
  EXPECT_EQ((*answers)[1].error_detail.revert_reason,
            "FiatTokenV2: authorization is used or canceled");
  EXPECT_EQ(*(*answers)[2].result, "c");
  EXPECT_EQ(server.Methods(), std::vector<std::string>{"batch"});
  ASSERT_TRUE(seen.is_array());
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i]["jsonrpc"], "2.0");
    EXPECT_EQ(seen[i]["method"], calls[i].method);
    EXPECT_EQ(seen[i]["params"], calls[i].params);
  }
  EXPECT_NE(seen[0]["id"], seen[1]["id"]);
}

TEST(JsonRpcClientTest, ABatchAnswerIsUsedOnlyWhenEachAnswerIsForOneOfItsCalls) {
  // Each call answered by `shape`, the result its own param.
  auto answering = [](std::function<json(const json& request)> shape) {
    return [shape](const json& request) { return FakeReply{200, shape(request).dump(), false}; };
  };
  auto each = [](const json& request) {
    json answers = json::array();
    for (const json& call : request) answers.push_back(Envelope(ResultReply(call, "0x1")));
    return answers;
  };
  ASSERT_TRUE(Batch(answering(each)).ok());
  // The whole answer unusable: an object, an answer to no call of ours, two to one call.
  const std::vector<std::function<json(const json&)>> unusable = {
      [&](const json& request) { return Envelope(ResultReply(request[0], "0x1")); },
      [&](const json& request) {
        json answers = each(request);
        answers[1]["id"] = 999999;
        return answers;
      },
      [&](const json& request) {
        json answers = each(request);
        answers[1]["id"] = answers[0]["id"];
        return answers;
      },
      [&](const json& request) {
        json answers = each(request);
        answers.push_back("0x1");
        return answers;
      },
  };
  for (size_t i = 0; i < unusable.size(); ++i) {
    EXPECT_EQ(Batch(answering(unusable[i])).status().code(), kRpcMalformed) << i;
  }
  // A call the answer leaves out, or answers with something that is not JSON-RPC: that call only.
  auto partial = Batch(answering([&](const json& request) {
    json answers = each(request);
    answers.erase(answers.begin() + 1);
    answers[1].erase("jsonrpc");
    return answers;
  }));
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_TRUE((*partial)[0].result.ok());
  EXPECT_EQ((*partial)[1].result.status().code(), kRpcMalformed);
  EXPECT_EQ((*partial)[2].result.status().code(), kRpcMalformed);
  // One error object for the whole batch: a node that takes none (its answer), or a rate limit.
  auto refused = Batch([](const json&) {
    return FakeReply{
        200, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}})",
        false};
  });
  EXPECT_EQ(refused.status().code(), kRpcError);
  auto limited = Batch([](const json&) {
    return FakeReply{
        200, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"slow down"}})", false};
  });
  EXPECT_EQ(limited.status().code(), kRpcUnavailable);
  EXPECT_EQ(Batch([](const json&) {
              return FakeReply{429, "too many", false};
            })
                .status()
                .code(),
            kRpcUnavailable);
  EXPECT_EQ(Batch([](const json&) {
              return FakeReply{200, "", true};
            })
                .status()
                .code(),
            kRpcTimeout);
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

// A node that takes eth_sendRawTransaction alone and, unless `batches` is false, in batches: each
// transaction's hash is keccak256 of its bytes, as a node's would be.
FakeRpcServer::Handler Sender(bool batches) {
  auto one = [](const json& call) {
    Result<Bytes> raw = ParseHex(call["params"][0].get<std::string>());
    return ResultReply(call, Hex(Keccak256(*raw)));
  };
  return [one, batches](const json& request) {
    if (!request.is_array()) return one(request);
    if (!batches) {
      return FakeReply{
          200, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch"}})", false};
    }
    json answers = json::array();
    for (const json& call : request) answers.push_back(Envelope(one(call)));
    return FakeReply{200, answers.dump(), false};
  };
}

TEST(RpcChainParsingTest, TransactionsSentTogetherGoInBatchesOfAtMostTheCap) {
  FakeRpcServer server(Sender(true));
  RpcChain chain(server.endpoint(), kTimeoutMs);
  std::vector<Bytes> raws;
  for (uint8_t i = 0; i < kMaxRpcBatchCalls + 2; ++i) raws.push_back(Bytes{0x02, i});
  std::vector<Result<Hash32>> sent = chain.SendRawTransactions(raws);
  ASSERT_EQ(sent.size(), raws.size());
  for (size_t i = 0; i < raws.size(); ++i) {
    ASSERT_TRUE(sent[i].ok()) << i << sent[i].status().ToString();
    EXPECT_EQ(*sent[i], Keccak256(raws[i]));
  }
  EXPECT_EQ(server.Methods(), (std::vector<std::string>{"batch", "batch"}));
  // One transaction alone is a plain call.
  ASSERT_TRUE(chain.SendRawTransactions(std::span(raws).first(1))[0].ok());
  EXPECT_EQ(server.Methods().back(), "eth_sendRawTransaction");
}

TEST(RpcChainParsingTest, ANodeThatRefusesBatchesGetsTheTransactionsOneByOneFromThenOn) {
  // Refused with one error object, or answered with something that is no batch's answer.
  for (bool refuses : {true, false}) {
    SCOPED_TRACE(refuses ? "refuses" : "garbles");
    FakeRpcServer::Handler sender = Sender(!refuses);
    FakeRpcServer server([&](const json& request) {
      if (!refuses && request.is_array()) return FakeReply{200, R"({"jsonrpc":"2.0"})", false};
      return sender(request);
    });
    RpcChain chain(server.endpoint(), kTimeoutMs);
    const std::vector<Bytes> raws = {Bytes{0x02, 1}, Bytes{0x02, 2}};
    for (int round = 0; round < 2; ++round) {
      std::vector<Result<Hash32>> sent = chain.SendRawTransactions(raws);
      ASSERT_EQ(sent.size(), 2u);
      EXPECT_TRUE(sent[0].ok() && sent[1].ok()) << round;
    }
    EXPECT_EQ(server.Methods(),
              (std::vector<std::string>{"batch", "eth_sendRawTransaction", "eth_sendRawTransaction",
                                        "eth_sendRawTransaction", "eth_sendRawTransaction"}));
  }
}

TEST(RpcChainParsingTest, EachTransactionOfABatchIsReadAsItWouldBeAlone) {
  // The first already known, the second refused, the third answered with another's hash.
  FakeRpcServer server([](const json& request) {
    if (!request.is_array()) return ResultReply(request, nullptr);  // eth_getTransactionByHash
    json answers = json::array(
        {Envelope(ErrorReply(request[0], {{"code", -32000}, {"message", "already known"}})),
         Envelope(ErrorReply(request[1], {{"code", -32000}, {"message", "nonce too low"}})),
         Envelope(ResultReply(request[2], Hex(Keccak256("other"))))});
    return FakeReply{200, answers.dump(), false};
  });
  RpcChain chain(server.endpoint(), kTimeoutMs);
  std::vector<Result<Hash32>> sent =
      chain.SendRawTransactions(std::vector<Bytes>{Bytes{1}, Bytes{2}, Bytes{3}});
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].status().code(), kTxAlreadyKnown);
  EXPECT_EQ(sent[1].status().code(), kRpcError);
  EXPECT_EQ(sent[2].status().code(), kRpcMalformed);
}

}  // namespace
}  // namespace agentpay::chain
