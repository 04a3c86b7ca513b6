// The settlement transaction and its Transfer log; see settlement_tx.h.
#include "chain/settlement_tx.h"

#include <algorithm>

#include "chain/keccak.h"

namespace agentpay::chain {

Result<SignedTransaction> BuildTransferWithAuthorizationTx(
    const TransferAuthorization& authorization, const Signature& signature, const Address& token,
    uint64_t chain_id, uint64_t relayer_nonce, const FeeData& fees, uint64_t gas_limit,
    const PrivateKey& relayer_key) {
  AGENTPAY_CHECK(gas_limit > 0);
  if (fees.max_fee_per_gas < fees.max_priority_fee_per_gas) {
    return Status::Error(ErrorCode::kInvalidFees, "max fee per gas is below the priority fee");
  }
  Eip1559Transaction transaction;
  transaction.chain_id = chain_id;
  transaction.nonce = relayer_nonce;
  transaction.max_priority_fee_per_gas = fees.max_priority_fee_per_gas;
  transaction.max_fee_per_gas = fees.max_fee_per_gas;
  transaction.gas_limit = gas_limit;
  transaction.to = token;
  transaction.data = EncodeTransferWithAuthorizationVrs(authorization, signature);
  return SignEip1559(transaction, relayer_key);
}


bool ShowsAuthorizationSettled(const Receipt& receipt, const Address& token,
                               const TransferAuthorization& authorization) {
  static const Hash32 kAuthorizationUsed =
      Keccak256(std::string_view("AuthorizationUsed(address,bytes32)"));
  auto is_our_transfer = [&](size_t i) {
    if (i >= receipt.logs.size() || receipt.logs[i].address != token) return false;
    Result<TransferEvent> event = DecodeTransferEvent(receipt.logs[i].topics, receipt.logs[i].data);
    return event.ok() && event->from == authorization.from && event->to == authorization.to &&
           event->value == authorization.value;
  };
  for (size_t i = 0; i < receipt.logs.size(); ++i) {
    const LogEntry& log = receipt.logs[i];
    if (log.address != token || log.topics.size() != 3 || log.topics[0] != kAuthorizationUsed ||
        !std::equal(authorization.from.bytes.begin(), authorization.from.bytes.end(),
                    log.topics[1].begin() + 12) ||
        !std::all_of(log.topics[1].begin(), log.topics[1].begin() + 12,
                     [](uint8_t b) { return b == 0; }) ||
        log.topics[2] != authorization.nonce) {
      continue;
    }
    return is_our_transfer(i + 1) || (i > 0 && is_our_transfer(i - 1));
  }
  return false;
}

std::optional<TransferEvent> FindTransfer(const Receipt& receipt, const Address& token,
                                          const Address& from, const Address& to) {
  for (const LogEntry& log : receipt.logs) {
    if (log.address != token) continue;
    Result<TransferEvent> event = DecodeTransferEvent(log.topics, log.data);
    if (event.ok() && event->from == from && event->to == to) return *event;
  }
  return std::nullopt;
}

}  // namespace agentpay::chain
