// AsMined and AsSettled (src/settlement/settler.h): when the chain mines a transaction the stored
// one replaced, the two change places, so that the operation reports the hash that is on chain.
#include "settlement/settler.h"

#include <gtest/gtest.h>

#include "chain/bytes.h"
#include "chain/keccak.h"

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

}  // namespace
}  // namespace agentpay
