// EIP-712 / EIP-3009 hashing against the constants in NOTES.md and the x402 spec's published
// vector: if these drift, every payment signature fails to verify.
#include "chain/eip712.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace agentpay::chain {
namespace {

using test_util::AddressFrom;
using test_util::HashOf;

TransferAuthorization X402SpecAuthorization() {
  TransferAuthorization authorization;
  authorization.from = AddressFrom("0x857b06519E91e3A54538791bDbb0E22373e36b66");
  authorization.to = AddressFrom("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
  authorization.value = U256(10000);
  authorization.valid_after = U256(1740672089);
  authorization.valid_before = U256(1740672154);
  authorization.nonce =
      HashOf("0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480");
  return authorization;
}

TEST(Eip712, TypehashesMatchDocumentedConstants) {
  EXPECT_EQ(Hex(TransferWithAuthorizationTypehash()),
            "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267");
  EXPECT_EQ(Hex(Eip712DomainTypehash()),
            "0x8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f");
}

TEST(Eip712, X402PublishedVectorDigest) {
  const Hash32 domain = DomainSeparator("USDC", "2", 84532,
                                        AddressFrom("0x036CbD53842c5426634e7929541eC2318f3dCF7e"));
  EXPECT_EQ(Hex(Eip3009Digest(domain, X402SpecAuthorization())),
            "0xf256992871671abcb27ff92885a7afa46218724e5fc0bac35d050115aa1d22e6");
}

TEST(Eip712, EveryFieldChangesTheDigest) {
  const Address token = AddressFrom("0x036CbD53842c5426634e7929541eC2318f3dCF7e");
  const Hash32 domain = DomainSeparator("USDC", "2", 84532, token);
  const Hash32 reference = Eip3009Digest(domain, X402SpecAuthorization());
  // The NOTES.md trap: Base mainnet's name on a Base Sepolia domain.
  EXPECT_NE(Eip3009Digest(DomainSeparator("USD Coin", "2", 84532, token), X402SpecAuthorization()),
            reference);
  EXPECT_NE(Eip3009Digest(DomainSeparator("USDC", "1", 84532, token), X402SpecAuthorization()),
            reference);
  EXPECT_NE(Eip3009Digest(DomainSeparator("USDC", "2", 8453, token), X402SpecAuthorization()),
            reference);
  TransferAuthorization changed = X402SpecAuthorization();
  changed.value = U256(10001);
  EXPECT_NE(Eip3009Digest(domain, changed), reference);
  changed = X402SpecAuthorization();
  changed.nonce[31] ^= 1;
  EXPECT_NE(Eip3009Digest(domain, changed), reference);
  changed = X402SpecAuthorization();
  std::swap(changed.from, changed.to);
  EXPECT_NE(Eip3009Digest(domain, changed), reference);
}

}  // namespace
}  // namespace agentpay::chain
