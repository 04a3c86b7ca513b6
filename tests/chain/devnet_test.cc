// The built-in devnet against Circle FiatTokenV2's rules: authorizations signed here, relayed in
// transactions built by settlement_tx.h, mined by a hand-advanced clock. After every scenario the
// token's supply and the sum of the balances both equal what was minted.
#include "chain/devnet.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "chain/multicall.h"
#include "chain/rlp.h"
#include "chain/settlement_tx.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::AddressFrom;
using test_util::KeyNumber;
using test_util::NonceNumber;
using test_util::HighSTwin;

constexpr uint64_t kChainId = 84532;
constexpr std::string_view kTokenHex = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr uint64_t kGasLimit = 120'000;

class ManualClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }
  int64_t NowS() const { return now_ms_ / 1000; }

 private:
  int64_t now_ms_ = kStartMs;
};


class DevnetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenDevnet(Config());
    ASSERT_TRUE(devnet_->Mint(payer_, U256(1'000'000)).ok());
    minted_ = U256(1'000'000);
  }

  void TearDown() override {
    if (devnet_) ExpectConserved();
  }

  DevnetConfig Config(int64_t mine_delay_ms = 2000, std::string path = "") {
    DevnetConfig config;
    config.chain_id = kChainId;
    config.token = token_;
    config.token_name = "USDC";
    config.token_version = "2";
    config.mine_delay_ms = mine_delay_ms;
    config.persistence_path = std::move(path);
    return config;
  }

  void OpenDevnet(DevnetConfig config) {
    devnet_.reset();
    Result<std::unique_ptr<Devnet>> opened = Devnet::Open(std::move(config), clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
  }

  TransferAuthorization Authorization(uint64_t value, uint8_t nonce_number) {
    return {
        payer_, seller_, U256(value), U256(0), U256(clock_.NowS() + 60), NonceNumber(nonce_number)};
  }

  Signature Sign(const TransferAuthorization& authorization, const PrivateKey& key,
                 uint64_t chain_id = kChainId) {
    const Hash32 domain = DomainSeparator("USDC", "2", chain_id, token_);
    Result<Signature> signature = SignDigest(Eip3009Digest(domain, authorization), key);
    EXPECT_TRUE(signature.ok());
    return *signature;
  }

  // The relayer's transaction for authorization signed by the payer (or `signature`).
  SignedTransaction Relay(const TransferAuthorization& authorization,
                          std::optional<Signature> signature = std::nullopt,
                          std::optional<uint64_t> relayer_nonce = std::nullopt,
                          uint64_t chain_id = kChainId, uint64_t gas_limit = kGasLimit) {
    if (!relayer_nonce) relayer_nonce = *devnet_->PendingNonce(relayer_);
    const FeeData fees = *devnet_->Fees();
    Result<SignedTransaction> transaction = BuildTransferWithAuthorizationTx(
        authorization, signature.value_or(Sign(authorization, payer_key_)), token_, chain_id,
        *relayer_nonce, fees, gas_limit, relayer_key_);
    EXPECT_TRUE(transaction.ok()) << transaction.status().ToString();
    return *transaction;
  }

  SignedTransaction RelayData(const Bytes& data, const std::optional<Address>& to,
                              uint64_t gas_limit = kGasLimit) {
    Eip1559Transaction transaction;
    transaction.chain_id = kChainId;
    transaction.nonce = *devnet_->PendingNonce(relayer_);
    transaction.max_priority_fee_per_gas = U256(1'000'000);
    transaction.max_fee_per_gas = U256(3'000'000'000);
    transaction.gas_limit = gas_limit;
    transaction.to = to;
    transaction.data = data;
    Result<SignedTransaction> signed_transaction = SignEip1559(transaction, relayer_key_);
    EXPECT_TRUE(signed_transaction.ok());
    return *signed_transaction;
  }

  Hash32 Send(const SignedTransaction& transaction) {
    Result<Hash32> hash = devnet_->SendRawTransaction(transaction.raw);
    EXPECT_TRUE(hash.ok()) << hash.status().ToString();
    EXPECT_EQ(hash.ok() ? *hash : Hash32{}, transaction.hash);
    return transaction.hash;
  }

  std::optional<Receipt> ReceiptOf(const Hash32& hash) {
    Result<std::optional<Receipt>> receipt = devnet_->GetReceipt(hash);
    EXPECT_TRUE(receipt.ok()) << receipt.status().ToString();
    return receipt.ok() ? *receipt : std::nullopt;
  }

  // Mines past the delay and returns the receipt, which must exist.
  Receipt Mined(const Hash32& hash) {
    clock_.Advance(2000);
    std::optional<Receipt> receipt = ReceiptOf(hash);
    EXPECT_TRUE(receipt.has_value());
    return receipt.value_or(Receipt{});
  }

  U256 Balance(const Address& owner) {
    Result<U256> balance = devnet_->BalanceOf(token_, owner);
    EXPECT_TRUE(balance.ok()) << balance.status().ToString();
    return balance.ok() ? *balance : U256();
  }

  void ExpectConserved() {
    devnet_->SetUnavailable(false);
    U256 sum;
    for (const Address& owner : {payer_, seller_, relayer_, other_, Address{}}) {
      sum = *U256::CheckedAdd(sum, Balance(owner));
    }
    EXPECT_EQ(sum, minted_);
    Result<Bytes> supply = devnet_->Call(token_, Bytes{0x18, 0x16, 0x0d, 0xdd});  // totalSupply()
    ASSERT_TRUE(supply.ok()) << supply.status().ToString();
    EXPECT_EQ(*DecodeUint256(*supply), minted_);
  }

  void ExpectRefused(const Bytes& raw, std::string_view message_part) {
    Result<Hash32> hash = devnet_->SendRawTransaction(raw);
    ASSERT_FALSE(hash.ok());
    EXPECT_EQ(hash.status().code(), kRpcError);
    EXPECT_NE(hash.status().message().find(message_part), std::string::npos)
        << hash.status().message();
  }

  void ExpectReverted(const Hash32& hash, std::string_view reason) {
    std::optional<Receipt> receipt = ReceiptOf(hash);
    ASSERT_TRUE(receipt.has_value());
    EXPECT_EQ(receipt->status, 0);
    EXPECT_TRUE(receipt->logs.empty());
    EXPECT_EQ(devnet_->RevertReason(hash).value_or("(none)"), reason);
  }

  ManualClock clock_;
  std::unique_ptr<Devnet> devnet_;
  U256 minted_;
  const Address token_ = AddressFrom(kTokenHex);
  const PrivateKey payer_key_ = KeyNumber(1);
  const PrivateKey relayer_key_ = KeyNumber(2);
  const PrivateKey other_key_ = KeyNumber(3);
  const Address payer_ = AddressOf(payer_key_);
  const Address relayer_ = AddressOf(relayer_key_);
  const Address other_ = AddressOf(other_key_);
  const Address seller_ = AddressFrom("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
};

TEST_F(DevnetTest, SettlesOnceTheMineDelayHasPassed) {
  const SignedTransaction transaction = Relay(Authorization(10'000, 1));
  const Hash32 hash = Send(transaction);
  EXPECT_EQ(hash, Keccak256(transaction.raw));
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 1u);
  Result<std::optional<TxInfo>> info = devnet_->GetTransaction(hash);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->from, relayer_);
  EXPECT_FALSE((*info)->block_number.has_value());
  EXPECT_EQ(devnet_->SendRawTransaction(transaction.raw).status().code(), kTxAlreadyKnown);

  clock_.Advance(1999);
  EXPECT_FALSE(ReceiptOf(hash).has_value());
  EXPECT_EQ(*devnet_->BlockNumber(), 0u);
  clock_.Advance(1);
  std::optional<Receipt> receipt = ReceiptOf(hash);
  ASSERT_TRUE(receipt.has_value());
  EXPECT_EQ(receipt->status, 1);
  EXPECT_EQ(receipt->block_number, 1u);
  EXPECT_EQ(receipt->gas_used, kDevnetSettlementGas);
  std::optional<TransferEvent> transfer = FindTransfer(*receipt, token_, payer_, seller_);
  ASSERT_TRUE(transfer.has_value());
  EXPECT_EQ(transfer->value, U256(10'000));
  ASSERT_EQ(receipt->logs.size(), 2u);
  EXPECT_EQ(receipt->logs[0].topics[0],
            Keccak256(std::string_view("AuthorizationUsed(address,bytes32)")));
  EXPECT_EQ(receipt->logs[0].topics[2], NonceNumber(1));

  EXPECT_EQ(Balance(payer_), U256(990'000));
  EXPECT_EQ(Balance(seller_), U256(10'000));
  EXPECT_TRUE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(2)));
  EXPECT_EQ(*devnet_->BlockNumber(), 1u);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), clock_.NowS());
  info = devnet_->GetTransaction(hash);
  EXPECT_EQ((*info)->block_number, std::optional<uint64_t>(1));
  // Mined or pending, the very same bytes are "already known", never a second settlement.
  EXPECT_EQ(devnet_->SendRawTransaction(transaction.raw).status().code(), kTxAlreadyKnown);
}

TEST_F(DevnetTest, BlocksAreStampedWithTheDueTimeNotTheTimeOfTheNextPoll) {
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), kStartMs / 1000);  // genesis
  TransferAuthorization authorization = Authorization(5, 1);
  authorization.valid_before = U256(clock_.NowS() + 3);
  const Hash32 hash = Send(Relay(authorization));
  clock_.Advance(3'600'000);  // nobody looked for an hour
  std::optional<Receipt> receipt = ReceiptOf(hash);
  ASSERT_TRUE(receipt.has_value());
  EXPECT_EQ(receipt->status, 1);  // mined at submission + 2 s, before validBefore
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), kStartMs / 1000 + 2);
}

TEST_F(DevnetTest, EmptyBlocksMoveChainTimeOnAnIdleChainOnlyWhenAsked) {
  auto start = devnet_->LatestBlockTimestamp();
  ASSERT_TRUE(start.ok());
  clock_.Advance(10'000);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), *start);  // off by default: time stands still
  DevnetConfig config = Config();
  config.empty_block_interval_ms = 2000;
  OpenDevnet(config);
  ASSERT_TRUE(devnet_->Mint(payer_, minted_).ok());  // a new, empty chain: the same books
  auto opened = *devnet_->LatestBlockTimestamp();
  clock_.Advance(1'500);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), opened);  // not yet an interval
  clock_.Advance(1'000);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), clock_.NowMs() / 1000);
  EXPECT_GT(*devnet_->BlockNumber(), 0u);
}

TEST_F(DevnetTest, BytesSignatureOverloadSettles) {
  const TransferAuthorization authorization = Authorization(7, 1);
  const Hash32 hash = Send(RelayData(
      EncodeTransferWithAuthorizationBytes(authorization, Sign(authorization, payer_key_)),
      token_));
  const Receipt receipt = Mined(hash);
  EXPECT_EQ(receipt.status, 1);
  EXPECT_TRUE(FindTransfer(receipt, token_, payer_, seller_).has_value());
  EXPECT_EQ(Balance(seller_), U256(7));
}

TEST_F(DevnetTest, ReusedAuthorizationRevertsAndTheRelayerNonceStillAdvances) {
  const TransferAuthorization authorization = Authorization(10'000, 1);
  EXPECT_EQ(Mined(Send(Relay(authorization))).status, 1);
  // Same authorization, new relayer nonce: different bytes, the token refuses it.
  const Hash32 again = Send(Relay(authorization));
  EXPECT_EQ(*devnet_->EstimateGas(relayer_, token_,
                                  EncodeTransferWithAuthorizationVrs(
                                      Authorization(1, 9), Sign(Authorization(1, 9), payer_key_))),
            kDevnetSettlementGas);
  Mined(again);
  ExpectReverted(again, "FiatTokenV2: authorization is used or canceled");
  EXPECT_EQ(Balance(payer_), U256(990'000));
  EXPECT_EQ(Balance(seller_), U256(10'000));
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 2u);
  EXPECT_EQ(*devnet_->BlockNumber(), 2u);
}

TEST_F(DevnetTest, ValidityWindowIsStrictOnBothEnds) {
  TransferAuthorization expires = Authorization(1, 1);
  expires.valid_before = U256(clock_.NowS() + 1);  // passes during the 2 s mine delay
  TransferAuthorization not_yet = Authorization(1, 2);
  not_yet.valid_after = U256(clock_.NowS() + 100);
  TransferAuthorization exactly_now = Authorization(1, 3);
  exactly_now.valid_after = U256(clock_.NowS() + 2);  // == the block's timestamp
  Result<uint64_t> estimate = devnet_->EstimateGas(
      relayer_, token_, EncodeTransferWithAuthorizationVrs(not_yet, Sign(not_yet, payer_key_)));
  ASSERT_FALSE(estimate.ok());
  EXPECT_EQ(estimate.status().code(), kRpcError);
  EXPECT_EQ(estimate.status().message(),
            "execution reverted: FiatTokenV2: authorization is not yet valid");
  const Hash32 first = Send(Relay(expires));
  const Hash32 second = Send(Relay(not_yet));
  const Hash32 third = Send(Relay(exactly_now));
  Mined(first);
  ExpectReverted(first, "FiatTokenV2: authorization is expired");
  ExpectReverted(second, "FiatTokenV2: authorization is not yet valid");
  ExpectReverted(third, "FiatTokenV2: authorization is not yet valid");
  EXPECT_EQ(Balance(payer_), U256(1'000'000));
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
}

TEST_F(DevnetTest, BadSignaturesRevertInvalidSignature) {
  const TransferAuthorization authorization = Authorization(1, 1);
  const Signature good = Sign(authorization, payer_key_);
  Signature bad_v = good;
  bad_v.bytes[64] = 29;
  const std::vector<Signature> bad = {HighSTwin(good), Sign(authorization, other_key_), bad_v,
                                      Sign(authorization, payer_key_, kChainId + 1)};
  std::vector<Hash32> hashes;
  for (const Signature& signature : bad) hashes.push_back(Send(Relay(authorization, signature)));
  Mined(hashes[0]);
  for (const Hash32& hash : hashes) ExpectReverted(hash, "FiatTokenV2: invalid signature");
  EXPECT_EQ(Balance(payer_), U256(1'000'000));
  // The honest signature still works afterwards: nothing was consumed.
  EXPECT_EQ(Mined(Send(Relay(authorization, good))).status, 1);
}

TEST_F(DevnetTest, InsufficientBalanceReverts) {
  const Hash32 hash = Send(Relay(Authorization(1'000'001, 1)));
  Mined(hash);
  ExpectReverted(hash, "ERC20: transfer amount exceeds balance");
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
}

TEST_F(DevnetTest, TooLittleGasRunsOutOfGas) {
  const Hash32 hash = Send(
      Relay(Authorization(1, 1), std::nullopt, std::nullopt, kChainId, kDevnetSettlementGas - 1));
  const Receipt receipt = Mined(hash);
  EXPECT_EQ(receipt.status, 0);
  EXPECT_EQ(receipt.gas_used, kDevnetSettlementGas - 1);
  EXPECT_EQ(devnet_->RevertReason(hash), std::optional<std::string>("out of gas"));
}

TEST_F(DevnetTest, RefusesWrongChainIdAndRelayerNonceGaps) {
  const TransferAuthorization authorization = Authorization(1, 1);
  ExpectRefused(Relay(authorization, std::nullopt, 0, kChainId + 1).raw, "invalid chain id");
  ExpectRefused(Relay(authorization, std::nullopt, 1).raw, "nonce too high");
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
  EXPECT_EQ(Mined(Send(Relay(authorization, std::nullopt, 0))).status, 1);
  ExpectRefused(Relay(Authorization(1, 2), std::nullopt, 0).raw, "nonce too low");
  ExpectRefused(Relay(Authorization(1, 2), std::nullopt, 5).raw, "nonce too high");
  Send(Relay(Authorization(1, 2), std::nullopt, 1));
  ExpectRefused(Relay(Authorization(1, 3), std::nullopt, 1).raw,
                "replacement transaction underpriced");
}

TEST_F(DevnetTest, RefusesCallsOtherThanTheTokensSettlement) {
  ExpectRefused(RelayData(EncodeTransferWithAuthorizationVrs(Authorization(1, 1),
                                                             Sign(Authorization(1, 1), payer_key_)),
                          other_)
                    .raw,
                "unsupported call");
  ExpectRefused(RelayData(EncodeBalanceOf(payer_), token_).raw, "unsupported call");
  ExpectRefused(RelayData(Bytes{}, std::nullopt).raw, "unsupported call");  // a deployment
  ExpectRefused(Relay(Authorization(1, 1), std::nullopt, 0, kChainId, 20'000).raw,
                "intrinsic gas too low");
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
}

TEST_F(DevnetTest, DroppedTransactionIsForgottenAndCanBeSentAgain) {
  const SignedTransaction first = Relay(Authorization(1, 1));
  const SignedTransaction second = Relay(Authorization(2, 2), std::nullopt, 1);
  Send(first);
  Send(second);
  ASSERT_TRUE(*devnet_->DropTransaction(first.hash));
  EXPECT_FALSE(*devnet_->DropTransaction(first.hash));
  EXPECT_FALSE(devnet_->GetTransaction(first.hash)->has_value());
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
  // The second is stuck behind the gap, as in a real pool.
  clock_.Advance(10'000);
  EXPECT_FALSE(ReceiptOf(second.hash).has_value());
  EXPECT_TRUE(devnet_->GetTransaction(second.hash)->has_value());
  EXPECT_EQ(Send(first), first.hash);
  const Receipt receipt = Mined(first.hash);
  EXPECT_EQ(receipt.status, 1);
  EXPECT_EQ(ReceiptOf(second.hash)->status, 1);
  EXPECT_EQ(Balance(seller_), U256(3));
  EXPECT_FALSE(*devnet_->DropTransaction(first.hash));  // mined: nothing to drop
}

TEST_F(DevnetTest, AReorganisationUndoesItsBlocksAndTheSameTransactionsSettleAgain) {
  const Hash32 first = Send(Relay(Authorization(10'000, 1)));
  const Receipt mined_first = Mined(first);
  const SignedTransaction second_transaction = Relay(Authorization(20'000, 2));
  const Hash32 second = Send(second_transaction);
  const Receipt mined_second = Mined(second);
  const Hash32 tip_hash = *devnet_->BlockHash(2).value();
  EXPECT_EQ(Balance(seller_), U256(30'000));

  EXPECT_EQ(devnet_->Reorg(0).status().error(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(devnet_->Reorg(3).status().error(), ErrorCode::kInvalidArgument);
  ASSERT_EQ(*devnet_->Reorg(1), 1u);
  // The second block is gone: its settlement undone, its transaction pending again, the first
  // untouched.
  EXPECT_EQ(*devnet_->BlockNumber(), 1u);
  EXPECT_FALSE(ReceiptOf(second).has_value());
  EXPECT_FALSE((*devnet_->GetTransaction(second))->block_number.has_value());
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(2)));
  EXPECT_EQ(Balance(seller_), U256(10'000));
  EXPECT_EQ(*ReceiptOf(first), mined_first);
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 2u);
  EXPECT_EQ(*devnet_->MinedNonce(relayer_), 1u);
  // The same bytes are known to the node; after the mine delay they settle again, once, in a
  // block of another hash.
  EXPECT_EQ(devnet_->SendRawTransaction(second_transaction.raw).status().code(), kTxAlreadyKnown);
  const Receipt again = Mined(second);
  EXPECT_EQ(again.status, 1);
  EXPECT_EQ(again.block_number, 2u);
  EXPECT_NE(again.block_hash, mined_second.block_hash);
  EXPECT_NE(*devnet_->BlockHash(2).value(), tip_hash);
  EXPECT_TRUE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(2)));
  EXPECT_EQ(Balance(seller_), U256(30'000));
  EXPECT_EQ(Balance(payer_), U256(970'000));
}

// A batched settlement: Multicall3's aggregate3 of transferWithAuthorization calls in one
// relayer transaction, each call allowed to fail on its own.
Call3 SettlementCall(const Address& token, const TransferAuthorization& authorization,
                     const Signature& signature, bool allow_failure = true) {
  return {token, allow_failure, EncodeTransferWithAuthorizationVrs(authorization, signature)};
}

TEST_F(DevnetTest, AnAggregate3SettlesEachCallOnItsOwnAndItsReceiptShowsEach) {
  const TransferAuthorization a = Authorization(10'000, 1);
  TransferAuthorization expired = Authorization(20'000, 2);
  expired.valid_before = U256(clock_.NowS() - 1);
  const TransferAuthorization c = Authorization(30'000, 3);
  const std::vector<Call3> calls = {SettlementCall(token_, a, Sign(a, payer_key_)),
                                    SettlementCall(token_, expired, Sign(expired, payer_key_)),
                                    SettlementCall(token_, c, Sign(c, payer_key_))};
  const Hash32 hash =
      Send(RelayData(EncodeAggregate3(calls), Multicall3Address(), 3 * kDevnetSettlementGas));
  const Receipt receipt = Mined(hash);
  EXPECT_EQ(receipt.status, 1);
  EXPECT_EQ(receipt.gas_used, 3 * kDevnetSettlementGas);
  ASSERT_EQ(receipt.logs.size(), 4u);  // two settled calls, two logs each
  EXPECT_TRUE(ShowsAuthorizationSettled(receipt, token_, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(receipt, token_, expired));
  EXPECT_TRUE(ShowsAuthorizationSettled(receipt, token_, c));
  EXPECT_TRUE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(2)));
  EXPECT_TRUE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(3)));
  EXPECT_EQ(Balance(seller_), U256(40'000));
  EXPECT_EQ(*devnet_->MinedNonce(relayer_), 1u);  // one relayer transaction for both
  // A reorganisation undoes both; the same bytes settle both again.
  ASSERT_EQ(*devnet_->Reorg(1), 0u);  // back to block 0
  EXPECT_EQ(Balance(seller_), U256(0));
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(3)));
  EXPECT_EQ(Mined(hash).status, 1);
  EXPECT_EQ(Balance(seller_), U256(40'000));
}

TEST_F(DevnetTest, AnAggregate3CallThatMayNotFailRevertsTheWholeTransaction) {
  const TransferAuthorization a = Authorization(10'000, 1);
  TransferAuthorization poor = Authorization(2'000'000, 2);  // more than the payer holds
  const std::vector<Call3> calls = {SettlementCall(token_, a, Sign(a, payer_key_)),
                                    SettlementCall(token_, poor, Sign(poor, payer_key_), false)};
  const Hash32 hash =
      Send(RelayData(EncodeAggregate3(calls), Multicall3Address(), 2 * kDevnetSettlementGas));
  const Receipt receipt = Mined(hash);
  EXPECT_EQ(receipt.status, 0);
  EXPECT_TRUE(receipt.logs.empty());
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
  EXPECT_EQ(Balance(seller_), U256(0));
  EXPECT_EQ(*devnet_->MinedNonce(relayer_), 1u);  // the relayer's nonce is used all the same
  // Too little gas for its calls: reverted, nothing applied.
  const TransferAuthorization b = Authorization(10'000, 3);
  const Hash32 starved = Send(RelayData(
      EncodeAggregate3(std::vector<Call3>{SettlementCall(token_, b, Sign(b, payer_key_)),
                                          SettlementCall(token_, a, Sign(a, payer_key_))}),
      Multicall3Address(), kDevnetSettlementGas));
  EXPECT_EQ(Mined(starved).status, 0);
  EXPECT_EQ(Balance(seller_), U256(0));
}

TEST_F(DevnetTest, Multicall3TakesOnlyTheTokensSettlements) {
  const TransferAuthorization a = Authorization(10'000, 1);
  const Call3 elsewhere = {seller_, true,
                           EncodeTransferWithAuthorizationVrs(a, Sign(a, payer_key_))};
  const Call3 not_a_settlement = {token_, true, EncodeBalanceOf(payer_)};
  for (const Call3& bad : {elsewhere, not_a_settlement}) {
    Result<Hash32> refused = devnet_->SendRawTransaction(
        RelayData(EncodeAggregate3(std::vector<Call3>{bad}), Multicall3Address()).raw);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("aggregate3 of transferWithAuthorization"),
              std::string::npos)
        << refused.status().message();
  }
  Result<Hash32> garbage = devnet_->SendRawTransaction(
      RelayData(Bytes{0x82, 0xad, 0x56, 0xcb}, Multicall3Address()).raw);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("runs only aggregate3"), std::string::npos);
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
}

TEST_F(DevnetTest, AReorganisedTransactionCanBeDroppedAndItsAuthorizationStaysUnused) {
  const Hash32 hash = Send(Relay(Authorization(10'000, 1)));
  Mined(hash);
  ASSERT_EQ(*devnet_->Reorg(1), 0u);
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  clock_.Advance(10'000);
  EXPECT_FALSE(ReceiptOf(hash).has_value());
  EXPECT_FALSE(devnet_->GetTransaction(hash)->has_value());
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, payer_, NonceNumber(1)));
  EXPECT_EQ(Balance(payer_), U256(1'000'000));
  EXPECT_EQ(*devnet_->PendingNonce(relayer_), 0u);
}

TEST_F(DevnetTest, NothingIsMinedWithAutomineOffUntilMine) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  devnet_->SetMineDelayMs(0);
  const Hash32 hash = Send(Relay(Authorization(1, 1)));
  clock_.Advance(30'000);  // well inside the authorization's 60 s
  EXPECT_FALSE(ReceiptOf(hash).has_value());
  EXPECT_EQ(*devnet_->BlockNumber(), 0u);
  EXPECT_EQ(*devnet_->Mine(), 1u);
  EXPECT_EQ(ReceiptOf(hash)->status, 1);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), clock_.NowS());
  EXPECT_EQ(*devnet_->Mine(), 2u);  // an empty block
  ASSERT_TRUE(devnet_->SetAutomine(true).ok());
  const Hash32 next = Send(Relay(Authorization(1, 2)));  // delay 0: mined at submission
  EXPECT_EQ(ReceiptOf(next)->block_number, 3u);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), clock_.NowS());
}

TEST_F(DevnetTest, UnavailableNodeFailsEveryCallAndCatchesUpAfterwards) {
  const Hash32 hash = Send(Relay(Authorization(1, 1)));
  const SignedTransaction later = Relay(Authorization(1, 2));
  devnet_->SetUnavailable(true);
  clock_.Advance(60'000);
  const Hash32 nonce = NonceNumber(1);
  const std::vector<Status> failures = {devnet_->ChainId().status(),
                                        devnet_->AuthorizationState(token_, payer_, nonce).status(),
                                        devnet_->BalanceOf(token_, payer_).status(),
                                        devnet_->Call(token_, EncodeBalanceOf(payer_)).status(),
                                        devnet_->EstimateGas(relayer_, token_, Bytes{}).status(),
                                        devnet_->Fees().status(),
                                        devnet_->PendingNonce(relayer_).status(),
                                        devnet_->SendRawTransaction(later.raw).status(),
                                        devnet_->GetReceipt(hash).status(),
                                        devnet_->GetTransaction(hash).status(),
                                        devnet_->BlockNumber().status(),
                                        devnet_->LatestBlockTimestamp().status()};
  for (const Status& status : failures) EXPECT_EQ(status.code(), kRpcUnreachable);
  devnet_->SetUnavailable(false);
  EXPECT_EQ(ReceiptOf(hash)->status, 1);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), kStartMs / 1000 + 2);  // the chain kept going
  EXPECT_FALSE(devnet_->GetTransaction(later.hash)->has_value());    // never reached it
}

TEST_F(DevnetTest, PoolIsBounded) {
  DevnetConfig config = Config();
  config.max_pending_transactions = 3;
  OpenDevnet(config);
  ASSERT_TRUE(devnet_->Mint(payer_, U256(1'000'000)).ok());
  for (uint8_t i = 0; i < 3; ++i) Send(Relay(Authorization(1, i)));
  ExpectRefused(Relay(Authorization(1, 3)).raw, "txpool is full");
  clock_.Advance(2000);
  EXPECT_EQ(*devnet_->BlockNumber(), 1u);  // one block for the three due together
  Send(Relay(Authorization(1, 3)));
}

TEST_F(DevnetTest, ReadsAnswerLikeTheToken) {
  const Result<Bytes> name = devnet_->Call(token_, Bytes{0x06, 0xfd, 0xde, 0x03});
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->size(), 96u);
  EXPECT_EQ((*name)[64], 'U');
  EXPECT_EQ((*name)[63], 4);  // length word
  const Result<Bytes> version = devnet_->Call(token_, Bytes{0x54, 0xfd, 0x4d, 0x50});
  ASSERT_TRUE(version.ok());
  EXPECT_EQ((*version)[64], '2');
  EXPECT_EQ(devnet_->Call(token_, Bytes{0xde, 0xad, 0xbe, 0xef}).status().code(), kRpcError);
  EXPECT_EQ(devnet_->Call(token_, Bytes{0x70}).status().code(), kRpcError);
  EXPECT_TRUE(devnet_->Call(other_, EncodeBalanceOf(payer_))->empty());  // no code there
  EXPECT_EQ(devnet_->BalanceOf(other_, payer_).status().code(), "invalid_abi");
  EXPECT_EQ(devnet_->AuthorizationState(other_, payer_, NonceNumber(1)).status().code(),
            "invalid_abi");
  const FeeData fees = *devnet_->Fees();
  EXPECT_EQ(fees.max_fee_per_gas,
            *U256::CheckedAdd(*U256::CheckedAdd(fees.base_fee_per_gas, fees.base_fee_per_gas),
                              fees.max_priority_fee_per_gas));
  EXPECT_EQ(*devnet_->ChainId(), kChainId);
  EXPECT_EQ(devnet_->EstimateGas(relayer_, other_, Bytes{}).status().code(), kRpcError);
  EXPECT_FALSE(devnet_->GetTransaction(Hash32{})->has_value());
  EXPECT_FALSE(ReceiptOf(Hash32{}).has_value());
  EXPECT_EQ(devnet_->Mint(payer_, U256::FromLimbs({~0ull, ~0ull, ~0ull, ~0ull})).code(),
            "invalid_amount");
}

TEST_F(DevnetTest, ConcurrentRelayersEachSettleEveryAuthorization) {
  devnet_->SetMineDelayMs(0);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20;
  const FeeData fees = *devnet_->Fees();
  std::vector<std::vector<Hash32>> hashes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const PrivateKey relayer_key = KeyNumber(static_cast<uint8_t>(10 + t));
      for (int i = 0; i < kPerThread; ++i) {
        const TransferAuthorization authorization =
            Authorization(1, static_cast<uint8_t>(t * kPerThread + i));
        Result<SignedTransaction> transaction = BuildTransferWithAuthorizationTx(
            authorization, Sign(authorization, payer_key_), token_, kChainId,
            static_cast<uint64_t>(i), fees, kGasLimit, relayer_key);
        ASSERT_TRUE(transaction.ok());
        Result<Hash32> hash = devnet_->SendRawTransaction(transaction->raw);
        ASSERT_TRUE(hash.ok()) << hash.status().ToString();
        hashes[t].push_back(*hash);
        EXPECT_TRUE(devnet_->BalanceOf(token_, payer_).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::vector<Hash32>& relayer_hashes : hashes) {
    ASSERT_EQ(relayer_hashes.size(), static_cast<size_t>(kPerThread));
    for (const Hash32& hash : relayer_hashes) EXPECT_EQ(ReceiptOf(hash)->status, 1);
  }
  EXPECT_EQ(Balance(seller_), U256(kThreads * kPerThread));
  EXPECT_EQ(*devnet_->BlockNumber(), static_cast<uint64_t>(kThreads * kPerThread));
}

// ---- Persistence ----

class DevnetPersistenceTest : public DevnetTest {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/agentpay_devnet_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/devnet.sqlite";
    OpenDevnet(Config(0, path_));
    ASSERT_TRUE(devnet_->Mint(payer_, U256(1'000'000)).ok());
    minted_ = U256(1'000'000);
  }
  void TearDown() override {
    DevnetTest::TearDown();
    devnet_.reset();
    std::filesystem::remove_all(directory_);
  }

  std::string directory_;
  std::string path_;
};

TEST_F(DevnetPersistenceTest, EmptyBlocksArePersistedToo) {
  DevnetConfig config = Config(0, path_);
  config.empty_block_interval_ms = 1000;
  OpenDevnet(config);
  clock_.Advance(5'000);
  const uint64_t blocks = *devnet_->BlockNumber();  // stamps an empty block: an empty log entry
  const int64_t stamped = *devnet_->LatestBlockTimestamp();
  EXPECT_GT(blocks, 0u);
  OpenDevnet(Config(0, path_));  // reopened without the interval: exactly what was logged
  EXPECT_EQ(*devnet_->BlockNumber(), blocks);
  EXPECT_EQ(*devnet_->LatestBlockTimestamp(), stamped);
}

struct Snapshot {
  std::vector<U256> balances;
  uint64_t relayer_nonce = 0;
  uint64_t block_number = 0;
  int64_t timestamp = 0;
  std::vector<std::optional<Receipt>> receipts;
  std::vector<std::optional<TxInfo>> transactions;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

TEST_F(DevnetPersistenceTest, ReopeningReplaysTheSameChain) {
  const TransferAuthorization authorization = Authorization(10'000, 1);
  const Hash32 settled = Send(Relay(authorization));  // delay 0: mined at once
  const Hash32 reverted = Send(Relay(authorization));
  devnet_->SetMineDelayMs(5000);
  const Hash32 pending = Send(Relay(Authorization(20'000, 2)));
  const SignedTransaction dropped = Relay(Authorization(30'000, 3));
  Send(dropped);
  ASSERT_TRUE(*devnet_->DropTransaction(dropped.hash));
  ASSERT_TRUE(devnet_->Mint(other_, U256(5)).ok());
  minted_ = *U256::CheckedAdd(minted_, U256(5));
  const std::vector<Hash32> hashes = {settled, reverted, pending, dropped.hash};
  const auto snapshot = [&] {
    Snapshot s;
    for (const Address& owner : {payer_, seller_, other_}) s.balances.push_back(Balance(owner));
    s.relayer_nonce = *devnet_->PendingNonce(relayer_);
    s.block_number = *devnet_->BlockNumber();
    s.timestamp = *devnet_->LatestBlockTimestamp();
    for (const Hash32& hash : hashes) {
      s.receipts.push_back(*devnet_->GetReceipt(hash));
      s.transactions.push_back(*devnet_->GetTransaction(hash));
    }
    return s;
  };
  const Snapshot before = snapshot();
  EXPECT_EQ(before.relayer_nonce, 3u);
  EXPECT_EQ(before.block_number, 2u);
  clock_.Advance(1000);
  OpenDevnet(Config(0, path_));
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(devnet_->RevertReason(reverted),
            std::optional<std::string>("FiatTokenV2: authorization is used or canceled"));
  // The pending transaction keeps its due time across the restart.
  clock_.Advance(4000);
  EXPECT_EQ(ReceiptOf(pending)->status, 1);
  EXPECT_EQ(Balance(seller_), U256(30'000));
  EXPECT_EQ(Send(dropped), dropped.hash);  // still sendable: the drop was recorded too
  const Snapshot after = snapshot();
  OpenDevnet(Config(0, path_));
  EXPECT_EQ(snapshot(), after);
}

TEST_F(DevnetPersistenceTest, AReorganisationIsReplayedToo) {
  const Hash32 kept = Send(Relay(Authorization(10'000, 1)));
  clock_.Advance(1000);
  const Hash32 moved = Send(Relay(Authorization(20'000, 2)));
  ASSERT_TRUE(ReceiptOf(moved).has_value());
  devnet_->SetMineDelayMs(3000);
  ASSERT_EQ(*devnet_->Reorg(1), 1u);
  OpenDevnet(Config(0, path_));  // reopened: the removed block stays removed, due as before
  EXPECT_EQ(*devnet_->BlockNumber(), 1u);
  EXPECT_TRUE(ReceiptOf(kept).has_value());
  EXPECT_FALSE(ReceiptOf(moved).has_value());
  EXPECT_EQ(Balance(seller_), U256(10'000));
  clock_.Advance(3000);
  EXPECT_EQ(ReceiptOf(moved)->status, 1);
  EXPECT_EQ(Balance(seller_), U256(30'000));
}

TEST_F(DevnetPersistenceTest, RefusesAFileOfAnotherChain) {
  devnet_.reset();
  DevnetConfig config = Config(0, path_);
  config.chain_id = kChainId + 1;
  Result<std::unique_ptr<Devnet>> opened = Devnet::Open(config, clock_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), "devnet_config_mismatch");
  config = Config(0, path_);
  config.token_name = "USD Coin";
  EXPECT_EQ(Devnet::Open(config, clock_).status().code(), "devnet_config_mismatch");
  OpenDevnet(Config(0, path_));
  EXPECT_EQ(Balance(payer_), U256(1'000'000));
}

TEST_F(DevnetPersistenceTest, UnwritableFileIsAnError) {
  DevnetConfig config = Config(0, directory_ + "/missing/devnet.sqlite");
  EXPECT_EQ(Devnet::Open(config, clock_).status().code(), "devnet_store");
}

// ---- Hostile input ----

TEST_F(DevnetTest, GarbageRawTransactionsAreRefusedWithoutHarm) {
  std::mt19937 random(42);
  for (int i = 0; i < 2000; ++i) {
    Bytes raw(random() % 300);
    for (uint8_t& byte : raw) byte = static_cast<uint8_t>(random());
    if (!raw.empty() && i % 2 == 0) raw[0] = 0x02;
    EXPECT_FALSE(devnet_->SendRawTransaction(raw).ok());
  }
  const SignedTransaction valid = Relay(Authorization(1, 1));
  for (size_t size = 0; size < valid.raw.size(); ++size) {
    const Bytes truncated(valid.raw.begin(), valid.raw.begin() + size);
    EXPECT_EQ(devnet_->SendRawTransaction(truncated).status().code(), kRpcError) << size;
  }
  for (std::string_view huge :
       {"0x02bfffffffffffffffff", "0x02ffffffffffffffffff", "0x02f9ffff", "0x02f8", "0x02c0",
        "0x02", "0x", "0x02cc808080808080808080c0808080"}) {
    EXPECT_EQ(devnet_->SendRawTransaction(test_util::HexBytes(huge)).status().code(), kRpcError)
        << huge;
  }
  EXPECT_EQ(devnet_->SendRawTransaction(Bytes(200'000, 0x02)).status().message(), "oversized data");
  // Flipping any one bit must not crash; some flips give a valid transaction of another sender.
  for (size_t at = 0; at < valid.raw.size(); ++at) {
    Bytes flipped = valid.raw;
    flipped[at] ^= 0x01;
    (void)devnet_->SendRawTransaction(flipped);
  }
  ASSERT_TRUE(devnet_->Mine().ok());
  // A flip in the relayer's r, s or yParity yields another relayer, and anyone may relay an
  // EIP-3009 authorization: it settles at most once.
  EXPECT_LE(Balance(seller_), U256(1));
}

TEST_F(DevnetTest, MalformedCalldataRevertsWithoutAReason) {
  const TransferAuthorization authorization = Authorization(1, 1);
  const Bytes good =
      EncodeTransferWithAuthorizationBytes(authorization, Sign(authorization, payer_key_));
  Bytes short_args(good.begin(), good.begin() + 4 + 100);
  Bytes huge_offset = good;
  std::fill(huge_offset.begin() + 4 + 6 * 32, huge_offset.begin() + 4 + 7 * 32, 0xff);
  Bytes huge_length = good;
  std::fill(huge_length.begin() + 4 + 7 * 32, huge_length.begin() + 4 + 8 * 32, 0xff);
  Bytes short_signature = good;
  short_signature[4 + 8 * 32 - 1] = 64;  // length word: 64 bytes
  Bytes dirty_address = good;
  dirty_address[4] = 1;
  std::vector<Hash32> hashes;
  for (const Bytes* data : {&short_args, &huge_offset, &huge_length, &dirty_address}) {
    EXPECT_EQ(devnet_->Call(token_, *data).status().message(), "execution reverted");
    hashes.push_back(Send(RelayData(*data, token_)));
  }
  const Hash32 bad_length = Send(RelayData(short_signature, token_));
  Mined(bad_length);
  for (const Hash32& hash : hashes) ExpectReverted(hash, "");
  ExpectReverted(bad_length, "FiatTokenV2: invalid signature");
}

}  // namespace
}  // namespace agentpay::chain
