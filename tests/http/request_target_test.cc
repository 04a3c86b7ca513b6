// The request-target normaliser (http/request_target.h): a table of what each target becomes, or
// why it is refused. Every row is an attack or a corner that routing depends on.
#include "http/request_target.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

struct Normal {
  const char* in;
  const char* out;
};

TEST(NormalizeTarget, Canonical) {
  const Normal cases[] = {
      {"/", "/"},
      {"/a", "/a"},
      {"/a/", "/a/"},
      {"/a?b=1", "/a?b=1"},
      {"/a?x=/../y", "/a?x=/../y"},  // the query is not a path
      {"/cheap/../expensive", "/expensive"},
      {"/cheap/./x", "/cheap/x"},
      {"/cheap/..", "/"},
      {"/cheap/x/..", "/cheap/"},
      {"/cheap/x/.", "/cheap/x/"},
      {"/..", "/"},
      {"/../../etc/passwd", "/etc/passwd"},
      {"/a/b/c/./../../g", "/a/g"},  // RFC 3986 §5.2.4's example
      {"/mid/content=5/../6", "/mid/6"},
      {"//expensive", "/expensive"},
      {"///a//b///", "/a/b/"},
      {"/cheap/%2e%2e/expensive", "/expensive"},
      {"/cheap/%2E%2E/expensive", "/expensive"},
      {"/cheap/.%2e/expensive", "/expensive"},
      {"/%63heap", "/cheap"},  // encoded unreserved letter
      {"/a%7Eb%2d%5F", "/a~b-_"},
      {"/a%20b", "/a%20b"},
      {"/a%3fb", "/a%3Fb"},  // an encoded '?' stays encoded, hex upper-cased
      {"/a%c3%a9", "/a%C3%A9"},
      {"/a%252e%252e", "/a%252e%252e"},  // an encoded '%' stays encoded: never decoded twice
      {"/...", "/..."},
      {"/.a/..b", "/.a/..b"},
      {"/a;x=1/b", "/a;x=1/b"},
      {"/?", "/?"},
      {"/a/..?q", "/?q"},
  };
  for (const Normal& c : cases) {
    SCOPED_TRACE(c.in);
    auto out = NormalizeTarget(c.in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, c.out);
    // Normal forms are fixed points.
    auto again = NormalizeTarget(*out);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *out);
  }
}

TEST(NormalizeTarget, Refused) {
  const char* refused[] = {
      "",
      "*",
      "http://evil.example/expensive",
      "https://host/x",
      "host:443",
      "expensive",
      "/cheap%2F..%2Fexpensive",
      "/cheap%2f..%2fexpensive",
      "/cheap/%5C../expensive",
      "/cheap\\..\\expensive",
      "/a%00b",
      "/a%",
      "/a%2",
      "/a%zz",
      "/a%2g",
      "/cheap/..;/expensive",
      "/cheap/..;x=1/expensive",
      "/cheap/.;/x",
      "/cheap/%2e%2e;/expensive",
      // Issue 36 item 2: segments that some server reads as a dot segment or a delimiter.
      "/cheap/..%3B/expensive",
      "/cheap/..%3b/expensive",
      "/cheap/..%20/expensive",
      "/cheap/%252E%252E/expensive",
      "/cheap%252F..%252Fexpensive",
      "/cheap%255C..%255Cexpensive",
      "/cheap%253F/../../expensive",
      "/cheap/%EF%BC%8E%EF%BC%8E/expensive",
      "/cheap%EF%BC%8F..%EF%BC%8Fexpensive",
      "/cheap/%C0%AE%C0%AE/expensive",
      "/cheap%C0%AFexpensive",
      "/a#frag",
      "/a?b#frag",
  };
  for (const char* target : refused) {
    SCOPED_TRACE(target);
    auto out = NormalizeTarget(target);
    ASSERT_FALSE(out.ok()) << *out;
    EXPECT_EQ(out.status().error(), ErrorCode::kInvalidTarget);
    EXPECT_FALSE(out.status().message().empty());
  }
}

TEST(NormalizeTarget, NeverEscapesTheRootOrGrows) {
  // Every combination of a few tricky segments: the result starts with '/', holds no dot segment
  // and no empty segment, and is never longer than the input.
  const char* parts[] = {"a", ".", "..", "", "%2e", "%2E%2e", "b%41", "..."};
  for (const char* p1 : parts) {
    for (const char* p2 : parts) {
      for (const char* p3 : parts) {
        std::string in = std::string("/") + p1 + "/" + p2 + "/" + p3;
        auto out = NormalizeTarget(in);
        ASSERT_TRUE(out.ok()) << in;
        ASSERT_EQ(out->front(), '/');
        EXPECT_LE(out->size(), in.size());
        EXPECT_EQ(out->find("//"), std::string::npos) << in;
        EXPECT_EQ(out->find("/./"), std::string::npos) << in;
        EXPECT_EQ(out->find("/../"), std::string::npos) << in;
        EXPECT_FALSE(out->ends_with("/..") || out->ends_with("/.")) << in;
      }
    }
  }
}

}  // namespace
}  // namespace agentpay
