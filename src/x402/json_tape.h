// A strict JSON reader for the payment headers, several times faster than building an
// nlohmann::json tree: one pass validates the whole document and records every value as a node of
// a flat "tape", from which the decoder reads the dozen fields it needs. It accepts what
// nlohmann::json::parse (3.11, strict, no comments) accepts, with the same duplicate-key rule (the
// last one wins), so moving the payment decoder onto it changed no verdict, but one: nlohmann
// takes a NUL byte for the end of the input and ignores what follows, JsonTape refuses it (as
// JSON.parse does). fuzz/payment_header_fuzzer.cc checks all of this against nlohmann.
// Header-only: wire.cc, the tests and the fuzzer include it.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <forward_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/hex.h"

namespace agentpay::x402 {

enum class JsonType : uint8_t { kNull, kFalse, kTrue, kNumber, kString, kArray, kObject };

// One value of the document. Children of a container follow it on the tape; an object's members
// are key (a kString node) then value.
struct JsonNode {
  JsonType type = JsonType::kNull;
  // kString: the content has escapes (read it with JsonTape::String). kNumber: integer syntax (no
  // fraction, no exponent).
  bool flag = false;
  uint32_t begin = 0;  // kString: first byte after the opening quote; others: first byte
  uint32_t end = 0;    // kString: the closing quote; others: one past the last byte
  uint32_t next = 0;   // index of the first node after this value and its children
};

enum class JsonError { kNone, kSyntax, kTooDeep };

class JsonTape {
 public:
  static constexpr size_t kNoNode = static_cast<size_t>(-1);

  // Parses `text` (RFC 8259; UTF-8 checked inside strings; an optional leading BOM skipped and a
  // number whose magnitude overflows a double refused, as nlohmann does; a NUL byte refused).
  // Arrays and objects may nest at most max_depth deep (the outermost one is depth 1). The tape
  // refers to `text`, which must outlive it. Precondition: text.size() < 2^31.
  JsonError Parse(std::string_view text, int max_depth);

  const JsonNode& node(size_t index) const { return nodes_[index]; }
  size_t size() const { return nodes_.size(); }
  std::string_view text() const { return text_; }
  // The root value (node 0). Precondition: Parse returned kNone.
  static constexpr size_t root() { return 0; }

  // The value of the last member named `key` of the object at `object` (nlohmann keeps the last
  // of duplicate keys), or kNoNode. Precondition: node(object).type == kObject.
  size_t Member(size_t object, std::string_view key) const;

  // The content of the string at `index`, unescaped. Without escapes this is a view into the
  // text; with them it is decoded into `storage`, and the view lives as long as `storage` does.
  std::string_view String(size_t index, std::forward_list<std::string>& storage) const;
  // The raw token of a number, e.g. "-12.5e3".
  std::string_view Token(size_t index) const;
  // The number at `index` as nlohmann converts it to double (underflow gives ±0).
  double NumberAsDouble(size_t index) const;
  // The value at `index` as nlohmann::json::parse builds it (unsigned/integer/float numbers,
  // last duplicate key wins).
  nlohmann::json ToJson(size_t index) const;

 private:
  std::string_view text_;
  std::vector<JsonNode> nodes_;
};

// --- implementation ------------------------------------------------------------------------------

namespace json_tape_detail {

inline bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Four hex digits at p (the caller checked that four bytes remain), or -1.
inline int32_t Hex4(const char* p) {
  int32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const int digit = HexDigitValue(p[i]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Length of the well-formed UTF-8 sequence (RFC 3629, as nlohmann's lexer checks it) starting
// with the non-ASCII byte at p, or 0.
inline size_t Utf8SequenceLength(const unsigned char* p, const unsigned char* end) {
  auto in = [](unsigned char c, unsigned char low, unsigned char high) {
    return c >= low && c <= high;
  };
  const size_t left = static_cast<size_t>(end - p);
  const unsigned char lead = p[0];
  if (in(lead, 0xC2, 0xDF)) return left >= 2 && in(p[1], 0x80, 0xBF) ? 2 : 0;
  if (in(lead, 0xE0, 0xEF)) {
    if (left < 3) return 0;
    const unsigned char low = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned char high = lead == 0xED ? 0x9F : 0xBF;
    return in(p[1], low, high) && in(p[2], 0x80, 0xBF) ? 3 : 0;
  }
  if (in(lead, 0xF0, 0xF4)) {
    if (left < 4) return 0;
    const unsigned char low = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char high = lead == 0xF4 ? 0x8F : 0xBF;
    return in(p[1], low, high) && in(p[2], 0x80, 0xBF) && in(p[3], 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// Whether a number token that std::from_chars found out of range for double is too large (true)
// or too small (false): the sign of its decimal exponent decides, as out-of-range values lie
// beyond 1e308 or below 1e-308. Precondition: `token` is valid JSON number syntax, not all zeros.
inline bool OverflowsDouble(std::string_view token) {
  size_t i = token[0] == '-' ? 1 : 0;
  bool seen_point = false, found = false;
  int64_t integer_digits = 0, fraction_zeros = 0;
  for (; i < token.size() && token[i] != 'e' && token[i] != 'E'; ++i) {
    if (token[i] == '.') {
      seen_point = true;
    } else if (!seen_point) {
      if (found || token[i] != '0') {
        found = true;
        ++integer_digits;
      }
    } else if (!found) {
      if (token[i] == '0') {
        ++fraction_zeros;
      } else {
        found = true;
      }
    }
  }
  // The decimal exponent of the first non-zero digit, before the 'e' part.
  const int64_t magnitude = integer_digits > 0 ? integer_digits - 1 : -(fraction_zeros + 1);
  int64_t exponent = 0;
  if (i < token.size()) {
    ++i;
    const bool negative = token[i] == '-';
    if (token[i] == '-' || token[i] == '+') ++i;
    for (; i < token.size(); ++i) {
      exponent = std::min<int64_t>(exponent * 10 + (token[i] - '0'), int64_t{1} << 40);
    }
    if (negative) exponent = -exponent;
  }
  return magnitude + exponent > 0;
}

inline void AppendUtf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Recursive descent over the text, appending nodes. Every function starts at the first byte of
// its construct (whitespace already skipped) and returns false on any syntax error.
class Parser {
 public:
  Parser(std::string_view text, int max_depth, std::vector<JsonNode>& nodes)
      : base_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        max_depth_(max_depth),
        nodes_(nodes) {}

  JsonError Document() {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;
    SkipWhitespace();
    if (!Value(0)) return too_deep_ ? JsonError::kTooDeep : JsonError::kSyntax;
    SkipWhitespace();
    return p_ == end_ ? JsonError::kNone : JsonError::kSyntax;
  }

 private:
  void SkipWhitespace() {
    while (p_ != end_ && IsWhitespace(*p_)) ++p_;
  }
  uint32_t Offset(const char* p) const { return static_cast<uint32_t>(p - base_); }
  size_t Push(JsonType type, const char* begin) {
    nodes_.push_back(JsonNode{type, false, Offset(begin), 0, 0});
    return nodes_.size() - 1;
  }
  void Close(size_t index) {
    nodes_[index].end = Offset(p_);
    nodes_[index].next = static_cast<uint32_t>(nodes_.size());
  }

  bool Value(int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        return Container(depth, JsonType::kObject);
      case '[':
        return Container(depth, JsonType::kArray);
      case '"':
        return String();
      case 't':
        return Literal("true", JsonType::kTrue);
      case 'f':
        return Literal("false", JsonType::kFalse);
      case 'n':
        return Literal("null", JsonType::kNull);
      default:
        return Number();
    }
  }

  bool Literal(std::string_view word, JsonType type) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    const size_t index = Push(type, p_);
    p_ += word.size();
    Close(index);
    return true;
  }

  bool Container(int depth, JsonType type) {
    if (depth + 1 > max_depth_) {
      too_deep_ = true;
      return false;
    }
    const char close = type == JsonType::kObject ? '}' : ']';
    const size_t index = Push(type, p_);
    ++p_;
    SkipWhitespace();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      Close(index);
      return true;
    }
    while (true) {
      if (type == JsonType::kObject) {
        if (p_ == end_ || *p_ != '"' || !String()) return false;
        SkipWhitespace();
        if (p_ == end_ || *p_ != ':') return false;
        ++p_;
        SkipWhitespace();
      }
      if (!Value(depth + 1)) return false;
      SkipWhitespace();
      if (p_ == end_) return false;
      if (*p_ == close) break;
      if (*p_ != ',') return false;
      ++p_;
      SkipWhitespace();
    }
    ++p_;
    Close(index);
    return true;
  }

  bool String() {
    const size_t index = Push(JsonType::kString, p_ + 1);
    bool escaped = false;
    const auto* p = reinterpret_cast<const unsigned char*>(p_ + 1);
    const auto* end = reinterpret_cast<const unsigned char*>(end_);
    while (true) {
      while (p != end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
      if (p == end || *p < 0x20) return false;
      if (*p == '"') break;
      if (*p == '\\') {
        escaped = true;
        if (!Escape(p, end)) return false;
      } else {
        const size_t length = Utf8SequenceLength(p, end);
        if (length == 0) return false;
        p += length;
      }
    }
    p_ = reinterpret_cast<const char*>(p);
    nodes_[index].flag = escaped;
    nodes_[index].end = Offset(p_);
    nodes_[index].next = static_cast<uint32_t>(index + 1);
    ++p_;  // the closing quote
    return true;
  }

  // p at a backslash; moves past the escape. \u escapes must pair surrogates as nlohmann wants.
  static bool Escape(const unsigned char*& p, const unsigned char* end) {
    if (end - p < 2) return false;
    switch (p[1]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        p += 2;
        return true;
      case 'u':
        break;
      default:
        return false;
    }
    if (end - p < 6) return false;
    const int32_t unit = Hex4(reinterpret_cast<const char*>(p + 2));
    if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return false;
    p += 6;
    if (unit < 0xD800 || unit > 0xDBFF) return true;
    if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return false;
    const int32_t low = Hex4(reinterpret_cast<const char*>(p + 2));
    if (low < 0xDC00 || low > 0xDFFF) return false;
    p += 6;
    return true;
  }

  bool Digits() {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  bool Number() {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      return false;
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      integer = false;
      if (!Digits()) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      integer = false;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!Digits()) return false;
    }
    const std::string_view token(start, static_cast<size_t>(p_ - start));
    // A short integer never overflows; anything else is checked as nlohmann checks it.
    if (!integer || token.size() > 15) {
      double value = 0;
      const auto result = std::from_chars(token.data(), token.data() + token.size(), value);
      if (result.ec == std::errc::result_out_of_range && OverflowsDouble(token)) return false;
    }
    const size_t index = Push(JsonType::kNumber, start);
    nodes_[index].flag = integer;
    Close(index);
    return true;
  }

  const char* base_;
  const char* p_;
  const char* end_;
  int max_depth_;
  bool too_deep_ = false;
  std::vector<JsonNode>& nodes_;
};

}  // namespace json_tape_detail

inline JsonError JsonTape::Parse(std::string_view text, int max_depth) {
  AGENTPAY_CHECK(text.size() < (size_t{1} << 31));
  text_ = text;
  nodes_.clear();
  nodes_.reserve(text.size() / 10 + 8);  // a payment header has a node per 10 to 15 bytes
  return json_tape_detail::Parser(text, max_depth, nodes_).Document();
}

inline size_t JsonTape::Member(size_t object, std::string_view key) const {
  size_t found = kNoNode;
  std::forward_list<std::string> storage;
  for (size_t i = object + 1; i < nodes_[object].next; i = nodes_[i + 1].next) {
    const JsonNode& name = nodes_[i];
    const bool match =
        name.flag ? String(i, storage) == key
                  : std::string_view(text_.data() + name.begin, name.end - name.begin) == key;
    if (match) found = i + 1;
  }
  return found;
}

inline std::string_view JsonTape::String(size_t index,
                                         std::forward_list<std::string>& storage) const {
  const JsonNode& node = nodes_[index];
  AGENTPAY_CHECK(node.type == JsonType::kString);
  const std::string_view raw(text_.data() + node.begin, node.end - node.begin);
  if (!node.flag) return raw;
  std::string& out = storage.emplace_front();
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\') {
      out.push_back(raw[i]);
      continue;
    }
    const char kind = raw[++i];
    switch (kind) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        // Parse checked the digits and the surrogate pairing.
        uint32_t code_point = static_cast<uint32_t>(json_tape_detail::Hex4(&raw[i + 1]));
        i += 4;
        if (code_point >= 0xD800 && code_point <= 0xDBFF) {
          const auto low = static_cast<uint32_t>(json_tape_detail::Hex4(&raw[i + 3]));
          code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        }
        json_tape_detail::AppendUtf8(out, code_point);
        break;
      }
      default:
        out.push_back(kind);
        break;  // " \ /
    }
  }
  return out;
}

inline std::string_view JsonTape::Token(size_t index) const {
  const JsonNode& node = nodes_[index];
  return std::string_view(text_.data() + node.begin, node.end - node.begin);
}

inline double JsonTape::NumberAsDouble(size_t index) const {
  AGENTPAY_CHECK(nodes_[index].type == JsonType::kNumber);
  const std::string_view token = Token(index);
  double value = 0;
  const auto result = std::from_chars(token.data(), token.data() + token.size(), value);
  if (result.ec == std::errc::result_out_of_range) {  // underflow: Parse refused overflow
    return token[0] == '-' ? -0.0 : 0.0;
  }
  return value;
}

inline nlohmann::json JsonTape::ToJson(size_t index) const {
  const JsonNode& node = nodes_[index];
  switch (node.type) {
    case JsonType::kNull:
      return nullptr;
    case JsonType::kFalse:
      return false;
    case JsonType::kTrue:
      return true;
    case JsonType::kNumber: {
      const std::string_view token = Token(index);
      const char* first = token.data();
      const char* last = token.data() + token.size();
      if (node.flag && token[0] != '-') {
        uint64_t value = 0;
        if (std::from_chars(first, last, value).ec == std::errc()) return value;
      } else if (node.flag) {
        int64_t value = 0;
        if (std::from_chars(first, last, value).ec == std::errc()) return value;
      }
      return NumberAsDouble(index);
    }
    case JsonType::kString: {
      std::forward_list<std::string> storage;
      return std::string(String(index, storage));
    }
    case JsonType::kArray: {
      nlohmann::json array = nlohmann::json::array();
      for (size_t i = index + 1; i < node.next; i = nodes_[i].next) array.push_back(ToJson(i));
      return array;
    }
    case JsonType::kObject: {
      nlohmann::json object = nlohmann::json::object();
      auto& members = object.get_ref<nlohmann::json::object_t&>();
      std::forward_list<std::string> storage;
      for (size_t i = index + 1; i < node.next; i = nodes_[i + 1].next) {
        members.insert_or_assign(std::string(String(i, storage)), ToJson(i + 1));
      }
      return object;
    }
  }
  AGENTPAY_CHECK(false && "unknown JsonType");
  return nullptr;
}

}  // namespace agentpay::x402
