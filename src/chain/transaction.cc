// EIP-1559 serialisation. The signed form repeats the unsigned fields and appends yParity (0/1,
// not the 27/28 of message signatures), r and s as minimal integers.
#include "chain/transaction.h"

#include "chain/keccak.h"
#include "chain/rlp.h"

namespace agentpay::chain {
namespace {

constexpr uint8_t kEip1559Type = 0x02;

std::vector<Bytes> UnsignedFields(const Eip1559Transaction& transaction) {
  std::vector<Bytes> fields;
  fields.reserve(12);
  fields.push_back(RlpEncodeUint(U256(transaction.chain_id)));
  fields.push_back(RlpEncodeUint(U256(transaction.nonce)));
  fields.push_back(RlpEncodeUint(transaction.max_priority_fee_per_gas));
  fields.push_back(RlpEncodeUint(transaction.max_fee_per_gas));
  fields.push_back(RlpEncodeUint(U256(transaction.gas_limit)));
  fields.push_back(transaction.to ? RlpEncodeBytes(transaction.to->bytes) : RlpEncodeBytes({}));
  fields.push_back(RlpEncodeUint(transaction.value));
  fields.push_back(RlpEncodeBytes(transaction.data));
  fields.push_back(RlpEncodeList({}));  // access list
  return fields;
}

// Built by reserve + push_back: g++ 12 reports a false -Warray-bounds for an initializer-list
// vector followed by insert here.
Bytes Typed(const Bytes& rlp) {
  Bytes typed;
  typed.reserve(1 + rlp.size());
  typed.push_back(kEip1559Type);
  typed.insert(typed.end(), rlp.begin(), rlp.end());
  return typed;
}

}  // namespace

Hash32 Eip1559SigningHash(const Eip1559Transaction& transaction) {
  return Keccak256(Typed(RlpEncodeList(UnsignedFields(transaction))));
}

Result<SignedTransaction> SignEip1559(const Eip1559Transaction& transaction,
                                      const PrivateKey& key) {
  if (transaction.data.size() > kMaxTransactionDataBytes) {
    return Status::Error(ErrorCode::kTransactionTooLarge,
                         "transaction data is " + std::to_string(transaction.data.size()) +
                             " bytes; the limit is " + std::to_string(kMaxTransactionDataBytes));
  }
  Result<Signature> signature = SignDigest(Eip1559SigningHash(transaction), key);
  if (!signature.ok()) return signature.status();
  const std::span<const uint8_t> bytes(signature->bytes);
  std::vector<Bytes> fields = UnsignedFields(transaction);
  fields.push_back(RlpEncodeUint(U256(signature->v() - 27u)));  // yParity
  fields.push_back(RlpEncodeUint(U256::FromBigEndian(bytes.subspan<0, 32>())));
  fields.push_back(RlpEncodeUint(U256::FromBigEndian(bytes.subspan<32, 32>())));
  SignedTransaction signed_transaction;
  signed_transaction.raw = Typed(RlpEncodeList(fields));
  signed_transaction.hash = Keccak256(signed_transaction.raw);
  return signed_transaction;
}

}  // namespace agentpay::chain
