// Keccak-256 through Crypto++. Kept in its own translation unit so that only this file pulls in
// the Crypto++ headers.
#include "chain/keccak.h"

#include <cryptopp/keccak.h>

namespace agentpay::chain {

Hash32 Keccak256(std::span<const uint8_t> data) {
  static_assert(CryptoPP::Keccak_256::DIGESTSIZE == std::tuple_size_v<Hash32>);
  CryptoPP::Keccak_256 hasher;
  hasher.Update(data.data(), data.size());
  Hash32 digest;
  hasher.Final(digest.data());
  return digest;
}

Hash32 Keccak256(std::string_view text) {
  return Keccak256(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace agentpay::chain
