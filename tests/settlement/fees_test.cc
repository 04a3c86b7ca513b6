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

}  // namespace
}  // namespace agentpay
