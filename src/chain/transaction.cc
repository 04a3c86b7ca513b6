// EIP-1559 serialisation. The signed form repeats the unsigned fields and appends yParity (0/1,
// not the 27/28 of message signatures), r and s as minimal integers.
#include "chain/transaction.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "chain/keccak.h"
#include "chain/rlp.h"

namespace agentpay::chain {
namespace {

constexpr uint8_t kEip1559Type = 0x02;
constexpr size_t kEip1559Fields = 12;

// rpc_error, in geth's wording: the devnet answers clients with these messages.
Status DecodeError(std::string message) {
  return Status::Error(ErrorCode::kRpcError, std::move(message));
}

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

namespace {

// Reads the fields of a decoded RLP list; the first bad field sticks, later reads give zeros.
class FieldReader {
 public:
  explicit FieldReader(const std::vector<RlpItem>& items) : items_(items) {}
  const Status& status() const { return status_; }

  U256 Uint(size_t index, const char* name) {
    if (!status_.ok()) return U256();
    Result<U256> value = RlpDecodeUint(items_[index]);
    if (!value.ok()) Fail(name, value.status().message());
    return value.ok() ? *value : U256();
  }
  uint64_t Uint64(size_t index, const char* name) {
    const U256 value = Uint(index, name);
    if (value > U256(UINT64_MAX)) Fail(name, "does not fit in 64 bits");
    return value.Limb(0);
  }
  std::span<const uint8_t> String(size_t index, const char* name) {
    if (status_.ok() && items_[index].is_list) Fail(name, "expected a string, got a list");
    return status_.ok() ? items_[index].payload : std::span<const uint8_t>();
  }
  void List(size_t index, const char* name) {
    if (status_.ok() && !items_[index].is_list) Fail(name, "expected a list");
  }

 private:
  void Fail(const char* name, const std::string& what) {
    if (status_.ok()) status_ = DecodeError(std::string("rlp: field ") + name + ": " + what);
  }
  const std::vector<RlpItem>& items_;
  Status status_;
};

// keccak256(0x02 ‖ rlp(first nine fields)), re-using the encoded fields as they arrived.
Hash32 SigningHash(const std::vector<RlpItem>& items) {
  const uint8_t* begin = items[0].encoded.data();
  const uint8_t* end = items[8].encoded.data() + items[8].encoded.size();
  Bytes typed = {kEip1559Type};
  const Bytes list = RlpEncodeList({Bytes(begin, end)});
  typed.insert(typed.end(), list.begin(), list.end());
  return Keccak256(typed);
}

Result<Address> RecoverSender(const std::vector<RlpItem>& items, FieldReader& reader) {
  const U256 y_parity = reader.Uint(9, "yParity");
  const U256 r = reader.Uint(10, "r");
  const U256 s = reader.Uint(11, "s");
  if (!reader.status().ok()) return reader.status();
  if (y_parity > U256(1)) return DecodeError("invalid sender: yParity is neither 0 nor 1");
  Signature signature;
  const std::array<uint8_t, 32> r_bytes = r.ToBigEndian();
  const std::array<uint8_t, 32> s_bytes = s.ToBigEndian();
  std::copy(r_bytes.begin(), r_bytes.end(), signature.bytes.begin());
  std::copy(s_bytes.begin(), s_bytes.end(), signature.bytes.begin() + 32);
  signature.bytes[64] = static_cast<uint8_t>(27 + y_parity.Limb(0));
  Result<Address> sender = RecoverSigner(SigningHash(items), signature);
  if (!sender.ok()) return DecodeError("invalid sender: " + sender.status().message());
  return sender;
}

}  // namespace

Result<DecodedTransaction> DecodeRawTransaction(std::span<const uint8_t> raw) {
  if (raw.empty()) return DecodeError("typed transaction too short");
  if (raw[0] != kEip1559Type) return DecodeError("transaction type not supported");
  Result<RlpItem> list = RlpDecode(raw.subspan(1));
  if (!list.ok()) return DecodeError("rlp: " + list.status().message());
  Result<std::vector<RlpItem>> items = RlpListItems(*list, kEip1559Fields);
  if (!items.ok()) return DecodeError("rlp: " + items.status().message());
  if (items->size() != kEip1559Fields) {
    return DecodeError("rlp: expected 12 fields, got " + std::to_string(items->size()));
  }
  FieldReader reader(*items);
  DecodedTransaction transaction;
  transaction.chain_id = reader.Uint64(0, "chainId");
  transaction.nonce = reader.Uint64(1, "nonce");
  transaction.max_priority_fee_per_gas = reader.Uint(2, "maxPriorityFeePerGas");
  transaction.max_fee_per_gas = reader.Uint(3, "maxFeePerGas");
  transaction.gas_limit = reader.Uint64(4, "gas");
  const std::span<const uint8_t> to = reader.String(5, "to");
  transaction.value = reader.Uint(6, "value");
  const std::span<const uint8_t> data = reader.String(7, "data");
  reader.List(8, "accessList");
  if (!reader.status().ok()) return reader.status();
  if (to.size() == 20) {
    transaction.to = Address{};
    std::copy(to.begin(), to.end(), transaction.to->bytes.begin());
  } else if (!to.empty()) {
    return DecodeError("rlp: field to: expected 20 bytes, got " + std::to_string(to.size()));
  }
  transaction.data.assign(data.begin(), data.end());
  Result<Address> sender = RecoverSender(*items, reader);
  if (!sender.ok()) return sender.status();
  transaction.from = *sender;
  transaction.y_parity = static_cast<uint8_t>(reader.Uint(9, "yParity").Limb(0));  // checked ≤ 1
  transaction.r = reader.Uint(10, "r");
  transaction.s = reader.Uint(11, "s");
  return transaction;
}

}  // namespace agentpay::chain
