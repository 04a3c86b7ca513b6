// Helpers shared by the chain tests: parse literals that are known to be valid, failing the
// test loudly (instead of crashing) when one is not.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "chain/bytes.h"

namespace agentpay::chain::test_util {

inline Bytes HexBytes(std::string_view text) {
  Result<Bytes> bytes = ParseHex(text);
  EXPECT_TRUE(bytes.ok()) << text << ": " << bytes.status().ToString();
  return bytes.ok() ? *bytes : Bytes();
}

inline Hash32 HashOf(std::string_view text) {
  Result<Hash32> hash = ParseHash32(text);
  EXPECT_TRUE(hash.ok()) << text << ": " << hash.status().ToString();
  return hash.ok() ? *hash : Hash32{};
}

inline Address AddressFrom(std::string_view text) {
  Result<Address> address = ParseAddress(text);
  EXPECT_TRUE(address.ok()) << text << ": " << address.status().ToString();
  return address.ok() ? *address : Address{};
}

inline U256 Decimal(std::string_view text) {
  std::optional<U256> value = ParseU256Decimal(text);
  EXPECT_TRUE(value.has_value()) << text;
  return value.value_or(U256());
}

}  // namespace agentpay::chain::test_util
