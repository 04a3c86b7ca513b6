// The devnet's JSON-RPC read endpoint: every method against a devnet with real settlements mined
// by a hand-moved clock, every JSON-RPC error, the limits, the HTTP wrapper, and RpcChain (what
// `agentpay pay reconcile` uses) talking to it over a real socket.
#include "chain/devnet_rpc.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/rpc_chain.h"
#include "chain/settlement_tx.h"
#include "http/server.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;
using test_util::AddressFrom;
using test_util::KeyNumber;
using test_util::NonceNumber;

constexpr uint64_t kChainId = 84532;
constexpr char kTokenHex[] = "0x036cbd53842c5426634e7929541ec2318f3dcf7e";
constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr int64_t kMineDelayMs = 2000;

class ManualClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_ += ms; }
  int64_t NowS() const { return now_ms_.load() / 1000; }

 private:
  std::atomic<int64_t> now_ms_ = kStartMs;
};

std::string Topic(const Address& address) {
  Hash32 word{};
  std::copy(address.bytes.begin(), address.bytes.end(), word.begin() + 12);
  return Hex(word);
}

class DevnetRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DevnetConfig config;
    config.chain_id = kChainId;
    config.token = token_;
    config.token_name = "USDC";
    config.token_version = "2";
    config.mine_delay_ms = kMineDelayMs;
    auto opened = Devnet::Open(config, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
    ASSERT_TRUE(devnet_->Mint(payer_, U256(1'000'000)).ok());
  }

  TransferAuthorization Authorization(uint64_t value, uint32_t nonce_number) {
    return {payer_,
            seller_,
            U256(value),
            U256(0),
            U256(clock_.NowS() + 600),
            NonceNumber(nonce_number)};
  }

  SignedTransaction Relay(const TransferAuthorization& authorization) {
    const Hash32 domain = DomainSeparator("USDC", "2", kChainId, token_);
    Result<Signature> signature = SignDigest(Eip3009Digest(domain, authorization), payer_key_);
    EXPECT_TRUE(signature.ok());
    Result<SignedTransaction> transaction = BuildTransferWithAuthorizationTx(
        authorization, *signature, token_, kChainId, *devnet_->PendingNonce(relayer_),
        *devnet_->Fees(), 120'000, relayer_key_);
    EXPECT_TRUE(transaction.ok()) << transaction.status().ToString();
    return *transaction;
  }

  Hash32 Send(const TransferAuthorization& authorization) {
    const SignedTransaction transaction = Relay(authorization);
    Result<Hash32> hash = devnet_->SendRawTransaction(transaction.raw);
    EXPECT_TRUE(hash.ok()) << hash.status().ToString();
    return transaction.hash;
  }

  // One settlement of `value` with nonce `nonce_number`, mined in a block of its own.
  Hash32 Settle(uint64_t value, uint32_t nonce_number) {
    const Hash32 hash = Send(Authorization(value, nonce_number));
    clock_.Advance(kMineDelayMs);
    EXPECT_TRUE(devnet_->BlockNumber().ok());
    return hash;
  }

  json Raw(const std::string& body) {
    std::optional<std::string> text = AnswerDevnetRpc(body, *devnet_);
    EXPECT_TRUE(text.has_value()) << body;
    return text ? json::parse(*text) : json();
  }

  json Answer(const std::string& method, json params = json::array()) {
    return Raw(json{{"jsonrpc", "2.0"}, {"id", 7}, {"method", method}, {"params", params}}.dump());
  }

  json ResultOf(const std::string& method, json params = json::array()) {
    json answer = Answer(method, std::move(params));
    EXPECT_FALSE(answer.contains("error")) << method << ": " << answer.dump();
    EXPECT_EQ(answer["id"], 7);
    EXPECT_EQ(answer["jsonrpc"], "2.0");
    return answer["result"];
  }

  // The error code of the answer, which must be an error naming `part` in its message.
  int ErrorOf(const json& answer, std::string_view part = "") {
    EXPECT_TRUE(answer.contains("error")) << answer.dump();
    EXPECT_FALSE(answer.contains("result")) << answer.dump();
    if (!answer.contains("error")) return 0;
    const std::string message = answer["error"]["message"].get<std::string>();
    EXPECT_NE(message.find(part), std::string::npos) << message;
    return answer["error"]["code"].get<int>();
  }

  int MethodError(const std::string& method, json params, std::string_view part = "") {
    return ErrorOf(Answer(method, std::move(params)), part);
  }

  json CallData(const Bytes& data, json block = "latest") {
    return json::array({{{"to", kTokenHex}, {"data", Hex(data)}}, block});
  }

  ManualClock clock_;
  std::unique_ptr<Devnet> devnet_;
  const Address token_ = AddressFrom(kTokenHex);
  const PrivateKey payer_key_ = KeyNumber(1);
  const PrivateKey relayer_key_ = KeyNumber(2);
  const Address payer_ = AddressOf(payer_key_);
  const Address relayer_ = AddressOf(relayer_key_);
  const Address seller_ = AddressFrom("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
  const std::string transfer_topic_ = Hex(TransferEventTopic());
  const std::string used_topic_ =
      Hex(Keccak256(std::string_view("AuthorizationUsed(address,bytes32)")));
};

TEST_F(DevnetRpcTest, ChainIdNetVersionAndFees) {
  EXPECT_EQ(ResultOf("eth_chainId"), "0x14a34");
  EXPECT_EQ(ResultOf("net_version"), "84532");
  EXPECT_EQ(ResultOf("eth_maxPriorityFeePerGas"), "0xf4240");                // 0.001 gwei
  EXPECT_EQ(ResultOf("eth_gasPrice"), U256(1'001'000'000).ToHexQuantity());  // base + tip
  EXPECT_EQ(MethodError("eth_chainId", json::array({1}), "too many arguments"), kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, BlockNumberAndBlocksByNumber) {
  EXPECT_EQ(ResultOf("eth_blockNumber"), "0x0");
  const json genesis = ResultOf("eth_getBlockByNumber", {"latest", false});
  EXPECT_EQ(genesis["number"], "0x0");
  EXPECT_EQ(genesis["parentHash"], Hex(Hash32{}));
  EXPECT_EQ(genesis["timestamp"], U256(kStartMs / 1000).ToHexQuantity());
  EXPECT_EQ(genesis["transactions"], json::array());
  EXPECT_EQ(genesis["logsBloom"], Hex(std::array<uint8_t, 256>{}));

  const Hash32 hash = Settle(10'000, 1);
  EXPECT_EQ(ResultOf("eth_blockNumber"), "0x1");
  const json latest = ResultOf("eth_getBlockByNumber", {"latest", false});
  EXPECT_EQ(latest["number"], "0x1");
  EXPECT_EQ(latest["parentHash"], genesis["hash"]);
  EXPECT_EQ(latest["timestamp"], U256(clock_.NowS()).ToHexQuantity());
  EXPECT_EQ(latest["transactions"], json::array({Hex(hash)}));
  EXPECT_EQ(latest["gasUsed"], U256(kDevnetSettlementGas).ToHexQuantity());
  EXPECT_EQ(latest["baseFeePerGas"], "0x3b9aca00");
  EXPECT_NE(latest["logsBloom"], genesis["logsBloom"]);
  Result<std::optional<Receipt>> receipt = devnet_->GetReceipt(hash);
  ASSERT_TRUE(receipt.ok() && receipt->has_value());
  EXPECT_EQ(latest["hash"], Hex((*receipt)->block_hash));
  EXPECT_EQ(ResultOf("eth_getBlockByNumber", {"0x1"}), latest);  // full flag optional
  EXPECT_EQ(ResultOf("eth_getBlockByNumber", {"finalized", false}), latest);
  EXPECT_EQ(ResultOf("eth_getBlockByNumber", {"earliest", false}), genesis);
  EXPECT_EQ(ResultOf("eth_getBlockByNumber", {"0x0", false}), genesis);
  EXPECT_TRUE(ResultOf("eth_getBlockByNumber", {"0x2", false}).is_null());  // not mined yet

  const json full = ResultOf("eth_getBlockByNumber", {"0x1", true});
  ASSERT_EQ(full["transactions"].size(), 1u);
  EXPECT_EQ(full["transactions"][0]["hash"], Hex(hash));
  EXPECT_EQ(full["transactions"][0]["from"], ToLowerHex(relayer_));
  EXPECT_EQ(full["transactions"][0]["blockNumber"], "0x1");

  EXPECT_EQ(MethodError("eth_getBlockByNumber", {"pending", false}, "pending"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getBlockByNumber", {"newest", false}, "newest"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getBlockByNumber", {1, false}), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getBlockByNumber", {"latest", "yes"}), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getBlockByNumber", json::array(), "missing value"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getBlockByNumber", {"latest", false, 1}), kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, EthCallReadsTheTokenAtTheLatestBlock) {
  Settle(10'000, 1);
  EXPECT_EQ(ResultOf("eth_call", CallData(EncodeBalanceOf(payer_))),
            Hex(U256(990'000).ToBigEndian()));
  EXPECT_EQ(ResultOf("eth_call", CallData(EncodeBalanceOf(seller_))),
            Hex(U256(10'000).ToBigEndian()));
  EXPECT_EQ(ResultOf("eth_call", CallData(EncodeAuthorizationState(payer_, NonceNumber(1)))),
            Hex(U256(1).ToBigEndian()));
  EXPECT_EQ(ResultOf("eth_call", CallData(EncodeAuthorizationState(payer_, NonceNumber(2)))),
            Hex(U256(0).ToBigEndian()));
  const Selector name = FunctionSelector("name()");
  const json name_answer = ResultOf("eth_call", CallData(Bytes(name.begin(), name.end())));
  EXPECT_NE(name_answer.get<std::string>().find("55534443"), std::string::npos);  // "USDC"
  // "input" instead of "data", the block omitted, the latest block by number: all the same.
  json by_input = {{"to", kTokenHex}, {"input", Hex(EncodeBalanceOf(seller_))}};
  EXPECT_EQ(ResultOf("eth_call", json::array({by_input})), Hex(U256(10'000).ToBigEndian()));
  EXPECT_EQ(ResultOf("eth_call", CallData(EncodeBalanceOf(seller_), "0x1")),
            Hex(U256(10'000).ToBigEndian()));
  // An address without code answers empty data, as on any node.
  json elsewhere = {{"to", ToLowerHex(seller_)}, {"data", "0x"}};
  EXPECT_EQ(ResultOf("eth_call", json::array({elsewhere, "latest"})), "0x");
}

TEST_F(DevnetRpcTest, EthCallErrors) {
  Settle(10'000, 1);
  // A revert is code 3 with Solidity's Error(string) data, as geth answers.
  const json answer = Answer("eth_call", CallData(Bytes{}));  // no function: reverts, no reason
  EXPECT_EQ(ErrorOf(answer, "execution reverted"), kRpcExecutionReverted);
  EXPECT_EQ(answer["error"]["data"], "0x");
  TransferAuthorization used = Authorization(10'000, 1);
  const Hash32 domain = DomainSeparator("USDC", "2", kChainId, token_);
  const Bytes settle = EncodeTransferWithAuthorizationVrs(
      used, *SignDigest(Eip3009Digest(domain, used), payer_key_));
  const json reverted = Answer("eth_call", CallData(settle));
  EXPECT_EQ(ErrorOf(reverted, "FiatTokenV2: authorization is used or canceled"),
            kRpcExecutionReverted);
  EXPECT_EQ(DecodeRevertReason(*ParseHex(reverted["error"]["data"].get<std::string>())),
            "FiatTokenV2: authorization is used or canceled");

  EXPECT_EQ(MethodError("eth_call", CallData(EncodeBalanceOf(payer_), "0x0"), "historical state"),
            kRpcServerError);
  EXPECT_EQ(MethodError("eth_call", CallData(EncodeBalanceOf(payer_), "pending"), "pending"),
            kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call", json::array({{{"data", "0x"}}}), "call.to"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call", json::array({{{"to", "0x12"}}}), "call.to"), kRpcInvalidParams);
  EXPECT_EQ(
      MethodError("eth_call", json::array({{{"to", kTokenHex}, {"data", "0xabc"}}}), "call.data"),
      kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call",
                        json::array({{{"to", kTokenHex}, {"data", "0x01"}, {"input", "0x02"}}}),
                        "differ"),
            kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call", json::array({"0x"}), "object"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call", json::array(), "missing value"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_call", {{{"to", kTokenHex}}, "latest", json::object()},
                        "too many arguments"),
            kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, CodeOfAccountsAndOfTheBuiltInToken) {
  EXPECT_EQ(ResultOf("eth_getCode", {ToLowerHex(payer_), "latest"}), "0x");
  EXPECT_EQ(ResultOf("eth_getCode", {ToLowerHex(seller_)}), "0x");
  EXPECT_EQ(MethodError("eth_getCode", {kTokenHex, "latest"}, "no EVM bytecode"), kRpcServerError);
  EXPECT_EQ(MethodError("eth_getCode", {"0x12", "latest"}, "address"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getCode", {ToLowerHex(payer_), "later"}, "later"), kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, EstimateGasOfASettlement) {
  TransferAuthorization authorization = Authorization(10'000, 1);
  const Hash32 domain = DomainSeparator("USDC", "2", kChainId, token_);
  const Bytes settle = EncodeTransferWithAuthorizationVrs(
      authorization, *SignDigest(Eip3009Digest(domain, authorization), payer_key_));
  json call = {{"from", ToLowerHex(relayer_)}, {"to", kTokenHex}, {"data", Hex(settle)}};
  EXPECT_EQ(ResultOf("eth_estimateGas", json::array({call})),
            U256(kDevnetSettlementGas).ToHexQuantity());
  Settle(10'000, 1);
  EXPECT_EQ(MethodError("eth_estimateGas", json::array({call}), "authorization is used"),
            kRpcExecutionReverted);
}

TEST_F(DevnetRpcTest, ReceiptsPendingMinedRevertedAndUnknown) {
  const Hash32 first = Send(Authorization(10'000, 1));
  EXPECT_TRUE(ResultOf("eth_getTransactionReceipt", {Hex(first)}).is_null());  // pending
  const json pending = ResultOf("eth_getTransactionByHash", {Hex(first)});
  EXPECT_TRUE(pending["blockNumber"].is_null());
  EXPECT_TRUE(pending["blockHash"].is_null());
  EXPECT_EQ(pending["from"], ToLowerHex(relayer_));
  EXPECT_EQ(pending["nonce"], "0x0");
  // A second transaction in the same block that reverts (the same authorization again).
  const Hash32 second = Send(Authorization(10'000, 1));
  clock_.Advance(kMineDelayMs);

  const json receipt = ResultOf("eth_getTransactionReceipt", {Hex(first)});
  EXPECT_EQ(receipt["transactionHash"], Hex(first));
  EXPECT_EQ(receipt["status"], "0x1");
  EXPECT_EQ(receipt["blockNumber"], "0x1");
  EXPECT_EQ(receipt["transactionIndex"], "0x0");
  EXPECT_EQ(receipt["from"], ToLowerHex(relayer_));
  EXPECT_EQ(receipt["to"], kTokenHex);
  EXPECT_EQ(receipt["gasUsed"], U256(kDevnetSettlementGas).ToHexQuantity());
  EXPECT_EQ(receipt["effectiveGasPrice"], U256(1'001'000'000).ToHexQuantity());
  ASSERT_EQ(receipt["logs"].size(), 2u);
  EXPECT_EQ(receipt["logs"][0]["topics"][0], used_topic_);
  EXPECT_EQ(receipt["logs"][0]["topics"][1], Topic(payer_));
  EXPECT_EQ(receipt["logs"][0]["topics"][2], Hex(NonceNumber(1)));
  EXPECT_EQ(receipt["logs"][0]["logIndex"], "0x0");
  EXPECT_EQ(receipt["logs"][1]["topics"][0], transfer_topic_);
  EXPECT_EQ(receipt["logs"][1]["topics"][2], Topic(seller_));
  EXPECT_EQ(receipt["logs"][1]["data"], Hex(U256(10'000).ToBigEndian()));
  EXPECT_EQ(receipt["logs"][1]["logIndex"], "0x1");
  EXPECT_EQ(receipt["logs"][1]["transactionHash"], Hex(first));

  const json reverted = ResultOf("eth_getTransactionReceipt", {Hex(second)});
  EXPECT_EQ(reverted["status"], "0x0");
  EXPECT_EQ(reverted["transactionIndex"], "0x1");
  EXPECT_EQ(reverted["logs"], json::array());
  EXPECT_EQ(reverted["cumulativeGasUsed"], U256(2 * kDevnetSettlementGas).ToHexQuantity());
  EXPECT_EQ(ResultOf("eth_getTransactionByHash", {Hex(second)})["transactionIndex"], "0x1");

  EXPECT_TRUE(ResultOf("eth_getTransactionReceipt", {Hex(Hash32{})}).is_null());
  EXPECT_TRUE(ResultOf("eth_getTransactionByHash", {Hex(Hash32{})}).is_null());
  EXPECT_EQ(MethodError("eth_getTransactionReceipt", {"0x1234"}, "hash"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getTransactionReceipt", json::array()), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getTransactionByHash", {42}, "hash"), kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, TransactionCountLatestAndPending) {
  Settle(10'000, 1);
  Send(Authorization(10'000, 2));  // pending
  const std::string relayer = ToLowerHex(relayer_);
  EXPECT_EQ(ResultOf("eth_getTransactionCount", {relayer, "latest"}), "0x1");
  EXPECT_EQ(ResultOf("eth_getTransactionCount", {relayer}), "0x1");
  EXPECT_EQ(ResultOf("eth_getTransactionCount", {relayer, "pending"}), "0x2");
  EXPECT_EQ(ResultOf("eth_getTransactionCount", {ToLowerHex(payer_), "latest"}), "0x0");
  EXPECT_EQ(MethodError("eth_getTransactionCount", {relayer, "0x0"}, "historical"),
            kRpcServerError);
  EXPECT_EQ(MethodError("eth_getTransactionCount", {"0xnope", "latest"}, "address"),
            kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, GetLogsFiltersByRangeAddressAndTopics) {
  const Hash32 first = Settle(10'000, 1);
  const Hash32 second = Settle(20'000, 2);
  // What `agentpay pay reconcile` asks: the AuthorizationUsed log of (payer, nonce).
  json filter = {{"address", kTokenHex},
                 {"fromBlock", "0x0"},
                 {"toBlock", "latest"},
                 {"topics", {used_topic_, Topic(payer_), Hex(NonceNumber(2))}}};
  json logs = ResultOf("eth_getLogs", json::array({filter}));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["transactionHash"], Hex(second));
  EXPECT_EQ(logs[0]["blockNumber"], "0x2");
  EXPECT_EQ(logs[0]["logIndex"], "0x0");
  EXPECT_EQ(logs[0]["removed"], false);

  json transfers = {{"fromBlock", "0x0"}, {"topics", {transfer_topic_}}};
  logs = ResultOf("eth_getLogs", json::array({transfers}));  // toBlock omitted: the latest
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0]["transactionHash"], Hex(first));
  EXPECT_EQ(logs[1]["data"], Hex(U256(20'000).ToBigEndian()));
  // Alternatives at one position, null as a wildcard, a list of addresses.
  json either = {{"fromBlock", "0x1"},
                 {"toBlock", "0x2"},
                 {"address", {kTokenHex, ToLowerHex(seller_)}},
                 {"topics", {{used_topic_, transfer_topic_}, nullptr, nullptr}}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({either})).size(), 4u);
  json only_block_two = {{"fromBlock", "0x2"}, {"toBlock", "0x2"}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({only_block_two})).size(), 2u);
  json other_emitter = {{"fromBlock", "earliest"}, {"address", ToLowerHex(seller_)}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({other_emitter})).size(), 0u);
  json too_many_positions = {{"fromBlock", "0x0"},
                             {"topics", {transfer_topic_, nullptr, nullptr, nullptr}}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({too_many_positions})).size(), 0u);
  json future = {{"fromBlock", "0x9"}, {"toBlock", "0x10"}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({future})), json::array());
}

TEST_F(DevnetRpcTest, GetLogsErrors) {
  Settle(10'000, 1);
  auto error = [&](json filter, std::string_view part = "") {
    return MethodError("eth_getLogs", json::array({std::move(filter)}), part);
  };
  EXPECT_EQ(error({{"fromBlock", "0x2"}, {"toBlock", "0x1"}}, "after toBlock"), kRpcInvalidParams);
  EXPECT_EQ(error({{"fromBlock", "soon"}}, "fromBlock"), kRpcInvalidParams);
  EXPECT_EQ(error({{"blockHash", Hex(Hash32{})}}, "blockHash"), kRpcInvalidParams);
  EXPECT_EQ(error({{"address", "0x12"}}, "filter.address"), kRpcInvalidParams);
  EXPECT_EQ(error({{"topics", "0x12"}}, "filter.topics"), kRpcInvalidParams);
  EXPECT_EQ(error({{"topics", {"0x12"}}}, "filter.topics"), kRpcInvalidParams);
  EXPECT_EQ(error({{"topics", {nullptr, nullptr, nullptr, nullptr, nullptr}}}), kRpcInvalidParams);
  EXPECT_EQ(error({{"address", json(std::vector<std::string>(101, std::string(kTokenHex)))}},
                  "more than 100"),
            kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getLogs", json::array({"latest"}), "object"), kRpcInvalidParams);
  EXPECT_EQ(MethodError("eth_getLogs", json::array(), "missing value"), kRpcInvalidParams);
}

TEST_F(DevnetRpcTest, GetLogsBlockRangeIsBounded) {
  for (uint64_t i = 0; i < kDevnetMaxLogBlockRange; ++i) ASSERT_TRUE(devnet_->Mine().ok());
  // Blocks 0 to 100000 are 100001 blocks: one too many; 1 to 100000 is the most one call scans.
  json all = {{"fromBlock", "0x0"}, {"toBlock", "latest"}};
  EXPECT_EQ(MethodError("eth_getLogs", json::array({all}), "at most 100000"), kRpcLimitExceeded);
  json most = {{"fromBlock", "0x1"}, {"toBlock", "latest"}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({most})), json::array());
  // toBlock past the latest block is capped at it before the range is judged.
  json capped = {{"fromBlock", "0x1"}, {"toBlock", "0xffffffff"}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({capped})), json::array());
}

TEST_F(DevnetRpcTest, GetLogsResultCountAndBatchAnswerSizeAreBounded) {
  // 2501 settlements in one block: 5002 logs, 2501 of them Transfer.
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  for (uint32_t n = 0; n < 2501; ++n) Send(Authorization(1, 100 + n));
  ASSERT_TRUE(devnet_->Mine().ok());
  json all = {{"fromBlock", "0x0"}, {"toBlock", "latest"}};
  EXPECT_EQ(MethodError("eth_getLogs", json::array({all}), "more than 5000"), kRpcLimitExceeded);
  json transfers = {{"fromBlock", "0x0"}, {"topics", {transfer_topic_}}, {"toBlock", "latest"}};
  EXPECT_EQ(ResultOf("eth_getLogs", json::array({transfers})).size(), 2501u);

  json batch = json::array();
  for (int id = 0; id < 8; ++id) {
    batch.push_back({{"jsonrpc", "2.0"},
                     {"id", id},
                     {"method", "eth_getLogs"},
                     {"params", json::array({transfers})}});
  }
  // Notifications past the limit are not run and, like any notification, get no answer.
  batch.push_back({{"jsonrpc", "2.0"}, {"method", "eth_chainId"}});
  const std::string text = *AnswerDevnetRpc(batch.dump(), *devnet_);
  const json answers = json::parse(text);
  ASSERT_EQ(answers.size(), 8u);
  // Each answer is above a megabyte: calls run until the answers pass 4 MiB, the rest are refused.
  const size_t one = answers[0].dump().size();
  ASSERT_GT(one, 1'000'000u);
  const size_t answered = (kDevnetRpcMaxResponseBytes + one) / one;  // the first k·one > limit
  ASSERT_LT(answered, 8u);
  for (size_t id = 0; id < 8; ++id) {
    EXPECT_EQ(answers[id]["id"], id);
    if (id < answered) {
      EXPECT_EQ(answers[id]["result"].size(), 2501u) << id;
    } else {
      EXPECT_EQ(ErrorOf(answers[id], "send the rest"), kRpcLimitExceeded) << id;
    }
  }
  EXPECT_LT(text.size(), kDevnetRpcMaxResponseBytes + one + 8 * 200);
}

TEST_F(DevnetRpcTest, WritesAreRefusedAndChangeNothing) {
  const SignedTransaction transaction = Relay(Authorization(10'000, 1));
  EXPECT_EQ(MethodError("eth_sendRawTransaction", {Hex(transaction.raw)}, "only reads"),
            kRpcMethodNotSupported);
  for (const char* method : {"eth_sendTransaction", "anvil_setAutomine", "evm_mine",
                             "eth_signTypedData_v4", "personal_sign"}) {
    EXPECT_EQ(MethodError(method, json::array(), method), kRpcMethodNotSupported) << method;
  }
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
  EXPECT_EQ(*devnet_->BlockNumber(), 0u);
  EXPECT_FALSE(devnet_->Transaction(transaction.hash)->has_value());
}

TEST_F(DevnetRpcTest, EnvelopeErrors) {
  auto code = [&](const std::string& body) { return ErrorOf(Raw(body)); };
  EXPECT_EQ(code("{"), kRpcParseError);
  EXPECT_EQ(Raw("{")["id"], nullptr);
  EXPECT_EQ(code(""), kRpcParseError);
  EXPECT_EQ(code(std::string(17, '[') + std::string(17, ']')), kRpcParseError);
  EXPECT_EQ(code("1"), kRpcInvalidRequest);
  EXPECT_EQ(code(R"({"id":1,"method":"eth_chainId"})"), kRpcInvalidRequest);  // no jsonrpc
  EXPECT_EQ(code(R"({"jsonrpc":"1.0","id":1,"method":"eth_chainId"})"), kRpcInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"1.0","id":"x","method":"eth_chainId"})")["id"], "x");
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"method":5})"), kRpcInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"})"), kRpcInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"})")["id"], nullptr);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":"x"})"),
            kRpcInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":{"a":1}})"),
            kRpcInvalidParams);
  // Not a call even without an id: answered, with id null (a notification is a valid call).
  const json no_id = Raw(R"({"jsonrpc":"2.0","method":"eth_chainId","params":"bar"})");
  EXPECT_EQ(ErrorOf(no_id), kRpcInvalidRequest);
  EXPECT_EQ(no_id["id"], nullptr);
  // An id the answer could not echo exactly (fractional, or past 64 bits) is refused.
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1.5,"method":"eth_chainId"})"), kRpcInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":12345678901234567890123,"method":"eth_chainId"})"),
            kRpcInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":-9223372036854775807,"method":"eth_chainId"})")["id"],
            -9223372036854775807LL);
  const json unknown = Raw(R"({"jsonrpc":"2.0","id":1,"method":"eth_frobnicate","params":[]})");
  EXPECT_EQ(ErrorOf(unknown, "eth_frobnicate"), kRpcMethodNotFound);
  EXPECT_EQ(unknown["id"], 1);
  // params may be omitted or null; a string id comes back as it was sent.
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":"a-1","method":"eth_chainId"})")["result"], "0x14a34");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":null,"method":"eth_chainId","params":null})")["id"],
            nullptr);
}

TEST_F(DevnetRpcTest, BatchesAndNotifications) {
  const json answers = Raw(
      R"([{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},
          {"jsonrpc":"2.0","method":"eth_blockNumber"},
          {"jsonrpc":"2.0","id":"b","method":"nope"},
          5,
          {"jsonrpc":"2.0","id":3,"method":"eth_blockNumber","params":[]}])");
  ASSERT_EQ(answers.size(), 4u);  // the notification gets no answer
  EXPECT_EQ(answers[0]["result"], "0x14a34");
  EXPECT_EQ(answers[1]["id"], "b");
  EXPECT_EQ(ErrorOf(answers[1], "nope"), kRpcMethodNotFound);
  EXPECT_EQ(ErrorOf(answers[2]), kRpcInvalidRequest);
  EXPECT_EQ(answers[3]["result"], "0x0");

  EXPECT_FALSE(AnswerDevnetRpc(R"({"jsonrpc":"2.0","method":"eth_chainId"})", *devnet_));
  EXPECT_FALSE(AnswerDevnetRpc(R"([{"jsonrpc":"2.0","method":"eth_chainId"}])", *devnet_));
  EXPECT_EQ(ErrorOf(Raw("[]"), "empty batch"), kRpcInvalidRequest);

  json full = json::array();
  for (size_t id = 0; id < kDevnetRpcMaxBatch; ++id) {
    full.push_back({{"jsonrpc", "2.0"}, {"id", id}, {"method", "eth_chainId"}});
  }
  EXPECT_EQ(Raw(full.dump()).size(), kDevnetRpcMaxBatch);
  full.push_back({{"jsonrpc", "2.0"}, {"id", 100}, {"method", "eth_chainId"}});
  const json refused = Raw(full.dump());
  ASSERT_TRUE(refused.is_object());
  EXPECT_EQ(ErrorOf(refused, "at most 100"), kRpcInvalidRequest);
}

TEST_F(DevnetRpcTest, AnUnavailableChainIsAServerError) {
  devnet_->SetUnavailable(true);
  EXPECT_EQ(MethodError("eth_blockNumber", json::array()), kRpcServerError);
  EXPECT_EQ(MethodError("eth_call", CallData(EncodeBalanceOf(payer_))), kRpcServerError);
  EXPECT_EQ(MethodError("eth_getLogs", json::array({json::object()})), kRpcServerError);
  devnet_->SetUnavailable(false);
}

TEST_F(DevnetRpcTest, HttpWrapper) {
  HttpRequest request;
  request.method = "POST";
  request.target = "/devnet/rpcs";
  EXPECT_FALSE(HandleDevnetRpc(request, *devnet_).has_value());
  request.target = "/devnet/rpc?x=1";
  request.body = R"({"jsonrpc":"2.0","id":1,"method":"eth_chainId"})";
  std::optional<HttpResponse> answer = HandleDevnetRpc(request, *devnet_);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->Header("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(answer->body)["result"], "0x14a34");

  request.body = R"({"jsonrpc":"2.0","method":"eth_chainId"})";
  EXPECT_EQ(HandleDevnetRpc(request, *devnet_)->status, 204);
  request.body = std::string(kDevnetRpcMaxBodyBytes + 1, ' ');
  answer = HandleDevnetRpc(request, *devnet_);
  EXPECT_EQ(answer->status, 413);
  EXPECT_EQ(json::parse(answer->body)["error"]["code"], kRpcInvalidRequest);
  request.method = "GET";
  request.body.clear();
  answer = HandleDevnetRpc(request, *devnet_);
  EXPECT_EQ(answer->status, 405);
  EXPECT_EQ(answer->Header("Allow"), "POST");
}

// RpcChain is what `agentpay pay reconcile` and `pay --chain-rpc` read the chain with: every
// method of it works against the endpoint over a real socket, and sending is refused.
TEST_F(DevnetRpcTest, RpcChainReadsTheDevnetOverHttp) {
  auto server = HttpServer::Start("127.0.0.1", 0, ServerLimits{}, [this](const HttpRequest& r) {
    std::optional<HttpResponse> answer = HandleDevnetRpc(r, *devnet_);
    return answer ? *answer : ProblemResponse(404, ProblemCode::kNotFound, "no such path");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto endpoint =
      ParseHttpUrl("http://127.0.0.1:" + std::to_string((*server)->port()) + "/devnet/rpc");
  ASSERT_TRUE(endpoint.ok());
  RpcChain chain(*endpoint, 5000);

  const Hash32 settled = Settle(10'000, 1);
  const SignedTransaction pending = Relay(Authorization(10'000, 2));
  ASSERT_TRUE(devnet_->SendRawTransaction(pending.raw).ok());

  EXPECT_EQ(*chain.ChainId(), kChainId);
  EXPECT_EQ(*chain.BlockNumber(), 1u);
  EXPECT_EQ(*chain.LatestBlockTimestamp(), clock_.NowS());
  EXPECT_TRUE(*chain.AuthorizationState(token_, payer_, NonceNumber(1)));
  EXPECT_FALSE(*chain.AuthorizationState(token_, payer_, NonceNumber(2)));
  EXPECT_EQ(*chain.BalanceOf(token_, seller_), U256(10'000));
  EXPECT_EQ(*chain.PendingNonce(relayer_), 2u);
  Result<FeeData> fees = chain.Fees();
  ASSERT_TRUE(fees.ok()) << fees.status().ToString();
  EXPECT_EQ(*fees, *devnet_->Fees());
  Result<std::optional<Receipt>> receipt = chain.GetReceipt(settled);
  ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
  EXPECT_EQ(**receipt, **devnet_->GetReceipt(settled));
  EXPECT_FALSE(chain.GetReceipt(pending.hash)->has_value());
  Result<std::optional<TxInfo>> info = chain.GetTransaction(pending.hash);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(**info, **devnet_->GetTransaction(pending.hash));
  EXPECT_EQ(**chain.GetTransaction(settled), **devnet_->GetTransaction(settled));

  const TransferAuthorization third = Authorization(1, 3);
  const Hash32 domain = DomainSeparator("USDC", "2", kChainId, token_);
  const Bytes settle = EncodeTransferWithAuthorizationVrs(
      third, *SignDigest(Eip3009Digest(domain, third), payer_key_));
  EXPECT_EQ(*chain.EstimateGas(relayer_, token_, settle), kDevnetSettlementGas);

  const SignedTransaction refused = Relay(Authorization(1, 4));
  Result<Hash32> sent = chain.SendRawTransaction(refused.raw);
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.status().code(), kRpcError);
  EXPECT_FALSE(devnet_->Transaction(refused.hash)->has_value());
  (*server)->Stop();
}

}  // namespace
}  // namespace agentpay::chain
