// Identifier formats: unguessable, URL-safe, and operation ids ordered by creation time.
#include "core/world.h"

#include <gtest/gtest.h>

#include <set>

#include "core/hex.h"

namespace agentpay {
namespace {

class SequenceRandom final : public Random {
 public:
  void Fill(unsigned char* out, size_t size) override {
    for (size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>(next_++);
  }

 private:
  unsigned next_ = 0;
};

TEST(Ids, OperationIdsAreTimeOrderedAndCarry128RandomBits) {
  SequenceRandom random;
  std::string early = NewOperationId(random, 1'700'000'000'000);
  std::string late = NewOperationId(random, 1'700'000'000'001);
  std::string much_later = NewOperationId(random, 4'000'000'000'000);
  EXPECT_LT(early, late);
  EXPECT_LT(late, much_later);
  EXPECT_EQ(early.size(), 3u + 12u + 32u);
  EXPECT_EQ(early.substr(0, 3), "op_");
  for (char c : early.substr(3)) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << early;
  EXPECT_NE(NewOperationId(random, 5), NewOperationId(random, 5));
}

// The time part is the low 48 bits of the time in lower-case hex, as it was before the hex
// writers became one (core/hex.h): ids already stored keep sorting with new ones.
TEST(Ids, OperationIdTimeDigitsAreTheLow48BitsInLowerCaseHex) {
  SequenceRandom random;
  EXPECT_EQ(NewOperationId(random, 0xabcdef012345).substr(3, 12), "abcdef012345");
  EXPECT_EQ(NewOperationId(random, 0x1000000000001).substr(3, 12), "000000000001");
  EXPECT_EQ(NewOperationId(random, -7).substr(3, 12), "000000000000");
  EXPECT_EQ(NewOperationId(random, 5).substr(15), "303132333435363738393a3b3c3d3e3f");
}

TEST(Ids, AccountsAndKeys) {
  SequenceRandom random;
  EXPECT_EQ(NewAccountId(random).size(), 5u + 24u);
  std::string key = NewApiKey(random);
  EXPECT_EQ(key.substr(0, 3), "ak_");
  EXPECT_EQ(key.size(), 3u + 64u);
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(ToHex(bytes, 4), "000fa5ff");
  std::string prefixed = "0x";
  AppendHex(prefixed, bytes, 4);
  EXPECT_EQ(prefixed, "0x000fa5ff");
  EXPECT_EQ(ToHex(bytes, 0), "");
}

}  // namespace
}  // namespace agentpay
