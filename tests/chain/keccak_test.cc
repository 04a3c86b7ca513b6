// Keccak-256 must be Ethereum's (original padding), never NIST SHA3-256: the empty-input vectors
// of the two differ, and mixing them up fails silently everywhere downstream.
#include "chain/keccak.h"

#include <gtest/gtest.h>

namespace agentpay::chain {
namespace {

TEST(Keccak256, KnownVectors) {
  EXPECT_EQ(Hex(Keccak256(std::string_view(""))),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
  EXPECT_EQ(Hex(Keccak256(std::string_view("abc"))),
            "0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
  // SHA3-256("") — what a wrong backend would produce.
  EXPECT_NE(Hex(Keccak256(std::string_view(""))),
            "0xa7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a");
}

TEST(Keccak256, BytesAndTextOverloadsAgree) {
  const Bytes bytes = {'a', 'b', 'c'};
  EXPECT_EQ(Keccak256(bytes), Keccak256(std::string_view("abc")));
  EXPECT_EQ(Keccak256(Bytes{}), Keccak256(std::string_view("")));
}

}  // namespace
}  // namespace agentpay::chain
