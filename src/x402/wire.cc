// Encoding and strict decoding of x402 headers. Input is hostile: every field is checked for its
// JSON type and shape before use, nothing throws out of here, and each refusal names the field.
#include "x402/wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <forward_list>
#include <initializer_list>
#include <span>

#include "core/hex.h"
#include "x402/base64.h"
#include "x402/json_tape.h"

namespace agentpay::x402 {
namespace {

using Json = nlohmann::json;

// v1 network names. `v1_client` marks the names in x402 1.2.0's fixed enum: the only ones a v1
// client (x402-fetch) accepts, so the only ones we advertise. The others are later names from
// @x402/evm 2.27's v1 table, accepted when a payload names them.
struct NetworkName {
  std::string_view name;
  uint64_t chain_id;
  bool v1_client;
};
constexpr std::array<NetworkName, 23> kV1Networks = {{
    {"abstract", 2741, true},
    {"abstract-testnet", 11124, true},
    {"base-sepolia", 84532, true},
    {"base", 8453, true},
    {"avalanche-fuji", 43113, true},
    {"avalanche", 43114, true},
    {"iotex", 4689, true},
    {"sei", 1329, true},
    {"sei-testnet", 1328, true},
    {"polygon", 137, true},
    {"polygon-amoy", 80002, true},
    {"peaq", 3338, true},
    {"story", 1514, true},
    {"educhain", 41923, true},
    {"skale-base-sepolia", 324705682, true},
    {"ethereum", 1, false},
    {"sepolia", 11155111, false},
    {"megaeth", 4326, false},
    {"monad", 143, false},
    {"stable", 988, false},
    {"stable-testnet", 2201, false},
    {"celo", 42220, false},
    {"flare", 14, false},
}};

constexpr std::string_view kEip155Prefix = "eip155:";
constexpr uint64_t kMaxSafeInteger = (uint64_t{1} << 53) - 1;  // JS Number.isSafeInteger

Status Malformed(std::string message) {
  return Status::Error(ErrorCode::kMalformedPayment, std::move(message));
}

std::optional<uint64_t> ChainIdV2(std::string_view network) {
  if (network.substr(0, kEip155Prefix.size()) != kEip155Prefix) return std::nullopt;
  const std::string_view digits = network.substr(kEip155Prefix.size());
  if (digits.empty() || digits.size() > 16 || (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  uint64_t chain_id = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), chain_id);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (chain_id == 0 || chain_id > kMaxSafeInteger) return std::nullopt;
  return chain_id;
}

std::optional<uint64_t> ChainIdV1(std::string_view network) {
  for (const NetworkName& entry : kV1Networks) {
    if (entry.name == network) return entry.chain_id;
  }
  return std::nullopt;
}

// Never throws: invalid UTF-8 (from configuration strings) becomes U+FFFD.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// --- reading the header's JSON: each refusal names the field and the rule it broke -------------

// Joins message pieces; called only on the way to a refusal.
std::string Concat(std::initializer_list<std::string_view> pieces) {
  std::string text;
  for (std::string_view piece : pieces) text += piece;
  return text;
}

// Typed access to the members of a parsed document. Strings come back as views into the JSON
// text, or into storage owned here when they had escapes, so they live as long as the reader.
class Reader {
 public:
  static constexpr size_t kAbsent = JsonTape::kNoNode;

  explicit Reader(const JsonTape& tape) : tape_(tape) {}
  const JsonTape& tape() const { return tape_; }

  // Index of the member `key` of the object at `object`, or kAbsent.
  size_t Member(size_t object, std::string_view key) const { return tape_.Member(object, key); }
  JsonType Type(size_t node) const { return tape_.node(node).type; }
  bool AbsentOrNull(size_t node) const { return node == kAbsent || Type(node) == JsonType::kNull; }
  std::string_view String(size_t node) { return tape_.String(node, unescaped_); }

  Result<std::string_view> RequiredString(size_t object, std::string_view key,
                                          std::string_view path) {
    const size_t value = Member(object, key);
    if (value == kAbsent) return Malformed(Concat({path, key, " is missing"}));
    if (Type(value) != JsonType::kString) {
      return Malformed(Concat({path, key, " must be a string"}));
    }
    return String(value);
  }

  Result<std::string_view> NonEmptyString(size_t object, std::string_view key,
                                          std::string_view path) {
    Result<std::string_view> text = RequiredString(object, key, path);
    if (text.ok() && text->empty()) return Malformed(Concat({path, key, " must not be empty"}));
    return text;
  }

  Result<size_t> RequiredObject(size_t object, std::string_view key, std::string_view path) const {
    const size_t value = Member(object, key);
    if (value == kAbsent) return Malformed(Concat({path, key, " is missing"}));
    if (Type(value) != JsonType::kObject) {
      return Malformed(Concat({path, key, " must be an object"}));
    }
    return value;
  }

  Status OptionalObject(size_t object, std::string_view key, std::string_view path) const {
    const size_t value = Member(object, key);
    if (!AbsentOrNull(value) && Type(value) != JsonType::kObject) {
      return Malformed(Concat({path, key, " must be an object or null"}));
    }
    return Status::Ok();
  }

 private:
  const JsonTape& tape_;
  std::forward_list<std::string> unescaped_;
};

// Parses `text` onto `tape` and requires a JSON object at its root (nested at most kMaxJsonDepth).
Status ParseObject(std::string_view text, std::string_view what, JsonTape& tape) {
  switch (tape.Parse(text, kMaxJsonDepth)) {
    case JsonError::kNone:
      break;
    case JsonError::kTooDeep:
      return Malformed(
          Concat({what, " nests JSON deeper than ", std::to_string(kMaxJsonDepth), " levels"}));
    case JsonError::kSyntax:
      return Malformed(Concat({what, " is not valid JSON (UTF-8)"}));
  }
  if (tape.node(JsonTape::root()).type != JsonType::kObject) {
    return Malformed(Concat({what, " must be a JSON object"}));
  }
  return Status::Ok();
}

// --- the exact-scheme EVM payload --------------------------------------------------------------

// Nibble value of each byte, or -1 for a byte that is not a hex digit (either case): core's
// HexDigitValue, tabled at compile time for the hot path.
constexpr std::array<int8_t, 256> MakeHexTable() {
  std::array<int8_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    table[static_cast<size_t>(byte)] = static_cast<int8_t>(HexDigitValue(static_cast<char>(byte)));
  }
  return table;
}
constexpr std::array<int8_t, 256> kHexTable = MakeHexTable();

// "0x" and then exactly 2 × out.size() hex digits of either case (chain::ParseHex's rule), decoded
// into `out` without allocating. `out` may be partly written when this returns false.
bool ParseFixedHex(std::string_view text, std::span<uint8_t> out) {
  if (text.size() != 2 + 2 * out.size() || text[0] != '0' || text[1] != 'x') return false;
  const auto* digits = reinterpret_cast<const uint8_t*>(text.data() + 2);
  int bad = 0;  // collects the sign bits of the table entries: negative once any is -1
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = kHexTable[digits[2 * i]];
    const int low = kHexTable[digits[2 * i + 1]];
    bad |= high | low;
    out[i] = static_cast<uint8_t>(((high & 0x0f) << 4) | (low & 0x0f));
  }
  return bad >= 0;
}

Result<Address> AddressField(Reader& reader, size_t object, std::string_view key,
                             std::string_view path) {
  Result<std::string_view> text = reader.RequiredString(object, key, path);
  if (!text.ok()) return text.status();
  Address address;
  if (!ParseFixedHex(*text, address.bytes)) {
    return Malformed(Concat({path, key, " must be 0x followed by 40 hex digits"}));
  }
  return address;
}

Result<U256> DecimalField(Reader& reader, size_t object, std::string_view key,
                          std::string_view path) {
  Result<std::string_view> text = reader.RequiredString(object, key, path);
  if (!text.ok()) return text.status();
  const std::optional<U256> number = chain::ParseU256Decimal(*text);
  if (!number) {
    return Malformed(Concat({path, key,
                             " must be a decimal integer string (digits only, no sign, exponent, "
                             "hex prefix or leading zeros) below 2^256"}));
  }
  return *number;
}

Status DecodeAuthorization(Reader& reader, size_t authorization, TransferAuthorization& out) {
  constexpr std::string_view path = "payload.authorization.";
  Result<Address> from = AddressField(reader, authorization, "from", path);
  if (!from.ok()) return from.status();
  Result<Address> to = AddressField(reader, authorization, "to", path);
  if (!to.ok()) return to.status();
  Result<U256> value = DecimalField(reader, authorization, "value", path);
  if (!value.ok()) return value.status();
  Result<U256> valid_after = DecimalField(reader, authorization, "validAfter", path);
  if (!valid_after.ok()) return valid_after.status();
  Result<U256> valid_before = DecimalField(reader, authorization, "validBefore", path);
  if (!valid_before.ok()) return valid_before.status();
  Result<std::string_view> nonce_text = reader.RequiredString(authorization, "nonce", path);
  if (!nonce_text.ok()) return nonce_text.status();
  chain::Hash32 nonce;
  if (!ParseFixedHex(*nonce_text, nonce)) {
    return Malformed(Concat({path, "nonce must be 0x followed by 64 hex digits (32 bytes)"}));
  }
  out = TransferAuthorization{*from, *to, *value, *valid_after, *valid_before, nonce};
  return Status::Ok();
}

Status DecodeExactEvmPayload(Reader& reader, PaymentPayload& out) {
  Result<size_t> inner = reader.RequiredObject(JsonTape::root(), "payload", "");
  if (!inner.ok()) return inner.status();
  const size_t payload = *inner;
  if (reader.Member(payload, "authorization") == Reader::kAbsent &&
      reader.Member(payload, "permit2Authorization") != Reader::kAbsent) {
    return Malformed(
        "payload is a Permit2 authorization; only EIP-3009 authorizations are accepted");
  }
  Result<std::string_view> signature_text = reader.RequiredString(payload, "signature", "payload.");
  if (!signature_text.ok()) return signature_text.status();
  if (!ParseFixedHex(*signature_text, out.signature.bytes)) {
    return Malformed("payload.signature must be 0x followed by 130 hex digits (65 bytes r, s, v)");
  }
  Result<size_t> authorization = reader.RequiredObject(payload, "authorization", "payload.");
  if (!authorization.ok()) return authorization.status();
  return DecodeAuthorization(reader, *authorization, out.authorization);
}

// --- envelopes ---------------------------------------------------------------------------------

// nlohmann's is_number_integer: integer syntax whose value fits 64 bits (else it is a float).
bool IsJsonInteger(const JsonTape& tape, size_t node) {
  if (tape.node(node).type != JsonType::kNumber || !tape.node(node).flag) return false;
  const std::string_view token = tape.Token(node);
  const char* first = token.data();
  const char* last = token.data() + token.size();
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;
  return token[0] == '-' ? std::from_chars(first, last, signed_value).ec == std::errc()
                         : std::from_chars(first, last, unsigned_value).ec == std::errc();
}

Status CheckVersion(Reader& reader, Version version) {
  const size_t field = reader.Member(JsonTape::root(), "x402Version");
  if (field == Reader::kAbsent) return Malformed("x402Version is missing");
  if (!IsJsonInteger(reader.tape(), field)) return Malformed("x402Version must be an integer");
  // JSON spells a positive integer one way only, so the token is the number.
  const std::string expected = std::to_string(static_cast<int>(version));
  const std::string_view token = reader.tape().Token(field);
  if (token != expected) {
    return Malformed(Concat(
        {"x402Version must be ", expected, " in ", PaymentHeaderName(version), ", got ", token}));
  }
  return Status::Ok();
}

// accepted: the v2 PaymentRequirements schema of @x402/core (required fields and their types).
Status CheckAccepted(Reader& reader, size_t accepted) {
  constexpr std::string_view path = "accepted.";
  for (std::string_view key : {"scheme", "network", "amount", "asset", "payTo"}) {
    Result<std::string_view> text = reader.NonEmptyString(accepted, key, path);
    if (!text.ok()) return text.status();
  }
  const size_t timeout = reader.Member(accepted, "maxTimeoutSeconds");
  if (timeout == Reader::kAbsent) return Malformed("accepted.maxTimeoutSeconds is missing");
  if (reader.Type(timeout) != JsonType::kNumber || !(reader.tape().NumberAsDouble(timeout) > 0)) {
    return Malformed("accepted.maxTimeoutSeconds must be a positive number");
  }
  return reader.OptionalObject(accepted, "extra", path);
}

bool IsPaymentIdCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

Result<std::optional<std::string>> DecodePaymentIdentifier(Reader& reader) {
  const size_t extensions = reader.Member(JsonTape::root(), "extensions");
  if (reader.AbsentOrNull(extensions)) return std::optional<std::string>();
  const size_t extension = reader.Member(extensions, "payment-identifier");
  if (reader.AbsentOrNull(extension)) return std::optional<std::string>();
  constexpr std::string_view path = "extensions.payment-identifier.";
  if (reader.Type(extension) != JsonType::kObject) {
    return Malformed("extensions.payment-identifier must be an object");
  }
  Result<size_t> info = reader.RequiredObject(extension, "info", path);
  if (!info.ok()) return info.status();
  const size_t id = reader.Member(*info, "id");
  if (reader.AbsentOrNull(id)) return std::optional<std::string>();  // declared, not filled in
  if (reader.Type(id) != JsonType::kString) {
    return Malformed(Concat({path, "info.id must be a string"}));
  }
  const std::string_view text = reader.String(id);
  if (text.size() < kPaymentIdMinLength || text.size() > kPaymentIdMaxLength ||
      !std::all_of(text.begin(), text.end(), IsPaymentIdCharacter)) {
    return Malformed(Concat({path, "info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -"}));
  }
  return std::optional<std::string>(text);
}

Status DecodeV2Envelope(Reader& reader, PaymentPayload& out) {
  Result<size_t> accepted = reader.RequiredObject(JsonTape::root(), "accepted", "");
  if (!accepted.ok()) return accepted.status();
  Status status = CheckAccepted(reader, *accepted);
  if (!status.ok()) return status;
  for (std::string_view key : {"resource", "extensions"}) {
    status = reader.OptionalObject(JsonTape::root(), key, "");
    if (!status.ok()) return status;
  }
  out.scheme = reader.String(reader.Member(*accepted, "scheme"));
  out.network = reader.String(reader.Member(*accepted, "network"));
  out.chain_id = ChainIdV2(out.network);
  Result<std::optional<std::string>> identifier = DecodePaymentIdentifier(reader);
  if (!identifier.ok()) return identifier.status();
  out.payment_identifier = std::move(*identifier);
  out.accepted = reader.tape().ToJson(*accepted);
  return Status::Ok();
}

Status DecodeV1Envelope(Reader& reader, PaymentPayload& out) {
  Result<std::string_view> scheme = reader.NonEmptyString(JsonTape::root(), "scheme", "");
  if (!scheme.ok()) return scheme.status();
  Result<std::string_view> network = reader.NonEmptyString(JsonTape::root(), "network", "");
  if (!network.ok()) return network.status();
  out.scheme = *scheme;
  out.network = *network;
  out.chain_id = ChainIdV1(out.network);
  return Status::Ok();
}

Result<PaymentPayload> DecodeCheckedJson(std::string_view text, Version version,
                                         std::string_view what) {
  JsonTape tape;
  Status status = ParseObject(text, what, tape);
  if (!status.ok()) return status;
  Reader reader(tape);
  status = CheckVersion(reader, version);
  if (!status.ok()) return status;
  PaymentPayload payload;
  payload.version = version;
  status = version == Version::kV2 ? DecodeV2Envelope(reader, payload)
                                   : DecodeV1Envelope(reader, payload);
  if (!status.ok()) return status;
  status = DecodeExactEvmPayload(reader, payload);
  if (!status.ok()) return status;
  return payload;
}

Result<PaymentPayload> DecodeChecked(std::string_view value, Version version) {
  const std::string_view header = PaymentHeaderName(version);
  if (value.size() > kMaxPaymentHeaderBytes) {
    return Malformed(Concat({header, " is ", std::to_string(value.size()), " bytes; the limit is ",
                             std::to_string(kMaxPaymentHeaderBytes)}));
  }
  if (value.empty()) return Malformed(Concat({header, " is empty"}));
  Result<std::string> text = Base64Decode(value);
  if (!text.ok()) {
    return Malformed(Concat({header, " is not standard padded base64: ", text.status().message()}));
  }
  return DecodeCheckedJson(*text, version, header);
}

// A positive whole number of seconds that fits int64 (maxTimeoutSeconds).
Result<int64_t> PositiveSeconds(Reader& reader, size_t object, std::string_view key,
                                std::string_view path) {
  const size_t value = reader.Member(object, key);
  if (value == Reader::kAbsent) return Malformed(Concat({path, key, " is missing"}));
  if (!IsJsonInteger(reader.tape(), value) || reader.tape().Token(value)[0] == '-' ||
      reader.tape().Token(value) == "0") {
    return Malformed(Concat({path, key, " must be a positive whole number"}));
  }
  int64_t seconds = 0;
  const std::string_view token = reader.tape().Token(value);
  if (std::from_chars(token.data(), token.data() + token.size(), seconds).ec != std::errc()) {
    return Malformed(Concat({path, key, " is too large"}));
  }
  return seconds;
}

Result<Requirements> DecodeRequirementsChecked(std::string_view text, Version version) {
  constexpr std::string_view path = "paymentRequirements.";
  JsonTape tape;
  Status status = ParseObject(text, "paymentRequirements", tape);
  if (!status.ok()) return status;
  Reader reader(tape);
  const size_t root = JsonTape::root();
  Requirements out;
  Result<std::string_view> scheme = reader.NonEmptyString(root, "scheme", path);
  if (!scheme.ok()) return scheme.status();
  out.scheme = *scheme;
  Result<std::string_view> network = reader.NonEmptyString(root, "network", path);
  if (!network.ok()) return network.status();
  out.network = *network;
  const std::optional<uint64_t> chain_id =
      version == Version::kV2 ? ChainIdV2(*network) : ChainIdV1(*network);
  if (!chain_id) {
    return Malformed(Concat({path, "network ", *network, " is not a network of x402 version ",
                             std::to_string(static_cast<int>(version))}));
  }
  out.chain_id = *chain_id;
  Result<U256> amount =
      DecimalField(reader, root, version == Version::kV2 ? "amount" : "maxAmountRequired", path);
  if (!amount.ok()) return amount.status();
  out.amount = *amount;
  Result<Address> asset = AddressField(reader, root, "asset", path);
  if (!asset.ok()) return asset.status();
  out.asset = *asset;
  Result<Address> pay_to = AddressField(reader, root, "payTo", path);
  if (!pay_to.ok()) return pay_to.status();
  out.pay_to = *pay_to;
  Result<int64_t> timeout = PositiveSeconds(reader, root, "maxTimeoutSeconds", path);
  if (!timeout.ok()) return timeout.status();
  out.max_timeout_seconds = *timeout;
  status = reader.OptionalObject(root, "extra", path);
  if (!status.ok()) return status;
  const size_t extra = reader.Member(root, "extra");
  if (!reader.AbsentOrNull(extra)) {
    for (auto [key, field] : {std::pair{std::string_view("name"), &out.asset_name},
                              std::pair{std::string_view("version"), &out.asset_version}}) {
      const size_t member = reader.Member(extra, key);
      if (reader.AbsentOrNull(member)) continue;
      if (reader.Type(member) != JsonType::kString) {
        return Malformed(Concat({path, "extra.", key, " must be a string"}));
      }
      *field = reader.String(member);
    }
  }
  for (auto [key, field] : {std::pair{std::string_view("resource"), &out.resource_url},
                            std::pair{std::string_view("description"), &out.description},
                            std::pair{std::string_view("mimeType"), &out.mime_type}}) {
    const size_t member = reader.Member(root, key);
    if (reader.AbsentOrNull(member) || reader.Type(member) != JsonType::kString) continue;
    *field = reader.String(member);
  }
  return out;
}

}  // namespace

std::string V2Network(uint64_t chain_id) {
  return std::string(kEip155Prefix) + std::to_string(chain_id);
}

std::optional<std::string> V1NetworkName(uint64_t chain_id) {
  for (const NetworkName& entry : kV1Networks) {
    if (entry.v1_client && entry.chain_id == chain_id) return std::string(entry.name);
  }
  return std::nullopt;
}

std::optional<uint64_t> ChainIdForNetwork(std::string_view network) {
  if (std::optional<uint64_t> chain_id = ChainIdV2(network)) return chain_id;
  return ChainIdV1(network);
}

Json AcceptedEntry(const Requirements& requirements) {
  return Json{
      {"scheme", requirements.scheme},
      {"network", V2Network(requirements.chain_id)},
      {"amount", requirements.amount.ToDecimal()},
      {"asset", chain::ToChecksumHex(requirements.asset)},
      {"payTo", chain::ToChecksumHex(requirements.pay_to)},
      {"maxTimeoutSeconds", requirements.max_timeout_seconds},
      {"extra", {{"name", requirements.asset_name}, {"version", requirements.asset_version}}},
  };
}

std::string EncodePaymentRequiredHeader(const std::vector<Requirements>& requirements,
                                        std::string_view error) {
  AGENTPAY_CHECK(!requirements.empty());
  const Requirements& first = requirements.front();
  Json resource = {{"url", first.resource_url}};
  if (!first.description.empty()) resource["description"] = first.description;
  if (!first.mime_type.empty()) resource["mimeType"] = first.mime_type;
  Json accepts = Json::array();
  for (const Requirements& entry : requirements) accepts.push_back(AcceptedEntry(entry));
  Json root = {{"x402Version", 2}, {"resource", resource}, {"accepts", accepts}};
  if (!error.empty()) root["error"] = std::string(error);
  return Base64Encode(Dump(root));
}

Json PaymentRequiredV1Body(const std::vector<Requirements>& requirements, std::string_view error,
                           UnnamedV1Chain unnamed) {
  Json accepts = Json::array();
  for (const Requirements& entry : requirements) {
    std::optional<std::string> network = V1NetworkName(entry.chain_id);
    if (!network && unnamed == UnnamedV1Chain::kNameCaip2) network = V2Network(entry.chain_id);
    if (!network) continue;
    accepts.push_back(Json{
        {"scheme", entry.scheme},
        {"network", *network},
        {"maxAmountRequired", entry.amount.ToDecimal()},
        {"asset", chain::ToChecksumHex(entry.asset)},
        {"payTo", chain::ToChecksumHex(entry.pay_to)},
        {"resource", entry.resource_url},
        {"description", entry.description},
        {"mimeType", entry.mime_type},
        {"maxTimeoutSeconds", entry.max_timeout_seconds},
        {"extra", {{"name", entry.asset_name}, {"version", entry.asset_version}}},
    });
  }
  return Json{{"x402Version", 1}, {"error", std::string(error)}, {"accepts", accepts}};
}

Result<PaymentPayload> DecodePaymentHeader(std::string_view value, Version version) {
  // Every access above is type-checked first; this only turns a missed case into a refusal.
  try {
    return DecodeChecked(value, version);
  } catch (const nlohmann::json::exception& error) {
    return Malformed(std::string(PaymentHeaderName(version)) + ": " + error.what());
  }
}

Result<PaymentPayload> DecodePaymentJson(std::string_view json_text, Version version) {
  try {
    return DecodeCheckedJson(json_text, version, "paymentPayload");
  } catch (const nlohmann::json::exception& error) {
    return Malformed(std::string("paymentPayload: ") + error.what());
  }
}

Result<Requirements> DecodeRequirements(std::string_view json_text, Version version) {
  try {
    return DecodeRequirementsChecked(json_text, version);
  } catch (const nlohmann::json::exception& error) {
    return Malformed(std::string("paymentRequirements: ") + error.what());
  }
}

std::string EncodePaymentHeader(const PaymentPayload& payload) {
  const TransferAuthorization& authorization = payload.authorization;
  Json inner = {
      {"signature", chain::Hex(payload.signature.bytes)},
      {"authorization",
       {{"from", chain::ToChecksumHex(authorization.from)},
        {"to", chain::ToChecksumHex(authorization.to)},
        {"value", authorization.value.ToDecimal()},
        {"validAfter", authorization.valid_after.ToDecimal()},
        {"validBefore", authorization.valid_before.ToDecimal()},
        {"nonce", chain::Hex(authorization.nonce)}}},
  };
  Json root = {{"x402Version", static_cast<int>(payload.version)}, {"payload", inner}};
  if (payload.version == Version::kV1) {
    root["scheme"] = payload.scheme;
    root["network"] = payload.network;
  } else {
    AGENTPAY_CHECK(payload.accepted.has_value());
    root["accepted"] = *payload.accepted;
    if (payload.payment_identifier) {
      root["extensions"] = {
          {"payment-identifier",
           {{"info", {{"required", false}, {"id", *payload.payment_identifier}}}}}};
    }
  }
  return Base64Encode(Dump(root));
}

std::string EncodeSettleResponseHeader(const SettleResponse& response) {
  Json root = {{"success", response.success},
               {"transaction", response.transaction},
               {"network", response.network}};
  if (!response.error_reason.empty()) root["errorReason"] = response.error_reason;
  if (!response.payer.empty()) root["payer"] = response.payer;
  return Base64Encode(Dump(root));
}

Result<SettleResponse> DecodeSettleResponseHeader(std::string_view value) {
  if (value.size() > kMaxPaymentHeaderBytes) return Malformed("settle response header too long");
  Result<std::string> text = Base64Decode(value);
  if (!text.ok()) return Malformed("settle response header: " + text.status().message());
  JsonTape tape;
  Status status = ParseObject(*text, "settle response header", tape);
  if (!status.ok()) return status;
  Reader reader(tape);
  const size_t success = reader.Member(JsonTape::root(), "success");
  if (success == Reader::kAbsent ||
      (reader.Type(success) != JsonType::kTrue && reader.Type(success) != JsonType::kFalse)) {
    return Malformed("success must be a boolean");
  }
  SettleResponse response;
  response.success = reader.Type(success) == JsonType::kTrue;
  Result<std::string_view> transaction = reader.RequiredString(JsonTape::root(), "transaction", "");
  if (!transaction.ok()) return transaction.status();
  Result<std::string_view> network = reader.RequiredString(JsonTape::root(), "network", "");
  if (!network.ok()) return network.status();
  response.transaction = *transaction;
  response.network = *network;
  for (auto [key, field] : {std::pair{std::string_view("errorReason"), &response.error_reason},
                            std::pair{std::string_view("payer"), &response.payer}}) {
    const size_t member = reader.Member(JsonTape::root(), key);
    if (reader.AbsentOrNull(member)) continue;
    if (reader.Type(member) != JsonType::kString) {
      return Malformed(Concat({key, " must be a string"}));
    }
    *field = reader.String(member);
  }
  return response;
}

}  // namespace agentpay::x402
