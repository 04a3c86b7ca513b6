// EIP-712 encodeData for fixed-shape structs: every member is a static 32-byte word (strings are
// hashed first), so the encoding is a plain concatenation of words.
#include "chain/eip712.h"

#include <algorithm>

#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

// Appends 32-byte words; one hash over the result.
class WordWriter {
 public:
  void Word(std::span<const uint8_t, 32> word) {
    bytes_.insert(bytes_.end(), word.begin(), word.end());
  }
  void Uint(const U256& value) { Word(value.ToBigEndian()); }
  void AddressWord(const Address& address) {
    bytes_.insert(bytes_.end(), 12, 0);  // addresses are left-padded to 32 bytes
    bytes_.insert(bytes_.end(), address.bytes.begin(), address.bytes.end());
  }
  Hash32 Hash() const { return Keccak256(bytes_); }

 private:
  Bytes bytes_;
};

}  // namespace

// Computed once (thread-safe static initialisation): every payment verification needs both.
Hash32 Eip712DomainTypehash() {
  static const Hash32 typehash = Keccak256(kEip712DomainType);
  return typehash;
}

Hash32 TransferWithAuthorizationTypehash() {
  static const Hash32 typehash = Keccak256(kTransferWithAuthorizationType);
  return typehash;
}

Hash32 DomainSeparator(std::string_view name, std::string_view version, uint64_t chain_id,
                       const Address& verifying_contract) {
  WordWriter writer;
  writer.Word(Eip712DomainTypehash());
  writer.Word(Keccak256(name));
  writer.Word(Keccak256(version));
  writer.Uint(U256(chain_id));
  writer.AddressWord(verifying_contract);
  return writer.Hash();
}

Hash32 TransferWithAuthorizationStructHash(const TransferAuthorization& authorization) {
  WordWriter writer;
  writer.Word(TransferWithAuthorizationTypehash());
  writer.AddressWord(authorization.from);
  writer.AddressWord(authorization.to);
  writer.Uint(authorization.value);
  writer.Uint(authorization.valid_after);
  writer.Uint(authorization.valid_before);
  writer.Word(authorization.nonce);
  return writer.Hash();
}

Hash32 Eip3009Digest(const Hash32& domain_separator, const TransferAuthorization& authorization) {
  const Hash32 struct_hash = TransferWithAuthorizationStructHash(authorization);
  Bytes message = {0x19, 0x01};
  message.insert(message.end(), domain_separator.begin(), domain_separator.end());
  message.insert(message.end(), struct_hash.begin(), struct_hash.end());
  return Keccak256(message);
}

}  // namespace agentpay::chain
