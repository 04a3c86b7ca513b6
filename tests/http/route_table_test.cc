// The route table (http/route_table.h): which route a path buys, and the paths that a common
// upstream could read as another route. The issue's table ("/" at 1, "/expensive" at 500000) and
// the variants found since, then a brute force over concrete server readings.
#include "http/route_table.h"

#include <gtest/gtest.h>

#include <optional>

#include "core/hex.h"
#include "http/request_target.h"

namespace agentpay {
namespace {

RouteTable Table(std::vector<RoutePrefix> prefixes) {
  auto table = RouteTable::Make(prefixes);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return std::move(*table);
}

// The match of a request target, normalised first as the gateway does.
RouteMatch MatchTarget(const RouteTable& table, std::string_view target) {
  auto normal = NormalizeTarget(target);
  EXPECT_TRUE(normal.ok()) << target << ": " << normal.status().ToString();
  if (!normal.ok()) return {};
  std::string_view path = *normal;
  return table.Match(path.substr(0, path.find('?')));
}

void ExpectMatched(const RouteTable& table, std::string_view target, size_t route) {
  SCOPED_TRACE(target);
  const RouteMatch match = MatchTarget(table, target);
  EXPECT_EQ(match.outcome, RouteOutcome::kMatched);
  EXPECT_EQ(match.route, route);
}

void ExpectAmbiguous(const RouteTable& table, std::string_view target, size_t other) {
  SCOPED_TRACE(target);
  const RouteMatch match = MatchTarget(table, target);
  EXPECT_EQ(match.outcome, RouteOutcome::kAmbiguous);
  EXPECT_EQ(match.route, other);
}

TEST(RouteTable, TheIssuesVariantsAreAmbiguous) {
  const RouteTable table = Table({{"/", 0}, {"/expensive", 1}});
  for (const char* target :
       {// issue 36 item 2, as reported
        "/expensive;jsessionid=1/report", "/Expensive/report", "/EXPENSIVE/report",
        "/expensive%3b/report",
        // and found since
        "/expensive;jsessionid=1", "/Expensive", "/eXpEnSiVe?q=1", "/expensive%3Bx=1/report",
        "/expensive%253B/report", "/expensive./report", "/expensive%20/report",
        "/expensive...%20/report", "/expensive::$DATA", "/expensive:$i30:$INDEX_ALLOCATION/r",
        "/%2545xpensive/report", "/%25%34%35xpensive", "/%EF%BD%85xpensive/report",
        "/%EF%BC%A5%EF%BC%B8%EF%BC%B0%EF%BC%A5%EF%BC%AE%EF%BC%B3%EF%BC%A9%EF%BC%B6%EF%BC%A5",
        "/expen%C5%BFive/report", "/%E2%84%AA", "/expens%C3%AFve", "/EXPENS~1/report", "/expens~2",
        "/;x/expensive/report", "/%3Bx/expensive", "/%20/expensive", "/.../expensive/report",
        "/%C2%AD/expensive", "/;b/;c/expensive/report", "/Expensive;x=1./report", "/%C3%A9",
        // Rails and Spring MVC before 5.3 take a last segment's extension for a format
        "/expensive.json", "/Expensive.JSON", "/expensive.tar.gz", "/expensive.json;x",
        "/;x/expensive.json", "/expensive.json/;x", "/expensive.json/%20", "/expens%C3%AFve.xml"}) {
    ExpectAmbiguous(table, target, 1);
  }
}

TEST(RouteTable, PathsThatReadAsOneRouteAreServed) {
  const RouteTable table = Table({{"/", 0}, {"/expensive", 1}});
  ExpectMatched(table, "/expensive", 1);
  ExpectMatched(table, "/expensive/report", 1);
  ExpectMatched(table, "/expensive/Report;v=2/x.json", 1);  // a legitimate ';' below a route
  ExpectMatched(table, "/expensive/../cheap", 0);
  ExpectMatched(table, "/cheap;x=1/y", 0);  // every reading is "/cheap/y": route "/"
  ExpectMatched(table, "/CHEAP/Y", 0);
  ExpectMatched(table, "/", 0);
  ExpectMatched(table, "/expensively", 0);
  ExpectMatched(table, "/expensive-x/report", 0);
  ExpectMatched(table, "/x/expensive", 0);
  ExpectMatched(table, "/x;y/expensive", 0);  // "x" never vanishes: not "/expensive"
  ExpectMatched(table, "/caf%C3%A9/expensive", 0);
  ExpectMatched(table, "/things:cancel", 0);
  ExpectMatched(table, "/%E6%97%A5%E6%9C%AC/report", 0);
  ExpectMatched(table, "/expensive%3Fx", 0);            // an escaped '?' is part of the segment
  ExpectMatched(table, "/a;b/;c/expensive/report", 0);  // "a" never vanishes
  ExpectMatched(table, "/expensive.json/report", 0);    // an extension only ends a path
  ExpectMatched(table, "/x/expensive.json", 0);
  ExpectMatched(table, "/expensively.json", 0);
  ExpectMatched(table, "/report.json", 0);
  ExpectMatched(table, "/expensive/report.json", 1);
}

TEST(RouteTable, ReadingsOnlyMoveARequestDeeper) {
  // "/api" and "/api/pro": a path below "/api/pro" reads below it everywhere, so only paths that
  // the gateway puts under "/api" are asked whether they read as "/api/pro".
  const RouteTable table = Table({{"/api", 0}, {"/api/pro", 1}, {"/news", 2}});
  ExpectMatched(table, "/api/pro/x;y", 1);
  ExpectMatched(table, "/api/PROtocol", 0);
  ExpectMatched(table, "/api/prototype", 0);
  ExpectMatched(table, "/api/x;y/z", 0);
  ExpectAmbiguous(table, "/api/PRO/x", 1);
  ExpectAmbiguous(table, "/api/pro;v=1/x", 1);
  ExpectAmbiguous(table, "/api/pr%C3%B3", 1);
  ExpectAmbiguous(table, "/api/%20/pro", 1);
  ExpectAmbiguous(table, "/api/pro.json", 1);
  ExpectMatched(table, "/api/protocol.json", 0);
  // Unmatched as the gateway reads it, yet a route as another server does: refused, not 404.
  ExpectAmbiguous(table, "/API/x", 0);
  ExpectAmbiguous(table, "/News", 2);
  const RouteMatch none = MatchTarget(table, "/other");
  EXPECT_EQ(none.outcome, RouteOutcome::kUnmatched);
  EXPECT_EQ(MatchTarget(table, "/apix").outcome, RouteOutcome::kUnmatched);
}

TEST(RouteTable, LongPathsOfVanishingSegments) {
  // Thousands of segments that vanish cost one reading each, not one per candidate prefix, and
  // still count: an extension read off holds only if all that follows may vanish.
  std::vector<RoutePrefix> prefixes = {{"/", 0}};
  for (size_t i = 1; i <= 50; ++i) prefixes.push_back({"/r" + std::to_string(i) + "/a/b", i});
  prefixes.push_back({"/expensive", 51});
  const RouteTable table = Table(prefixes);
  std::string vanishing;
  for (int i = 0; i < 2000; ++i) vanishing += "/;x";
  ExpectAmbiguous(table, vanishing + "/expensive", 51);
  ExpectAmbiguous(table, vanishing + "/r7" + vanishing + "/A/b", 7);
  ExpectAmbiguous(table, vanishing + "/expensive.json" + vanishing, 51);
  ExpectAmbiguous(table, "/expensive.json/%20" + vanishing + "/%C3%A9", 51);
  ExpectMatched(table, vanishing + "/expensive.json" + vanishing + "/x", 0);
  ExpectMatched(table, vanishing, 0);
  ExpectMatched(table, "/r7/a/b" + vanishing, 7);
}

TEST(RouteTable, RoutesOfTheSameTermsAreInterchangeable) {
  // "/" and "/v1" at one price to one upstream: reading "/V1" as "/v1" buys the same thing.
  const RouteTable table = Table({{"/", 0}, {"/v1", 0}, {"/v1/pro", 2}});
  ExpectMatched(table, "/V1/x", 0);
  ExpectMatched(table, "/v1/x", 1);
  ExpectAmbiguous(table, "/V1/Pro", 2);
  ExpectAmbiguous(table, "/v1/pro;x", 2);
}

TEST(RouteTable, PrefixesMustReadAlikeEverywhere) {
  for (const char* prefix : {"/a;b", "/a.", "/a/b.", "/a%20", "/caf%C3%A9", "/expens~1",
                             "/a::$DATA", "/a%2541", "/a%EF%BC%8Fb", "/a/..%3B"}) {
    SCOPED_TRACE(prefix);
    Status checked = CheckRoutePrefix(prefix);
    EXPECT_EQ(checked.error(), ErrorCode::kInvalidConfig);
    EXPECT_NE(checked.message().find(prefix), std::string::npos) << checked.message();
    EXPECT_FALSE(RouteTable::Make({{"/", 0}, {prefix, 1}}).ok());
  }
  for (const char* prefix : {"/", "/API", "/v1/things:batch", "/a%20b", "/v1.2/x", "/a~b", "/~x"}) {
    SCOPED_TRACE(prefix);
    EXPECT_TRUE(CheckRoutePrefix(prefix).ok()) << CheckRoutePrefix(prefix).ToString();
  }
}

TEST(RouteTable, PrefixesThatReadAlikeCollide) {
  for (const auto& [a, b] :
       {std::pair{"/Expensive", "/expensive"}, {"/a%20b", "/A%20B"}, {"/v1/Pro", "/V1/pro"}}) {
    SCOPED_TRACE(b);
    auto table = RouteTable::Make({{"/", 0}, {a, 1}, {b, 2}});
    ASSERT_FALSE(table.ok());
    EXPECT_EQ(table.status().error(), ErrorCode::kInvalidConfig);
    EXPECT_NE(table.status().message().find(a), std::string::npos);
  }
  EXPECT_TRUE(RouteTable::Make({{"/a", 0}, {"/a/b", 1}, {"/b", 2}}).ok());
}

// ---- A brute force against concrete readings: each server behaviour written out on its own.

enum Reading : unsigned {
  kCutParameters = 1,   // Tomcat: cut each segment at its first raw ';'
  kDecodeThenCut = 2,   // Jetty 9: decode once, then cut at ';'
  kFoldCase = 4,        // IIS: letter case ignored
  kTrimTrailing = 8,    // Windows: trailing dots and spaces dropped
  kDecodeTwice = 16,    // a second decoding of what the first one left
  kDropExtension = 32,  // Rails: the last segment's extension is a format, not part of its name
};

std::string DecodeOnce(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexDigitValue(text[i + 1]) >= 0 &&
        HexDigitValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexDigitValue(text[i + 1]) * 16 + HexDigitValue(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The segments of a normalised path as one server with `readings` sees them, decoded.
std::vector<std::string> ReadPath(std::string_view path, unsigned readings) {
  std::vector<std::string> segments;
  std::string_view rest = path;
  while (!rest.empty()) {
    rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    std::string segment(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (readings & kCutParameters) segment = segment.substr(0, segment.find(';'));
    segment = DecodeOnce(segment);
    if (readings & kDecodeTwice) segment = DecodeOnce(segment);
    if (readings & kDecodeThenCut) segment = segment.substr(0, segment.find(';'));
    if (readings & kTrimTrailing) {
      while (!segment.empty() && (segment.back() == '.' || segment.back() == ' ')) {
        segment.pop_back();
      }
    }
    if (readings & kFoldCase) {
      for (char& c : segment) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  if ((readings & kDropExtension) && !segments.empty()) {
    std::string& last = segments.back();
    last = last.substr(0, last.find('.'));
    if (last.empty()) segments.pop_back();
  }
  return segments;
}

// The longest prefix below which a server with `readings` puts the path.
std::optional<size_t> RouteAsRead(const std::vector<std::string>& prefixes, std::string_view path,
                                  unsigned readings) {
  const std::vector<std::string> segments = ReadPath(path, readings);
  std::optional<size_t> best;
  size_t best_depth = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const std::vector<std::string> prefix =
        prefixes[i] == "/" ? std::vector<std::string>() : ReadPath(prefixes[i], readings);
    if (prefix.size() > segments.size()) continue;
    if (!std::equal(prefix.begin(), prefix.end(), segments.begin())) continue;
    if (!best || prefix.size() > best_depth) best = i, best_depth = prefix.size();
  }
  return best;
}

TEST(RouteTable, NoServerReadingLeavesTheRouteItWasSoldAs) {
  const std::vector<std::string> prefixes = {"/", "/expensive", "/cheap/pro"};
  const RouteTable table = Table({{"/", 0}, {"/expensive", 1}, {"/cheap/pro", 2}});
  const char* parts[] = {
      "expensive",      "Expensive", "expensive;x", "expensive%3B", "expensive.", "cheap",
      "CHEAP",          "pro",       "Pro;v=1",     ";x",           "%20",        "x",
      "%2545xpensive",  "..",        "p%2572o",     "...",          "a%3Bb",      "cheap%20.",
      "expensive.json", "Pro.v2",    ".x"};
  int served = 0, refused = 0;
  for (const char* a : parts) {
    for (const char* b : parts) {
      for (const char* c : parts) {
        const std::string target = std::string("/") + a + "/" + b + "/" + c;
        auto normal = NormalizeTarget(target);
        if (!normal.ok()) continue;
        const RouteMatch match = table.Match(*normal);
        if (match.outcome == RouteOutcome::kAmbiguous) {
          ++refused;
          continue;
        }
        ++served;
        for (unsigned readings = 0; readings < 64; ++readings) {
          const std::optional<size_t> as_read = RouteAsRead(prefixes, *normal, readings);
          ASSERT_TRUE(as_read.has_value()) << target;
          ASSERT_EQ(*as_read, match.route) << target << " read with " << readings;
        }
      }
    }
  }
  // Both kinds occur: the check is not vacuous.
  EXPECT_GT(served, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace agentpay
