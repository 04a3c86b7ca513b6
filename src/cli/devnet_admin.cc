// See devnet_admin.h.
#include "cli/devnet_admin.h"

#include <nlohmann/json.hpp>
#include <variant>

#include "core/json_depth.h"
#include "gateway/api_keys.h"

namespace agentpay {
namespace {

constexpr int64_t kMaxMineDelayMs = 3600 * 1000;
constexpr int kMaxJsonDepth = 8;  // the body is one flat object

// `done` (what a POST did) is left out of a GET's answer.
HttpResponse State(chain::Devnet& devnet, std::optional<nlohmann::json> done) {
  auto number = devnet.BlockNumber();
  auto time = devnet.LatestBlockTimestamp();
  if (!number.ok() || !time.ok()) {
    return ProblemResponse(503, ProblemCode::kChainUnavailable, "the devnet cannot be read");
  }
  const chain::Devnet::Controls controls = devnet.CurrentControls();
  nlohmann::json body = {{"block_number", *number},
                         {"latest_block_timestamp", *time},
                         {"automine", controls.automine},
                         {"mine_delay_ms", controls.mine_delay_ms},
                         {"pending_transactions", controls.pending_transactions}};
  if (done) body["done"] = std::move(*done);
  return JsonResponse(200, body.dump());
}

// A POST body, checked whole before anything runs: a refused body changes nothing.
struct DevnetCommand {
  std::optional<bool> automine;
  std::optional<int64_t> mine_delay_ms;
  std::optional<chain::Hash32> drop;
  bool mine = false;
};

HttpResponse Refused(const std::string& detail) {
  return ProblemResponse(400, ProblemCode::kInvalidRequest, detail);
}

// The command in `body`, or the 400 answer that names the first bad or unknown field.
std::variant<DevnetCommand, HttpResponse> ParseCommand(const nlohmann::json& body) {
  DevnetCommand command;
  for (const auto& [key, value] : body.items()) {
    if (key == "automine") {
      if (!value.is_boolean()) return Refused("automine must be true or false");
      command.automine = value.get<bool>();
    } else if (key == "mine_delay_ms") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
          value.get<int64_t>() > kMaxMineDelayMs) {
        return Refused("mine_delay_ms must be an integer from 0 to 3600000");
      }
      command.mine_delay_ms = value.get<int64_t>();
    } else if (key == "drop") {
      constexpr const char* kNotAHash = "drop must be a transaction hash: 0x and 64 hex digits";
      if (!value.is_string()) return Refused(kNotAHash);
      auto hash = chain::ParseHash32(value.get<std::string>());
      if (!hash.ok()) return Refused(kNotAHash);
      command.drop = *hash;
    } else if (key == "mine") {
      if (!value.is_boolean()) return Refused("mine must be true or false");
      command.mine = value.get<bool>();
    } else {
      return Refused("unknown field \"" + key +
                     "\": the fields are automine, mine_delay_ms, drop and mine");
    }
  }
  return command;
}

// Runs the command in a fixed order: automine, mine delay, drop, mine. An answer means the chain
// failed part way; what ran before it stays done, and `done` says what that was.
std::optional<HttpResponse> Apply(const DevnetCommand& command, chain::Devnet& devnet,
                                  nlohmann::json& done) {
  if (command.automine) {
    if (!devnet.SetAutomine(*command.automine).ok()) {
      return ProblemResponse(503, ProblemCode::kChainUnavailable,
                             "the devnet could not change automine");
    }
    done.push_back(*command.automine ? "automine on" : "automine off");
  }
  if (command.mine_delay_ms) {
    devnet.SetMineDelayMs(*command.mine_delay_ms);
    done.push_back("mine delay " + std::to_string(*command.mine_delay_ms) + " ms");
  }
  if (command.drop) {
    auto dropped = devnet.DropTransaction(*command.drop);
    if (!dropped.ok()) {
      return ProblemResponse(503, ProblemCode::kChainUnavailable, "the devnet failed");
    }
    done.push_back(*dropped ? "dropped" : "not pending: nothing dropped");
  }
  if (command.mine) {
    auto mined = devnet.Mine();
    if (!mined.ok()) {
      return ProblemResponse(503, ProblemCode::kChainUnavailable, "the devnet failed");
    }
    done.push_back("mined block " + std::to_string(*mined));
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpResponse> HandleDevnetAdmin(const HttpRequest& request, chain::Devnet& devnet,
                                              const std::string& admin_token) {
  if (request.Path() != "/admin/v1/devnet") return std::nullopt;
  if (!IsAdmin(request, admin_token)) {
    return ProblemResponse(401, ProblemCode::kUnauthorized,
                           "the admin API needs the admin bearer token");
  }
  if (request.method == "GET") return State(devnet, std::nullopt);
  if (request.method != "POST") {
    return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "GET or POST");
  }
  // The same codes as the admin API: every bad body, JSON or not, is 400 invalid_request.
  if (!JsonNestingWithin(request.body, kMaxJsonDepth)) return Refused("the body nests too deep");
  auto body = nlohmann::json::parse(request.body, nullptr, false);
  if (!body.is_object()) {
    return Refused("the body must be a JSON object, e.g. {\"automine\": false}");
  }
  auto command = ParseCommand(body);
  if (auto* refused = std::get_if<HttpResponse>(&command)) return std::move(*refused);
  nlohmann::json done = nlohmann::json::array();
  if (auto failed = Apply(std::get<DevnetCommand>(command), devnet, done)) {
    return std::move(*failed);
  }
  return State(devnet, std::move(done));
}

}  // namespace agentpay
