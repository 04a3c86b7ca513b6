// See web_files.h.
#include "cli/web_files.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>

namespace agentpay {
namespace {

struct WebFile {
  std::string_view name;
  std::string_view content_type;
  std::string_view shared = "";  // read from web/shared/ instead of the set's own directory
};

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kScript = "text/javascript; charset=utf-8";
constexpr std::string_view kStyle = "text/css; charset=utf-8";

// The trace timeline is one component, served under both sets' prefixes.
constexpr WebFile kInspectorFiles[] = {
    {"index.html", kHtml},
    {"inspector.js", kScript},
    {"inspector.css", kStyle},
    {"timeline.js", kScript, "shared"},
    {"timeline.css", kStyle, "shared"},
};
constexpr WebFile kConsoleFiles[] = {
    {"index.html", kHtml},
    {"console.js", kScript},
    {"console.css", kStyle},
    {"timeline.js", kScript, "shared"},
    {"timeline.css", kStyle, "shared"},
};

struct PageSet {
  std::string_view dir;  // under the web directory; the URL prefix is "/" + dir
  std::span<const WebFile> files;
};

PageSet SetOf(WebPages pages) {
  switch (pages) {
    case WebPages::kInspector:
      return {"inspector", kInspectorFiles};
    case WebPages::kConsole:
      return {"console", kConsoleFiles};
  }
  return {"inspector", kInspectorFiles};
}

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

}  // namespace

std::optional<HttpResponse> ServeWebPages(WebPages pages, std::string_view path,
                                          std::string_view method) {
  const PageSet set = SetOf(pages);
  const std::string prefix = "/" + std::string(set.dir);
  if (path != prefix && !path.starts_with(prefix + "/")) return std::nullopt;
  if (method != "GET") return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
  if (path == prefix) {
    HttpResponse redirect;
    redirect.status = 308;
    redirect.SetHeader("Location", prefix + "/");
    return redirect;
  }
  std::string_view name = path.substr(prefix.size() + 1);
  if (name.empty()) name = "index.html";
  for (const WebFile& file : set.files) {
    if (file.name != name) continue;
    const std::string_view dir = file.shared.empty() ? set.dir : file.shared;
    auto body = ReadFile(WebDir() / std::string(dir) / std::string(file.name));
    if (!body) {
      return ProblemResponse(404, ProblemCode::kNotFound,
                             "the " + std::string(set.dir) + " files are not installed");
    }
    HttpResponse response;
    response.body = std::move(*body);
    response.SetHeader("Content-Type", std::string(file.content_type));
    response.SetHeader("Cache-Control", "no-cache");
    response.SetHeader("X-Content-Type-Options", "nosniff");
    // Only its own files and its own API; never framed (clickjacking), no referrer leaves. The
    // inspector too: on the admin listener it reads the console's token to open a trace.
    response.SetHeader("Content-Security-Policy",
                       "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                       "base-uri 'none'; form-action 'self'");
    response.SetHeader("X-Frame-Options", "DENY");
    response.SetHeader("Referrer-Policy", "no-referrer");
    return response;
  }
  return ProblemResponse(404, ProblemCode::kNotFound, "no such " + std::string(set.dir) + " file");
}

}  // namespace agentpay
