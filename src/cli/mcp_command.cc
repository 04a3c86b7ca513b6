// See mcp_command.h. The shell of client/mcp.h: the stdio transport (one JSON-RPC message a line
// on stdin, the answers a line each on stdout, everything else on stderr) and the streamable HTTP
// transport (POST /mcp, answered with application/json), each tool call run on a small pool of
// its own so that neither the stdin reader nor an I/O thread waits on a payment.
#include "cli/mcp_command.h"

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/payment_flags.h"
#include "cli/serve_config.h"
#include "cli/signals.h"
#include "client/mcp.h"
#include "gateway/hashing.h"
#include "http/browser_guard.h"
#include "http/origin.h"
#include "http/server.h"
#include "http/worker_pool.h"

#ifndef AGENTPAY_VERSION
#define AGENTPAY_VERSION "0"
#endif

namespace agentpay {
namespace {

using Json = nlohmann::json;

// Tool calls at once, and waiting; past them a call is answered busy (HTTP 503, or a JSON-RPC
// error on stdio).
constexpr size_t kToolThreads = 4;
constexpr size_t kMaxQueuedCalls = 64;
// A stdin line (one message) longer than this is refused and skipped.
constexpr size_t kMaxLineBytes = 4 * 1024 * 1024;
constexpr int kServerBusy = -32000;

struct McpFlags {
  PaymentFlags payment;
  std::string listen;  // empty: stdio
  std::string token_file;
  std::vector<std::string> origins;  // --origin: where browsers reach the listener besides itself
};
constexpr size_t kMaxOrigins = 16;

void Say(const std::string& line) { std::fprintf(stderr, "agentpay mcp: %s\n", line.c_str()); }

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Runs tasks on the pool and tells when every one submitted has ended.
class Calls {
 public:
  Calls() : pool_(kToolThreads, kMaxQueuedCalls) {}
  ~Calls() { pool_.Stop(); }
  bool TrySubmit(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      ++running_;
    }
    bool queued = pool_.TrySubmit([this, task = std::move(task)] {
      task();
      Done();
    });
    if (!queued) Done();
    return queued;
  }
  void WaitAll() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  void Done() {
    std::lock_guard lock(mutex_);
    if (--running_ == 0) idle_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t running_ = 0;
  WorkerPool pool_;  // last: stopped (joined) before the counters go
};

client::McpEffects Effects(const client::McpServerConfig& config) {
  auto progress = [](std::string_view line) { Say(std::string(line)); };
  // Before the first payment creates the budget file, the budget is the one --budget will give it.
  const std::optional<int64_t> total = config.payment.budget;
  auto budget = [total](const std::string& db) {
    std::error_code error;
    if (total && !std::filesystem::exists(db, error) && !error) {
      client::BudgetReport fresh;
      fresh.asset.state = "unbound";
      fresh.total = *total;
      return fresh;
    }
    return client::ReadBudget(db);
  };
  return {[progress](const client::PayOptions& o) { return client::Pay(o, progress); },
          std::move(budget),
          [progress](const client::ReconcileOptions& o) { return client::Reconcile(o, progress); }};
}

int RunStdio(const client::McpServerConfig& config) {
  const client::McpEffects effects = Effects(config);
  std::mutex out_mutex;
  auto write = [&out_mutex](const Json& message) {
    const std::string line = Dump(message) + "\n";
    std::lock_guard lock(out_mutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  };
  Calls calls;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.size() > kMaxLineBytes) {
      write(client::McpParseError());
      continue;
    }
    Json message = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded()) {
      write(client::McpParseError());
      continue;
    }
    auto shared = std::make_shared<Json>(std::move(message));
    const bool queued = calls.TrySubmit([shared, &config, &effects, &write] {
      if (auto answer = client::HandleMcpMessage(*shared, config, effects)) write(*answer);
    });
    if (!queued && shared->is_object() && shared->contains("id")) {
      write(Json{{"jsonrpc", "2.0"},
                 {"id", (*shared)["id"]},
                 {"error", {{"code", kServerBusy}, {"message", "too many calls at once"}}}});
    }
  }
  calls.WaitAll();  // stdin closed: the calls under way still answer, then the server ends
  return 0;
}

HttpResponse JsonAnswer(int status, const Json& body) {
  HttpResponse response;
  response.status = status;
  response.headers = {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}};
  response.body = Dump(body);
  return response;
}

HttpResponse PlainAnswer(int status, std::string text, std::vector<HttpHeader> headers = {}) {
  HttpResponse response;
  response.status = status;
  response.headers = std::move(headers);
  response.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  response.body = std::move(text) + "\n";
  return response;
}

int RunHttp(const client::McpServerConfig& config, const std::string& listen,
            const std::string& token, std::vector<WebOrigin> origins) {
  auto address = ParseListenAddress(listen);
  if (!address.ok()) {
    Say("--listen " + listen + ": " + address.status().message());
    return 2;
  }
  const auto& [host, port] = *address;
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    Say("--listen " + listen +
        ": the MCP listener spends the budget and serves plain HTTP: it binds a loopback address "
        "only (127.0.0.1 or [::1]); reach it from elsewhere through a TLS proxy of your own");
    return 2;
  }
  TerminationSignals signals;
  auto guard = std::make_shared<BrowserGuard>(host, /*tls=*/false, std::move(origins));
  auto effects = std::make_shared<const client::McpEffects>(Effects(config));
  auto calls = std::make_shared<Calls>();
  AsyncHandler handler = [config, token, guard, effects, calls](
                             std::shared_ptr<const HttpRequest> request, Respond respond) {
    if (request->Path() != "/mcp")
      return respond(PlainAnswer(404, "not found: the MCP endpoint is /mcp"));
    // DNS rebinding and cross-site pages: a browser's request must come from this listener's own
    // origin (the MCP specification's Origin check).
    if (BrowserCheck check = guard->Check(*request); check != BrowserCheck::kAllowed) {
      return respond(guard->Refusal(check));
    }
    const std::optional<std::string_view> authorization = request->Header("Authorization");
    const std::string_view prefix = "Bearer ";
    if (!authorization || !authorization->starts_with(prefix) ||
        !SecretEquals(authorization->substr(prefix.size()), token)) {
      return respond(
          PlainAnswer(401, "unauthorized: send Authorization: Bearer <the token of --token-file>",
                      {{"WWW-Authenticate", "Bearer"}}));
    }
    if (request->method != "POST") {
      // No stream from the server: every answer is the POST's own (application/json).
      return respond(PlainAnswer(405, "use POST /mcp", {{"Allow", "POST"}}));
    }
    Json message = Json::parse(request->body, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded()) return respond(JsonAnswer(400, client::McpParseError()));
    const bool request_with_id =
        message.is_object() && message.contains("method") && message.contains("id");
    if (!request_with_id) {
      // A notification, a response, or junk: answered at once (202 when there is nothing to say).
      auto answer = client::HandleMcpMessage(message, config, *effects);
      if (!answer) {
        HttpResponse accepted;
        accepted.status = 202;
        return respond(std::move(accepted));
      }
      return respond(JsonAnswer(400, *answer));
    }
    auto shared = std::make_shared<Json>(std::move(message));
    auto shared_respond = std::make_shared<Respond>(std::move(respond));
    const bool queued = calls->TrySubmit([shared, shared_respond, config, effects] {
      auto answer = client::HandleMcpMessage(*shared, config, *effects);
      (*shared_respond)(JsonAnswer(200, answer.value_or(Json::object())));
    });
    if (!queued) {
      HttpResponse busy = JsonAnswer(
          503, Json{{"jsonrpc", "2.0"},
                    {"id", (*shared)["id"]},
                    {"error", {{"code", kServerBusy}, {"message", "too many calls at once"}}}});
      busy.headers.push_back({"Retry-After", "1"});
      (*shared_respond)(std::move(busy));
    }
  };
  ServerLimits limits;
  limits.io_threads = 1;
  limits.max_connections = 64;
  limits.max_connections_per_client = 64;
  limits.max_body_bytes = 2 * 1024 * 1024;
  auto server = HttpServer::StartAsync(host, port, limits, std::move(handler));
  if (!server.ok()) {
    Say("--listen " + listen + ": " + server.status().message());
    return 1;
  }
  guard->SetPort((*server)->port());
  Say("MCP over streamable HTTP on http://" + std::string(host == "::1" ? "[::1]" : host) + ":" +
      std::to_string((*server)->port()) +
      "/mcp (Authorization: Bearer <the token of --token-file>)");
  signals.Wait();
  // The calls under way answer first (each within --timeout-ms): a call's answer goes through
  // its connection, which Stop closes.
  calls->WaitAll();
  (*server)->Stop();
  return 0;
}

}  // namespace

std::function<int()> AddMcpCommand(CLI::App& mcp) {
  auto flags = std::make_shared<McpFlags>();
  mcp.footer(
      "Serves the Model Context Protocol on stdio (default: one JSON-RPC message a line) or, with "
      "--listen, streamable HTTP at POST /mcp (loopback only, Authorization: Bearer <token>). "
      "Tools: pay_request (call a paid URL, paying as `agentpay pay` does), budget, reconcile. "
      "Every payment uses this command's credential, budget file and limits; a call can lower "
      "--max-amount for itself, never raise it. Progress goes to stderr. See docs/mcp.md.");
  AddPaymentFlags(mcp, flags->payment, /*with_api_key_flag=*/false);
  mcp.add_option("--listen", flags->listen,
                 "serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST: 127.0.0.1 "
                 "or [::1])");
  mcp.add_option("--origin", flags->origins,
                 "with --listen: an origin browsers reach the listener at besides its own address "
                 "(e.g. a TLS proxy's https://mcp.example.com), repeatable");
  mcp.add_option("--token-file", flags->token_file,
                 "with --listen: file holding the token every request must carry (Authorization: "
                 "Bearer), at least 32 characters");
  return [flags]() -> int {
    if (Status s = ResolvePaymentFlags(flags->payment); !s.ok()) {
      Say(s.message());
      return 2;
    }
    const client::PayOptions& o = flags->payment.options;
    if (o.api_key.empty() == o.buyer_key.empty()) {
      Say("give the credential it pays with: --api-key-file or --buyer-key-file");
      return 2;
    }
    client::McpServerConfig config;
    config.payment = o;
    config.reconcile.budget_db = o.budget_db;
    config.reconcile.chain_rpc = o.chain_rpc;
    config.reconcile.ca_file = o.ca_file;
    config.reconcile.api_key = o.api_key;
    config.version = AGENTPAY_VERSION;
    if (flags->listen.empty()) {
      if (!flags->token_file.empty() || !flags->origins.empty()) {
        Say("--token-file and --origin go with --listen (stdio needs neither: its caller started "
            "it)");
        return 2;
      }
      return RunStdio(config);
    }
    if (flags->token_file.empty()) {
      Say("--listen needs --token-file: whoever reaches the listener spends the budget");
      return 2;
    }
    auto token = ReadSecretFile(flags->token_file);
    if (!token.ok()) {
      Say("--token-file: " + token.status().message());
      return 2;
    }
    if (token->size() < 32) {
      Say("--token-file: the token must be at least 32 characters (e.g. openssl rand -hex 32)");
      return 2;
    }
    if (flags->origins.size() > kMaxOrigins) {
      Say("--origin: at most " + std::to_string(kMaxOrigins) + " origins");
      return 2;
    }
    std::vector<WebOrigin> origins;
    for (const std::string& text : flags->origins) {
      auto origin = ParseWebOrigin(text);
      if (!origin.ok()) {
        Say("--origin " + text + ": " + origin.status().message());
        return 2;
      }
      origins.push_back(*origin);
    }
    return RunHttp(config, flags->listen, *token, std::move(origins));
  };
}

}  // namespace agentpay
