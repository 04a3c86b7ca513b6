// Identifier formats: unguessable, URL-safe, and operation ids ordered by creation time.
#include "core/world.h"

#include <gtest/gtest.h>

#include <set>

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

TEST(Ids, AccountsAndKeys) {
  SequenceRandom random;
  EXPECT_EQ(NewAccountId(random).size(), 5u + 24u);
  std::string key = NewApiKey(random);
  EXPECT_EQ(key.substr(0, 3), "ak_");
  EXPECT_EQ(key.size(), 3u + 64u);
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(ToHex(bytes, 4), "000fa5ff");
}

}  // namespace
}  // namespace agentpay
