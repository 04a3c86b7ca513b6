// How common servers may read a path segment (http/path_reading.h): the skeleton every reading
// shares, and the segments refused whatever the routes. Each row is a server behaviour or an
// attack.
#include "http/path_reading.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

std::string Any(std::string text) {
  for (char& c : text) {
    if (c == '*') c = kAnyRun;
  }
  return text;
}

TEST(PathReading, SkeletonAppliesEveryReading) {
  const std::pair<const char*, const char*> cases[] = {
      {"expensive", "expensive"},
      {"Expensive", "expensive"},  // IIS, Windows, case-insensitive routers
      {"EXPENSIVE", "expensive"},
      {"expensive;jsessionid=1", "expensive"},  // Tomcat, Jetty, Spring path parameters
      {"expensive;", "expensive"},
      {"expensive%3B", "expensive"},  // decoded, then cut (Jetty 9, Spring)
      {"expensive%3Bx=1", "expensive"},
      {"expensive%253Bx", "expensive"},  // decoded twice, then cut
      {"expensive.", "expensive"},       // Windows drops trailing dots and spaces
      {"expensive%20", "expensive"},
      {"expensive.%20.", "expensive"},
      {"expensive::$DATA", "expensive"},  // NTFS streams on IIS
      {"expensive:$i30:$INDEX_ALLOCATION", "expensive"},
      {"things:batchGet", "things:batchget"},  // a colon alone is no stream
      {"%2545xpensive", "expensive"},          // %2545 -> %45 -> E
      {"%25%34%35xpensive", "expensive"},      // the decoded digits complete an escape
      {"%EF%BC%A5xpensive", "*xpensive"},      // fullwidth E: NFKC reads 'E'
      {"expen%C5%BFive", "expen*ive"},         // long s: its upper case is 'S'
      {"caf%C3%A9", "caf*"},
      {"%E9t%E9", "*t*"},                  // Latin-1 bytes, not UTF-8
      {"%C3%A9%C3%A9", "*"},               // one run
      {"%E6%97%A5%E6%9C%AC", "\x80"},      // CJK reads as itself
      {"a%D0%B0", "a\x80"},                // so does Cyrillic
      {"expensive.%C2%A0", "expensive*"},  // a no-break space reads ' ' (NFKC)
      {"EXPENS~1", "expens*"},             // a Windows short name
      {"report~12.jso", "report*"},
      {"a~b", "a~b"},              // no digits: no short name
      {"abcdefg~1", "abcdefg~1"},  // seven letters: no short name
      {";x", ""},
      {"%20", ""},
      {"...", ""},
      {"", ""},
      {"a.b", "a.b"},
      {"v1.2", "v1.2"},
      {"a%3Fb", "a?b"},  // an escaped '?' or '#' is one once decoded, as meant
      {"a%23b", "a#b"},
  };
  for (const auto& [segment, skeleton] : cases) {
    SCOPED_TRACE(segment);
    const SegmentReading reading = ReadSegment(segment);
    EXPECT_EQ(reading.hazard, SegmentHazard::kNone);
    EXPECT_EQ(reading.skeleton, Any(skeleton));
    EXPECT_EQ(HazardOf(segment), SegmentHazard::kNone);
  }
}

TEST(PathReading, HazardsAreRefusedWhateverTheRoutes) {
  const std::pair<const char*, SegmentHazard> cases[] = {
      {"..;", SegmentHazard::kDotSegment},
      {".;x", SegmentHazard::kDotSegment},
      {"..%3B", SegmentHazard::kDotSegment},  // Jetty 9 decoded it, then cut it: ".."
      {"..%3Bx", SegmentHazard::kDotSegment},
      {".%3B", SegmentHazard::kDotSegment},
      {"..%20", SegmentHazard::kDotSegment},  // Windows drops the space
      {".%20%20", SegmentHazard::kDotSegment},
      {"%252E%252E", SegmentHazard::kDotSegment},  // decoded twice
      {"%25252E.", SegmentHazard::kDotSegment},
      {"..%C2%AD", SegmentHazard::kDotSegment},  // a soft hyphen some mappings drop
      {".%C3%A9.", SegmentHazard::kDotSegment},
      {"..::$DATA", SegmentHazard::kDotSegment},
      {"%252F", SegmentHazard::kEncodedDelimiter},
      {"a%252fb", SegmentHazard::kEncodedDelimiter},
      {"%255C", SegmentHazard::kEncodedDelimiter},
      {"%2500", SegmentHazard::kEncodedDelimiter},
      {"%253F", SegmentHazard::kEncodedDelimiter},  // a double decoder starts the query there
      {"%2523", SegmentHazard::kEncodedDelimiter},
      {"%25%32%66", SegmentHazard::kEncodedDelimiter},
      {"a%EF%BC%8Fb", SegmentHazard::kLookalike},  // fullwidth solidus: NFKC reads '/'
      {"%EF%BC%8E%EF%BC%8E", SegmentHazard::kLookalike},
      {"%EF%BC%BC", SegmentHazard::kLookalike},     // fullwidth reverse solidus
      {"x%EF%BC%9By", SegmentHazard::kLookalike},   // fullwidth semicolon
      {"x%CD%BE", SegmentHazard::kLookalike},       // Greek question mark: canonically ';'
      {"%E2%80%A5", SegmentHazard::kLookalike},     // two dot leader: ".."
      {"%E2%80%A6", SegmentHazard::kLookalike},     // horizontal ellipsis: "..."
      {"%E2%88%95", SegmentHazard::kLookalike},     // division slash: best fit '/'
      {"%C2%A5", SegmentHazard::kLookalike},        // yen sign: '\' in the Japanese code page
      {"%EF%BC%85", SegmentHazard::kLookalike},     // fullwidth percent sign
      {"%F0%9F%84%80", SegmentHazard::kLookalike},  // U+1F100 digit zero full stop: "0."
      {"%C0%AF", SegmentHazard::kOverlongUtf8},     // '/' in two bytes
      {"%C0%AE%C0%AE", SegmentHazard::kOverlongUtf8},
      {"%E0%80%AF", SegmentHazard::kOverlongUtf8},
      {"%F0%80%80%AF", SegmentHazard::kOverlongUtf8},
      {"%C1%9C", SegmentHazard::kOverlongUtf8},
  };
  for (const auto& [segment, hazard] : cases) {
    SCOPED_TRACE(segment);
    EXPECT_EQ(ReadSegment(segment).hazard, hazard);
    EXPECT_EQ(HazardOf(segment), hazard);
    EXPECT_FALSE(HazardReason(hazard).empty());
  }
}

TEST(PathReading, OtherUnicodeIsNoHazard) {
  // Non-ASCII text in paths is served: only characters that read as ASCII punctuation are not.
  for (const char* segment : {"%E6%97%A5%E6%9C%AC", "%E3%80%82",  // 日本, ideographic full stop
                              "%F0%9F%98%80", "%ED%A0%80", "%80%80", "%F4%90%80%80"}) {
    SCOPED_TRACE(segment);
    EXPECT_EQ(ReadSegment(segment).hazard, SegmentHazard::kNone);
  }
}

TEST(PathReading, MayReadAsIsAGlobOfTheSkeleton) {
  EXPECT_TRUE(MayReadAs("expensive", "expensive"));
  EXPECT_FALSE(MayReadAs("expensive", "expensivex"));
  EXPECT_FALSE(MayReadAs("cheap", "expensive"));
  EXPECT_TRUE(MayReadAs(Any("*xpensive"), "expensive"));
  EXPECT_TRUE(MayReadAs(Any("expen*ive"), "expensive"));
  EXPECT_TRUE(MayReadAs(Any("*"), "expensive"));
  EXPECT_TRUE(MayReadAs(Any("e*e*e"), "expensive"));
  EXPECT_FALSE(MayReadAs(Any("e*x*z"), "expensive"));
  EXPECT_TRUE(MayReadAs(Any("expensive*"), "expensive"));  // the run may be nothing
  EXPECT_FALSE(MayReadAs(Any("caf*"), "expensive"));
  EXPECT_FALSE(MayReadAs("", "expensive"));
  EXPECT_TRUE(MayReadAs(Any("*"), ""));
}

TEST(PathReading, MayVanish) {
  EXPECT_TRUE(MayVanish(""));
  EXPECT_TRUE(MayVanish(Any("*")));
  EXPECT_FALSE(MayVanish("a"));
  EXPECT_FALSE(MayVanish(Any("*a")));
  EXPECT_TRUE(MayVanish(ReadSegment(";jsessionid=1").skeleton));
  EXPECT_TRUE(MayVanish(ReadSegment("%C2%AD").skeleton));
  EXPECT_FALSE(MayVanish(ReadSegment("report").skeleton));
  EXPECT_FALSE(MayVanish(ReadSegment("%E6%97%A5").skeleton));
  EXPECT_FALSE(MayReadAs(ReadSegment("%E6%97%A5").skeleton, "expensive"));
}

TEST(PathReading, WithoutExtensionIsTheNameBeforeTheFirstDot) {
  // Rails routes "/expensive.json" to "/expensive" (format json), as Spring MVC did before 5.3.
  EXPECT_EQ(WithoutExtension("expensive.json"), "expensive");
  EXPECT_EQ(WithoutExtension("expensive.tar.gz"), "expensive");
  EXPECT_EQ(WithoutExtension(".json"), "");
  EXPECT_EQ(WithoutExtension(ReadSegment("Expensive.JSON;x").skeleton), "expensive");
  EXPECT_EQ(WithoutExtension("expensive"), std::nullopt);
  EXPECT_EQ(WithoutExtension(ReadSegment("expensive.").skeleton), std::nullopt);  // trimmed
}

}  // namespace
}  // namespace agentpay
