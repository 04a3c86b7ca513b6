// Standard padded base64 against RFC 4648's vectors, and the strictness the payment headers rely
// on: one spelling per value, no URL-safe alphabet, no whitespace, no missing padding.
#include "x402/base64.h"

#include <gtest/gtest.h>

namespace agentpay::x402 {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string_view, std::string_view> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    Result<std::string> decoded = Base64Decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded << ": " << decoded.status().ToString();
    EXPECT_EQ(*decoded, plain);
  }
}

TEST(Base64, RoundTripsEveryByteValueAtEveryAlignment) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (size_t length = 0; length <= bytes.size(); length += 37) {
    const std::string plain = bytes.substr(bytes.size() - length);
    for (size_t cut = 0; cut < 3 && cut <= plain.size(); ++cut) {
      const std::string piece = plain.substr(cut);
      Result<std::string> decoded = Base64Decode(Base64Encode(piece));
      ASSERT_TRUE(decoded.ok());
      EXPECT_EQ(*decoded, piece);
    }
  }
}

TEST(Base64, UsesTheStandardAlphabet) {
  EXPECT_EQ(Base64Encode("\xfb\xff\xbf"), "+/+/");
  EXPECT_EQ(*Base64Decode("+/+/"), "\xfb\xff\xbf");
}

TEST(Base64, RefusesEverythingButTheCanonicalSpelling) {
  for (std::string_view bad : {
           std::string_view("Zg"),      // padding missing
           std::string_view("Zm8"),     // padding missing
           std::string_view("Zg="),     // padding short
           std::string_view("Zg==="),   // padding long
           std::string_view("Z==="),    // one sextet cannot make a byte
           std::string_view("===="),    // padding only
           std::string_view("Z=g="),    // '=' inside
           std::string_view("-_-_"),    // URL-safe alphabet
           std::string_view("Zm9v\n"),  // trailing newline
           std::string_view(" Zm9v"),   // leading space
           std::string_view("Zm 9v"),   // inner space
           std::string_view("Zh=="),    // non-zero bits under the padding
           std::string_view("Zm9="),    // non-zero bits under the padding
           std::string_view("Zm9v\0\0\0\0", 8),
           std::string_view("Zm9v!!!!"),
       }) {
    Result<std::string> decoded = Base64Decode(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().code(), "invalid_base64");
    EXPECT_FALSE(decoded.status().message().empty());
  }
}

TEST(Base64, NamesTheUrlSafeAlphabet) {
  EXPECT_NE(Base64Decode("ab-c").status().message().find("URL-safe"), std::string::npos);
}

}  // namespace
}  // namespace agentpay::x402
