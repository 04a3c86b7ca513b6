// The one SHA-256 of the gateway and the client (http/sha256.h): FIPS 180-2 vectors, lower-case
// hex, and the same digest from a context reused on one thread and from another thread.
#include "http/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace agentpay {
namespace {

TEST(Sha256Hex, KnownVectorsInLowerCaseHex) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Hex, ReusedContextAndOtherThreadsAgree) {
  const std::string first = Sha256Hex("abc");
  EXPECT_EQ(Sha256Hex("abc"), first);
  std::string from_thread;
  std::thread([&] { from_thread = Sha256Hex("abc"); }).join();
  EXPECT_EQ(from_thread, first);
}

}  // namespace
}  // namespace agentpay
