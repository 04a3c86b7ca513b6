#include "x402/facilitator.h"

#include "chain/bytes.h"
#include "x402/json_tape.h"

namespace agentpay::x402 {
namespace {

using Json = nlohmann::json;

Status Malformed(std::string message) {
  return Status::Error(ErrorCode::kMalformedPayment, std::move(message));
}

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The raw text of the object member `key` of the root, or an error naming it.
Result<std::string_view> ObjectText(const JsonTape& tape, std::string_view key) {
  const size_t member = tape.Member(JsonTape::root(), key);
  if (member == JsonTape::kNoNode) return Malformed(std::string(key) + " is missing");
  const JsonNode& node = tape.node(member);
  if (node.type != JsonType::kObject) return Malformed(std::string(key) + " must be an object");
  return tape.text().substr(node.begin, node.end - node.begin);
}

}  // namespace

Result<FacilitatorRequest> ParseFacilitatorRequest(std::string_view body) {
  if (body.size() > kMaxFacilitatorBodyBytes) {
    return Malformed("the body is " + std::to_string(body.size()) + " bytes; the limit is " +
                     std::to_string(kMaxFacilitatorBodyBytes));
  }
  JsonTape tape;
  switch (tape.Parse(body, kMaxJsonDepth)) {
    case JsonError::kNone:
      break;
    case JsonError::kTooDeep:
      return Malformed("the body nests JSON deeper than " + std::to_string(kMaxJsonDepth) +
                       " levels");
    case JsonError::kSyntax:
      return Malformed("the body is not valid JSON (UTF-8)");
  }
  if (tape.node(JsonTape::root()).type != JsonType::kObject) {
    return Malformed("the body must be a JSON object");
  }
  const size_t version = tape.Member(JsonTape::root(), "x402Version");
  if (version == JsonTape::kNoNode) return Malformed("x402Version is missing");
  const std::string_view token =
      tape.node(version).type == JsonType::kNumber ? tape.Token(version) : std::string_view();
  FacilitatorRequest request;
  if (token == "2") {
    request.version = Version::kV2;
  } else if (token == "1") {
    request.version = Version::kV1;
  } else {
    return Malformed("x402Version must be 1 or 2");
  }
  auto payload_text = ObjectText(tape, "paymentPayload");
  if (!payload_text.ok()) return payload_text.status();
  auto requirements_text = ObjectText(tape, "paymentRequirements");
  if (!requirements_text.ok()) return requirements_text.status();
  auto payload = DecodePaymentJson(*payload_text, request.version);
  if (!payload.ok()) return payload.status();
  auto requirements = DecodeRequirements(*requirements_text, request.version);
  if (!requirements.ok()) return requirements.status();
  request.payload = std::move(*payload);
  request.requirements = std::move(*requirements);
  return request;
}

std::string SupportedBody(uint64_t chain_id, const Address& signer) {
  Json kinds = Json::array();
  kinds.push_back({{"x402Version", 2}, {"scheme", "exact"}, {"network", V2Network(chain_id)}});
  if (auto v1 = V1NetworkName(chain_id)) {
    kinds.push_back({{"x402Version", 1}, {"scheme", "exact"}, {"network", *v1}});
  }
  return Dump(Json{{"kinds", kinds},
                   {"extensions", Json::array()},
                   {"signers", {{"eip155:*", Json::array({chain::ToChecksumHex(signer)})}}}});
}

std::string VerifyBody(const VerifyAnswer& answer) {
  Json root = {{"isValid", answer.valid}};
  if (!answer.invalid_reason.empty()) root["invalidReason"] = answer.invalid_reason;
  if (!answer.invalid_message.empty()) root["invalidMessage"] = answer.invalid_message;
  if (!answer.payer.empty()) root["payer"] = answer.payer;
  return Dump(root);
}

std::string SettleBody(const SettleResponse& response, std::string_view message) {
  Json root = {{"success", response.success},
               {"transaction", response.transaction},
               {"network", response.network}};
  if (!response.error_reason.empty()) root["errorReason"] = response.error_reason;
  if (!message.empty()) root["errorMessage"] = std::string(message);
  if (!response.payer.empty()) root["payer"] = response.payer;
  return Dump(root);
}

}  // namespace agentpay::x402
