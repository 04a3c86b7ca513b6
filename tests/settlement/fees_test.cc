// The rows of the fee-cap table in src/settlement/fees.h, each checked.
#include "settlement/fees.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

using chain::U256;

chain::FeeData Node(uint64_t base, uint64_t tip) {
  return {U256(base), U256(tip), U256(2 * base + tip)};
}

TEST(FeeCaps, WithoutCapsTheNodesFeesAreSigned) {  // (1)
  const FeeDecision decision = ApplyFeeCaps(Node(100, 7), FeeCaps{});
  EXPECT_FALSE(decision.too_high);
  EXPECT_EQ(decision.fees, Node(100, 7));
}

TEST(FeeCaps, ABaseFeeAboveTheCapSignsNothing) {  // (2)
  const FeeDecision decision = ApplyFeeCaps(Node(101, 7), FeeCaps{U256(100), U256(0)});
  EXPECT_TRUE(decision.too_high);
  EXPECT_EQ(decision.reason,
            "the chain's base fee is 101 wei per gas, above --max-fee-per-gas 100");
  // At the cap itself the transaction can still be included (with no tip left).
  const FeeDecision at_cap = ApplyFeeCaps(Node(100, 7), FeeCaps{U256(100), U256(0)});
  EXPECT_FALSE(at_cap.too_high);
  EXPECT_EQ(at_cap.fees.max_fee_per_gas, U256(100));
  EXPECT_EQ(at_cap.fees.max_priority_fee_per_gas, U256(7));
}

TEST(FeeCaps, ATipAboveItsCapIsCutAndTheMaxFeeFollows) {  // (3)
  const FeeDecision decision = ApplyFeeCaps(Node(100, 50), FeeCaps{U256(0), U256(10)});
  EXPECT_FALSE(decision.too_high);
  EXPECT_EQ(decision.fees.max_priority_fee_per_gas, U256(10));
  EXPECT_EQ(decision.fees.max_fee_per_gas, U256(210));
  EXPECT_EQ(decision.fees.base_fee_per_gas, U256(100));
}

TEST(FeeCaps, TheMaxFeeIsTheLesserOfTwiceTheBasePlusTipAndTheCap) {  // (4)
  EXPECT_EQ(ApplyFeeCaps(Node(100, 7), FeeCaps{U256(150), U256(0)}).fees.max_fee_per_gas,
            U256(150));
  EXPECT_EQ(ApplyFeeCaps(Node(100, 7), FeeCaps{U256(1000), U256(0)}).fees.max_fee_per_gas,
            U256(207));
  // The tip never exceeds the max fee.
  const FeeDecision low = ApplyFeeCaps(Node(5, 50), FeeCaps{U256(20), U256(0)});
  EXPECT_EQ(low.fees.max_fee_per_gas, U256(20));
  EXPECT_EQ(low.fees.max_priority_fee_per_gas, U256(20));
}

// ---- The replacement table ------------------------------------------------------------------

chain::FeeData Signed(uint64_t max_fee, uint64_t tip) {
  return {U256(0), U256(tip), U256(max_fee)};
}

TEST(ReplacementFees, BumpIsAnEighthRoundedUpAndAlwaysMore) {
  EXPECT_EQ(Bump(U256(0)), U256(1));
  EXPECT_EQ(Bump(U256(1)), U256(2));
  EXPECT_EQ(Bump(U256(8)), U256(9));
  EXPECT_EQ(Bump(U256(9)), U256(11));
  EXPECT_EQ(Bump(U256(1000000000)), U256(1125000000));
  // Across a limb: 2^64 + 8 -> + 2^61 + 1.
  const U256 wide = U256::FromLimbs({8, 1, 0, 0});
  EXPECT_EQ(Bump(wide), U256::FromLimbs({8 + (1ull << 61) + 1, 1, 0, 0}));
  // Saturates instead of wrapping.
  const U256 top = U256::FromLimbs({~0ull, ~0ull, ~0ull, ~0ull});
  EXPECT_EQ(Bump(top), top);
}

TEST(ReplacementFees, NothingIsReplacedWhileTheBaseFeeIsAboveTheCap) {  // (1)
  const FeeCaps caps{U256(100), U256(0)};
  const ReplacementDecision d =
      ReplacementFees(Signed(50, 2), ApplyFeeCaps(Node(101, 2), caps), caps);
  EXPECT_FALSE(d.replace);
  EXPECT_NE(d.reason.find("above --max-fee-per-gas 100"), std::string::npos) << d.reason;
}

TEST(ReplacementFees, ATransactionAtTheMarketsFeesIsNotReplaced) {  // (2)
  const ReplacementDecision d = ReplacementFees(Signed(207, 7), ApplyFeeCaps(Node(100, 7), {}), {});
  EXPECT_FALSE(d.replace);
  EXPECT_TRUE(d.at_market);
  EXPECT_NE(d.reason.find("at the market's fees"), std::string::npos) << d.reason;
}

TEST(ReplacementFees, ATransactionHeldAtTheNextNonceIsReplacedEvenAtTheMarketsFees) {  // (2)→(4)
  // The node holds it at the relayer's next nonce and will not mine it: a bump, whatever the
  // market.
  ReplacementDecision d =
      ReplacementFees(Signed(207, 7), ApplyFeeCaps(Node(100, 7), {}), {}, Stuck::kHeldAtNextNonce);
  ASSERT_TRUE(d.replace);
  EXPECT_FALSE(d.at_market);
  EXPECT_EQ(d.fees.max_fee_per_gas, Bump(U256(207)));
  EXPECT_EQ(d.fees.max_priority_fee_per_gas, Bump(U256(7)));
  EXPECT_NE(d.reason.find("held by the node at the relayer's next nonce"), std::string::npos)
      << d.reason;
  // Still never above the cap (3), nor while the base fee is above it (1).
  const FeeCaps caps{U256(220), U256(0)};
  d = ReplacementFees(Signed(207, 7), ApplyFeeCaps(Node(100, 7), caps), caps,
                      Stuck::kHeldAtNextNonce);
  EXPECT_FALSE(d.replace);
  EXPECT_NE(d.reason.find("exceeds --max-fee-per-gas"), std::string::npos) << d.reason;
  d = ReplacementFees(Signed(207, 7), ApplyFeeCaps(Node(300, 7), caps), caps,
                      Stuck::kHeldAtNextNonce);
  EXPECT_FALSE(d.replace);
}

TEST(ReplacementFees, TheCapNeverGivesWayToAReplacement) {  // (3)
  // The market wants 207; the old max fee 95 bumped is 107, above the cap of 100.
  const FeeCaps caps{U256(100), U256(0)};
  ReplacementDecision d = ReplacementFees(Signed(95, 2), ApplyFeeCaps(Node(50, 7), caps), caps);
  EXPECT_FALSE(d.replace);
  EXPECT_NE(d.reason.find("exceeds --max-fee-per-gas"), std::string::npos) << d.reason;
  // The tip cap alike: an old tip of 10 bumped is 12, above a tip cap of 11.
  const FeeCaps tip_caps{U256(0), U256(11)};
  d = ReplacementFees(Signed(60, 10), ApplyFeeCaps(Node(50, 11), tip_caps), tip_caps);
  EXPECT_FALSE(d.replace);
}

TEST(ReplacementFees, AStuckTransactionIsReplacedAtTheMarketOrABumpWhicheverIsMore) {  // (4)
  // The base fee rose from 10 to 100: the market's max fee (207) is above the bump of 27 (31).
  ReplacementDecision d = ReplacementFees(Signed(27, 7), ApplyFeeCaps(Node(100, 7), {}), {});
  ASSERT_TRUE(d.replace);
  EXPECT_EQ(d.fees.max_fee_per_gas, U256(207));
  EXPECT_EQ(d.fees.max_priority_fee_per_gas, U256(8));  // Bump(7) = 8 > the market's 7
  // Outbid on the tip alone: both fields still go up by at least an eighth.
  d = ReplacementFees(Signed(300, 2), ApplyFeeCaps(Node(100, 7), {}), {});
  ASSERT_TRUE(d.replace);
  EXPECT_EQ(d.fees.max_fee_per_gas, U256(338));
  EXPECT_EQ(d.fees.max_priority_fee_per_gas, U256(7));
  // Within the cap: the market's 207 is cut to the cap, still above the bump (113 > 112).
  const FeeCaps caps{U256(113), U256(0)};
  d = ReplacementFees(Signed(100, 2), ApplyFeeCaps(Node(50, 7), caps), caps);
  ASSERT_TRUE(d.replace);
  EXPECT_EQ(d.fees.max_fee_per_gas, U256(113));
  EXPECT_GE(d.fees.max_fee_per_gas, Bump(U256(100)));
  EXPECT_LE(d.fees.max_priority_fee_per_gas, d.fees.max_fee_per_gas);
}

}  // namespace
}  // namespace agentpay
