// Helpers shared by the chain tests: parse literals that are known to be valid, failing the
// test loudly (instead of crashing) when one is not.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "chain/bytes.h"
#include "chain/secp256k1.h"

namespace agentpay::chain::test_util {

// A loopback port that was free a moment ago (bind to port 0, read it, close): nobody listens.
inline uint16_t FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

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

// secp256k1 group order n, little-endian limbs.
constexpr U256 kSecp256k1Order = U256::FromLimbs(
    {0xBFD25E8CD0364141, 0xBAAEDCE6AF48A03B, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF});

// s' = n - s with v flipped: the malleable twin that libsecp256k1 alone would still recover.
inline Signature HighSTwin(const Signature& signature) {
  const U256 s = U256::FromBigEndian(std::span<const uint8_t>(signature.bytes).subspan<32, 32>());
  const std::array<uint8_t, 32> twin_s = U256::CheckedSub(kSecp256k1Order, s)->ToBigEndian();
  Signature twin = signature;
  std::copy(twin_s.begin(), twin_s.end(), twin.bytes.begin() + 32);
  twin.bytes[64] = signature.v() == 27 ? 28 : 27;
  return twin;
}

// A private key whose 32 bytes are all zero but the last: distinct test signers by number.
inline PrivateKey KeyNumber(uint8_t number) {
  std::array<uint8_t, 32> bytes{};
  bytes[31] = number;
  return PrivateKey(bytes);
}

// A distinct EIP-3009 nonce per number (0xab.. then the number in the last four bytes).
inline Hash32 NonceNumber(uint32_t number) {
  Hash32 nonce{};
  nonce[0] = 0xab;
  nonce[28] = static_cast<uint8_t>(number >> 24);
  nonce[29] = static_cast<uint8_t>(number >> 16);
  nonce[30] = static_cast<uint8_t>(number >> 8);
  nonce[31] = static_cast<uint8_t>(number);
  return nonce;
}

}  // namespace agentpay::chain::test_util
