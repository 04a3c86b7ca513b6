// secp256k1 ECDSA as Ethereum uses it: 65-byte r ‖ s ‖ v signatures over 32-byte digests, signer
// recovery, and addresses derived from keys. Recovery enforces what tokens enforce (low s,
// v ∈ {27, 28}), because libsecp256k1 alone accepts signatures that never settle on chain.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "chain/bytes.h"
#include "core/result.h"

namespace agentpay::chain {

// r (32) ‖ s (32) ‖ v (1), v ∈ {27, 28} for the signatures this module produces and accepts.
struct Signature {
  std::array<uint8_t, 65> bytes{};
  uint8_t v() const { return bytes[64]; }
  friend bool operator==(const Signature&, const Signature&) = default;
};

// 0x + 130 hex digits. Only the shape is checked here; RecoverSigner judges the values.
// Errors: "invalid_signature".
Result<Signature> ParseSignature(std::string_view text);

// A secp256k1 secret key in [1, n-1]. Deliberately not printable; wiped on destruction.
class PrivateKey {
 public:
  // Precondition: bytes is a valid secret key (use ParsePrivateKey for untrusted input).
  explicit PrivateKey(const std::array<uint8_t, 32>& bytes);
  PrivateKey(const PrivateKey& other) = default;
  PrivateKey& operator=(const PrivateKey& other) = default;
  ~PrivateKey();
  const std::array<uint8_t, 32>& bytes() const { return bytes_; }

 private:
  std::array<uint8_t, 32> bytes_;
};

// 0x + 64 hex digits, in range. Errors: "invalid_private_key" (the message never echoes the key).
Result<PrivateKey> ParsePrivateKey(std::string_view text);

// The last 20 bytes of keccak256 of the uncompressed public key without its 0x04 prefix.
Address AddressOf(const PrivateKey& key);

// Deterministic (RFC 6979), low-s, v ∈ {27, 28}. Errors: "signing_failed" (not expected to occur).
Result<Signature> SignDigest(const Hash32& digest, const PrivateKey& key);

// Recovers the address that signed digest. Error codes (stable; v is checked first):
//   "invalid_signature_v"  v is not 27 or 28 (0/1 are refused too, as tokens refuse them)
//   "invalid_signature_s"  n/2 < s < n (the malleable high-s twin of a valid signature)
//   "invalid_signature"    r or s is zero or ≥ n, or no public key recovers
Result<Address> RecoverSigner(const Hash32& digest, const Signature& signature);

}  // namespace agentpay::chain
