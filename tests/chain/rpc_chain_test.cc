// RpcChain against a real Anvil: a buyer's EIP-3009 authorization settled by the relayer's own
// EIP-1559 transaction, its replay refused, manual mining, a dropped and re-broadcast transaction,
// and the transport failures that must stay distinct (hung node: rpc_timeout; none: unreachable).
#include "chain/rpc_chain.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/multicall.h"
#include "chain/settlement_tx.h"
#include "rpc_anvil_process.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

#define ASSERT_OK(result) ASSERT_TRUE((result).ok()) << (result).status().ToString()

constexpr uint64_t kChainId = 84532;
constexpr int64_t kTimeoutMs = 5000;
constexpr int64_t kShortTimeoutMs = 400;
constexpr uint64_t kMinted = 1'000'000'000;  // 1000 USDC (6 decimals)
constexpr uint64_t kDeployGas = 3'000'000;
constexpr std::string_view kRelayerKey =  // Anvil account #0: deploys, mints, relays
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
constexpr std::string_view kBuyerKey =  // Anvil account #1
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
constexpr std::string_view kSellerAddress = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";  // #2
constexpr std::string_view kUsedOrCanceled = "authorization is used or canceled";

PrivateKey KeyOf(std::string_view text) {
  Result<PrivateKey> key = ParsePrivateKey(text);
  AGENTPAY_CHECK(key.ok());
  return *key;
}

Address AddressFromText(std::string_view text) {
  Result<Address> address = ParseAddress(text);
  AGENTPAY_CHECK(address.ok());
  return *address;
}

void AppendWord(Bytes& out, const U256& value) {
  const auto word = value.ToBigEndian();
  out.insert(out.end(), word.begin(), word.end());
}

// ABI encoding of a tuple of strings (TestUSDC's constructor): offsets, then length + padded data.
Bytes EncodeStrings(const std::vector<std::string>& values) {
  Bytes head;
  Bytes tail;
  for (const std::string& value : values) {
    AppendWord(head, U256(32 * values.size() + tail.size()));
    AppendWord(tail, U256(value.size()));
    tail.insert(tail.end(), value.begin(), value.end());
    tail.insert(tail.end(), (32 - value.size() % 32) % 32, 0);
  }
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

Bytes EncodeMint(const Address& to, const U256& amount) {
  const Selector selector = FunctionSelector("mint(address,uint256)");
  Bytes data(selector.begin(), selector.end());
  data.insert(data.end(), 12, 0);
  data.insert(data.end(), to.bytes.begin(), to.bytes.end());
  AppendWord(data, amount);
  return data;
}

// The hex string `field` of a compiled contract's artifact (tests/chain_env/artifacts).
Result<std::string> ArtifactField(const char* path, const char* field) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  json artifact = json::parse(text.str(), nullptr, false);
  if (artifact.is_discarded() || !artifact.contains(field) || !artifact[field].is_string()) {
    return Status::Error(ErrorCode::kIoError, std::string("cannot read ") + field + " of " + path);
  }
  return artifact[field].get<std::string>();
}

Result<Bytes> LoadCreationCode() {
  auto code = ArtifactField(AGENTPAY_TEST_USDC_ARTIFACT, "bytecode");
  if (!code.ok()) return code.status();
  return ParseHex(*code);
}

class AnvilChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status started = anvil_.Start(AGENTPAY_ANVIL_BIN, kChainId);
    ASSERT_TRUE(started.ok()) << started.ToString();
    chain_ = std::make_unique<RpcChain>(anvil_.endpoint(), kTimeoutMs);
    ASSERT_NO_FATAL_FAILURE(DeployToken());
    ASSERT_NO_FATAL_FAILURE(Mint());
  }
  void TearDown() override { anvil_.Stop(); }

  // Signs an EIP-1559 transaction from `key` with the node's next nonce and current fees.
  void SignTx(const PrivateKey& key, std::optional<Address> to, Bytes data, uint64_t gas,
              SignedTransaction* out) {
    Result<uint64_t> nonce = chain_->PendingNonce(chain::AddressOf(key));
    Result<FeeData> fees = chain_->Fees();
    ASSERT_OK(nonce);
    ASSERT_OK(fees);
    Eip1559Transaction transaction;
    transaction.chain_id = kChainId;
    transaction.nonce = *nonce;
    transaction.max_priority_fee_per_gas = fees->max_priority_fee_per_gas;
    transaction.max_fee_per_gas = fees->max_fee_per_gas;
    transaction.gas_limit = gas;
    transaction.to = to;
    transaction.data = std::move(data);
    Result<SignedTransaction> signed_tx = SignEip1559(transaction, key);
    ASSERT_OK(signed_tx);
    *out = std::move(*signed_tx);
  }

  // Polls for a receipt (automine on: it appears at once, but nothing promises that).
  void WaitReceipt(const Hash32& hash, Receipt* out) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < deadline) {
      Result<std::optional<Receipt>> receipt = chain_->GetReceipt(hash);
      ASSERT_OK(receipt);
      if (receipt->has_value()) {
        *out = **receipt;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "no receipt for " << Hex(hash);
  }

  void SendAndMine(const PrivateKey& key, std::optional<Address> to, Bytes data, uint64_t gas,
                   Receipt* out) {
    SignedTransaction tx;
    ASSERT_NO_FATAL_FAILURE(SignTx(key, to, std::move(data), gas, &tx));
    Result<Hash32> hash = chain_->SendRawTransaction(tx.raw);
    ASSERT_OK(hash);
    ASSERT_EQ(*hash, tx.hash);
    ASSERT_NO_FATAL_FAILURE(WaitReceipt(tx.hash, out));
    ASSERT_EQ(out->status, 1) << "transaction " << Hex(tx.hash) << " reverted";
  }

  void DeployToken() {
    Result<Bytes> code = LoadCreationCode();
    ASSERT_OK(code);
    Bytes args = EncodeStrings({"USDC", "USDC", "2"});  // name (the EIP-712 name), symbol, version
    code->insert(code->end(), args.begin(), args.end());
    Receipt receipt;
    ASSERT_NO_FATAL_FAILURE(SendAndMine(relayer_key_, std::nullopt, *code, kDeployGas, &receipt));
    ASSERT_TRUE(receipt.contract_address.has_value());
    token_ = *receipt.contract_address;
  }

  void Mint() {
    const Bytes data = EncodeMint(buyer_, U256(kMinted));
    Result<uint64_t> gas = chain_->EstimateGas(relayer_, token_, data);
    ASSERT_OK(gas);
    Receipt receipt;
    ASSERT_NO_FATAL_FAILURE(SendAndMine(relayer_key_, token_, data, *gas * 2, &receipt));
  }

  // A buyer-signed authorization of `value` to the seller, valid for an hour of chain time.
  void Authorize(uint64_t value, std::string_view nonce_label, TransferAuthorization* auth,
                 Signature* signature) {
    Result<int64_t> now = chain_->LatestBlockTimestamp();
    ASSERT_OK(now);
    *auth = TransferAuthorization{.from = buyer_,
                                  .to = seller_,
                                  .value = U256(value),
                                  .valid_after = U256(0),
                                  .valid_before = U256(static_cast<uint64_t>(*now + 3600)),
                                  .nonce = Keccak256(nonce_label)};
    const Hash32 domain = DomainSeparator("USDC", "2", kChainId, token_);
    Result<Signature> signed_digest = SignDigest(Eip3009Digest(domain, *auth), buyer_key_);
    ASSERT_OK(signed_digest);
    *signature = *signed_digest;
  }

  // The relayer's settlement transaction, with gas estimated by the node plus a margin.
  void SettlementTx(const TransferAuthorization& auth, const Signature& signature,
                    SignedTransaction* out) {
    const Bytes data = EncodeTransferWithAuthorizationVrs(auth, signature);
    Result<uint64_t> gas = chain_->EstimateGas(relayer_, token_, data);
    Result<FeeData> fees = chain_->Fees();
    Result<uint64_t> nonce = chain_->PendingNonce(relayer_);
    ASSERT_OK(gas);
    ASSERT_OK(fees);
    ASSERT_OK(nonce);
    Result<SignedTransaction> tx = BuildTransferWithAuthorizationTx(
        auth, signature, token_, kChainId, *nonce, *fees, *gas + *gas / 5, relayer_key_);
    ASSERT_OK(tx);
    *out = std::move(*tx);
  }

  // Anvil's own controls (anvil_*, evm_mine) go straight through the JSON-RPC client.
  void Control(std::string_view method, json params) {
    Result<json> answer = chain_->rpc().Call(method, std::move(params));
    ASSERT_OK(answer);
  }

  test_util::AnvilProcess anvil_;
  std::unique_ptr<RpcChain> chain_;
  const PrivateKey relayer_key_ = KeyOf(kRelayerKey);
  const PrivateKey buyer_key_ = KeyOf(kBuyerKey);
  const Address relayer_ = chain::AddressOf(relayer_key_);
  const Address buyer_ = chain::AddressOf(buyer_key_);
  const Address seller_ = AddressFromText(kSellerAddress);
  Address token_;
};

TEST_F(AnvilChainTest, ReadsChainIdBalancesFeesNoncesAndBlocks) {
  Result<uint64_t> chain_id = chain_->ChainId();
  ASSERT_OK(chain_id);
  EXPECT_EQ(*chain_id, kChainId);

  Result<U256> buyer_balance = chain_->BalanceOf(token_, buyer_);
  Result<U256> seller_balance = chain_->BalanceOf(token_, seller_);
  ASSERT_OK(buyer_balance);
  ASSERT_OK(seller_balance);
  EXPECT_EQ(*buyer_balance, U256(kMinted));
  EXPECT_EQ(*seller_balance, U256(0));

  Result<uint64_t> block = chain_->BlockNumber();
  ASSERT_OK(block);
  EXPECT_EQ(*block, 2u);  // deploy, mint: automine makes one block per transaction
  Result<uint64_t> nonce = chain_->PendingNonce(relayer_);
  ASSERT_OK(nonce);
  EXPECT_EQ(*nonce, 2u);

  Result<int64_t> timestamp = chain_->LatestBlockTimestamp();
  ASSERT_OK(timestamp);
  const int64_t wall_s = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NEAR(static_cast<double>(*timestamp), static_cast<double>(wall_s), 120.0);

  Result<FeeData> fees = chain_->Fees();
  ASSERT_OK(fees);
  EXPECT_FALSE(fees->base_fee_per_gas.IsZero());
  const U256 expected_max =
      *U256::CheckedAdd(*U256::CheckedAdd(fees->base_fee_per_gas, fees->base_fee_per_gas),
                        fees->max_priority_fee_per_gas);
  EXPECT_EQ(fees->max_fee_per_gas, expected_max);

  Result<bool> used = chain_->AuthorizationState(token_, buyer_, Keccak256("unused nonce"));
  ASSERT_OK(used);
  EXPECT_FALSE(*used);
}

TEST_F(AnvilChainTest, UnknownThingsAndNodeErrorsAreReportedPrecisely) {
  Result<std::optional<Receipt>> receipt = chain_->GetReceipt(Keccak256("no such tx"));
  Result<std::optional<TxInfo>> tx = chain_->GetTransaction(Keccak256("no such tx"));
  ASSERT_OK(receipt);
  ASSERT_OK(tx);
  EXPECT_FALSE(receipt->has_value());
  EXPECT_FALSE(tx->has_value());

  RpcErrorDetail detail;
  Result<json> unknown = chain_->rpc().Call("eth_noSuchMethod", json::array(), &detail);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), kRpcError);
  EXPECT_EQ(detail.code, -32601);

  // An account without code answers eth_call with empty data: not a bool.
  Result<bool> state = chain_->AuthorizationState(seller_, buyer_, Keccak256("n"));
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), "invalid_abi");

  // Only the minter may mint: the revert reason travels in the rpc_error message and detail.
  Result<Bytes> call = chain_->Call(token_, EncodeMint(buyer_, U256(1)));
  ASSERT_FALSE(call.ok());
  EXPECT_EQ(call.status().code(), kRpcError);
  EXPECT_NE(call.status().message().find("caller is not a minter"), std::string::npos)
      << call.status().message();

  Result<Hash32> garbage = chain_->SendRawTransaction(Bytes{0x02});
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), kRpcError) << garbage.status().ToString();
}

TEST_F(AnvilChainTest, SettlesAnAuthorizationAndRefusesItsReplay) {
  TransferAuthorization auth;
  Signature signature;
  SignedTransaction tx;
  ASSERT_NO_FATAL_FAILURE(Authorize(1'250'000, "settle-once", &auth, &signature));
  ASSERT_NO_FATAL_FAILURE(SettlementTx(auth, signature, &tx));
  Result<Hash32> sent = chain_->SendRawTransaction(tx.raw);
  ASSERT_OK(sent);
  EXPECT_EQ(*sent, tx.hash);
  Receipt receipt;
  ASSERT_NO_FATAL_FAILURE(WaitReceipt(tx.hash, &receipt));
  EXPECT_EQ(receipt.status, 1);
  EXPECT_EQ(receipt.transaction_hash, tx.hash);
  EXPECT_GT(receipt.gas_used, 21'000u);

  std::optional<TransferEvent> transfer = FindTransfer(receipt, token_, buyer_, seller_);
  ASSERT_TRUE(transfer.has_value());
  EXPECT_EQ(transfer->value, U256(1'250'000));
  EXPECT_FALSE(FindTransfer(receipt, token_, buyer_, relayer_).has_value());
  EXPECT_FALSE(FindTransfer(receipt, seller_, buyer_, seller_).has_value());

  Result<bool> used = chain_->AuthorizationState(token_, buyer_, auth.nonce);
  ASSERT_OK(used);
  EXPECT_TRUE(*used);
  Result<U256> seller_balance = chain_->BalanceOf(token_, seller_);
  ASSERT_OK(seller_balance);
  EXPECT_EQ(*seller_balance, U256(1'250'000));

  Result<std::optional<TxInfo>> info = chain_->GetTransaction(tx.hash);
  ASSERT_OK(info);
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->from, relayer_);
  EXPECT_EQ((*info)->nonce, 2u);
  EXPECT_EQ((*info)->block_number, receipt.block_number);

  // The same authorization again: the token refuses it, with Circle's reason.
  const Bytes replay = EncodeTransferWithAuthorizationVrs(auth, signature);
  Result<uint64_t> gas = chain_->EstimateGas(relayer_, token_, replay);
  ASSERT_FALSE(gas.ok());
  EXPECT_EQ(gas.status().code(), kRpcError);
  EXPECT_NE(gas.status().message().find(kUsedOrCanceled), std::string::npos)
      << gas.status().message();
  Result<Bytes> call = chain_->Call(token_, replay);
  ASSERT_FALSE(call.ok());
  EXPECT_EQ(call.status().code(), kRpcError);
  EXPECT_NE(call.status().message().find(kUsedOrCanceled), std::string::npos)
      << call.status().message();

  // Re-broadcasting the mined transaction: Anvil says "nonce too low", the hash is known.
  Result<Hash32> again = chain_->SendRawTransaction(tx.raw);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), kTxAlreadyKnown) << again.status().ToString();
}

// A batched settlement on a real EVM: Multicall3's aggregate3 (tests/chain_env's Multicall3Lite
// at the canonical address) of three transferWithAuthorization calls, the middle one already used:
// it fails alone, the other two settle, each shown by its own logs in the one receipt.
TEST_F(AnvilChainTest, AnAggregate3SettlesEachAuthorizationOnItsOwn) {
  auto runtime = ArtifactField(AGENTPAY_MULTICALL3_ARTIFACT, "deployedBytecode");
  ASSERT_OK(runtime);
  ASSERT_NO_FATAL_FAILURE(
      Control("anvil_setCode", json::array({ToChecksumHex(Multicall3Address()), *runtime})));
  TransferAuthorization a, used, c;
  Signature sa, sused, sc;
  ASSERT_NO_FATAL_FAILURE(Authorize(1'000, "batch-a", &a, &sa));
  ASSERT_NO_FATAL_FAILURE(Authorize(2'000, "batch-used", &used, &sused));
  ASSERT_NO_FATAL_FAILURE(Authorize(3'000, "batch-c", &c, &sc));
  SignedTransaction first;
  ASSERT_NO_FATAL_FAILURE(SettlementTx(used, sused, &first));
  ASSERT_OK(chain_->SendRawTransaction(first.raw));
  Receipt settled_first;
  ASSERT_NO_FATAL_FAILURE(WaitReceipt(first.hash, &settled_first));
  const std::vector<Call3> calls = {{token_, true, EncodeTransferWithAuthorizationVrs(a, sa)},
                                    {token_, true, EncodeTransferWithAuthorizationVrs(used, sused)},
                                    {token_, true, EncodeTransferWithAuthorizationVrs(c, sc)}};
  const Bytes data = EncodeAggregate3(calls);
  Result<uint64_t> gas = chain_->EstimateGas(relayer_, Multicall3Address(), data);
  ASSERT_OK(gas);
  Receipt receipt;
  ASSERT_NO_FATAL_FAILURE(
      SendAndMine(relayer_key_, Multicall3Address(), data, *gas + *gas / 5, &receipt));
  EXPECT_TRUE(ShowsAuthorizationSettled(receipt, token_, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(receipt, token_, used));
  EXPECT_TRUE(ShowsAuthorizationSettled(receipt, token_, c));
  EXPECT_TRUE(ShowsAuthorizationSettled(settled_first, token_, used));
  Result<U256> seller_balance = chain_->BalanceOf(token_, seller_);
  ASSERT_OK(seller_balance);
  EXPECT_EQ(*seller_balance, U256(6'000));  // 2,000 once (the first transaction), 1,000 + 3,000
}

TEST_F(AnvilChainTest, ReceiptIsAbsentUntilTheBlockIsMined) {
  TransferAuthorization auth;
  Signature signature;
  SignedTransaction tx;
  ASSERT_NO_FATAL_FAILURE(Authorize(500, "manual-mining", &auth, &signature));
  ASSERT_NO_FATAL_FAILURE(SettlementTx(auth, signature, &tx));
  ASSERT_NO_FATAL_FAILURE(Control("anvil_setAutomine", json::array({false})));
  Result<Hash32> sent = chain_->SendRawTransaction(tx.raw);
  ASSERT_OK(sent);

  Result<std::optional<Receipt>> pending = chain_->GetReceipt(tx.hash);
  ASSERT_OK(pending);
  EXPECT_FALSE(pending->has_value());
  Result<std::optional<TxInfo>> info = chain_->GetTransaction(tx.hash);
  ASSERT_OK(info);
  ASSERT_TRUE(info->has_value());
  EXPECT_FALSE((*info)->block_number.has_value());
  Result<bool> used = chain_->AuthorizationState(token_, buyer_, auth.nonce);
  ASSERT_OK(used);
  EXPECT_FALSE(*used);
  Result<uint64_t> nonce = chain_->PendingNonce(relayer_);
  ASSERT_OK(nonce);
  EXPECT_EQ(*nonce, 3u);  // counts the pending transaction

  // Broadcasting it again while it waits: the node already has it.
  Result<Hash32> again = chain_->SendRawTransaction(tx.raw);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), kTxAlreadyKnown) << again.status().ToString();

  ASSERT_NO_FATAL_FAILURE(Control("evm_mine", json::array()));
  Result<std::optional<Receipt>> mined = chain_->GetReceipt(tx.hash);
  ASSERT_OK(mined);
  ASSERT_TRUE(mined->has_value());
  EXPECT_EQ((*mined)->status, 1);
  info = chain_->GetTransaction(tx.hash);
  ASSERT_OK(info);
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->block_number, (*mined)->block_number);
}

TEST_F(AnvilChainTest, DroppedTransactionIsForgottenAndTheSameBytesCanBeRebroadcast) {
  TransferAuthorization auth;
  Signature signature;
  SignedTransaction tx;
  ASSERT_NO_FATAL_FAILURE(Authorize(700, "dropped", &auth, &signature));
  ASSERT_NO_FATAL_FAILURE(SettlementTx(auth, signature, &tx));
  ASSERT_NO_FATAL_FAILURE(Control("anvil_setAutomine", json::array({false})));
  Result<Hash32> sent = chain_->SendRawTransaction(tx.raw);
  ASSERT_OK(sent);
  ASSERT_NO_FATAL_FAILURE(Control("anvil_dropTransaction", json::array({Hex(tx.hash)})));

  Result<std::optional<TxInfo>> info = chain_->GetTransaction(tx.hash);
  ASSERT_OK(info);
  EXPECT_FALSE(info->has_value());
  Result<std::optional<Receipt>> receipt = chain_->GetReceipt(tx.hash);
  ASSERT_OK(receipt);
  EXPECT_FALSE(receipt->has_value());
  Result<uint64_t> nonce = chain_->PendingNonce(relayer_);
  ASSERT_OK(nonce);
  EXPECT_EQ(*nonce, 2u);

  Result<Hash32> resent = chain_->SendRawTransaction(tx.raw);
  ASSERT_OK(resent);
  EXPECT_EQ(*resent, tx.hash);
  ASSERT_NO_FATAL_FAILURE(Control("evm_mine", json::array()));
  Receipt mined;
  ASSERT_NO_FATAL_FAILURE(WaitReceipt(tx.hash, &mined));
  EXPECT_EQ(mined.status, 1);
  std::optional<TransferEvent> transfer = FindTransfer(mined, token_, buyer_, seller_);
  ASSERT_TRUE(transfer.has_value());
  EXPECT_EQ(transfer->value, U256(700));
}

TEST_F(AnvilChainTest, StoppedNodeTimesOutAndTheSendIsReconciledByHash) {
  TransferAuthorization auth;
  Signature signature;
  SignedTransaction tx;
  ASSERT_NO_FATAL_FAILURE(Authorize(900, "hung-node", &auth, &signature));
  ASSERT_NO_FATAL_FAILURE(SettlementTx(auth, signature, &tx));
  RpcChain impatient(anvil_.endpoint(), kShortTimeoutMs);
  Result<uint64_t> warm = impatient.BlockNumber();  // leaves a pooled keep-alive connection
  ASSERT_OK(warm);

  anvil_.Pause();
  for (int attempt = 0; attempt < 2; ++attempt) {  // pooled connection, then a fresh one
    const auto start = Clock::now();
    Result<Bytes> call = impatient.Call(token_, EncodeBalanceOf(buyer_));
    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    ASSERT_FALSE(call.ok());
    EXPECT_EQ(call.status().code(), kRpcTimeout) << call.status().ToString();
    EXPECT_GE(elapsed_ms, kShortTimeoutMs - 10);
    // The short timeout, not the default one (kTimeoutMs): the margin leaves room for a busy
    // machine (ctest -j, the sanitizer build) to wake the waiting thread late.
    EXPECT_LT(elapsed_ms, kShortTimeoutMs + 2000);
    static_assert(kShortTimeoutMs + 2000 < kTimeoutMs);
  }
  Result<Hash32> sent = impatient.SendRawTransaction(tx.raw);
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.status().code(), kRpcTimeout);
  anvil_.Resume();

  // rpc_timeout is "unknown": reconcile by hash, then re-broadcast the very same bytes. (Anvil
  // drops a request whose client hung up before it was read; other nodes may process it.)
  Result<std::optional<TxInfo>> known = chain_->GetTransaction(tx.hash);
  ASSERT_OK(known);
  if (!known->has_value()) {
    Result<Hash32> resent = chain_->SendRawTransaction(tx.raw);
    EXPECT_TRUE(resent.ok() || resent.status().code() == kTxAlreadyKnown)
        << resent.status().ToString();
  }
  Receipt receipt;
  ASSERT_NO_FATAL_FAILURE(WaitReceipt(tx.hash, &receipt));
  EXPECT_EQ(receipt.status, 1);
  Result<bool> used = chain_->AuthorizationState(token_, buyer_, auth.nonce);
  ASSERT_OK(used);
  EXPECT_TRUE(*used);
}

TEST_F(AnvilChainTest, ClosedPortIsUnreachable) {
  RpcChain nowhere(Endpoint{"127.0.0.1", test_util::FreeLoopbackPort(), ""}, kTimeoutMs);
  const auto start = Clock::now();
  Result<uint64_t> chain_id = nowhere.ChainId();
  ASSERT_FALSE(chain_id.ok());
  EXPECT_EQ(chain_id.status().code(), kRpcUnreachable) << chain_id.status().ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));

  // A node that went away behind a pooled keep-alive connection: still "never sent".
  Result<uint64_t> block = chain_->BlockNumber();
  ASSERT_OK(block);
  anvil_.Stop();
  Result<Hash32> sent = chain_->SendRawTransaction(Bytes{0x02});
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.status().code(), kRpcUnreachable) << sent.status().ToString();
}

}  // namespace
}  // namespace agentpay::chain
