// Encoding and strict decoding of x402 headers. Input is hostile: every field is checked for its
// JSON type and shape before use, nothing throws out of here, and each refusal names the field.
#include "x402/wire.h"
#include "core/json_depth.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "x402/base64.h"

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
  return Status::Error("malformed_payment", std::move(message));
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

Json PaymentRequiredV1Body(const std::vector<Requirements>& requirements, std::string_view error) {
  Json accepts = Json::array();
  for (const Requirements& entry : requirements) {
    const std::optional<std::string> network = V1NetworkName(entry.chain_id);
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

}  // namespace agentpay::x402
