// VerifyExact against the x402 spec's published payment (which must verify inside its window) and
// one minimal mutation per Failure, plus payloads signed here to show the checks' order and that
// only a signature by `from` under our exact domain passes.
#include "x402/verify.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <set>

#include "../chain/test_util.h"
#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "spec_examples.h"

namespace agentpay::x402 {
namespace {

using chain::test_util::HighSTwin;
using spec::AddressOf;

constexpr std::string_view kAnvilKey1 =
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

PaymentPayload SpecPayload(Version version = Version::kV2) {
  Result<PaymentPayload> payload = DecodePaymentHeader(
      version == Version::kV2 ? spec::kPaymentSignature : spec::kXPayment, version);
  EXPECT_TRUE(payload.ok()) << payload.status().ToString();
  return payload.ok() ? *payload : PaymentPayload{};
}

Failure Verify(const PaymentPayload& payload, const Requirements& requirements,
               int64_t now = spec::kNowInWindow) {
  return VerifyExact(payload, requirements, now, kDefaultValidBeforeBufferSeconds);
}

// Signs payload.authorization for requirements with Anvil's test account #1, setting `from`.
PaymentPayload SignedByAnvilKey(PaymentPayload payload, const Requirements& requirements) {
  const chain::PrivateKey key = *chain::ParsePrivateKey(kAnvilKey1);
  payload.authorization.from = chain::AddressOf(key);
  payload.signature = *chain::SignDigest(AuthorizationDigest(payload, requirements), key);
  return payload;
}

TEST(Verify, PublishedVectorVerifiesInsideItsWindow) {
  const PaymentPayload payload = SpecPayload();
  const Requirements requirements = spec::SpecRequirements();
  EXPECT_EQ(chain::Hex(AuthorizationDigest(payload, requirements)), spec::kDigest);
  EXPECT_EQ(Verify(payload, requirements), Failure::kNone);
  EXPECT_EQ(Verify(SpecPayload(Version::kV1), requirements), Failure::kNone);
  // Window edges: validAfter ≤ now, and validBefore ≥ now + 6.
  EXPECT_EQ(Verify(payload, requirements, spec::kValidAfter), Failure::kNone);
  EXPECT_EQ(Verify(payload, requirements, spec::kValidBefore - 6), Failure::kNone);
}

TEST(Verify, EachFailureFromOneMutation) {
  const Requirements base = spec::SpecRequirements();
  const PaymentPayload payload = SpecPayload();

  Requirements requirements = base;
  requirements.amount = U256(10001);
  EXPECT_EQ(Verify(payload, requirements), Failure::kValueMismatch);
  requirements = base;
  requirements.amount = U256(9999);  // exact, not "at least"
  EXPECT_EQ(Verify(payload, requirements), Failure::kValueMismatch);

  requirements = base;
  requirements.pay_to = AddressOf("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
  EXPECT_EQ(Verify(payload, requirements), Failure::kRecipientMismatch);

  EXPECT_EQ(Verify(payload, base, spec::kValidBefore - 5), Failure::kValidBeforeTooSoon);
  EXPECT_EQ(Verify(payload, base, spec::kValidBefore + 3600), Failure::kValidBeforeTooSoon);
  EXPECT_EQ(Verify(payload, base, spec::kValidAfter - 1), Failure::kValidAfterInFuture);

  requirements = base;
  requirements.chain_id = 8453;
  EXPECT_EQ(Verify(payload, requirements), Failure::kNetworkMismatch);

  PaymentPayload changed = payload;
  changed.scheme = "upto";
  EXPECT_EQ(Verify(changed, base), Failure::kUnsupportedScheme);
  requirements = base;
  requirements.scheme = "upto";
  EXPECT_EQ(Verify(payload, requirements), Failure::kUnsupportedScheme);

  requirements = base;
  requirements.asset_version.clear();
  EXPECT_EQ(Verify(payload, requirements), Failure::kMissingDomain);

  changed = payload;
  (*changed.accepted)["asset"] = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
  EXPECT_EQ(Verify(changed, base), Failure::kAssetMismatch);
  (*changed.accepted)["asset"] = "not an address";
  EXPECT_EQ(Verify(changed, base), Failure::kAssetMismatch);
  (*changed.accepted)["asset"] = "0x036cbd53842c5426634e7929541ec2318f3dcf7e";  // case-insensitive
  EXPECT_EQ(Verify(changed, base), Failure::kNone);
}

TEST(Verify, SignatureFailures) {
  const Requirements base = spec::SpecRequirements();
  const PaymentPayload payload = SpecPayload();

  PaymentPayload changed = payload;
  changed.signature.bytes[5] ^= 0x01;
  EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature);

  changed = payload;
  changed.signature = HighSTwin(payload.signature);
  EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature);

  for (uint8_t v : {0, 1, 27, 29}) {  // the published one is 28
    changed = payload;
    changed.signature.bytes[64] = v;
    EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature) << int{v};
  }

  Requirements requirements = base;
  requirements.asset_name = "USD Coin";  // Base mainnet's name on a Base Sepolia domain
  EXPECT_EQ(Verify(payload, requirements), Failure::kInvalidSignature);
  requirements = base;
  requirements.asset_version = "1";
  EXPECT_EQ(Verify(payload, requirements), Failure::kInvalidSignature);
  requirements = base;
  requirements.asset = AddressOf("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
  // The v2 echo names the spec's asset, and the echo is checked before the signature; without an
  // echo (v1) it is the signature over the other domain that fails.
  EXPECT_EQ(Verify(payload, requirements), Failure::kAssetMismatch);
  EXPECT_EQ(Verify(SpecPayload(Version::kV1), requirements), Failure::kInvalidSignature);

  // Every signed field is covered.
  changed = payload;
  changed.authorization.nonce[31] ^= 1;
  EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature);
  changed = payload;
  changed.authorization.valid_before = U256(spec::kValidBefore + 1);
  EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature);
  changed = payload;
  changed.authorization.from = AddressOf(spec::kPayTo);
  EXPECT_EQ(Verify(changed, base), Failure::kInvalidSignature);
}

TEST(Verify, FreshlySignedPayloads) {
  Requirements requirements = spec::SpecRequirements();
  PaymentPayload payload = SignedByAnvilKey(SpecPayload(), requirements);
  EXPECT_EQ(Verify(payload, requirements), Failure::kNone);

  // Properly signed, but for the wrong amount / recipient / window: the specific failure.
  PaymentPayload wrong = payload;
  wrong.authorization.value = U256(1);
  EXPECT_EQ(Verify(SignedByAnvilKey(wrong, requirements), requirements), Failure::kValueMismatch);
  wrong = payload;
  wrong.authorization.to = AddressOf(spec::kPayer);
  EXPECT_EQ(Verify(SignedByAnvilKey(wrong, requirements), requirements),
            Failure::kRecipientMismatch);
  wrong = payload;
  wrong.authorization.valid_after = U256(spec::kNowInWindow + 1);
  EXPECT_EQ(Verify(SignedByAnvilKey(wrong, requirements), requirements),
            Failure::kValidAfterInFuture);

  // Signed under another domain name: a well-formed signature that never validates.
  Requirements other_name = requirements;
  other_name.asset_name = "USD Coin";
  EXPECT_EQ(Verify(SignedByAnvilKey(payload, other_name), requirements),
            Failure::kInvalidSignature);

  // v1 uses the same digest.
  PaymentPayload v1 = SignedByAnvilKey(SpecPayload(Version::kV1), requirements);
  EXPECT_EQ(Verify(v1, requirements), Failure::kNone);
}

// AgentPay's order (not the reference's): every cheap check before the one signature recovery,
// so a payload that fails a cheap check costs no secp256k1 work. The reference checks the
// signature right after the network; where a payload fails both, the code differs (the gateway
// re-checks the signature before answering such a payload for an existing key: x402_path.cc).
TEST(Verify, CheapChecksRunBeforeTheSignature) {
  const Requirements base = spec::SpecRequirements();
  PaymentPayload payload = SpecPayload();
  payload.signature.bytes[5] ^= 1;  // bad signature ...
  EXPECT_EQ(Verify(payload, base), Failure::kInvalidSignature);
  Requirements requirements = base;
  requirements.amount = U256(1);  // ... and wrong amount: the amount comes first now
  EXPECT_EQ(Verify(payload, requirements), Failure::kValueMismatch);
  requirements.chain_id = 1;  // network before that
  EXPECT_EQ(Verify(payload, requirements), Failure::kNetworkMismatch);
  requirements.asset_name.clear();  // domain before network (as @x402/evm 2.27 does)
  EXPECT_EQ(Verify(payload, requirements), Failure::kMissingDomain);
  payload.scheme = "other";  // scheme first of all
  EXPECT_EQ(Verify(payload, requirements), Failure::kUnsupportedScheme);
  // Bad signature and an asset echo of another asset: the echo is cheap, it comes first.
  PaymentPayload echo = SpecPayload();
  echo.signature.bytes[5] ^= 1;
  (*echo.accepted)["asset"] = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
  EXPECT_EQ(Verify(echo, base), Failure::kAssetMismatch);
  // A far-future validBefore with a bad signature: refused for the window, no recovery needed.
  PaymentPayload far = SpecPayload();
  far.authorization.valid_before = U256(uint64_t{1} << 48);
  EXPECT_EQ(Verify(far, base), Failure::kValidBeforeTooLate);

  // recipient → validBefore (too soon, too late) → validAfter → value → asset echo → signature
  const PaymentPayload good = SpecPayload();
  requirements = base;
  requirements.pay_to = AddressOf(spec::kPayer);
  requirements.amount = U256(1);
  EXPECT_EQ(Verify(good, requirements, spec::kValidBefore), Failure::kRecipientMismatch);
  requirements.pay_to = base.pay_to;
  EXPECT_EQ(Verify(good, requirements, spec::kValidBefore), Failure::kValidBeforeTooSoon);
  EXPECT_EQ(Verify(good, requirements, spec::kValidAfter - 1), Failure::kValidAfterInFuture);
  PaymentPayload echo_good = good;
  (*echo_good.accepted)["asset"] = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
  EXPECT_EQ(Verify(echo_good, requirements), Failure::kValueMismatch);
  EXPECT_EQ(Verify(echo_good, base), Failure::kAssetMismatch);

  EXPECT_FALSE(ProvesSigner(Failure::kValueMismatch));
  EXPECT_FALSE(ProvesSigner(Failure::kInvalidSignature));
  EXPECT_TRUE(ProvesSigner(Failure::kNone));
  EXPECT_TRUE(SignedByFrom(good, base));
  EXPECT_FALSE(SignedByFrom(payload, base));
}

// validBefore may be at most now + maxTimeoutSeconds + kValidBeforeSkewSeconds (AgentPay's rule;
// the reference has no upper bound). The spec vector: maxTimeoutSeconds 60, validBefore − validAfter
// = 65 s, so it passes from validBefore − 90 s on and is refused one second earlier.
TEST(Verify, ValidBeforeIsCappedByMaxTimeoutPlusSkew) {
  const PaymentPayload payload = SpecPayload();
  Requirements requirements = spec::SpecRequirements();
  ASSERT_EQ(requirements.max_timeout_seconds, 60);
  const int64_t earliest_now =
      static_cast<int64_t>(spec::kValidBefore) - 60 - kValidBeforeSkewSeconds;
  // (validAfter is later than these instants, so a zero validAfter is signed here.)
  PaymentPayload early = SignedByAnvilKey(payload, requirements);
  early.authorization.valid_after = U256(0);
  early = SignedByAnvilKey(early, requirements);
  EXPECT_EQ(Verify(early, requirements, earliest_now), Failure::kNone);
  EXPECT_EQ(Verify(early, requirements, earliest_now - 1), Failure::kValidBeforeTooLate);
  EXPECT_EQ(ReasonCode(Failure::kValidBeforeTooLate),
            "invalid_exact_evm_payload_authorization_valid_before");
  // No skew: exactly maxTimeoutSeconds.
  EXPECT_EQ(VerifyExact(early, requirements, earliest_now + kValidBeforeSkewSeconds, 6, 0),
            Failure::kNone);
  EXPECT_EQ(VerifyExact(early, requirements, earliest_now + kValidBeforeSkewSeconds - 1, 6, 0),
            Failure::kValidBeforeTooLate);
  // A longer maxTimeoutSeconds moves the cap; 2^48 (the attack in issue 13) is refused for any
  // sensible one, and 2^256 − 1 never overflows the sum.
  requirements.max_timeout_seconds = 86400;
  EXPECT_EQ(Verify(early, requirements, earliest_now - 1), Failure::kNone);
  PaymentPayload far = early;
  far.authorization.valid_before = U256(uint64_t{1} << 48);
  EXPECT_EQ(Verify(SignedByAnvilKey(far, requirements), requirements), Failure::kValidBeforeTooLate);
  far.authorization.valid_before = chain::U256::FromLimbs({~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}});
  EXPECT_EQ(Verify(SignedByAnvilKey(far, requirements), requirements), Failure::kValidBeforeTooLate);
  EXPECT_EQ(VerifyExact(early, requirements, INT64_MAX, 0, INT64_MAX), Failure::kValidBeforeTooSoon);
}

TEST(Verify, DomainSeparatorIsPrecomputedOrComputedForTheRequirementsAtHand) {
  const PaymentPayload payload = SpecPayload();
  const Requirements base = spec::SpecRequirements();
  const chain::Hash32 expected =
      chain::DomainSeparator("USDC", "2", 84532, AddressOf(spec::kAsset));
  EXPECT_EQ(DomainSeparatorOf(base), expected);

  // Set once, it is what VerifyExact uses: the right value verifies, a wrong one does not.
  Requirements precomputed = base;
  precomputed.domain_separator = DomainSeparatorOf(base);
  EXPECT_EQ(Verify(payload, precomputed), Failure::kNone);
  precomputed.domain_separator = chain::DomainSeparator("USD Coin", "2", 84532, base.asset);
  EXPECT_EQ(Verify(payload, precomputed), Failure::kInvalidSignature);

  // Unset, it is computed from the four fields each time they change, and the value remembered
  // for one domain is never used for another (alternating, each of the four in turn).
  Requirements other = base;
  other.asset_name = "USD Coin";
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Verify(payload, base), Failure::kNone);
    EXPECT_EQ(Verify(payload, other), Failure::kInvalidSignature);
  }
  for (auto change : std::initializer_list<std::function<void(Requirements&)>>{
           [](Requirements& r) { r.asset_version = "1"; },
           [](Requirements& r) { r.asset = AddressOf(spec::kPayTo); },
           [](Requirements& r) { r.chain_id = 8453; }}) {
    Requirements changed = base;
    change(changed);
    EXPECT_NE(DomainSeparatorOf(changed), expected);
    EXPECT_EQ(DomainSeparatorOf(changed),
              chain::DomainSeparator(changed.asset_name, changed.asset_version, changed.chain_id,
                                     changed.asset));
    EXPECT_EQ(DomainSeparatorOf(base), expected);
  }
}

TEST(Verify, ZeroBufferAndFarFuture) {
  const PaymentPayload payload = SpecPayload();
  const Requirements requirements = spec::SpecRequirements();
  EXPECT_EQ(VerifyExact(payload, requirements, spec::kValidBefore, 0), Failure::kNone);
  EXPECT_EQ(VerifyExact(payload, requirements, spec::kValidBefore + 1, 0),
            Failure::kValidBeforeTooSoon);
  EXPECT_EQ(VerifyExact(payload, requirements, INT64_MAX, INT64_MAX), Failure::kValidBeforeTooSoon);
}

TEST(Verify, ReasonCodesAreTheReferenceStrings) {
  EXPECT_EQ(ReasonCode(Failure::kNone), "");
  EXPECT_EQ(ReasonCode(Failure::kInvalidSignature), "invalid_exact_evm_signature");
  EXPECT_EQ(ReasonCode(Failure::kRecipientMismatch), "invalid_exact_evm_recipient_mismatch");
  EXPECT_EQ(ReasonCode(Failure::kValidBeforeTooSoon),
            "invalid_exact_evm_payload_authorization_valid_before");
  EXPECT_EQ(ReasonCode(Failure::kValidAfterInFuture),
            "invalid_exact_evm_payload_authorization_valid_after");
  EXPECT_EQ(ReasonCode(Failure::kValueMismatch),
            "invalid_exact_evm_payload_authorization_value_mismatch");
  EXPECT_EQ(ReasonCode(Failure::kValueMismatch, Version::kV1),
            "invalid_exact_evm_authorization_value");
  EXPECT_EQ(ReasonCode(Failure::kUnsupportedScheme), "invalid_exact_evm_scheme");
  EXPECT_EQ(ReasonCode(Failure::kNetworkMismatch), "invalid_exact_evm_network_mismatch");
  EXPECT_EQ(ReasonCode(Failure::kMissingDomain), "invalid_exact_evm_missing_eip712_domain");
  EXPECT_EQ(ReasonCode(Failure::kTokenNameMismatch), "invalid_exact_evm_token_name_mismatch");
  EXPECT_EQ(ReasonCode(Failure::kNonceAlreadyUsed), "invalid_exact_evm_nonce_already_used");
  EXPECT_EQ(ReasonCode(Failure::kInsufficientBalance), "invalid_exact_evm_insufficient_balance");
  std::set<std::string_view> seen;
  for (int i = 1; i <= static_cast<int>(Failure::kInsufficientBalance); ++i) {
    // Both ends of the window share the reference's one validBefore code.
    if (static_cast<Failure>(i) == Failure::kValidBeforeTooLate) continue;
    const std::string_view code = ReasonCode(static_cast<Failure>(i));
    EXPECT_TRUE(code.starts_with("invalid_exact_evm_")) << code;
    EXPECT_TRUE(seen.insert(code).second) << code;
  }
}

}  // namespace
}  // namespace agentpay::x402
