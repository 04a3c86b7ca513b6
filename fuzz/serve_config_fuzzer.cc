// libFuzzer target for `agentpay serve --config FILE`: the bytes of the TOML file, resolved by
// ResolveServeConfigText exactly as ResolveServeConfig resolves a file (src/cli/serve_config.cc:
// toml++, known keys, types, ranges, routes, URLs, addresses) but reading no file. Every input
// gives a config or an invalid_config error naming the file; no exception escapes; an accepted
// config keeps the documented bounds.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cli/serve_config.h"

namespace {

using namespace agentpay;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "serve_config_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CLI::App app("serve");
  ServeOptions options;
  AddServeFlags(app, options);
  const char* argv[] = {"serve"};
  app.parse(1, argv);
  options.config_file = "fuzz.toml";

  auto config = ResolveServeConfigText(app, options, text);
  if (!config.ok()) {
    Require(config.status().error() == ErrorCode::kInvalidConfig, "a refusal is invalid_config");
    Require(!config.status().message().empty(), "a refusal says why");
    return 0;
  }
  Require(config->admin_token.empty(), "no file is read");
  Require(config->max_body_bytes >= 1, "a positive body limit");
  Require(config->blocking_threads >= 1 && config->blocking_threads <= 1024, "workers in range");
  for (const RouteConfig& route : config->routes) {
    Require(!route.prefix.empty() && route.prefix[0] == '/', "a prefix starts with '/'");
    Require(route.prefix == "/" || route.prefix.back() != '/', "no trailing '/' on a prefix");
    Require(route.price > 0, "a positive price");
    Require(route.timeout_ms >= 1, "a positive timeout");
    Require(!route.upstream.host.empty() && route.upstream.port != 0, "an upstream endpoint");
  }
  for (size_t i = 0; i < config->routes.size(); ++i) {
    for (size_t j = i + 1; j < config->routes.size(); ++j) {
      Require(config->routes[i].prefix != config->routes[j].prefix, "prefixes are distinct");
    }
  }
  return 0;
}
