// EIP-712 encodeData for fixed-shape structs: every member is a static 32-byte word (strings are
// hashed first), so the encoding is a plain concatenation of words.
#include "chain/eip712.h"

#include <algorithm>
#include <array>
#include <span>

#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

// Appends 32-byte words to a fixed buffer (the largest struct here has 7 members); one hash over
// the result. No allocation: this runs once per verified payment.
class WordWriter {
 public:
  void Word(std::span<const uint8_t, 32> word) {
    AGENTPAY_CHECK(size_ + 32 <= bytes_.size());
    std::copy(word.begin(), word.end(), bytes_.begin() + size_);
    size_ += 32;
  }
  void Uint(const U256& value) { Word(value.ToBigEndian()); }
  void AddressWord(const Address& address) {
    Hash32 word{};  // addresses are left-padded to 32 bytes
    std::copy(address.bytes.begin(), address.bytes.end(), word.begin() + 12);
    Word(word);
  }
  Hash32 Hash() const { return Keccak256(std::span<const uint8_t>(bytes_.data(), size_)); }

 private:
  std::array<uint8_t, 7 * 32> bytes_;
  size_t size_ = 0;
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
  std::array<uint8_t, 2 + 32 + 32> message{0x19, 0x01};
  std::copy(domain_separator.begin(), domain_separator.end(), message.begin() + 2);
  std::copy(struct_hash.begin(), struct_hash.end(), message.begin() + 34);
  return Keccak256(message);
}

}  // namespace agentpay::chain
