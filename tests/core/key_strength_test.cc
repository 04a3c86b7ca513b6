// The key-strength estimate of core/key_strength.h (docs/protocol.md §5a).
#include "core/key_strength.h"

#include <gtest/gtest.h>

#include <string>

namespace agentpay {
namespace {

TEST(KeyStrengthTest, GuessableShapesScoreLow) {
  EXPECT_EQ(EstimateKeyBits(""), 0);
  EXPECT_EQ(EstimateKeyBits("order-42"), 42);  // 7 counted (d-e is a step) x log2(69)
  EXPECT_LT(EstimateKeyBits("lost-response-1"), 96);
  EXPECT_EQ(EstimateKeyBits(std::string(255, 'x')), 4);         // one unit of 'x'
  EXPECT_EQ(EstimateKeyBits("abcdefghijklmnopqrstuvwxyz"), 4);  // a sequence counts its start
  EXPECT_EQ(EstimateKeyBits("0123456789012345678901234567890123456789"), 3);
  EXPECT_EQ(EstimateKeyBits("order-42order-42order-42order-42"), EstimateKeyBits("order-42"));
  EXPECT_LT(EstimateKeyBits("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbb"), 10);
}

TEST(KeyStrengthTest, RandomShapesScoreHigh) {
  EXPECT_GE(EstimateKeyBits("3f2a9c4e-71b0-4d5e-9a8f-c2e6b1d07f53"), 96);  // a UUID
  EXPECT_GE(EstimateKeyBits("pid_9f8e2c6a1b3d5f7e9a0c"), 96);              // payment-identifier
  EXPECT_GE(EstimateKeyBits("b7e1c93f0a5d2e8f6c4b1a9d7e3f5c20"), 96);      // 32 hex digits
  EXPECT_GE(EstimateKeyBits("Zk3_Qp9-Lm2xVt7RwY4nBs"), 96);                // 22 base64url
}

TEST(KeyStrengthTest, ClassesAreThoseUsed) {
  // 10 digits that are no sequence: 10 x log2(10).
  EXPECT_EQ(EstimateKeyBits("9370591846"), 33);
  // The same length with an uppercase letter added uses 36 symbols.
  EXPECT_EQ(EstimateKeyBits("9370591846Q"), 56);
}

}  // namespace
}  // namespace agentpay
