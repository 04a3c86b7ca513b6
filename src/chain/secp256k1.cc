// libsecp256k1 behind the Ethereum conventions. One context serves every thread: after creation
// it is only read, which libsecp256k1 documents as thread-safe. Signing is deterministic
// (RFC 6979), so no randomness is drawn here (DESIGN rule 1).
#include "chain/secp256k1.h"

#include <secp256k1.h>
#include <secp256k1_recovery.h>

#include <algorithm>

#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

// n/2 for the secp256k1 group order n, big-endian: the largest s tokens accept (EIP-2).
constexpr std::array<uint8_t, 32> kHalfOrder = {
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0};

// Created on first use and never destroyed, so that it outlives every static that might sign.
const secp256k1_context* Context() {
  static const secp256k1_context* const context = [] {
    secp256k1_context* created = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    AGENTPAY_CHECK(created != nullptr);
    return created;
  }();
  return context;
}

Address AddressOfPublicKey(const secp256k1_pubkey& public_key) {
  std::array<uint8_t, 65> serialized{};
  size_t size = serialized.size();
  AGENTPAY_CHECK(secp256k1_ec_pubkey_serialize(Context(), serialized.data(), &size, &public_key,
                                               SECP256K1_EC_UNCOMPRESSED) == 1);
  AGENTPAY_CHECK(size == 65 && serialized[0] == 0x04);
  const Hash32 hash = Keccak256(std::span<const uint8_t>(serialized).subspan(1));
  Address address;
  std::copy(hash.begin() + 12, hash.end(), address.bytes.begin());
  return address;
}

bool IsHighS(std::span<const uint8_t, 65> signature) {
  const auto s = signature.subspan<32, 32>();
  return std::lexicographical_compare(kHalfOrder.begin(), kHalfOrder.end(), s.begin(), s.end());
}

}  // namespace

PrivateKey::PrivateKey(const std::array<uint8_t, 32>& bytes) : bytes_(bytes) {
  AGENTPAY_CHECK(secp256k1_ec_seckey_verify(Context(), bytes_.data()) == 1);
}

PrivateKey::~PrivateKey() {
  // volatile so the compiler cannot drop the stores to memory that is about to die
  volatile uint8_t* bytes = bytes_.data();
  for (size_t i = 0; i < bytes_.size(); ++i) bytes[i] = 0;
}

Result<PrivateKey> ParsePrivateKey(std::string_view text) {
  Result<Hash32> bytes = ParseHash32(text);
  if (!bytes.ok()) {
    return Status::Error(ErrorCode::kInvalidPrivateKey,
                         "private key must be 0x followed by 64 hex digits");
  }
  const bool valid = secp256k1_ec_seckey_verify(Context(), bytes->data()) == 1;
  if (!valid) {
    return Status::Error(ErrorCode::kInvalidPrivateKey,
                         "private key is zero or not below the group order");
  }
  return PrivateKey(*bytes);
}

Result<Signature> ParseSignature(std::string_view text) {
  Result<Bytes> bytes = ParseHex(text, 65);
  if (!bytes.ok()) {
    return Status::Error(ErrorCode::kInvalidSignature, "signature: " + bytes.status().message());
  }
  Signature signature;
  std::copy(bytes->begin(), bytes->end(), signature.bytes.begin());
  return signature;
}

Address AddressOf(const PrivateKey& key) {
  secp256k1_pubkey public_key;
  AGENTPAY_CHECK(secp256k1_ec_pubkey_create(Context(), &public_key, key.bytes().data()) == 1);
  return AddressOfPublicKey(public_key);
}

Result<Signature> SignDigest(const Hash32& digest, const PrivateKey& key) {
  secp256k1_ecdsa_recoverable_signature recoverable;
  // nullptr nonce function: libsecp256k1's RFC 6979 default.
  if (secp256k1_ecdsa_sign_recoverable(Context(), &recoverable, digest.data(), key.bytes().data(),
                                       nullptr, nullptr) != 1) {
    return Status::Error(ErrorCode::kSigningFailed, "secp256k1 could not sign the digest");
  }
  Signature signature;
  int recovery_id = -1;
  secp256k1_ecdsa_recoverable_signature_serialize_compact(Context(), signature.bytes.data(),
                                                          &recovery_id, &recoverable);
  AGENTPAY_CHECK(recovery_id == 0 || recovery_id == 1);
  signature.bytes[64] = static_cast<uint8_t>(27 + recovery_id);
  // libsecp256k1 always emits low s; a high s here would be a library bug, not bad input.
  AGENTPAY_CHECK(!IsHighS(signature.bytes));
  return signature;
}

Result<Address> RecoverSigner(const Hash32& digest, const Signature& signature) {
  const uint8_t v = signature.v();
  if (v != 27 && v != 28) {
    return Status::Error(ErrorCode::kInvalidSignatureV,
                         "signature v must be 27 or 28, got " + std::to_string(v));
  }
  secp256k1_ecdsa_recoverable_signature recoverable;
  if (secp256k1_ecdsa_recoverable_signature_parse_compact(Context(), &recoverable,
                                                          signature.bytes.data(), v - 27) != 1) {
    return Status::Error(ErrorCode::kInvalidSignature,
                         "signature r or s is not below the group order");
  }
  if (IsHighS(signature.bytes)) {
    return Status::Error(ErrorCode::kInvalidSignatureS,
                         "signature s is above n/2 (malleable high-s form)");
  }
  secp256k1_pubkey public_key;
  if (secp256k1_ecdsa_recover(Context(), &public_key, &recoverable, digest.data()) != 1) {
    return Status::Error(ErrorCode::kInvalidSignature,
                         "no public key recovers from this signature");
  }
  return AddressOfPublicKey(public_key);
}

}  // namespace agentpay::chain
