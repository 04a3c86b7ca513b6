// How common upstream servers may read one segment of a path that the gateway forwards (issue 36
// item 2, T21): Tomcat, Jetty and Spring drop ";parameters", IIS and Windows ignore letter case and
// trailing dots and spaces, some decode escapes twice or fold Unicode, Rails drops an extension.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agentpay {

// Why a segment is refused whatever the routes: some server reads structure into it.
enum class SegmentHazard {
  kNone,
  kDotSegment,        // some reading is "." or "..": "..%3B", ".%20", "%252E%252E"
  kEncodedDelimiter,  // decoded twice it holds '/', '\', '?', '#' or NUL: "%252F"
  kLookalike,         // a character that NFKC or Windows best fit maps to ASCII punctuation
  kOverlongUtf8,      // an overlong UTF-8 form, which lenient decoders read as ASCII: "%C0%AF"
};

// The reason given to the client for a hazard (empty for kNone).
std::string_view HazardReason(SegmentHazard hazard);

// In a skeleton, a non-ASCII character that some mapping may turn into ASCII: it may read as any
// run of ASCII characters other than delimiters, or as nothing (NFKC folds fullwidth letters, best
// fit drops accents, some mappings drop invisible characters). Normalised paths hold no NUL.
inline constexpr char kAnyRun = '\0';

// In a skeleton, a run of non-ASCII characters that no mapping turns into ASCII (CJK, Cyrillic...):
// it reads as itself, never as a route prefix's ASCII nor as nothing.
inline constexpr char kItself = '\x80';

struct SegmentReading {
  SegmentHazard hazard = SegmentHazard::kNone;
  // The segment with every reading applied, when hazard is kNone: escapes decoded until none is
  // left, cut at the first ';' (path parameters) and, before an NTFS stream ("x::$DATA"), at the
  // first ':', trailing dots and spaces dropped, letters lower-cased, non-ASCII characters
  // kAnyRun or kItself, and a Windows short name ("expens~1") its first letters and kAnyRun.
  std::string skeleton;
};

// Precondition: `segment` is a segment of a normalised path (http/request_target.h): no '/', and
// every '%' starts an escape.
SegmentReading ReadSegment(std::string_view segment);

// Just the hazard: the same answer as ReadSegment's, without building a skeleton where none can be.
SegmentHazard HazardOf(std::string_view segment);

// Whether some reading of a segment with this skeleton is `literal`, a skeleton without kAnyRun
// (such as a route prefix's segment).
bool MayReadAs(std::string_view skeleton, std::string_view literal);

// Whether some reading leaves nothing of the segment, so that the next one takes its place.
bool MayVanish(std::string_view skeleton);

// The skeleton of a path's last segment as Rails (an optional ".:format") and Spring MVC before
// 5.3 (suffix pattern matching) route it: cut at its first '.', the rest taken for a format, so
// "/expensive.json" is served as "/expensive". Nothing when the skeleton holds no '.'. Only the
// last segment that a reading keeps is read so.
std::optional<std::string_view> WithoutExtension(std::string_view skeleton);

}  // namespace agentpay
