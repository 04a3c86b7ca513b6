// The payment header decoder as it was before it moved onto JsonTape (src/x402/wire.cc at
// dbf13b9: nlohmann::json::parse behind the JsonNestingWithin guard) and the base64 decoder of
// that version, kept verbatim as the fuzzer's oracle: the new decoders must accept exactly what
// these accept and decode it to the same values. Only the glue (namespace, the chain-id helpers
// over the public API) is new.
#include "reference_decoder.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/json_depth.h"

namespace agentpay::x402::reference {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kEip155Prefix = "eip155:";

Status Malformed(std::string message) {
  return Status::Error(ErrorCode::kMalformedPayment, std::move(message));
}

// The old ChainIdV2 / ChainIdV1, through ChainIdForNetwork (which tries the eip155 form, then the
// v1 names, none of which starts with "eip155:").
std::optional<uint64_t> ChainIdV2(std::string_view network) {
  if (network.substr(0, kEip155Prefix.size()) != kEip155Prefix) return std::nullopt;
  return ChainIdForNetwork(network);
}
std::optional<uint64_t> ChainIdV1(std::string_view network) {
  if (network.substr(0, kEip155Prefix.size()) == kEip155Prefix) return std::nullopt;
  return ChainIdForNetwork(network);
}

// --- the old base64 decoder (src/x402/base64.cc at dbf13b9) ---

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Sextet value of each byte, or -1 when the byte is not in the standard alphabet.
constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  for (int8_t& entry : table) entry = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kDecodeTable = MakeDecodeTable();

Status Invalid(std::string message) {
  return Status::Error(ErrorCode::kInvalidBase64, std::move(message));
}

}  // namespace

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Invalid("length " + std::to_string(text.size()) +
                   " is not a multiple of 4 (padding missing or extra characters)");
  }
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  const size_t data_chars = text.size() - padding;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t group = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    const int8_t value = kDecodeTable[static_cast<uint8_t>(text[i])];
    if (value < 0) {
      if (text[i] == '-' || text[i] == '_') return Invalid("URL-safe base64 is not accepted");
      if (text[i] == '=') return Invalid("'=' padding inside the text");
      return Invalid("character at offset " + std::to_string(i) + " is not standard base64");
    }
    group = (group << 6) | static_cast<uint32_t>(value);
    if (i % 4 == 3) {
      out.push_back(static_cast<char>((group >> 16) & 0xff));
      out.push_back(static_cast<char>((group >> 8) & 0xff));
      out.push_back(static_cast<char>(group & 0xff));
      group = 0;
    }
  }
  if (padding == 2) {  // 2 sextets: 12 bits, 8 used
    if ((group & 0x0f) != 0) return Invalid("non-zero bits under the padding");
    out.push_back(static_cast<char>((group >> 4) & 0xff));
  } else if (padding == 1) {  // 3 sextets: 18 bits, 16 used
    if ((group & 0x03) != 0) return Invalid("non-zero bits under the padding");
    out.push_back(static_cast<char>((group >> 10) & 0xff));
    out.push_back(static_cast<char>((group >> 2) & 0xff));
  }
  return out;
}

namespace {

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// --- JSON reading helpers: each returns a message naming `path` on a type or shape error. ------

// The member `key` of object, or nullptr when absent. Precondition: object.is_object().
const Json* Member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool AbsentOrNull(const Json* value) { return value == nullptr || value->is_null(); }

Result<std::string> RequiredString(const Json& object, const char* key, const std::string& path) {
  const Json* value = Member(object, key);
  if (value == nullptr) return Malformed(path + key + " is missing");
  if (!value->is_string()) return Malformed(path + key + " must be a string");
  return value->get_ref<const std::string&>();
}

Result<std::string> NonEmptyString(const Json& object, const char* key, const std::string& path) {
  Result<std::string> text = RequiredString(object, key, path);
  if (text.ok() && text->empty()) return Malformed(path + key + " must not be empty");
  return text;
}

Result<const Json*> RequiredObject(const Json& object, const char* key, const std::string& path) {
  const Json* value = Member(object, key);
  if (value == nullptr) return Malformed(path + key + " is missing");
  if (!value->is_object()) return Malformed(path + key + " must be an object");
  return value;
}

Status OptionalObject(const Json& object, const char* key, const std::string& path) {
  const Json* value = Member(object, key);
  if (!AbsentOrNull(value) && !value->is_object()) {
    return Malformed(path + key + " must be an object or null");
  }
  return Status::Ok();
}

Result<Json> ParseObject(std::string_view text, std::string_view what) {
  if (!JsonNestingWithin(text, kMaxJsonDepth)) {
    return Malformed(std::string(what) + " nests JSON deeper than " +
                     std::to_string(kMaxJsonDepth) + " levels");
  }
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Malformed(std::string(what) + " is not valid JSON (UTF-8)");
  if (!root.is_object()) return Malformed(std::string(what) + " must be a JSON object");
  return root;
}

// --- the exact-scheme EVM payload --------------------------------------------------------------

Result<Address> AddressField(const Json& object, const char* key, const std::string& path) {
  Result<std::string> text = RequiredString(object, key, path);
  if (!text.ok()) return text.status();
  Result<Address> address = chain::ParseAddress(*text);
  if (!address.ok()) return Malformed(path + key + " must be 0x followed by 40 hex digits");
  return address;
}

Result<U256> DecimalField(const Json& object, const char* key, const std::string& path) {
  Result<std::string> text = RequiredString(object, key, path);
  if (!text.ok()) return text.status();
  const std::optional<U256> number = chain::ParseU256Decimal(*text);
  if (!number) {
    return Malformed(path + key +
                     " must be a decimal integer string (digits only, no sign, exponent, hex "
                     "prefix or leading zeros) below 2^256");
  }
  return *number;
}

Status DecodeAuthorization(const Json& authorization, TransferAuthorization& out) {
  const std::string path = "payload.authorization.";
  Result<Address> from = AddressField(authorization, "from", path);
  if (!from.ok()) return from.status();
  Result<Address> to = AddressField(authorization, "to", path);
  if (!to.ok()) return to.status();
  Result<U256> value = DecimalField(authorization, "value", path);
  if (!value.ok()) return value.status();
  Result<U256> valid_after = DecimalField(authorization, "validAfter", path);
  if (!valid_after.ok()) return valid_after.status();
  Result<U256> valid_before = DecimalField(authorization, "validBefore", path);
  if (!valid_before.ok()) return valid_before.status();
  Result<std::string> nonce_text = RequiredString(authorization, "nonce", path);
  if (!nonce_text.ok()) return nonce_text.status();
  Result<chain::Hash32> nonce = chain::ParseHash32(*nonce_text);
  if (!nonce.ok()) return Malformed(path + "nonce must be 0x followed by 64 hex digits (32 bytes)");
  out = TransferAuthorization{*from, *to, *value, *valid_after, *valid_before, *nonce};
  return Status::Ok();
}

Status DecodeExactEvmPayload(const Json& root, PaymentPayload& out) {
  Result<const Json*> inner = RequiredObject(root, "payload", "");
  if (!inner.ok()) return inner.status();
  const Json& payload = **inner;
  if (Member(payload, "authorization") == nullptr &&
      Member(payload, "permit2Authorization") != nullptr) {
    return Malformed(
        "payload is a Permit2 authorization; only EIP-3009 authorizations are accepted");
  }
  Result<std::string> signature_text = RequiredString(payload, "signature", "payload.");
  if (!signature_text.ok()) return signature_text.status();
  Result<Signature> signature = chain::ParseSignature(*signature_text);
  if (!signature.ok()) {
    return Malformed("payload.signature must be 0x followed by 130 hex digits (65 bytes r, s, v)");
  }
  out.signature = *signature;
  Result<const Json*> authorization = RequiredObject(payload, "authorization", "payload.");
  if (!authorization.ok()) return authorization.status();
  return DecodeAuthorization(**authorization, out.authorization);
}

// --- envelopes ---------------------------------------------------------------------------------

Status CheckVersion(const Json& root, Version version) {
  const Json* field = Member(root, "x402Version");
  if (field == nullptr) return Malformed("x402Version is missing");
  if (!field->is_number_integer()) return Malformed("x402Version must be an integer");
  const int expected = static_cast<int>(version);
  if (*field != expected) {
    return Malformed("x402Version must be " + std::to_string(expected) + " in " +
                     std::string(PaymentHeaderName(version)) + ", got " + Dump(*field));
  }
  return Status::Ok();
}

// accepted: the v2 PaymentRequirements schema of @x402/core (required fields and their types).
Status CheckAccepted(const Json& accepted) {
  const std::string path = "accepted.";
  for (const char* key : {"scheme", "network", "amount", "asset", "payTo"}) {
    Result<std::string> text = NonEmptyString(accepted, key, path);
    if (!text.ok()) return text.status();
  }
  const Json* timeout = Member(accepted, "maxTimeoutSeconds");
  if (timeout == nullptr) return Malformed("accepted.maxTimeoutSeconds is missing");
  if (!timeout->is_number() || !(timeout->get<double>() > 0)) {
    return Malformed("accepted.maxTimeoutSeconds must be a positive number");
  }
  return OptionalObject(accepted, "extra", path);
}

Result<std::optional<std::string>> DecodePaymentIdentifier(const Json& root) {
  const Json* extensions = Member(root, "extensions");
  if (AbsentOrNull(extensions)) return std::optional<std::string>();
  const Json* extension = Member(*extensions, "payment-identifier");
  if (AbsentOrNull(extension)) return std::optional<std::string>();
  const std::string path = "extensions.payment-identifier.";
  if (!extension->is_object()) return Malformed("extensions.payment-identifier must be an object");
  Result<const Json*> info = RequiredObject(*extension, "info", path);
  if (!info.ok()) return info.status();
  const Json* id = Member(**info, "id");
  if (AbsentOrNull(id)) return std::optional<std::string>();  // declared by us, not filled in
  if (!id->is_string()) return Malformed(path + "info.id must be a string");
  const std::string& text = id->get_ref<const std::string&>();
  const bool valid_chars = std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  if (text.size() < kPaymentIdMinLength || text.size() > kPaymentIdMaxLength || !valid_chars) {
    return Malformed(path + "info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -");
  }
  return std::optional<std::string>(text);
}

Status DecodeV2Envelope(const Json& root, PaymentPayload& out) {
  Result<const Json*> accepted = RequiredObject(root, "accepted", "");
  if (!accepted.ok()) return accepted.status();
  Status status = CheckAccepted(**accepted);
  if (!status.ok()) return status;
  for (const char* key : {"resource", "extensions"}) {
    status = OptionalObject(root, key, "");
    if (!status.ok()) return status;
  }
  out.scheme = (*accepted)->at("scheme").get<std::string>();
  out.network = (*accepted)->at("network").get<std::string>();
  out.chain_id = ChainIdV2(out.network);
  out.accepted = **accepted;
  Result<std::optional<std::string>> identifier = DecodePaymentIdentifier(root);
  if (!identifier.ok()) return identifier.status();
  out.payment_identifier = *identifier;
  return Status::Ok();
}

Status DecodeV1Envelope(const Json& root, PaymentPayload& out) {
  Result<std::string> scheme = NonEmptyString(root, "scheme", "");
  if (!scheme.ok()) return scheme.status();
  Result<std::string> network = NonEmptyString(root, "network", "");
  if (!network.ok()) return network.status();
  out.scheme = *scheme;
  out.network = *network;
  out.chain_id = ChainIdV1(out.network);
  return Status::Ok();
}

Result<PaymentPayload> DecodeChecked(std::string_view value, Version version) {
  const std::string header(PaymentHeaderName(version));
  if (value.size() > kMaxPaymentHeaderBytes) {
    return Malformed(header + " is " + std::to_string(value.size()) + " bytes; the limit is " +
                     std::to_string(kMaxPaymentHeaderBytes));
  }
  if (value.empty()) return Malformed(header + " is empty");
  Result<std::string> text = Base64Decode(value);
  if (!text.ok()) {
    return Malformed(header + " is not standard padded base64: " + text.status().message());
  }
  Result<Json> root = ParseObject(*text, header);
  if (!root.ok()) return root.status();
  Status status = CheckVersion(*root, version);
  if (!status.ok()) return status;
  PaymentPayload payload;
  payload.version = version;
  status =
      version == Version::kV2 ? DecodeV2Envelope(*root, payload) : DecodeV1Envelope(*root, payload);
  if (!status.ok()) return status;
  status = DecodeExactEvmPayload(*root, payload);
  if (!status.ok()) return status;
  return payload;
}

}  // namespace

Result<PaymentPayload> DecodePaymentHeader(std::string_view value, Version version) {
  try {
    return DecodeChecked(value, version);
  } catch (const nlohmann::json::exception& error) {
    return Malformed(std::string(PaymentHeaderName(version)) + ": " + error.what());
  }
}

Result<SettleResponse> DecodeSettleResponseHeader(std::string_view value) {
  if (value.size() > kMaxPaymentHeaderBytes) return Malformed("settle response header too long");
  Result<std::string> text = Base64Decode(value);
  if (!text.ok()) return Malformed("settle response header: " + text.status().message());
  Result<Json> root = ParseObject(*text, "settle response header");
  if (!root.ok()) return root.status();
  const Json* success = Member(*root, "success");
  if (success == nullptr || !success->is_boolean()) return Malformed("success must be a boolean");
  SettleResponse response;
  response.success = success->get<bool>();
  Result<std::string> transaction = RequiredString(*root, "transaction", "");
  if (!transaction.ok()) return transaction.status();
  Result<std::string> network = RequiredString(*root, "network", "");
  if (!network.ok()) return network.status();
  response.transaction = *transaction;
  response.network = *network;
  for (auto [key, field] :
       {std::pair{"errorReason", &response.error_reason}, std::pair{"payer", &response.payer}}) {
    const Json* member = Member(*root, key);
    if (AbsentOrNull(member)) continue;
    if (!member->is_string()) return Malformed(std::string(key) + " must be a string");
    *field = member->get<std::string>();
  }
  return response;
}

}  // namespace agentpay::x402::reference
