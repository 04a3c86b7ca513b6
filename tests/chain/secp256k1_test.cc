// Signer recovery with the checks tokens apply (low s, v ∈ {27, 28}), deterministic signing, and
// key handling. The x402 spec's signature is the anchor; its high-s twin must be refused even
// though libsecp256k1 alone would recover the real signer from it.
#include "chain/secp256k1.h"

#include <gtest/gtest.h>

#include "chain/eip712.h"
#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::AddressFrom;
using test_util::HashOf;
using test_util::HighSTwin;

constexpr std::string_view kX402Digest =
    "0xf256992871671abcb27ff92885a7afa46218724e5fc0bac35d050115aa1d22e6";
constexpr std::string_view kX402Signature =
    "0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf58"
    "36e9bd15092f9ecab05ded3d6293af148b571c";
constexpr std::string_view kAnvilKey0 =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";


Signature X402Signature() {
  Result<Signature> signature = ParseSignature(kX402Signature);
  EXPECT_TRUE(signature.ok());
  return signature.ok() ? *signature : Signature{};
}

PrivateKey AnvilKey0() {
  Result<PrivateKey> key = ParsePrivateKey(kAnvilKey0);
  EXPECT_TRUE(key.ok());
  return *key;
}

TEST(Secp256k1, RecoversX402PublishedSigner) {
  Result<Address> signer = RecoverSigner(HashOf(kX402Digest), X402Signature());
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  EXPECT_EQ(ToChecksumHex(*signer), "0x857b06519E91e3A54538791bDbb0E22373e36b66");
}

TEST(Secp256k1, RefusesHighSTwin) {
  Result<Address> signer = RecoverSigner(HashOf(kX402Digest), HighSTwin(X402Signature()));
  ASSERT_FALSE(signer.ok());
  EXPECT_EQ(signer.status().code(), "invalid_signature_s");
}

TEST(Secp256k1, RefusesVOutsideTwentySevenTwentyEight) {
  for (uint8_t v : {0, 1, 26, 29, 35, 36, 255}) {
    Signature signature = X402Signature();
    signature.bytes[64] = v;
    Result<Address> signer = RecoverSigner(HashOf(kX402Digest), signature);
    ASSERT_FALSE(signer.ok()) << int{v};
    EXPECT_EQ(signer.status().code(), "invalid_signature_v") << int{v};
  }
}

TEST(Secp256k1, FlippedBitsNeverYieldTheSigner) {
  const Address real = AddressFrom("0x857b06519E91e3A54538791bDbb0E22373e36b66");
  for (size_t bit : {0, 7, 100, 255}) {  // bits of r
    Signature signature = X402Signature();
    signature.bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Result<Address> signer = RecoverSigner(HashOf(kX402Digest), signature);
    if (signer.ok()) {
      EXPECT_NE(*signer, real) << bit;
    } else {
      EXPECT_EQ(signer.status().code(), "invalid_signature") << bit;
    }
  }
  Signature wrong_parity = X402Signature();
  wrong_parity.bytes[64] = 27;  // the published one is 28 (0x1c)
  Result<Address> other = RecoverSigner(HashOf(kX402Digest), wrong_parity);
  EXPECT_TRUE(!other.ok() || *other != real);
}

TEST(Secp256k1, RefusesOutOfRangeRAndS) {
  Signature zero_r = X402Signature();
  std::fill(zero_r.bytes.begin(), zero_r.bytes.begin() + 32, 0);
  EXPECT_EQ(RecoverSigner(HashOf(kX402Digest), zero_r).status().code(), "invalid_signature");
  Signature zero_s = X402Signature();
  std::fill(zero_s.bytes.begin() + 32, zero_s.bytes.begin() + 64, 0);
  EXPECT_EQ(RecoverSigner(HashOf(kX402Digest), zero_s).status().code(), "invalid_signature");
  Signature big_r = X402Signature();
  std::fill(big_r.bytes.begin(), big_r.bytes.begin() + 32, 0xff);
  EXPECT_EQ(RecoverSigner(HashOf(kX402Digest), big_r).status().code(), "invalid_signature");
  Signature s_is_n = X402Signature();
  const std::array<uint8_t, 32> order = test_util::kSecp256k1Order.ToBigEndian();
  std::copy(order.begin(), order.end(), s_is_n.bytes.begin() + 32);
  EXPECT_EQ(RecoverSigner(HashOf(kX402Digest), s_is_n).status().code(), "invalid_signature");
}

TEST(Secp256k1, ParseSignatureChecksShape) {
  EXPECT_TRUE(ParseSignature(kX402Signature).ok());
  for (std::string_view bad : {std::string_view(""), kX402Signature.substr(0, 130),
                               kX402Signature.substr(2), std::string_view("0x1c")}) {
    Result<Signature> signature = ParseSignature(bad);
    ASSERT_FALSE(signature.ok()) << bad;
    EXPECT_EQ(signature.status().code(), "invalid_signature");
  }
  EXPECT_FALSE(ParseSignature(std::string(kX402Signature) + "00").ok());
}

TEST(Secp256k1, AnvilKeyAddress) {
  EXPECT_EQ(ToChecksumHex(AddressOf(AnvilKey0())), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
}

TEST(Secp256k1, SignRecoverRoundTripIsDeterministicAndLowS) {
  const PrivateKey key = AnvilKey0();
  const Address address = AddressOf(key);
  for (uint8_t seed = 0; seed < 32; ++seed) {
    Hash32 digest{};
    digest.fill(seed);
    digest[0] = static_cast<uint8_t>(seed * 37);
    Result<Signature> signature = SignDigest(digest, key);
    ASSERT_TRUE(signature.ok());
    EXPECT_TRUE(signature->v() == 27 || signature->v() == 28);
    Result<Address> signer = RecoverSigner(digest, *signature);  // would fail on a high s
    ASSERT_TRUE(signer.ok()) << signer.status().ToString();
    EXPECT_EQ(*signer, address);
    EXPECT_EQ(*SignDigest(digest, key), *signature);  // RFC 6979: same input, same signature
    EXPECT_EQ(RecoverSigner(digest, HighSTwin(*signature)).status().code(), "invalid_signature_s");
  }
}

TEST(Secp256k1, ParsePrivateKeyRefusesBadKeys) {
  const std::string order_hex = Hex(test_util::kSecp256k1Order.ToBigEndian());
  const std::string below_order = Hex(U256::CheckedSub(test_util::kSecp256k1Order, U256(1))->ToBigEndian());
  EXPECT_TRUE(ParsePrivateKey(below_order).ok());
  EXPECT_TRUE(ParsePrivateKey("0x" + std::string(63, '0') + "1").ok());
  for (const std::string& bad :
       {std::string("0x") + std::string(64, '0'), order_hex,
        std::string("0x") + std::string(64, 'f'), std::string(kAnvilKey0.substr(2)),
        std::string(kAnvilKey0.substr(0, 64)), std::string("")}) {
    Result<PrivateKey> key = ParsePrivateKey(bad);
    ASSERT_FALSE(key.ok()) << bad;
    EXPECT_EQ(key.status().code(), "invalid_private_key");
    EXPECT_EQ(key.status().message().find(kAnvilKey0.substr(2, 16)), std::string::npos);
  }
}

}  // namespace
}  // namespace agentpay::chain
