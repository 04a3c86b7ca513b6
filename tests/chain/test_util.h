// Helpers shared by the chain tests: parse literals that are known to be valid, failing the
// test loudly (instead of crashing) when one is not, and loopback ports reserved across tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "chain/bytes.h"
#include "chain/secp256k1.h"

namespace agentpay::chain::test_util {

// A loopback port that no other test process holds and nothing listens on, held until this process
// ends, as tests/testports.py chooses them (its docstring says why "bind port 0, read it, close"
// races once ctest runs tests side by side): from below the kernel's ephemeral range, each reserved
// by a POSIX record lock on one byte at the port's offset of the same shared file, so a port taken
// here is never one a Python or node test holds, nor the source port of an outgoing connection.
inline uint16_t FreeLoopbackPort() {
  constexpr int kSpan = 12000;  // as tests/testports.py
  static std::mutex mutex;
  static int lock_fd = -1;  // never closed: closing it would drop every lock of the process
  static std::set<uint16_t> taken;
  std::lock_guard guard(mutex);
  if (lock_fd < 0) {
    const char* dir = std::getenv("TMPDIR");  // where Python's tempfile.gettempdir() looks first
    const std::string path = std::string(dir != nullptr && *dir != 0 ? dir : "/tmp") +
                             "/agentpay-test-ports-" + std::to_string(::getuid()) + ".lock";
    lock_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd < 0) {
      ADD_FAILURE() << "cannot open " << path;
      return 0;
    }
  }
  int ephemeral_low = 32768, ephemeral_high = 60999;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) {
    range >> ephemeral_low >> ephemeral_high;
  }
  const bool below = ephemeral_low - kSpan >= 1024;
  const int low = below ? ephemeral_low - kSpan : ephemeral_high + 1;
  const int high = below ? ephemeral_low : std::min(65536, ephemeral_high + 1 + kSpan);
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, high - 1);
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const auto port = static_cast<uint16_t>(pick(random));
    if (taken.count(port) != 0) continue;
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = port;
    lock.l_len = 1;
    if (::fcntl(lock_fd, F_SETLK, &lock) != 0) continue;  // another test process holds it
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as servers bind
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool bindable =
        fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    if (fd >= 0) ::close(fd);
    if (bindable) {
      taken.insert(port);
      return port;
    }
    lock.l_type = F_UNLCK;
    ::fcntl(lock_fd, F_SETLK, &lock);
  }
  ADD_FAILURE() << "no free port in " << low << ".." << high - 1 << " for tests";
  return 0;
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
