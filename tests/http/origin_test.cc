// Origins, public base URLs and Host headers (http/origin.h): one normal form, so that two
// spellings of one origin compare equal and nothing that is not an origin is taken for one.
#include "http/origin.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

TEST(WebOrigin, ParsesAndNormalises) {
  struct Case {
    const char* text;
    const char* serialized;
  };
  for (const Case& c : {Case{"http://127.0.0.1:8404", "http://127.0.0.1:8404"},
                        Case{"HTTPS://Console.Example.COM", "https://console.example.com"},
                        Case{"https://console.example.com:443/", "https://console.example.com"},
                        Case{"http://console.example.com:80", "http://console.example.com"},
                        Case{"http://[0:0:0:0:0:0:0:1]:8404", "http://[::1]:8404"},
                        Case{"https://[::1]", "https://[::1]"},
                        Case{"http://localhost:8404", "http://localhost:8404"}}) {
    auto origin = ParseWebOrigin(c.text);
    ASSERT_TRUE(origin.ok()) << c.text << ": " << origin.status().ToString();
    EXPECT_EQ(origin->Serialize(), c.serialized) << c.text;
  }
  auto https = ParseWebOrigin("https://a.example");
  ASSERT_TRUE(https.ok());
  EXPECT_EQ(*https, (WebOrigin{true, "a.example", 443}));
  EXPECT_NE(*https, *ParseWebOrigin("http://a.example:443")) << "the scheme is part of it";
}

TEST(WebOrigin, RefusesWhatIsNotAnOrigin) {
  for (const char* bad : {"",
                          "null",
                          "127.0.0.1:8404",
                          "ftp://a.example",
                          "http://",
                          "https://:443",
                          "http://a.example/console",
                          "http://a.example//",
                          "http://a.example?x",
                          "http://a.example#x",
                          "http://user@a.example",
                          "http://a.example:0",
                          "http://a.example:65536",
                          "http://a.example:8x",
                          "http://a.example:",
                          "http://a..example",
                          "http://.a.example",
                          "http://a.example.",
                          "http://::1:8404",
                          "http://[::1",
                          "http://[zz::1]:80",
                          "http://a%2eexample",
                          "http://a example",
                          "http://[::1%25eth0]:80"}) {
    auto origin = ParseWebOrigin(bad);
    EXPECT_FALSE(origin.ok()) << bad << " parsed as " << origin->Serialize();
    if (!origin.ok()) {
      EXPECT_EQ(origin.status().code(), "invalid_config");
    }
  }
  EXPECT_FALSE(ParseWebOrigin(std::string(300, 'a')).ok());
  EXPECT_FALSE(ParseWebOrigin("http://" + std::string(254, 'a')).ok()) << "longer than DNS allows";
}

TEST(PublicUrl, ParsesAndNormalises) {
  struct Case {
    const char* text;
    const char* normal;
  };
  for (const Case& c : {Case{"https://pay.example.com", "https://pay.example.com"},
                        Case{"https://Pay.Example.com:443/", "https://pay.example.com"},
                        Case{"https://pay.example.com/base/", "https://pay.example.com/base"},
                        Case{"http://10.0.0.5:8402/a/b", "http://10.0.0.5:8402/a/b"},
                        Case{"HTTP://[::1]:8402", "http://[::1]:8402"}}) {
    auto url = ParsePublicUrl(c.text);
    ASSERT_TRUE(url.ok()) << c.text << ": " << url.status().ToString();
    EXPECT_EQ(*url, c.normal) << c.text;
  }
  for (const char* bad : {"pay.example.com", "ftp://pay.example.com", "https://", "https://a/?x=1",
                          "https://a/#top", "https://user:pw@a", "https://a:0", "https://a/b/../c",
                          "https://a//b", "https://a/%7Eb", "https://a b"}) {
    EXPECT_FALSE(ParsePublicUrl(bad).ok()) << bad;
  }
}

TEST(HostHeader, GivesTheHostInOriginForm) {
  EXPECT_EQ(HostOfHeader("127.0.0.1:8404"), "127.0.0.1");
  EXPECT_EQ(HostOfHeader("Evil.Example:8404"), "evil.example");
  EXPECT_EQ(HostOfHeader("evil.example"), "evil.example");
  EXPECT_EQ(HostOfHeader("[::1]:8404"), "[::1]");
  EXPECT_EQ(HostOfHeader("localhost"), "localhost");
  for (const char* bad : {"", ":8404", "::1:8404", "a@b:80", "a/b", "a:0", "a:99999", "a b:80"}) {
    EXPECT_FALSE(HostOfHeader(bad).has_value()) << bad;
  }
}

TEST(HostHeader, AddressesAreToldFromNames) {
  for (const char* address : {"127.0.0.1", "10.0.0.5", "[::1]", "[2001:db8::1]", "0.0.0.0"}) {
    EXPECT_TRUE(IsIpAddressHost(address)) << address;
  }
  for (const char* name : {"localhost", "evil.example", "127.0.0.1.nip.io", "::1", "[evil]"}) {
    EXPECT_FALSE(IsIpAddressHost(name)) << name;
  }
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.2"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]"));
  EXPECT_FALSE(IsLoopbackAddress("localhost"));  // a name: see ListenerUrl's callers
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5"));
  EXPECT_TRUE(IsWildcardAddress("0.0.0.0"));
  EXPECT_TRUE(IsWildcardAddress("::"));
  EXPECT_TRUE(IsWildcardAddress("[::]"));
  EXPECT_FALSE(IsWildcardAddress("127.0.0.1"));
}

TEST(ListenerUrlTest, NamesTheBoundAddressWithTheScheme) {
  EXPECT_EQ(ListenerUrl("127.0.0.1", 8402, false), "http://127.0.0.1:8402");
  EXPECT_EQ(ListenerUrl("127.0.0.1", 8402, true), "https://127.0.0.1:8402");
  EXPECT_EQ(ListenerUrl("::1", 8402, false), "http://[::1]:8402");
  EXPECT_EQ(ListenerUrl("[::1]", 8402, false), "http://[::1]:8402");
}

}  // namespace
}  // namespace agentpay
