// The settlement transaction and its Transfer log; see settlement_tx.h.
#include "chain/settlement_tx.h"

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

std::vector<TransferEvent> FindTransfers(const Receipt& receipt, const Address& token,
                                         const Address& from, const Address& to) {
  std::vector<TransferEvent> found;
  for (const LogEntry& log : receipt.logs) {
    if (log.address != token) continue;
    Result<TransferEvent> event = DecodeTransferEvent(log.topics, log.data);
    if (event.ok() && event->from == from && event->to == to) found.push_back(*event);
  }
  return found;
}

std::optional<TransferEvent> FindTransfer(const Receipt& receipt, const Address& token,
                                          const Address& from, const Address& to) {
  std::vector<TransferEvent> found = FindTransfers(receipt, token, from, to);
  if (found.empty()) return std::nullopt;
  return found.front();
}

}  // namespace agentpay::chain
