// Money parsing and checked arithmetic: every malformed or out-of-range amount is refused.
#include "core/money.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

TEST(Money, ParsesCanonicalDecimals) {
  EXPECT_EQ(ParseAmount("0"), 0);
  EXPECT_EQ(ParseAmount("100000"), 100000);
  EXPECT_EQ(ParseAmount("9223372036854775807"), INT64_MAX);
}

TEST(Money, RejectsEverythingElse) {
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "01", "1.0", "1e3", "0x10", "abc",
                          "9223372036854775808", "99999999999999999999", "١"}) {
    EXPECT_FALSE(ParseAmount(bad).has_value()) << bad;
  }
}

TEST(Money, CheckedArithmetic) {
  EXPECT_EQ(AddAmounts(2, 3), 5);
  EXPECT_FALSE(AddAmounts(INT64_MAX, 1).has_value());
  EXPECT_FALSE(AddAmounts(-1, 1).has_value());
  EXPECT_EQ(SubtractAmounts(5, 3), 2);
  EXPECT_FALSE(SubtractAmounts(3, 5).has_value());
  EXPECT_FALSE(SubtractAmounts(3, -1).has_value());
}

}  // namespace
}  // namespace agentpay
