// AsMined and AsSettled (src/settlement/settler.h): when the chain mines a transaction the stored
// one replaced, the two change places, so that the operation reports the hash that is on chain.
#include "settlement/settler.h"

#include <gtest/gtest.h>

#include "../gateway/gateway_test_support.h"
#include "chain/bytes.h"
#include "chain/devnet.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/multicall.h"
#include "chain/settlement_tx.h"
#include "chain/transaction.h"

namespace agentpay {
namespace {

std::string HashOf(const std::string& raw_hex) {
  return chain::Hex(chain::Keccak256(*chain::ParseHex(raw_hex)));
}

X402PaymentRecord Replaced() {
  X402PaymentRecord record;
  record.operation_id = "op_1";
  record.raw_tx_hex = "0x02cc";
  record.tx_hash = HashOf(record.raw_tx_hex);
  record.replaced_raw_txs = {"0x02aa", "0x02bb"};  // oldest first
  return record;
}

TEST(AsMined, AnOlderTransactionMinedTakesThePlaceOfItsReplacement) {
  const X402PaymentRecord record = Replaced();
  X402PaymentRecord mined = AsMined(record, HashOf("0x02aa"));
  EXPECT_EQ(mined.tx_hash, HashOf("0x02aa"));
  EXPECT_EQ(mined.raw_tx_hex, "0x02aa");
  EXPECT_EQ(mined.replaced_raw_txs, (std::vector<std::string>{"0x02bb", "0x02cc"}));
  // Its own hash, an empty one or one it never had: unchanged.
  EXPECT_EQ(AsMined(record, record.tx_hash), record);
  EXPECT_EQ(AsMined(record, ""), record);
  EXPECT_EQ(AsMined(record, "0x" + std::string(64, 'f')), record);
}

TEST(AsSettled, RecordsTheReceiptsBlockAndWhen) {
  ChainObservation seen;
  seen.receipt = ReceiptView::kSuccessWithTransfer;
  seen.receipt_tx_hash = HashOf("0x02bb");
  seen.receipt_block = 42;
  seen.receipt_block_hash = "0x" + std::string(64, '4');
  const X402PaymentRecord settled = AsSettled(Replaced(), seen, 123456);
  EXPECT_EQ(settled.tx_hash, HashOf("0x02bb"));
  EXPECT_EQ(settled.settled_block, 42);
  EXPECT_EQ(settled.settled_block_hash, seen.receipt_block_hash);
  EXPECT_EQ(settled.settled_ms, 123456);
}

using testing_support::Key;
using testing_support::ManualClock;

// Batched settlement (issue 38 item 3): the inputs of several payments joined, their one
// transaction, its replacement, and the check for Multicall3, on the built-in devnet.
class SettlerBatchTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kChainId = 1337;
  void SetUp() override {
    token_ = *chain::ParseAddress("0xa6e0000000000000000000000000000000000402");
    pay_to_ = *chain::ParseAddress("0x9a7e000000000000000000000000000000000402");
    auto opened = testing_support::OpenTestDevnet(clock_, token_, kChainId);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
    ASSERT_TRUE(devnet_->Mint(chain::AddressOf(Key(0x01)), chain::U256(1'000'000)).ok());
    settler_ = std::make_unique<Settler>(
        *devnet_, testing_support::TestSettlerConfig(token_, kChainId), Key(0x99));
  }

  // A payment of `value` signed by Key(0x01), stored as the gateway stores it (unsigned).
  X402PaymentRecord Payment(int64_t value, const std::string& op_id) {
    chain::TransferAuthorization a;
    a.from = chain::AddressOf(Key(0x01));
    a.to = pay_to_;
    a.value = chain::U256(static_cast<uint64_t>(value));
    a.valid_after = chain::U256(0);
    a.valid_before = chain::U256(static_cast<uint64_t>(clock_.NowMs() / 1000 + 600));
    a.nonce[31] = static_cast<uint8_t>(++nonces_);
    auto digest =
        chain::Eip3009Digest(chain::DomainSeparator("USD Coin", "2", kChainId, token_), a);
    X402PaymentRecord record;
    record.operation_id = op_id;
    record.authorization = {chain::ToLowerHex(a.from), chain::Hex(a.nonce), 0,
                            a.valid_before.ToInt64(), value};
    record.pay_to = chain::ToLowerHex(pay_to_);
    record.signature_hex = chain::Hex(chain::SignDigest(digest, Key(0x01))->bytes);
    return record;
  }

  TxInputs Inputs(uint64_t max_fee, uint64_t tip, int64_t nonce, uint64_t gas) {
    TxInputs inputs;
    inputs.fees.max_fee_per_gas = chain::U256(max_fee);
    inputs.fees.max_priority_fee_per_gas = chain::U256(tip);
    inputs.pending_nonce = nonce;
    inputs.gas_limit = gas;
    return inputs;
  }

  ManualClock clock_;
  chain::Address token_, pay_to_;
  std::unique_ptr<chain::Devnet> devnet_;
  std::unique_ptr<Settler> settler_;
  int nonces_ = 0;
};

TEST_F(SettlerBatchTest, TogetherTakesTheHighestFeesAndNonceAndSumsTheGas) {
  const TxInputs one = Inputs(30, 2, 7, 100'000);
  EXPECT_EQ(Settler::Together({&one, 1}).gas_limit, 100'000u);  // one payment: its own inputs
  const std::vector<TxInputs> each = {one, Inputs(40, 1, 5, 90'000), Inputs(35, 3, 9, 110'000)};
  const TxInputs together = Settler::Together(each);
  EXPECT_EQ(together.fees.max_fee_per_gas, chain::U256(40));
  EXPECT_EQ(together.fees.max_priority_fee_per_gas, chain::U256(3));
  EXPECT_EQ(together.pending_nonce, 9);
  EXPECT_EQ(together.gas_limit, 300'000u + 20'000u);
}

TEST_F(SettlerBatchTest, PaymentsSignedTogetherShareOneAggregate3AndEachSettlesOnItsOwn) {
  std::vector<X402PaymentRecord> records = {Payment(100, "op_a"), Payment(200, "op_b"),
                                            Payment(300, "op_c")};
  auto fees = devnet_->Fees();
  ASSERT_TRUE(fees.ok());
  TxInputs inputs;
  inputs.fees = *fees;
  inputs.gas_limit = 3 * 120'000;
  auto signed_batch = settler_->SignTogether(records, inputs, 0, clock_.NowMs());
  ASSERT_TRUE(signed_batch.ok()) << signed_batch.status().ToString();
  ASSERT_EQ(signed_batch->size(), 3u);
  const X402PaymentRecord& first = signed_batch->front();
  for (const X402PaymentRecord& member : *signed_batch) {
    EXPECT_EQ(member.tx_hash, first.tx_hash);
    EXPECT_EQ(member.raw_tx_hex, first.raw_tx_hex);
    EXPECT_EQ(member.relayer_nonce, 0);
    EXPECT_EQ(member.broadcasts, 1);
  }
  // The transaction: the relayer's, to Multicall3, each payment's transfer allowed to fail alone.
  auto decoded = chain::DecodeRawTransaction(*chain::ParseHex(first.raw_tx_hex));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->from, settler_->relayer());
  EXPECT_EQ(decoded->to, chain::Multicall3Address());
  auto calls = chain::DecodeAggregate3(decoded->data);
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*calls)[i].target, token_);
    EXPECT_TRUE((*calls)[i].allow_failure);
    EXPECT_EQ((*calls)[i].call_data, chain::EncodeTransferWithAuthorizationVrs(
                                         *AuthorizationOf(records[i]), *SignatureOf(records[i])));
  }
  ASSERT_TRUE(settler_->Broadcast(first).ok());
  for (const X402PaymentRecord& member : *signed_batch) {
    auto look = settler_->LookForReceipt(member);
    ASSERT_TRUE(look.ok());
    EXPECT_EQ(look->view, ReceiptView::kSuccessWithTransfer) << member.operation_id;
  }
  EXPECT_EQ(devnet_->BalanceOf(token_, pay_to_)->ToInt64(), 600);
  // One payment alone is Sign's plain transfer, not a batch.
  X402PaymentRecord alone = Payment(50, "op_d");
  auto one = settler_->SignTogether({alone}, inputs, 1, clock_.NowMs());
  auto plain = settler_->Sign(alone, inputs, 1, clock_.NowMs());
  ASSERT_TRUE(one.ok() && plain.ok());
  EXPECT_EQ(one->front(), *plain);
}

TEST_F(SettlerBatchTest, ABatchsReplacementIsTheSameCallsAtTheSameNonceAtAHigherFee) {
  std::vector<X402PaymentRecord> records = {Payment(100, "op_a"), Payment(200, "op_b")};
  TxInputs inputs;
  inputs.fees = *devnet_->Fees();
  inputs.gas_limit = 240'000;
  auto signed_batch = settler_->SignTogether(records, inputs, 4, clock_.NowMs());
  ASSERT_TRUE(signed_batch.ok());
  auto replaced = settler_->Replace(signed_batch->front(), clock_.NowMs(), Stuck::kHeldAtNextNonce);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  ASSERT_TRUE(replaced->record.has_value()) << replaced->decision.reason;
  auto before = chain::DecodeRawTransaction(*chain::ParseHex(signed_batch->front().raw_tx_hex));
  auto after = chain::DecodeRawTransaction(*chain::ParseHex(replaced->record->raw_tx_hex));
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(after->to, before->to);
  EXPECT_EQ(after->data, before->data);
  EXPECT_EQ(after->nonce, 4u);
  EXPECT_EQ(after->gas_limit, before->gas_limit);
  EXPECT_GT(after->max_fee_per_gas, before->max_fee_per_gas);
  ASSERT_EQ(replaced->record->replaced_raw_txs.size(), 1u);
  EXPECT_EQ(replaced->record->replaced_raw_txs[0], signed_batch->front().raw_tx_hex);
}

TEST_F(SettlerBatchTest, ANodeWithoutMulticall3IsRefusedForBatching) {
  // The devnet answers aggregate3 transactions but no eth_call at that address: as a node
  // without the contract would, it answers nothing, and batching is refused.
  Status checked = settler_->CheckMulticall3();
  EXPECT_EQ(checked.error(), ErrorCode::kInvalidConfig) << checked.ToString();
  EXPECT_NE(checked.message().find("0xcA11bde05977b3631167028862bE2a173976CA11"),
            std::string::npos);
}

}  // namespace
}  // namespace agentpay
