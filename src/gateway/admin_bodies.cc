// See admin_bodies.h.
#include "gateway/admin_bodies.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/json_depth.h"
#include "core/money.h"

namespace agentpay {
namespace {

Status Refused(std::string message) {
  return Status::Error(ErrorCode::kInvalidArgument, std::move(message));
}

std::optional<nlohmann::json> ParseObject(std::string_view body) {
  if (!JsonNestingWithin(body, kMaxAdminJsonDepth)) return std::nullopt;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return parsed;
}

// The string field `key` when it holds 1..max_length bytes.
std::optional<std::string> StringField(const nlohmann::json& object, const char* key,
                                       size_t max_length) {
  auto field = object.find(key);
  if (field == object.end() || !field->is_string()) return std::nullopt;
  const auto& text = field->get_ref<const std::string&>();
  if (text.empty() || text.size() > max_length) return std::nullopt;
  return text;
}

}  // namespace

Result<NewAccountBody> ParseNewAccountBody(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) return Refused("the body must be a JSON object {\"name\": ...}");
  auto name = StringField(*object, "name", kMaxAccountNameLength);
  if (!name) return Refused("\"name\" must be a string of 1-200 characters");
  return NewAccountBody{std::move(*name)};
}

Result<DepositBody> ParseDepositBody(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) {
    return Refused("the body must be a JSON object {\"amount\": \"...\", \"reference\": ...}");
  }
  std::optional<int64_t> amount;
  if (auto field = object->find("amount"); field != object->end() && field->is_string()) {
    amount = ParseAmount(field->get_ref<const std::string&>());
  }
  if (!amount || *amount == 0) {
    return Refused("\"amount\" must be a positive integer of atomic units, as a decimal string");
  }
  auto reference = StringField(*object, "reference", kMaxDepositReferenceLength);
  if (!reference) return Refused("\"reference\" must be a string of 1-255 characters");
  return DepositBody{*amount, std::move(*reference)};
}

Result<ResolveBody> ParseResolveBody(std::string_view body) {
  auto object = ParseObject(body);
  if (!object) return Refused("the body must be a JSON object {\"outcome\": ..., \"note\": ...}");
  std::optional<ResolutionOutcome> outcome;
  if (auto field = object->find("outcome"); field != object->end() && field->is_string()) {
    outcome = ParseResolutionOutcome(field->get_ref<const std::string&>());
  }
  if (!outcome) {
    return Refused("\"outcome\" must be one of delivered, refunded, written_off, no_action");
  }
  auto note = StringField(*object, "note", kMaxResolutionNoteLength);
  if (!note) return Refused("\"note\" must be a string of 1-1000 characters");
  return ResolveBody{*outcome, std::move(*note)};
}

}  // namespace agentpay
