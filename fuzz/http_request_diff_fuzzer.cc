// Differential libFuzzer target: the listener's request reading (ReadRequestBytes,
// src/http/server.cc, the session's code path) against Node's http_parser 2.9.4, an independent C
// implementation. Where the reference reads a whole first request within the listener's limits,
// ours must read the same method, target, header fields, body and keep-alive; everywhere else ours
// must refuse. Each place where the two may differ by design is a narrow normalisation below,
// citing RFC 9110/9112, and is listed in fuzz/README.md. Input layout as in http_request_fuzzer.cc
// (two bytes, then the wire).
#include <http_parser.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request_target.h"
#include "http/server.h"

namespace {

using namespace agentpay;

// What http_parser made of the bytes, up to its first complete message.
struct Reference {
  enum class Outcome {
    kComplete,    // on_message_complete for the first request
    kRefused,     // an HPE_* error before that
    kIncomplete,  // every byte taken, no complete request: more bytes needed
  };
  Outcome outcome = Outcome::kIncomplete;
  http_errno error = HPE_OK;
  bool head_done = false;
  size_t head_bytes = 0;  // up to and with the LF that ends the head
  std::string method;
  std::string target;
  std::vector<HttpHeader> headers;  // the head's fields only: a trailer's are dropped, as ours does
  bool in_value = false;            // the last header callback was a value
  std::string body;
  bool keep_alive = false;
  unsigned http_major = 0;
  // Where the body's bytes lie on the wire read, and where the first request ends: the bytes
  // between head and end that are not body are the chunked framing (sizes, extensions, trailer).
  const char* wire_start = nullptr;
  std::vector<std::pair<size_t, size_t>> body_ranges;  // offset, length
  size_t message_end = 0;
  // What the wire given to the reference differs by (a request line rewritten for it, see
  // ForReference): its head_bytes are counted on the original wire.
  bool method_replaced = false;
  bool target_replaced = false;
};

// RFC 9110 §5.1: a field name is the whole token before the colon, so "Transfer-Encoding2" is
// not Transfer-Encoding. http_parser 2.9.4 marks a request as using a transfer coding as soon as
// a name's first 17 bytes match (uses_transfer_encoding, set in h_matching_transfer_encoding),
// then refuses it (HPE_INVALID_TRANSFER_ENCODING, or HPE_UNEXPECTED_CONTENT_LENGTH beside a
// Content-Length). Such a name is masked for it: its first byte becomes '~' (a tchar, the same
// length), on its wire and, for the comparison, in our field names.
bool LongerThanTransferEncoding(std::string_view name) {
  constexpr std::string_view kTe = "transfer-encoding";
  return name.size() > kTe.size() && HeaderNameEquals(name.substr(0, kTe.size()), kTe);
}

Reference& Of(http_parser* parser) { return *static_cast<Reference*>(parser->data); }

int OnUrl(http_parser* parser, const char* at, size_t length) {
  Of(parser).target.append(at, length);
  return 0;
}
int OnHeaderField(http_parser* parser, const char* at, size_t length) {
  Reference& ref = Of(parser);
  if (ref.head_done) return 0;  // a trailer field
  if (ref.headers.empty() || ref.in_value) ref.headers.push_back({});
  ref.in_value = false;
  ref.headers.back().name.append(at, length);
  return 0;
}
int OnHeaderValue(http_parser* parser, const char* at, size_t length) {
  Reference& ref = Of(parser);
  if (ref.head_done) return 0;
  ref.in_value = true;
  ref.headers.back().value.append(at, length);
  return 0;
}
int OnHeadersComplete(http_parser* parser) {
  Reference& ref = Of(parser);
  ref.head_done = true;
  ref.method = http_method_str(static_cast<http_method>(parser->method));
  ref.http_major = parser->http_major;
  http_parser_pause(parser, 1);  // so that the caller learns where the head ends
  return 0;
}
int OnBody(http_parser* parser, const char* at, size_t length) {
  Reference& ref = Of(parser);
  ref.body.append(at, length);
  ref.body_ranges.emplace_back(static_cast<size_t>(at - ref.wire_start), length);
  return 0;
}
int OnMessageComplete(http_parser* parser) {
  Reference& ref = Of(parser);
  ref.outcome = Reference::Outcome::kComplete;
  ref.keep_alive = http_should_keep_alive(parser) != 0;
  http_parser_pause(parser, 1);  // the first request only
  return 0;
}

Reference ReadWithReference(std::string_view wire) {
  http_parser_settings settings;
  http_parser_settings_init(&settings);
  settings.on_url = OnUrl;
  settings.on_header_field = OnHeaderField;
  settings.on_header_value = OnHeaderValue;
  settings.on_headers_complete = OnHeadersComplete;
  settings.on_body = OnBody;
  settings.on_message_complete = OnMessageComplete;
  Reference ref;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &ref;
  ref.wire_start = wire.data();
  size_t at = 0;
  while (ref.outcome != Reference::Outcome::kComplete) {
    const size_t used = http_parser_execute(&parser, &settings, wire.data() + at, wire.size() - at);
    const http_errno error = HTTP_PARSER_ERRNO(&parser);
    if (error == HPE_PAUSED && ref.outcome != Reference::Outcome::kComplete) {
      // Paused by OnHeadersComplete with the parser on the head's last LF: that LF is the head's
      // last byte, and is read again (state s_headers_done) when the parser goes on.
      ref.head_bytes = at + used + 1;
      at += used;
      http_parser_pause(&parser, 0);
      continue;
    }
    if (ref.outcome == Reference::Outcome::kComplete) ref.message_end = at + used;
    if (error != HPE_OK && error != HPE_PAUSED) {
      ref.outcome = Reference::Outcome::kRefused;
      ref.error = error;
    }
    break;
  }
  return ref;
}

// ---- normalisations (fuzz/README.md lists them) ----------------------------------------------

bool IsTokenChar(char c) {  // RFC 9110 §5.6.2 tchar
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// RFC 9110 §5.6.1: a comma-separated list, each element a token (empty elements allowed).
bool IsTokenList(std::string_view value) {
  while (true) {
    const size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty() && !IsToken(item)) return false;
    if (comma == std::string_view::npos) return true;
    value.remove_prefix(comma + 1);
  }
}

// The wire the reference reads. http_parser knows a fixed list of methods, where RFC 9110 §9.1
// lets a method be any token (Beast reads any; the gateway answers a method it does not route):
// a token it does not know becomes "GET", which frames a request as any other method does but
// CONNECT (RFC 9112 §6.3). And it refuses some targets at the parse that the listener leaves to
// the gateway, which refuses every target NormalizeTarget refuses (400 invalid_target, before
// any route is matched): such a target becomes "/". Only when ours read a request with them.
Reference ForReference(std::string_view original, const RequestRead& ours) {
  if (!ours.request) return ReadWithReference(original);
  const HttpRequest& request = *ours.request;
  std::string masked(original);
  const size_t head_end = masked.find("\r\n\r\n");
  for (const auto& header : request.headers) {
    if (!LongerThanTransferEncoding(header.name)) continue;
    const std::string line_start = "\n" + header.name + ":";
    for (size_t at = masked.find(line_start); at < head_end; at = masked.find(line_start, at + 1)) {
      masked[at + 1] = '~';
    }
  }
  // RFC 9110 §8.6, §5.5: a Content-Length value is digits, with optional whitespace (SP or HTAB)
  // around it; http_parser 2.9.4 takes SP but refuses HTAB there. In a Content-Length line of the
  // head, HTAB becomes SP for it (the same length; both trim the value's edges).
  for (size_t at = masked.find('\n'); at < head_end; at = masked.find('\n', at + 1)) {
    constexpr std::string_view kCl = "content-length:";
    const size_t line_end = std::min(masked.find('\n', at + 1), head_end);
    if (line_end - at <= kCl.size() ||
        !HeaderNameEquals(std::string_view(masked).substr(at + 1, kCl.size()), kCl)) {
      continue;
    }
    std::replace(masked.begin() + static_cast<std::ptrdiff_t>(at),
                 masked.begin() + static_cast<std::ptrdiff_t>(line_end), '\t', ' ');
  }
  const std::string_view wire = masked;
  Reference ref = ReadWithReference(wire);
  if (ref.outcome != Reference::Outcome::kRefused) return ref;
  const std::string line = request.method + " " + request.target + " ";
  if (wire.substr(0, line.size()) != line) return ref;  // Beast reads no other request line
  const bool unknown_method = ref.error == HPE_INVALID_METHOD && IsToken(request.method);
  std::string method = unknown_method ? "GET" : request.method;
  std::string rewritten =
      method + " " + request.target + " " + std::string(wire.substr(line.size()));
  Reference again = unknown_method ? ReadWithReference(rewritten) : ref;
  const bool refused_target = again.outcome == Reference::Outcome::kRefused &&
                              again.error == HPE_INVALID_URL &&
                              !NormalizeTarget(request.target).ok();
  if (refused_target) {
    rewritten = method + " / " + std::string(wire.substr(line.size()));
    again = ReadWithReference(rewritten);
  }
  if (!unknown_method && !refused_target) return ref;
  // Counted on the original wire, for the limits.
  if (again.head_done) again.head_bytes = again.head_bytes + wire.size() - rewritten.size();
  again.method_replaced = unknown_method;
  again.target_replaced = refused_target;
  return again;
}

// The head as the reference read it: up to its end, or every byte when it never ended.
std::string_view RefHead(std::string_view wire, const Reference& ref) {
  return ref.head_done ? wire.substr(0, std::min(ref.head_bytes, wire.size())) : wire;
}

bool HasObsFold(std::string_view head) {
  for (size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 1)) {
    if (at + 2 < head.size() && (head[at + 2] == ' ' || head[at + 2] == '\t')) return true;
  }
  return false;
}

// Why ours may refuse (400, or wait for a head it never sees end) what the reference reads. Each
// is a place where the RFCs let a server refuse, and refusing closes the connection: no framing
// differs. Empty: no reason.
std::string ComparedValue(std::string_view value, bool obs_fold);

// The bytes that frame the message, not its content: the head, then (chunked) the chunk lines and
// the trailer section, up to where the reference ended the request.
std::string FramingBytes(std::string_view wire, const Reference& ref) {
  std::string framing(RefHead(wire, ref));
  if (ref.outcome != Reference::Outcome::kComplete) return framing;
  size_t at = framing.size();
  const auto take_to = [&](size_t to) {
    if (to > at) framing.append(wire.substr(at, std::min(to, wire.size()) - at));
    at = std::max(at, to);
  };
  for (const auto& [offset, length] : ref.body_ranges) {
    take_to(offset);
    at = std::max(at, offset + length);
  }
  take_to(ref.message_end);
  return framing;
}

// Why ours may refuse one field line, of the head or of a trailer (Beast checks both alike).
std::string_view FieldRefusal(std::string_view name, std::string_view value) {
  // RFC 9110 §5.1, RFC 9112 §5.1: a field name is a token, no space before its colon (MUST
  // be refused); http_parser (not strict) takes other bytes into names.
  if (!IsToken(name)) return "field name not a token";
  // RFC 9110 §5.5: CTLs other than HTAB make a field value invalid (a recipient MAY keep
  // them; Beast refuses).
  for (char c : value) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return "CTL in value";
  }
  // RFC 9110 §7.6.1: Connection is a list of tokens; Beast refuses any other value, which
  // would otherwise decide whether the connection stays open.
  if ((HeaderNameEquals(name, "Connection") || HeaderNameEquals(name, "Proxy-Connection")) &&
      !IsTokenList(value)) {
    return "Connection not a token list";
  }
  return {};
}

// RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF, chunk-size = 1*HEXDIG.
// http_parser (not built strict) ends a size at a SP and skips what follows to the CR, and takes
// any two bytes after chunk data as its CRLF; Beast refuses both (400 "bad chunk"), which closes
// the connection: nothing is framed differently. Empty when every chunk up to the last is framed
// as the RFC writes it (the trailer section is checked elsewhere).
std::string_view LenientChunkFraming(std::string_view wire, size_t at) {
  for (;;) {
    const size_t line_end = wire.find("\r\n", at);
    if (line_end == std::string_view::npos) return {};  // the reference read it otherwise: others
    const std::string_view size_line = wire.substr(at, line_end - at);
    if (size_line.empty() || size_line.size() > 16 ||
        !std::all_of(size_line.begin(), size_line.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
      return "chunk size line not 1*HEXDIG CRLF";
    }
    const uint64_t size = std::stoull(std::string(size_line), nullptr, 16);
    at = line_end + 2;
    if (size == 0) break;
    if (size > wire.size() - at) return {};
    at += size;
    if (wire.substr(at, 2) != "\r\n") return "chunk data not followed by CRLF";
    at += 2;
  }
  // RFC 9112 §7.1.2: the trailer section is field lines, which Beast checks as it checks the
  // head's; http_parser (not strict) takes other bytes into names and values.
  for (;;) {
    const size_t line_end = wire.find("\r\n", at);
    if (line_end == std::string_view::npos || line_end == at) return {};
    const std::string_view field = wire.substr(at, line_end - at);
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) return "trailer field not a field line";
    const std::string_view name = field.substr(0, colon);
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    if (std::string_view why = FieldRefusal(name, value); !why.empty()) return why;
    // RFC 9110 §6.5.1: framing fields are not allowed in a trailer; Beast reads its trailer's
    // fields as a head's and refuses a Transfer-Encoding or Content-Length there.
    if (HeaderNameEquals(name, "Transfer-Encoding") || HeaderNameEquals(name, "Content-Length")) {
      return "framing field in trailer";
    }
    at = line_end + 2;
  }
}

std::string_view WhyOursMayRefuse(std::string_view wire, const Reference& ref) {
  const std::string_view head = RefHead(wire, ref);
  const std::string framing = FramingBytes(wire, ref);
  for (size_t at = 0; at < framing.size(); ++at) {
    // RFC 9112 §2.2 (and §7.1 for chunk lines and the trailer): a recipient MAY take a bare LF
    // as a line end (Beast does not).
    if (framing[at] == '\n' && (at == 0 || framing[at - 1] != '\r')) return "bare LF";
    // RFC 9112 §2.2: a bare CR MUST be refused or replaced by SP; http_parser (not built
    // strict) takes CR and any next byte as a line end.
    if (framing[at] == '\r' && (at + 1 >= framing.size() || framing[at + 1] != '\n')) {
      return "bare CR";
    }
  }
  // RFC 9112 §2.2: a server SHOULD ignore empty lines before the request line; Beast refuses.
  if (!wire.empty() && (wire[0] == '\r' || wire[0] == '\n')) return "leading empty line";
  // RFC 9112 §2.3: HTTP-version is "HTTP/" DIGIT "." DIGIT, case-sensitive, and only HTTP/1.x
  // is served (RFC 9110 §6.2: a major version it does not support gets an error); http_parser
  // (not strict) reads "HXXP/2.1", and HTTP/0.9's line without a version. RFC 9110 §2.5 says a
  // server SHOULD read HTTP/1.2 to HTTP/1.9 as HTTP/1.1; Beast 1.74 knows HTTP/1.0 and HTTP/1.1
  // only and refuses the rest (400 and close: nothing is framed differently, no request runs).
  const std::string_view line = head.substr(0, head.find("\r\n"));
  // RFC 9112 §3: request-line = method SP request-target SP HTTP-version; a recipient MAY split
  // it on whitespace instead (http_parser takes runs of SP), Beast wants one SP each.
  if (std::count(line.begin(), line.end(), ' ') != 2) return "request line not split by one SP";
  const std::string_view version = line.substr(line.size() < 9 ? 0 : line.size() - 9);
  if (ref.http_major != 1 || (version != " HTTP/1.0" && version != " HTTP/1.1")) {
    return "HTTP version other than HTTP/1.0 or HTTP/1.1";
  }
  for (const auto& header : ref.headers) {
    if (std::string_view why = FieldRefusal(header.name, header.value); !why.empty()) return why;
  }
  // RFC 9110 §9.3.6: CONNECT has no content, what follows is a tunnel: the listeners are no
  // proxy and refuse it (server.cc FramingRefusal); http_parser reads a tunnel's start.
  if (ref.method == "CONNECT") return "CONNECT";
  // RFC 9112 §3.2: a request-target holds no whitespace or CTL; http_parser (not strict) takes
  // HTAB and FF into it.
  for (char c : ref.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return "CTL in target";
  }
  // RFC 9112 §6.3 lets a server refuse a transfer coding it does not understand; the listener
  // takes only exactly one field "chunked" (FramingRefusal, T22), where http_parser looks only
  // at whether the last value ends in "chunked".
  size_t codings = 0;
  bool one_chunked = false;
  for (const auto& header : ref.headers) {
    if (!HeaderNameEquals(header.name, "Transfer-Encoding")) continue;
    ++codings;
    one_chunked = HeaderNameEquals(ComparedValue(header.value, false), "chunked");
  }
  if (codings > 1 || (codings == 1 && !one_chunked)) return "transfer coding other than chunked";
  // RFC 9112 §6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty framing; the listener
  // refuses it (400 and close), http_parser reads it chunked.
  if (codings > 0 && version == " HTTP/1.0") return "Transfer-Encoding in HTTP/1.0";
  // RFC 9112 §7.1.1: a chunk extension is ";" token ["=" (token / quoted-string)], which Beast
  // checks and http_parser skips unread.
  if (framing.find(';', head.size()) != std::string::npos) return "chunk extension";
  if (codings == 1 && one_chunked && ref.outcome == Reference::Outcome::kComplete) {
    if (std::string_view why = LenientChunkFraming(wire, head.size()); !why.empty()) return why;
  }
  return {};
}

// The elements of a comma-separated field value, each without the OWS around it (an empty element
// stays, as "5,,5" has one; nothing follows a trailing comma).
std::vector<std::string_view> ListItems(std::string_view value) {
  std::vector<std::string_view> items;
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    items.push_back(item);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
  return items;
}

// Why ours may read what the reference refuses: RFC 9110 §8.6 lets a recipient take a
// Content-Length whose value repeats one decimal number ("42, 42", "05, 5", or the field twice)
// as that number; http_parser refuses it. And RFC 9112 §5.2 lets a server replace an obs-fold by
// SP, which Beast does, so "Content-Length: 6" CRLF SP is 6; http_parser refuses the folded
// value. Only when every Content-Length ours read says the length of the body it read.
bool RepeatedLengthOursMayRead(const HttpRequest& ours, const Reference& ref, bool obs_fold) {
  if (ref.outcome != Reference::Outcome::kRefused ||
      (ref.error != HPE_UNEXPECTED_CONTENT_LENGTH && ref.error != HPE_INVALID_CONTENT_LENGTH)) {
    return false;
  }
  const std::string length = std::to_string(ours.body.size());
  size_t fields = 0;
  size_t numbers = 0;
  for (const auto& header : ours.headers) {
    if (!HeaderNameEquals(header.name, "Content-Length")) continue;
    ++fields;
    for (std::string_view item : ListItems(header.value)) {
      while (item.size() > 1 && item.front() == '0') item.remove_prefix(1);  // "05" is 5
      if (item != length) return false;
      ++numbers;
    }
  }
  return fields > 0 && (numbers > 1 || obs_fold);
}

// A field value as compared: RFC 9112 §5 excludes leading and trailing whitespace from a field
// value (http_parser keeps the trailing), and RFC 9112 §5.2 lets a server replace an obs-fold
// by one or more SP (Beast: one SP; http_parser keeps the fold's whitespace): in a head with an
// obs-fold, each run of SP/HTAB counts as one SP.
std::string ComparedValue(std::string_view value, bool obs_fold) {
  std::string out;
  for (char c : value) {
    const bool space = c == ' ' || c == '\t';
    if (obs_fold && space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      continue;
    }
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  return out;
}

// ---- comparison -------------------------------------------------------------------------------

const Reference* g_reference = nullptr;  // for the report of a failed property
const RequestRead* g_ours = nullptr;

void Describe() {
  if (g_reference) {
    const Reference& ref = *g_reference;
    std::fprintf(stderr,
                 "reference: outcome %d (%s), head %zu bytes, %s %s, body %zu, keep-alive %d, "
                 "method/target replaced %d/%d\n",
                 static_cast<int>(ref.outcome), http_errno_name(ref.error), ref.head_bytes,
                 ref.method.c_str(), ref.target.c_str(), ref.body.size(), ref.keep_alive,
                 ref.method_replaced, ref.target_replaced);
    for (const auto& h : ref.headers) {
      std::fprintf(stderr, "  [%s]: [%s]\n", h.name.c_str(), h.value.c_str());
    }
  }
  if (g_ours) {
    const RequestRead& ours = *g_ours;
    if (ours.request) {
      std::fprintf(stderr, "ours: request %s %s, body %zu, keep-alive %d\n",
                   ours.request->method.c_str(), ours.request->target.c_str(),
                   ours.request->body.size(), ours.keep_alive);
      for (const auto& h : ours.request->headers) {
        std::fprintf(stderr, "  [%s]: [%s]\n", h.name.c_str(), h.value.c_str());
      }
    } else if (ours.answer) {
      std::fprintf(stderr, "ours: answer %d %s\n", ours.answer->status, ours.answer->body.c_str());
    } else {
      std::fprintf(stderr, "ours: closed without an answer\n");
    }
  }
}

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "http_request_diff_fuzzer: disagreement: %s\n", what);
    Describe();
    std::abort();
  }
}

// Header fields in the order compared: RFC 9110 §5.3 makes the order of fields with different
// names insignificant (Beast puts a repeated name after the last field of that name), and keeps
// the order of the fields of one name: a stable sort by lower-cased name.
std::vector<HttpHeader> InComparedOrder(std::vector<HttpHeader> headers, bool obs_fold) {
  for (auto& header : headers) {
    for (char& c : header.name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (LongerThanTransferEncoding(header.name)) header.name[0] = '~';  // as masked for it
    header.value = ComparedValue(header.value, obs_fold);
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const HttpHeader& a, const HttpHeader& b) { return a.name < b.name; });
  return headers;
}

bool ListsClose(const std::vector<HttpHeader>& headers) {
  for (const auto& header : headers) {
    if (!HeaderNameEquals(header.name, "Connection")) continue;
    for (std::string_view item : ListItems(header.value)) {
      if (HeaderNameEquals(item, "close")) return true;
    }
  }
  return false;
}

void CompareRequests(std::string_view wire, const RequestRead& ours, const Reference& ref) {
  const HttpRequest& request = *ours.request;
  if (!ref.method_replaced) Require(request.method == ref.method, "the same method");
  if (!ref.target_replaced) Require(request.target == ref.target, "the same target");
  Require(request.headers.size() == ref.headers.size(), "the same number of header fields");
  const bool obs_fold = HasObsFold(RefHead(wire, ref));
  auto ours_fields = InComparedOrder(request.headers, obs_fold);
  auto ref_fields = InComparedOrder(ref.headers, obs_fold);
  // A field literally named like a masked one ("~ransfer-Encoding2") is one name with the masked
  // fields for the reference, and another for ours, which groups fields by name: among the
  // fields of such a name the order says nothing, so they are compared as sets.
  for (auto* fields : {&ours_fields, &ref_fields}) {
    for (auto first = fields->begin(); first != fields->end();) {
      auto last = std::find_if(first, fields->end(),
                               [&](const HttpHeader& h) { return h.name != first->name; });
      if (first->name.starts_with('~')) {
        std::sort(first, last,
                  [](const HttpHeader& a, const HttpHeader& b) { return a.value < b.value; });
      }
      first = last;
    }
  }
  for (size_t i = 0; i < ours_fields.size(); ++i) {
    Require(ours_fields[i].name == ref_fields[i].name, "the same field names");
    Require(ours_fields[i].value == ref_fields[i].value, "the same field values, in order");
  }
  Require(request.body == ref.body, "the same body");
  // RFC 9112 §9.6: a "close" option in any Connection field ends the connection. http_parser
  // misses it among empty list elements ("keep-alive,,, close") or in a second field; ours may
  // close where it keeps the connection, never the other way round.
  Require(ours.keep_alive == ref.keep_alive || (!ours.keep_alive && ListsClose(request.headers)),
          "the same keep-alive");
}

// RFC 9112 §7.1.1: chunk-ext = *( BWS ";" ... ), and BWS may be HTAB; http_parser takes only SP
// between a chunk size and its ';'. Ours (Beast) reads "0\t;x" as the RFC does.
bool TabBeforeChunkExtension(std::string_view wire, const Reference& ref) {
  if (!ref.head_done) return false;
  for (size_t at = wire.find('\t', ref.head_bytes); at != std::string_view::npos;
       at = wire.find('\t', at + 1)) {
    size_t end = at;
    while (end < wire.size() && (wire[end] == '\t' || wire[end] == ' ')) ++end;
    const bool after_size = at > 0 && std::isxdigit(static_cast<unsigned char>(wire[at - 1])) != 0;
    if (after_size && end < wire.size() && wire[end] == ';') return true;
  }
  return false;
}

void Compare(std::string_view wire, const RequestRead& ours, const Reference& ref,
             const ServerLimits& limits) {
  const bool ref_whole = ref.outcome == Reference::Outcome::kComplete;
  const bool head_within = ref.head_done && ref.head_bytes <= limits.max_header_bytes;
  const bool within_limits = ref_whole && head_within && ref.body.size() <= limits.max_body_bytes;
  if (ours.request) {
    if (RepeatedLengthOursMayRead(*ours.request, ref, HasObsFold(wire.substr(0, 16384)))) return;
    if (ref.outcome == Reference::Outcome::kRefused && ref.error == HPE_INVALID_CHUNK_SIZE &&
        TabBeforeChunkExtension(wire, ref)) {
      return;
    }
    Require(within_limits,
            "ours read a request the reference refused, did not finish, or found past a limit");
    CompareRequests(wire, ours, ref);
    return;
  }
  // Where ours reads lines differently (a bare CR or LF is no line end to it, see
  // WhyOursMayRefuse), it can find a head longer than the reference's.
  const bool lines_differ = !WhyOursMayRefuse(wire, ref).empty();
  if (within_limits) {
    Require(lines_differ, "ours refused a request the reference read whole within the limits");
    // Refused for a reason the RFCs allow: with a 400, by waiting for a head whose end (a CRLF
    // CRLF) never comes, or with a 431 for the longer head it reads.
    // A chunk line read otherwise (a bare LF in an extension, say) can make ours find a chunk
    // past the body limit: a 413, as final a refusal as a 400.
    Require(!ours.answer || ours.answer->status == 400 ||
                (ours.answer->status == 431 && wire.size() >= limits.max_header_bytes) ||
                (ours.answer->status == 413 && ref.body.size() > 0),
            "such a refusal is a 400");
    return;
  }
  if (!ours.answer) return;  // closed: the reference refused or needs more
  switch (ours.answer->status) {
    case 431:
      // Past the head's limit by the reference's count too, a head it never finished, or a head
      // ours reads as longer.
      Require(wire.size() >= limits.max_header_bytes && (!head_within || lines_differ),
              "431 only for a head past max_header_bytes");
      return;
    case 413:
    case 400:
      return;  // the reference refused, needs more, or found the body past the limit
    default:
      Require(false, "a read error is 400, 413 or 431");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // As in http_request_fuzzer.cc. Byte 0: the size of the pieces our side reads (0: all at once;
  // the reference always gets every byte at once). Byte 1: small limits.
  const size_t chunk_bytes = data[0];
  ServerLimits limits;
  if (data[1] & 1) limits.max_header_bytes = 200;
  if (data[1] & 2) limits.max_body_bytes = 16;
  const std::string_view wire(reinterpret_cast<const char*>(data + 2), size - 2);

  const RequestRead ours = ReadRequestBytes(wire, limits, chunk_bytes);
  const Reference ref = ForReference(wire, ours);
  g_reference = &ref;
  g_ours = &ours;
  static const bool show = std::getenv("AGENTPAY_DIFF_SHOW") != nullptr;  // for triage
  if (show) Describe();
  Compare(wire, ours, ref, limits);
  g_reference = nullptr;
  g_ours = nullptr;
  return 0;
}
