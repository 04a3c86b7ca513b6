// See path_reading.h. The readings are applied all at once: a prefix segment of a route reads the
// same on every server but for case (route_table.h checks that), so the most reduced form of a
// path segment is the only one that can read as a prefix segment the strict form is not.
#include "http/path_reading.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/hex.h"

namespace agentpay {
namespace {

// Code points that some server turns into '/', '\', '.', ';', ':', '?', '#' or '%': every one whose
// NFKC form or case mapping holds one (Unicode 15 data; U+037E is even canonically ';'), and the
// slashes, backslashes, yen and won signs that Windows' best-fit code pages map to '/' or '\'.
struct CodePointRange {
  uint32_t first, last;
};
constexpr std::array<CodePointRange, 33> kLookalikes = {{
    {0x00A5, 0x00A5}, {0x037E, 0x037E}, {0x2024, 0x2026},   {0x2044, 0x2044}, {0x2047, 0x2049},
    {0x20A9, 0x20A9}, {0x2100, 0x2101}, {0x2105, 0x2106},   {0x2215, 0x2216}, {0x2488, 0x249B},
    {0x29F5, 0x29F5}, {0x29F8, 0x29F9}, {0x2A74, 0x2A74},   {0x33C2, 0x33C2}, {0x33C7, 0x33C7},
    {0x33D8, 0x33D8}, {0xFE13, 0xFE14}, {0xFE16, 0xFE16},   {0xFE19, 0xFE19}, {0xFE30, 0xFE30},
    {0xFE52, 0xFE52}, {0xFE54, 0xFE56}, {0xFE5F, 0xFE5F},   {0xFE68, 0xFE68}, {0xFE6A, 0xFE6A},
    {0xFF03, 0xFF03}, {0xFF05, 0xFF05}, {0xFF0E, 0xFF0F},   {0xFF1A, 0xFF1B}, {0xFF1F, 0xFF1F},
    {0xFF3C, 0xFF3C}, {0xFFE5, 0xFFE6}, {0x1F100, 0x1F100},
}};

// Code points that some server may read as ASCII letters, digits, other ASCII or nothing: every
// one whose NFKC form or case mapping holds ASCII, the format characters and spaces, and whole
// blocks around them (Latin, Greek, letterlike, compatibility forms) whose accents Windows'
// best-fit mapping drops. Any other character (CJK, Cyrillic, Arabic letters...) reads as itself.
// tests/http/check_unicode_tables.py checks both tables against Unicode's data.
constexpr std::array<CodePointRange, 37> kMayReadAsAscii = {{
    {0x0080, 0x03FF},   {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},
    {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x1680, 0x1680},
    {0x180E, 0x180E},   {0x1AB0, 0x1AFF},   {0x1D00, 0x1FFF},   {0x2000, 0x218F},
    {0x2460, 0x24FF},   {0x2A74, 0x2A76},   {0x2C60, 0x2C7F},   {0x3000, 0x3000},
    {0x309B, 0x309C},   {0x3200, 0x33FF},   {0xA720, 0xA7FF},   {0xAB30, 0xAB6F},
    {0xFB00, 0xFB4F},   {0xFC5E, 0xFC63},   {0xFDFA, 0xFDFB},   {0xFE00, 0xFE7F},
    {0xFEFF, 0xFEFF},   {0xFF00, 0xFFEF},   {0xFFF9, 0xFFFB},   {0x107A5, 0x107A5},
    {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3},
    {0x1D173, 0x1D17A}, {0x1D400, 0x1D7FF}, {0x1F100, 0x1F1FF}, {0x1FBF0, 0x1FBF9},
    {0xE0000, 0xE01EF},
}};

template <size_t N>
bool InRanges(const std::array<CodePointRange, N>& ranges, uint32_t code_point) {
  auto after = std::upper_bound(
      ranges.begin(), ranges.end(), code_point,
      [](uint32_t value, const CodePointRange& range) { return value < range.first; });
  return after != ranges.begin() && code_point <= std::prev(after)->last;
}

// One character of decoded bytes from `at` on (text[at] >= 0x80).
struct Utf8Char {
  enum class Kind { kValid, kOverlong, kInvalid } kind;
  uint32_t code_point = 0;
  size_t length = 1;  // kInvalid: the one byte, read by lenient decoders as some other character
};

Utf8Char NextUtf8(std::string_view text, size_t at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  size_t length = 0;
  uint32_t code_point = 0;
  if (lead >= 0xC0 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07;
  } else {
    return {Utf8Char::Kind::kInvalid};
  }
  if (at + length > text.size()) return {Utf8Char::Kind::kInvalid};
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[at + i]);
    if ((next & 0xC0) != 0x80) return {Utf8Char::Kind::kInvalid};
    code_point = (code_point << 6) | (next & 0x3F);
  }
  static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code_point < kLeast[length]) return {Utf8Char::Kind::kOverlong};
  return {Utf8Char::Kind::kValid, code_point, length};
}

// Escapes decoded until none is left: "%2541" reads "%41" once decoded, then "A". A decoded byte
// may complete an escape with the bytes before it, so each is looked at again. Escapes never
// overlap, so the order in which servers decode does not change the end: this is every partial
// decoding's end as well.
std::string DecodeFully(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out += c;
    while (out.size() >= 3 && out[out.size() - 3] == '%') {
      const int high = HexDigitValue(out[out.size() - 2]);
      const int low = HexDigitValue(out.back());
      if (high < 0 || low < 0) break;
      out.resize(out.size() - 3);
      out += static_cast<char>(high * 16 + low);
    }
  }
  return out;
}

// The segment's escapes decoded once, as every server does.
std::string DecodeOnce(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int high = text[i] == '%' && i + 2 < text.size() ? HexDigitValue(text[i + 1]) : -1;
    const int low = high >= 0 ? HexDigitValue(text[i + 2]) : -1;
    if (low < 0) {
      out += text[i];
      continue;
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

// How many bytes of the text end a segment or a path for some server.
size_t Delimiters(std::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) {
    return c == '\0' || c == '/' || c == '\\' || c == '?' || c == '#';
  });
}

// Whether some reading of this cut of a segment is a dot segment: its non-ASCII characters read
// as nothing and trailing spaces dropped (Windows), it is "." or "..".
bool MayBeDotSegment(std::string_view cut) {
  std::string left;
  for (char c : cut) {
    if (c != kAnyRun) left += c;  // kItself is no dot and never vanishes
    if (left.size() > 2 && left.back() != ' ') return false;
  }
  while (!left.empty() && left.back() == ' ') left.pop_back();
  return left == "." || left == "..";
}

// The segment cut at the first ';' and, before an NTFS stream type (":$"), at the first ':'.
std::string_view CutParameters(std::string_view text) {
  text = text.substr(0, text.find(';'));
  if (text.find(":$") != std::string_view::npos) text = text.substr(0, text.find(':'));
  return text;
}

// Trailing dots and spaces dropped; where non-ASCII characters are among them, that whole tail may
// read as anything from nothing on, so it becomes one kAnyRun.
std::string DropTrailingDotsAndSpaces(std::string_view text) {
  size_t end = text.size();
  bool any = false;
  while (end > 0 && (text[end - 1] == '.' || text[end - 1] == ' ' || text[end - 1] == kAnyRun)) {
    any = any || text[end - 1] == kAnyRun;
    --end;
  }
  std::string out(text.substr(0, end));
  if (any) out += kAnyRun;
  return out;
}

// A Windows 8.3 short name ("EXPENS~1", "REPORT~12.JSO") names some long name that starts with
// its first letters: it becomes those letters and kAnyRun.
void WidenShortName(std::string& skeleton) {
  const size_t tilde = skeleton.find('~');
  if (tilde == 0 || tilde == std::string::npos || tilde > 6) return;
  size_t end = tilde + 1;
  while (end < skeleton.size() && skeleton[end] >= '0' && skeleton[end] <= '9') ++end;
  if (end == tilde + 1) return;
  if (end < skeleton.size() && (skeleton[end] != '.' || skeleton.size() - end > 4)) return;
  skeleton.resize(tilde);
  skeleton += kAnyRun;
}

// Bytes that no reading changes: a segment of only these reads as itself but for case.
bool Plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' ||
         c == '*' || c == '+' || c == ',' || c == '=' || c == '@';
}

// A segment of plain bytes, dots and '~' only, other than "." and "..": no escape, cut or
// non-ASCII character, so no reading of it is a dot segment or holds a delimiter (dots need a cut,
// an escape or a non-ASCII character for that).
bool PlainSegment(std::string_view segment) {
  return segment != "." && segment != ".." &&
         std::all_of(segment.begin(), segment.end(), [](char c) {
           return Plain(static_cast<unsigned char>(c)) || c == '.' || c == '~';
         });
}

}  // namespace

std::string_view HazardReason(SegmentHazard hazard) {
  switch (hazard) {
    case SegmentHazard::kNone:
      return "";
    case SegmentHazard::kDotSegment:
      return "a path segment that some servers read as '.' or '..' (with ';' parameters, an "
             "encoded ';', trailing spaces or escapes decoded twice) is not accepted";
    case SegmentHazard::kEncodedDelimiter:
      return "an escape that decodes to '/', '\\', '?', '#' or NUL when decoded twice (such as "
             "%252F) is not accepted";
    case SegmentHazard::kLookalike:
      return "a character that Unicode compatibility or Windows best-fit mapping turns into "
             "'/', '\\', '.', ';', ':', '?', '#' or '%' (such as a fullwidth solidus) is not "
             "accepted";
    case SegmentHazard::kOverlongUtf8:
      return "an overlong UTF-8 sequence (such as %C0%AF), which lenient decoders read as ASCII, "
             "is not accepted";
  }
  return "";
}

SegmentReading ReadSegment(std::string_view segment) {
  if (PlainSegment(segment)) {  // the common case, in one allocation: only case and dots to read
    SegmentReading reading{SegmentHazard::kNone, std::string(segment)};
    for (char& c : reading.skeleton) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    while (!reading.skeleton.empty() && reading.skeleton.back() == '.') reading.skeleton.pop_back();
    WidenShortName(reading.skeleton);
    return reading;
  }
  const bool escaped = segment.find('%') != std::string_view::npos;
  const std::string decoded = escaped ? DecodeFully(segment) : std::string(segment);
  // An escaped '?' or '#' (%3F, %23) is one once decoded, as meant. A delimiter that only a second
  // decoding makes is not: decoding never consumes a delimiter, so it shows as one more.
  if (escaped && Delimiters(decoded) > Delimiters(DecodeOnce(segment))) {
    return {SegmentHazard::kEncodedDelimiter, {}};
  }
  std::string text;  // decoded, each non-ASCII character one kAnyRun or kItself
  text.reserve(decoded.size());
  for (size_t i = 0; i < decoded.size();) {
    const auto c = static_cast<unsigned char>(decoded[i]);
    if (c < 0x80) {
      text += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      ++i;
      continue;
    }
    const Utf8Char next = NextUtf8(decoded, i);
    char stands_for = kAnyRun;  // an invalid byte: a lenient decoder reads it as Latin-1
    switch (next.kind) {
      case Utf8Char::Kind::kOverlong:
        return {SegmentHazard::kOverlongUtf8, {}};
      case Utf8Char::Kind::kValid:
        if (InRanges(kLookalikes, next.code_point)) return {SegmentHazard::kLookalike, {}};
        if (!InRanges(kMayReadAsAscii, next.code_point)) stands_for = kItself;
        break;
      case Utf8Char::Kind::kInvalid:
        break;
    }
    if (text.empty() || text.back() != stands_for) text += stands_for;
    i += next.length;
  }
  // Each server cuts, or not, at ';' and at ':$': every cut must stay clear of a dot segment.
  const std::string_view at_semicolon = std::string_view(text).substr(0, text.find(';'));
  const std::string_view cut = CutParameters(text);
  if (MayBeDotSegment(text) || MayBeDotSegment(at_semicolon) || MayBeDotSegment(cut)) {
    return {SegmentHazard::kDotSegment, {}};
  }
  SegmentReading reading{SegmentHazard::kNone, DropTrailingDotsAndSpaces(cut)};
  WidenShortName(reading.skeleton);
  return reading;
}

SegmentHazard HazardOf(std::string_view segment) {
  return PlainSegment(segment) ? SegmentHazard::kNone : ReadSegment(segment).hazard;
}

bool MayReadAs(std::string_view skeleton, std::string_view literal) {
  // A glob match, kAnyRun for '*': on a mismatch, the last kAnyRun takes one more character.
  size_t s = 0, l = 0;
  size_t star = std::string_view::npos, star_at = 0;
  while (l < literal.size()) {
    if (s < skeleton.size() && skeleton[s] == kAnyRun) {
      star = ++s;
      star_at = l;
    } else if (s < skeleton.size() && skeleton[s] == literal[l]) {
      ++s, ++l;
    } else if (star != std::string_view::npos) {
      s = star;
      l = ++star_at;
    } else {
      return false;
    }
  }
  while (s < skeleton.size() && skeleton[s] == kAnyRun) ++s;
  return s == skeleton.size();
}

bool MayVanish(std::string_view skeleton) {
  return std::all_of(skeleton.begin(), skeleton.end(), [](char c) { return c == kAnyRun; });
}

std::optional<std::string_view> WithoutExtension(std::string_view skeleton) {
  const size_t dot = skeleton.find('.');  // kAnyRun never reads as '.': those are kLookalike
  if (dot == std::string_view::npos) return std::nullopt;
  return skeleton.substr(0, dot);
}

}  // namespace agentpay
