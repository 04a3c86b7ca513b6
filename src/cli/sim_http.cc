// See sim_http.h. A run is bounded by the model's own limits (at most 100 attempts, times up to a
// day), so it is answered inline, like any short read.
#include "cli/sim_http.h"

#include <cstdio>
#include <map>

#include "cli/signals.h"
#include "cli/web_files.h"
#include "http/server.h"
#include "sim/model_format.h"

namespace agentpay {
namespace {

constexpr size_t kMaxQueryBytes = 4096;

}  // namespace

std::optional<HttpResponse> HandleSimRequest(const HttpRequest& request) {
  std::string_view path = request.Path();
  if (auto page = ServeWebPages(WebPages::kInspector, path, request.method)) return page;
  if (path != "/v1/sim") return std::nullopt;
  if (request.method != "GET") {
    return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
  }
  std::string_view query = request.Query();
  if (query.size() > kMaxQueryBytes) {
    return ProblemResponse(414, ProblemCode::kLimitExceeded, "the query is longer than 4096 bytes");
  }
  std::map<std::string, std::string, std::less<>> values;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    auto name = DecodeQueryComponent(pair.substr(0, eq));
    auto value = DecodeQueryComponent(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (!name || !value) {
      return ProblemResponse(400, ProblemCode::kInvalidRequest, "malformed query escape");
    }
    if (!name->empty()) values[*name] = *value;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  for (const auto& [name, value] : values) {
    bool known = false;
    for (std::string_view candidate : sim::kSimParamNames) known = known || candidate == name;
    if (!known) {
      return ProblemResponse(400, ProblemCode::kInvalidRequest, "unknown parameter " + name);
    }
  }
  auto params = sim::ParseSimParams([&](std::string_view name) -> std::optional<std::string> {
    auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  });
  if (!params.ok()) {
    return ProblemResponse(400, ProblemCode::kInvalidRequest, params.status().message());
  }
  auto run = sim::Simulate(*params);
  if (!run.ok()) return ProblemResponse(400, ProblemCode::kInvalidRequest, run.status().message());
  return JsonResponse(200, sim::SimRunToJson(*run).dump(-1, ' ', false,
                                                         nlohmann::json::error_handler_t::replace));
}

int RunSimServer(const std::string& listen) {
  auto address = ParseListenAddress(listen);
  if (!address.ok()) {
    std::fprintf(stderr, "agentpay sim: %s\n", address.status().message().c_str());
    return 2;
  }
  TerminationSignals signals;  // before any thread starts: they inherit the mask
  ServerLimits limits;
  limits.workers = 4;
  auto server = HttpServer::Start(address->first, address->second, limits,
                                  [](const HttpRequest& request) {
                                    auto answer = HandleSimRequest(request);
                                    if (answer) return *answer;
                                    return ProblemResponse(404, ProblemCode::kNotFound,
                                                           "no such endpoint");
                                  });
  if (!server.ok()) {
    std::fprintf(stderr, "agentpay sim: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("agentpay sim listening on http://%s:%u (GET /v1/sim, /inspector/)\n",
              address->first.c_str(), (*server)->port());
  std::fflush(stdout);
  signals.Wait();
  (*server)->Stop();
  return 0;
}

}  // namespace agentpay
