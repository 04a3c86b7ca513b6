// See sim_http.h. A run is bounded by the model's own limits (at most 100 attempts, times up to a
// day), so it is answered inline, like any short read.
#include "cli/sim_http.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/signals.h"
#include "http/server.h"
#include "sim/model_format.h"

namespace agentpay {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; a malformed escape is nullopt.
std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      if (i + 2 >= text.size()) return std::nullopt;
      int high = HexValue(text[i + 1]), low = HexValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return out;
}

constexpr size_t kMaxQueryBytes = 4096;

// The inspector's files: a fixed whitelist, so no request path ever reaches the filesystem.
struct WebFile {
  std::string_view name;
  std::string_view content_type;
};
constexpr WebFile kInspectorFiles[] = {
    {"index.html", "text/html; charset=utf-8"},
    {"inspector.js", "text/javascript; charset=utf-8"},
    {"inspector.css", "text/css; charset=utf-8"},
};

// The web directory: $AGENTPAY_WEB_DIR, else <exe dir>/../web, <exe dir>/web, ./web (the first
// holding inspector/index.html).
std::filesystem::path WebDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("AGENTPAY_WEB_DIR"); env && *env) return env;
  std::error_code error;
  fs::path exe_dir = fs::read_symlink("/proc/self/exe", error).parent_path();
  for (const fs::path& dir : {exe_dir / ".." / "web", exe_dir / "web", fs::path("web")}) {
    if (fs::is_regular_file(dir / "inspector" / "index.html", error)) return dir;
  }
  return "web";
}

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// GET /inspector/<file> for the whitelisted files; /inspector redirects to /inspector/.
HttpResponse ServeInspector(std::string_view path, std::string_view method) {
  if (method != "GET") return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
  if (path == "/inspector") {
    HttpResponse redirect;
    redirect.status = 308;
    redirect.SetHeader("Location", "/inspector/");
    return redirect;
  }
  std::string_view name = path.substr(std::string_view("/inspector/").size());
  if (name.empty()) name = "index.html";
  for (const WebFile& file : kInspectorFiles) {
    if (file.name != name) continue;
    auto body = ReadFile(WebDir() / "inspector" / std::string(file.name));
    if (!body) {
      return ProblemResponse(404, ProblemCode::kNotFound, "the inspector files are not installed");
    }
    HttpResponse response;
    response.body = std::move(*body);
    response.SetHeader("Content-Type", std::string(file.content_type));
    response.SetHeader("Cache-Control", "no-cache");
    return response;
  }
  return ProblemResponse(404, ProblemCode::kNotFound, "no such inspector file");
}

}  // namespace

std::optional<HttpResponse> HandleSimRequest(const HttpRequest& request) {
  std::string_view path = request.Path();
  if (path == "/inspector" || path.starts_with("/inspector/")) {
    return ServeInspector(path, request.method);
  }
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
    auto name = Decode(pair.substr(0, eq));
    auto value = Decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
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
