// See devnet_admin.h.
#include "cli/devnet_admin.h"

#include <nlohmann/json.hpp>

#include "gateway/hashing.h"

namespace agentpay {
namespace {

constexpr int64_t kMaxMineDelayMs = 3600 * 1000;

HttpResponse State(chain::Devnet& devnet, nlohmann::json done) {
  auto number = devnet.BlockNumber();
  auto time = devnet.LatestBlockTimestamp();
  if (!number.ok() || !time.ok()) {
    return ProblemResponse(503, "chain_unavailable", "the devnet cannot be read");
  }
  nlohmann::json body = {{"block_number", *number}, {"latest_block_timestamp", *time}};
  if (!done.empty()) body["done"] = std::move(done);
  return JsonResponse(200, body.dump());
}

// Applies one POST body; an answer means it was refused (nothing after the refused field ran).
std::optional<HttpResponse> Apply(const nlohmann::json& body, chain::Devnet& devnet,
                                  nlohmann::json& done) {
  if (body.contains("automine")) {
    if (!body["automine"].is_boolean()) {
      return ProblemResponse(400, "invalid_request", "automine must be true or false");
    }
    if (!devnet.SetAutomine(body["automine"].get<bool>()).ok()) {
      return ProblemResponse(503, "chain_unavailable", "the devnet could not change automine");
    }
    done.push_back(body["automine"].get<bool>() ? "automine on" : "automine off");
  }
  if (body.contains("mine_delay_ms")) {
    const auto& delay = body["mine_delay_ms"];
    if (!delay.is_number_integer() || delay.get<int64_t>() < 0 ||
        delay.get<int64_t>() > kMaxMineDelayMs) {
      return ProblemResponse(400, "invalid_request", "mine_delay_ms must be 0 to 3600000");
    }
    devnet.SetMineDelayMs(delay.get<int64_t>());
    done.push_back("mine delay " + std::to_string(delay.get<int64_t>()) + " ms");
  }
  if (body.contains("drop")) {
    auto hash = body["drop"].is_string() ? chain::ParseHash32(body["drop"].get<std::string>())
                                         : Result<chain::Hash32>(Status::Error("x", "x"));
    if (!hash.ok()) return ProblemResponse(400, "invalid_request", "drop must be a 0x tx hash");
    auto dropped = devnet.DropTransaction(*hash);
    if (!dropped.ok()) return ProblemResponse(503, "chain_unavailable", "the devnet failed");
    done.push_back(*dropped ? "dropped" : "not pending: nothing dropped");
  }
  if (body.value("mine", false)) {
    auto mined = devnet.Mine();
    if (!mined.ok()) return ProblemResponse(503, "chain_unavailable", "the devnet failed");
    done.push_back("mined block " + std::to_string(*mined));
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpResponse> HandleDevnetAdmin(const HttpRequest& request, chain::Devnet& devnet,
                                              const std::string& admin_token) {
  if (request.Path() != "/admin/v1/devnet") return std::nullopt;
  auto header = request.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (admin_token.empty() || !header || !header->starts_with(kBearer) ||
      !SecretEquals(header->substr(kBearer.size()), admin_token)) {
    return ProblemResponse(401, "unauthorized", "the admin API needs the admin bearer token");
  }
  if (request.method == "GET") return State(devnet, {});
  if (request.method != "POST") return ProblemResponse(405, "method_not_allowed", "GET or POST");
  auto body = nlohmann::json::parse(request.body, nullptr, false);
  if (!body.is_object()) return ProblemResponse(400, "invalid_json", "the body must be an object");
  nlohmann::json done = nlohmann::json::array();
  if (auto refused = Apply(body, devnet, done)) return std::move(*refused);
  return State(devnet, std::move(done));
}

}  // namespace agentpay
