// See serve.h.
#include "cli/serve.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "chain/devnet.h"
#include "chain/devnet_rpc.h"
#include "chain/rpc_chain.h"
#include "cli/admin_listener.h"
#include "cli/log.h"
#include "cli/seller.h"
#include "cli/signals.h"
#include "cli/sim_http.h"
#include "cli/system_world.h"
#include "core/check.h"
#include "gateway/admin_surface.h"
#include "gateway/facilitator.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "gateway/rate_sync.h"
#include "gateway/settlement_config.h"
#include "http/browser_guard.h"
#include "http/origin.h"
#include "http/server.h"
#include "http/timers.h"
#include "settlement/relayer_watch.h"
#include "store/store.h"
#include "workers/hold_sweeper.h"
#include "workers/periodic.h"
#include "workers/pruner.h"
#include "workers/reconciler.h"

namespace agentpay {
namespace {

// Client connections are served by half the CPUs by default: the gateway's store writer, its
// upstream client and often the upstream itself want the rest. On the 2-core bench machine, with
// one I/O thread instead of two the gateway spent 5 % less CPU per paid request (142 -> 135 us,
// 5 interleaved runs each).
size_t ServeIoThreads(int64_t configured) {
  if (configured > 0) return static_cast<size_t>(configured);
  return std::max<size_t>(1, std::thread::hardware_concurrency() / 2);
}

constexpr char kDemoDir[] = "./agentpay-data";
// The admin listener serves operators' calls and scrapes, not traffic: small bodies, few sockets.
constexpr uint64_t kMaxAdminBodyBytes = 64 * 1024;
constexpr size_t kMaxAdminConnections = 64;
// The admin listener's callers are local tools and the console: a head takes them milliseconds.
constexpr int64_t kAdminHeaderTimeoutMs = 5000;

// The public listener's hooks: the gateway decides from a request's head whether its body is read.
ServerHooks PublicHooks(Gateway& gateway, chain::Devnet* devnet,
                        std::shared_ptr<const TlsIdentity> identity) {
  ServerHooks hooks;
  hooks.head = [&gateway, devnet](const HttpRequest& head, HeadDone done) -> HeadDecision {
    // Answered from the whole request, never a paid route: no early 402 for it.
    if (devnet != nullptr && head.Path() == chain::kDevnetRpcPath) return HeadDecision::ReadBody();
    // An unknown endpoint there (404), never a 402.
    if (IsAdminSurfacePath(head.Path())) return HeadDecision::ReadBody();
    return gateway.AnswerHead(head, std::move(done));
  };
  hooks.tls = std::move(identity);
  return hooks;
}

// The admin listener's: a connection that showed the admin token keeps its slot under a flood.
ServerHooks AdminHooks(const std::string& admin_token,
                       std::shared_ptr<const TlsIdentity> identity) {
  ServerHooks hooks;
  hooks.tls = std::move(identity);
  hooks.trusted = [admin_token](const HttpRequest& head) { return IsAdmin(head, admin_token); };
  return hooks;
}

// The answer to an admin-surface path on the public listener: the same as any unknown endpoint.
HttpResponse NoSuchEndpoint() {
  return ProblemResponse(404, ProblemCode::kNotFound, "no such endpoint");
}

// 127.0.0.0/8, ::1 and localhost: what --demo may listen on.
bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || IsLoopbackAddress(host);
}
constexpr int64_t kDemoPrice = 10000;         // 0.01 USDC
constexpr int64_t kDemoFunding = 10'000'000;  // 10 USDC

// Start-up failures are written as text before --log-format is known to be valid, and through the
// log once it is.
// "URL" or "URL1, URL2 (failover)", for the start banner.
std::string JoinUrls(const std::vector<std::string>& urls) {
  std::string joined;
  for (const std::string& url : urls) joined += (joined.empty() ? "" : ", ") + url;
  return urls.size() > 1 ? joined + " (failover in this order)" : joined;
}

int Fail(const std::string& message, Logger* log = nullptr) {
  if (log != nullptr) {
    log->Error("start_failed", message);
  } else {
    std::fprintf(stderr, "agentpay serve: %s\n", message.c_str());
  }
  return 2;
}

struct DemoAccount {
  std::string id;
  std::string api_key;
  Balances balances;  // as they are now, after any earlier runs of the demo
};

// The demo account survives restarts: its id and API key live in agentpay-data/demo-account.json.
Result<DemoAccount> EnsureDemoAccount(Store& store, Clock& clock, Random& random) {
  const std::string path = std::string(kDemoDir) + "/demo-account.json";
  std::string account_id, api_key;
  std::error_code ec;
  if (std::filesystem::is_symlink(path, ec) || std::filesystem::exists(path, ec)) {
    auto text = ReadSecretFile(path, SecretLinks::kRefuse);
    if (!text.ok()) return text.status();
    auto saved = nlohmann::json::parse(*text, nullptr, false);
    if (saved.is_object() && saved.value("account_id", "") != "" &&
        saved.value("api_key", "") != "") {
      account_id = saved["account_id"];
      api_key = saved["api_key"];
    }
  }
  if (account_id.empty()) {
    account_id = NewAccountId(random);
    api_key = NewApiKey(random);
  }
  Balances balances;
  Status status = store.Write([&](Transaction& tx) -> Status {
    const int64_t now = clock.NowMs();
    auto inserted = tx.InsertAccount({account_id, "demo", Sha256Hex(api_key), {}, now});
    if (!inserted.ok()) return inserted.status();
    auto deposit = tx.InsertDeposit({account_id, "demo-initial-funding", kDemoFunding, now});
    if (!deposit.ok()) return deposit.status();
    if (*deposit) {
      auto moved = tx.Move(account_id, MoveKind::kDeposit, kDemoFunding, "", now);
      if (!moved.ok()) return moved.status();
    }
    auto account = tx.FindAccount(account_id);
    if (!account.ok()) return account.status();
    if (!account->has_value()) {
      return Status::Error(ErrorCode::kStoreCorrupt, "demo account vanished");
    }
    balances = (*account)->balances;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  Status saved = WriteSecretFile(
      path, nlohmann::json({{"account_id", account_id}, {"api_key", api_key}}).dump());
  if (!saved.ok()) return saved;
  return DemoAccount{account_id, api_key, balances};
}

// Keys of the built-in devnet only: its tokens are worth nothing, so the keys are no secret. The
// relayer submits settlements; the demo buyer is funded by `serve --demo` for x402 clients.
constexpr char kDevnetRelayerKey[] =
    "0x6167656e74706179206465766e65742072656c61796572206b65792030303031";
constexpr char kDevnetDemoBuyerKey[] =
    "0x6167656e74706179206465766e65742064656d6f206275796572202030303031";
constexpr int64_t kDevnetEmptyBlockIntervalMs = 2000;

// The chain x402 payments settle on: a JSON-RPC node (--chain-rpc), checked to be the chain the
// configuration names, or the built-in devnet persisted beside the SQLite store. All null when
// there is neither: a postgresql:// store without --chain-rpc takes wallet payments only.
struct SettlementChain {
  std::unique_ptr<chain::Chain> node;
  chain::Devnet* devnet = nullptr;  // set when node is the devnet
  std::unique_ptr<Settler> settler;
};

Result<std::unique_ptr<chain::Chain>> OpenRpcNode(const RpcChainOptions& rpc,
                                                  const GatewayConfig& config,
                                                  std::shared_ptr<const TlsTrust> trust) {
  std::vector<Endpoint> endpoints;
  for (const std::string& url : rpc.urls) {
    auto endpoint = ParseHttpUrl(url);
    if (!endpoint.ok()) return endpoint.status();
    endpoints.push_back(*endpoint);
  }
  auto node =
      std::make_unique<chain::RpcChain>(std::move(endpoints), rpc.rpc_timeout_ms, std::move(trust));
  // Every endpoint must answer, and be the configured chain: one that is another chain would
  // settle nothing and could report anything.
  for (size_t i = 0; i < rpc.urls.size(); ++i) {
    auto chain_id = node->EndpointChainId(i);
    if (!chain_id.ok()) {
      return Status::Error(ErrorCode::kChainUnavailable,
                           "--chain-rpc " + rpc.urls[i] + ": " + chain_id.status().message());
    }
    if (static_cast<int64_t>(*chain_id) != config.chain.chain_id) {
      return Status::Error(ErrorCode::kInvalidConfig,
                           "--chain-rpc " + rpc.urls[i] + " is chain " + std::to_string(*chain_id) +
                               ", not --chain-id " + std::to_string(config.chain.chain_id));
    }
  }
  return std::unique_ptr<chain::Chain>(std::move(node));
}

Result<SettlementChain> OpenSettlementChain(const ServeOptions& options,
                                            const GatewayConfig& config, Clock& clock,
                                            std::shared_ptr<const TlsTrust> trust) {
  SettlementChain out;
  std::string key_text = kDevnetRelayerKey;
  if (auto rpc = RpcChainOf(options)) {
    auto secret = ReadSecretFile(rpc->relayer_key_file);
    if (!secret.ok()) {
      return Status::Error(ErrorCode::kInvalidConfig,
                           "--relayer-key-file: " + secret.status().message());
    }
    key_text = *secret;
    auto node = OpenRpcNode(*rpc, config, std::move(trust));
    if (!node.ok()) return node.status();
    out.node = std::move(*node);
  } else {
    // The built-in devnet belongs to one process and is kept beside its SQLite file. On a shared
    // store there is no such place: x402 needs a node (--chain-rpc), and without one the gateway
    // takes wallet payments only (no settler, no x402 offer).
    if (!options.db.starts_with("sqlite:")) return out;
    chain::DevnetConfig devnet;
    devnet.chain_id = static_cast<uint64_t>(config.chain.chain_id);
    devnet.token = *chain::ParseAddress(config.chain.asset);
    devnet.token_name = config.chain.asset_name;
    devnet.token_version = config.chain.asset_version;
    devnet.mine_delay_ms = options.devnet_mine_delay_ms;
    devnet.persistence_path = options.db.substr(7) + ".devnet";
    devnet.empty_block_interval_ms = kDevnetEmptyBlockIntervalMs;
    auto opened = chain::Devnet::Open(devnet, clock);
    if (!opened.ok()) return opened.status();
    out.devnet = opened->get();
    out.node = std::move(*opened);
  }
  auto key = chain::ParsePrivateKey(key_text);
  if (!key.ok()) {
    return Status::Error(ErrorCode::kInvalidConfig, "relayer key: " + key.status().message());
  }
  out.settler = std::make_unique<Settler>(*out.node, SettlerConfigOf(config), *key,
                                          ReservationLimitsOf(config));
  // Batched settlement sends through Multicall3: a node without it would mine every batch
  // without paying anyone. (The devnet runs aggregate3 there.)
  if (config.settle_batch_max > 1 && out.devnet == nullptr) {
    if (Status s = out.settler->CheckMulticall3(); !s.ok()) return s;
  }
  return out;
}

struct DemoBuyer {
  std::string address;
  chain::U256 balance;
};

// Tops the demo buyer up to kDemoFunding on the devnet; returns its address and balance.
Result<DemoBuyer> FundDemoBuyer(chain::Devnet& devnet, const GatewayConfig& config) {
  auto key = chain::ParsePrivateKey(kDevnetDemoBuyerKey);
  AGENTPAY_CHECK(key.ok());
  const chain::Address buyer = chain::AddressOf(*key);
  auto balance = devnet.BalanceOf(*chain::ParseAddress(config.chain.asset), buyer);
  if (!balance.ok()) return balance.status();
  const chain::U256 target(static_cast<uint64_t>(kDemoFunding));
  if (*balance < target) {
    if (Status s = devnet.Mint(buyer, *chain::U256::CheckedSub(target, *balance)); !s.ok()) {
      return s;
    }
    return DemoBuyer{chain::ToChecksumHex(buyer), target};
  }
  return DemoBuyer{chain::ToChecksumHex(buyer), *balance};
}

void LogReconcile(Logger& log, const Result<ReconcileReport>& report) {
  if (!report.ok()) {
    log.Error("reconciler_failed", "reconciler: " + report.status().ToString(),
              {{"code", report.status().code()}});
    return;
  }
  for (const WorkerDecision& decision : report->decisions) {
    const bool error = decision.action.ends_with("_error");
    log.Log(error ? LogLevel::kWarning : LogLevel::kInfo, "reconciler_decision",
            "reconciler: " + decision.operation_id + ": " + decision.action + " (" +
                decision.reason + ")",
            {{"operation_id", decision.operation_id},
             {"action", decision.action},
             {"reason", decision.reason}});
  }
  if (report->gaps_filled > 0) {
    log.Info("relayer_nonce_gap_filled",
             "reconciler: re-sent the stored transaction at the relayer's next nonce",
             {{"count", report->gaps_filled}});
  }
  if (report->gap_noops > 0) {
    log.Info("relayer_nonce_gap_noop",
             "reconciler: sent a no-op at a relayer nonce the node lacks and nothing stored fills",
             {{"count", report->gap_noops}});
  }
}

void LogSweep(Logger& log, const Result<SweepReport>& report) {
  if (!report.ok()) {
    log.Error("sweeper_failed", "hold sweeper: " + report.status().ToString(),
              {{"code", report.status().code()}});
    return;
  }
  for (const WorkerDecision& decision : report->decisions) {
    const bool hold = decision.action == "hold_released_alert_raised";
    log.Warn(hold ? "hold_expired" : "unpaid_closed",
             (hold ? "hold sweeper: released the expired hold of "
                   : "sweeper: closed the unpaid x402 operation ") +
                 decision.operation_id + " and raised an alert (" + decision.reason + ")",
             {{"operation_id", decision.operation_id},
              {"action", decision.action},
              {"reason", decision.reason}});
  }
}

// What a person at a terminal reads at start; in JSON the same facts are log events.
void AnnounceStart(Logger& log, const std::string& base, const std::string& admin_base,
                   const ServeOptions& options, const GatewayConfig& config,
                   const SettlementChain& settlement) {
  const std::string admin =
      admin_base.empty()
          ? "admin listener off (--admin-listen off): no admin API, devnet controls or /metrics"
          : "admin API, devnet controls and /metrics (admin listener): " + admin_base;
  const std::string listening =
      "agentpay gateway listening on " + base + " (store " + RedactedStoreUrl(options.db) + ")";
  const std::string chain =
      settlement.settler == nullptr ? "x402 off (no --chain-rpc): wallet payments only"
      : settlement.devnet != nullptr
          ? "x402 on the built-in devnet: chain " + config.chain.Network() + ", asset " +
                config.chain.asset + " (\"" + config.chain.asset_name + "\" v" +
                config.chain.asset_version + "), pay to " + config.chain.pay_to
          : "x402 on " + JoinUrls(options.chain_rpc) + ": chain " + config.chain.Network() +
                ", asset " + config.chain.asset + ", relayer " +
                chain::ToChecksumHex(settlement.settler->relayer());
  const std::string rpc_url =
      settlement.devnet != nullptr ? base + std::string(chain::kDevnetRpcPath) : "";
  if (log.format() == LogFormat::kJson) {
    log.Info("listening", listening, {{"url", base}, {"store", RedactedStoreUrl(options.db)}});
    log.Info("admin_listening", admin, {{"url", admin_base}});
    if (!admin_base.empty()) {
      log.Info("console", "operator console: " + admin_base + "/console/",
               {{"url", admin_base + "/console/"}});
    }
    if (!rpc_url.empty()) {
      log.Info("devnet_rpc", "devnet JSON-RPC (reads): " + rpc_url, {{"url", rpc_url}});
    }
    log.Info("chain", chain,
             {{"network", config.chain.Network()},
              {"asset", config.chain.asset},
              {"pay_to", config.chain.pay_to},
              {"kind", settlement.settler == nullptr  ? "off"
                       : settlement.devnet != nullptr ? "devnet"
                                                      : "rpc"}});
    for (const auto& route : config.routes) {
      log.Info("route", "paid route " + route.prefix + " -> " + route.upstream_url,
               {{"prefix", route.prefix},
                {"upstream", route.upstream_url},
                {"price", static_cast<long long>(route.price)}});
    }
    return;
  }
  std::printf("%s\n  %s\n", listening.c_str(), admin.c_str());
  if (!admin_base.empty()) {
    std::printf("  operator console (admin listener; sign in with the admin token): %s/console/\n",
                admin_base.c_str());
  }
  std::printf("  %s\n", chain.c_str());
  if (!rpc_url.empty()) std::printf("  devnet JSON-RPC (reads): %s\n", rpc_url.c_str());
  std::printf("  request/effect inspector: %s/inspector/\n", base.c_str());
  for (const auto& route : config.routes) {
    std::printf("  paid route %s -> %s at %lld atomic units\n", route.prefix.c_str(),
                route.upstream_url.c_str(), static_cast<long long>(route.price));
  }
}

void AnnounceDemo(Logger& log, const std::string& base, const std::string& admin_base,
                  const ServeOptions& options,
                  const GatewayConfig& config, const std::optional<DemoAccount>& account,
                  const std::optional<DemoBuyer>& buyer) {
  if (log.format() == LogFormat::kJson) {
    if (account) {
      log.Info("demo_account", "demo account " + account->id,
               {{"account_id", account->id},
                {"api_key", account->api_key},
                {"balance", static_cast<long long>(account->balances.balance())},
                {"available", static_cast<long long>(account->balances.available())},
                {"admin_token_file", options.admin_token_file},
                {"admin_url", admin_base}});
    }
    if (buyer) {
      log.Info("demo_buyer", "demo x402 buyer " + buyer->address,
               {{"address", buyer->address},
                {"balance", buyer->balance.ToDecimal()},
                {"private_key", kDevnetDemoBuyerKey}});
    }
    return;
  }
  if (account) {
    std::printf(
        "\nDemo account %s: balance %lld atomic units (%lld available, %lld held).\n"
        "  API key:      %s\n"
        "  admin token:  in %s (for the admin API at %s: agentpay admin --url %s ...)\n"
        "\nA paid request (run it twice: the second is a free replay):\n"
        "  curl -i -H 'Authorization: Bearer %s' -H 'Idempotency-Key: demo-1' "
        "-d '{\"query\":\"hello\"}' %s/hello\n"
        "Then look at the account and the operation:\n"
        "  curl -s -H 'Authorization: Bearer %s' %s/v1/account\n"
        "  curl -s -H 'Authorization: Bearer %s' %s/v1/operations/<AgentPay-Operation-Id from "
        "the first answer>\n",
        account->id.c_str(), static_cast<long long>(account->balances.balance()),
        static_cast<long long>(account->balances.available()),
        static_cast<long long>(account->balances.held), account->api_key.c_str(),
        options.admin_token_file.c_str(), admin_base.empty() ? "(off)" : admin_base.c_str(),
        admin_base.empty() ? "(off)" : admin_base.c_str(), account->api_key.c_str(), base.c_str(),
        account->api_key.c_str(), base.c_str(), account->api_key.c_str(), base.c_str());
  }
  if (buyer) {
    std::printf(
        "\nDemo x402 buyer on the devnet: %s, balance %s atomic units.\n"
        "  private key (devnet only, worth nothing): %s\n"
        "  Any x402 client can pay with it (network %s, asset %s).\n",
        buyer->address.c_str(), buyer->balance.ToDecimal().c_str(), kDevnetDemoBuyerKey,
        config.chain.Network().c_str(), config.chain.asset.c_str());
  }
}

// The demo's upstream, in process, when no route was configured.
Result<std::unique_ptr<HttpServer>> StartDemoSeller(Seller& seller, GatewayConfig& config,
                                                    int64_t upstream_timeout_ms) {
  ServerLimits limits;
  // An upstream's one client is the gateway, from one address: no per-client share.
  limits.max_connections_per_client = limits.max_connections;
  auto started =
      HttpServer::Start("127.0.0.1", 0, limits,
                        [&seller](const HttpRequest& request) { return seller.Handle(request); });
  if (!started.ok()) return started.status();
  RouteConfig route;
  route.upstream_url = "http://127.0.0.1:" + std::to_string((*started)->port());
  route.upstream = *ParseHttpUrl(route.upstream_url);
  route.price = kDemoPrice;
  route.timeout_ms = upstream_timeout_ms;
  config.routes.push_back(route);
  return std::move(*started);
}

// The demo's directory (private: it holds the demo's API key and admin token) and admin token.
Status PrepareDemo(Random& random, ServeOptions& options, GatewayConfig& config) {
  std::error_code ec;
  std::filesystem::create_directories(kDemoDir, ec);
  if (ec) {
    return Status::Error(ErrorCode::kIoError,
                         std::string("cannot create ") + kDemoDir + ": " + ec.message());
  }
  std::filesystem::permissions(kDemoDir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec) {
    return Status::Error(ErrorCode::kIoError,
                         std::string("cannot make ") + kDemoDir + " private: " + ec.message());
  }
  if (!options.admin_token_file.empty()) return Status::Ok();
  const std::string token_path = std::string(kDemoDir) + "/admin-token";
  // is_symlink first: exists() follows a link, and a link there is refused, never followed.
  if (!std::filesystem::is_symlink(token_path, ec) && !std::filesystem::exists(token_path, ec)) {
    if (Status s = WriteSecretFile(token_path, "adm_" + RandomHex(random, 32)); !s.ok()) return s;
  }
  auto token = ReadSecretFile(token_path, SecretLinks::kRefuse);
  if (!token.ok()) return token.status();
  config.admin_token = *token;
  options.admin_token_file = token_path;
  return Status::Ok();
}

}  // namespace

int RunServe(const CLI::App& command, ServeOptions& options) {
  auto config = ResolveServeConfig(command, options);
  if (!config.ok()) return Fail(config.status().message());
  SystemClock clock;
  SystemRandom random;
  Logger log(options.log_format == "json" ? LogFormat::kJson : LogFormat::kText, clock,
             "agentpay serve");
  auto listen = ParseListenAddress(options.listen);
  if (!listen.ok()) {
    return Fail("--listen " + options.listen + ": " + listen.status().message(), &log);
  }

  std::optional<std::pair<std::string, uint16_t>> admin_listen;
  if (options.admin_listen != "off") {
    auto parsed = ParseListenAddress(options.admin_listen);
    if (!parsed.ok()) {
      return Fail("--admin-listen " + options.admin_listen + ": " + parsed.status().message() +
                      " (HOST:PORT, or off)",
                  &log);
    }
    admin_listen = *parsed;
  }
  std::optional<std::pair<std::string, uint16_t>> facilitator_listen;
  if (options.facilitator_listen != "off") {
    auto parsed = ParseListenAddress(options.facilitator_listen);
    if (!parsed.ok()) {
      return Fail("--facilitator-listen " + options.facilitator_listen + ": " +
                      parsed.status().message() + " (HOST:PORT, or off)",
                  &log);
    }
    facilitator_listen = *parsed;
    auto text = ReadSecretFile(options.facilitator_sellers_file, SecretLinks::kRefuse);
    if (!text.ok()) {
      return Fail("--facilitator-sellers-file: " + text.status().message(), &log);
    }
    auto parsed_sellers = ParseSellers(*text);
    if (!parsed_sellers.ok()) {
      return Fail("--facilitator-sellers-file " + options.facilitator_sellers_file + ": " +
                      parsed_sellers.status().message(),
                  &log);
    }
    config->facilitator_sellers = std::move(*parsed_sellers);
  }
  if (options.demo) {
    // The demo prints its API key and keeps a well-known devnet key: never reachable from
    // another machine.
    if (!IsLoopbackHost(listen->first)) {
      return Fail("--demo serves only loopback: --listen " + options.listen +
                      " is not a loopback address (use 127.0.0.1:PORT, or run without --demo)",
                  &log);
    }
    if (admin_listen && !IsLoopbackHost(admin_listen->first)) {
      return Fail("--demo serves only loopback: --admin-listen " + options.admin_listen +
                      " is not a loopback address (use 127.0.0.1:PORT or off)",
                  &log);
    }
    if (facilitator_listen && !IsLoopbackHost(facilitator_listen->first)) {
      return Fail("--demo serves only loopback: --facilitator-listen " +
                      options.facilitator_listen +
                      " is not a loopback address (use 127.0.0.1:PORT or off)",
                  &log);
    }
  }

  // Whom https upstreams and the RPC node must prove to be; what the listeners present.
  auto trust = TlsTrust::Load(options.ca_file);
  if (!trust.ok()) return Fail(trust.status().message(), &log);
  std::shared_ptr<TlsIdentity> identity;
  if (!options.tls_cert.empty()) {
    auto loaded = TlsIdentity::Load(options.tls_cert, options.tls_key);
    if (!loaded.ok()) return Fail(loaded.status().message(), &log);
    identity = *loaded;
  }

  // Before any thread starts: they inherit the mask. SIGHUP reloads the TLS identity.
  TerminationSignals signals(/*reload=*/true);

  std::unique_ptr<Seller> demo_seller;
  std::unique_ptr<HttpServer> demo_seller_server;
  if (options.demo) {
    if (Status s = PrepareDemo(random, options, *config); !s.ok()) return Fail(s.message(), &log);
    if (config->routes.empty()) {
      demo_seller = std::make_unique<Seller>("ok");
      auto started = StartDemoSeller(*demo_seller, *config, options.upstream_timeout_ms);
      if (!started.ok()) return Fail(started.status().message(), &log);
      demo_seller_server = std::move(*started);
    }
  }

  if (Status s = PrepareStoreDirectory(options); !s.ok()) return Fail(s.message(), &log);
  auto store = OpenStore(options.db);
  if (!store.ok())
    return Fail("--db " + RedactedStoreUrl(options.db) + ": " + store.status().message(), &log);
  auto settlement = OpenSettlementChain(options, *config, clock, *trust);
  if (!settlement.ok()) return Fail(settlement.status().message(), &log);
  HttpUpstream upstream(config->max_upstream_response_bytes, *trust);
  AsioTimers timers;
  Gateway gateway(*config, **store, clock, random, timers, upstream, settlement->settler.get());
  // Liveness first, for the whole process lifetime: other gateway processes on this database then
  // leave this one's calls alone, and its own recovery below only takes over dead processes' calls.
  if (Status registered = gateway.RegisterInstance(); !registered.ok()) {
    return Fail("cannot register this gateway instance with the store: " + registered.message(),
                &log);
  }
  auto recovered = gateway.RecoverInterrupted();
  if (!recovered.ok()) {
    return Fail("crash recovery failed: " + recovered.status().message(), &log);
  }
  if (*recovered > 0) {
    log.Warn("crash_recovery",
             "recovered " + std::to_string(*recovered) +
                 " operation(s) interrupted mid-flight in gateway processes that are gone: holds "
                 "kept, settlements left to the reconciler, fulfillment pending_retry",
             {{"operations", *recovered}});
  }
  const ReconcilerConfig reconciler_config = ReconcilerConfigOf(*config);
  std::optional<Reconciler> paced_reconciler;
  if (settlement->settler != nullptr) {
    // The payers' authorizations a previous process left in flight hold their balance again.
    if (auto restored = RestoreReservations(**store, settlement->settler->reservations());
        !restored.ok()) {
      return Fail("cannot rebuild the payers' reservations: " + restored.status().message(), &log);
    }
    paced_reconciler.emplace(**store, *settlement->settler, clock, random, reconciler_config,
                             &gateway.metrics());
  } else {
    log.Warn("x402_off",
             "x402 is off: no --chain-rpc, and the built-in devnet runs only beside a sqlite: "
             "store; this gateway takes wallet payments only");
  }
  auto reconcile = [&] {
    if (paced_reconciler) LogReconcile(log, paced_reconciler->RunPass());
  };
  // The relayer's gas and nonces for the console's overview: three chain calls every 30 s, at
  // start first; an admin request never calls the chain.
  constexpr int64_t kRelayerWatchIntervalMs = 30000;
  std::optional<RelayerWatch> relayer_watch;
  std::optional<PeriodicWorker> relayer_watcher;
  if (settlement->settler != nullptr) {
    relayer_watch.emplace(*settlement->settler);
    gateway.AttachRelayerWatch(&*relayer_watch);
    relayer_watcher.emplace(kRelayerWatchIntervalMs,
                            [&] { relayer_watch->Refresh(clock.NowMs()); });
  }
  reconcile();  // settlements a previous process left behind, before traffic is accepted

  std::optional<DemoAccount> demo_account;
  if (options.demo) {
    auto ensured = EnsureDemoAccount(**store, clock, random);
    if (!ensured.ok()) return Fail("demo account: " + ensured.status().message(), &log);
    demo_account = *ensured;
  }
  std::optional<DemoBuyer> demo_buyer;
  if (options.demo && settlement->devnet != nullptr) {
    auto funded = FundDemoBuyer(*settlement->devnet, *config);
    if (!funded.ok()) return Fail("demo buyer: " + funded.status().message(), &log);
    demo_buyer = *funded;
  }

  ServerLimits limits;
  limits.max_body_bytes = config->max_body_bytes;
  limits.max_body_bytes_in_flight = static_cast<uint64_t>(options.max_body_bytes_in_flight);
  // One client address gets a quarter, and always room for one whole body.
  limits.max_body_bytes_in_flight_per_client =
      std::max(limits.max_body_bytes_in_flight / 4, limits.max_body_bytes);
  limits.max_connections = static_cast<size_t>(options.max_connections);
  limits.max_connections_per_client = static_cast<size_t>(options.max_connections_per_client);
  limits.header_timeout_ms = options.header_timeout_ms;
  limits.io_threads = ServeIoThreads(options.io_threads);
  auto server = HttpServer::StartAsync(
      listen->first, listen->second, limits,
      [&gateway, devnet = settlement->devnet](std::shared_ptr<const HttpRequest> request,
                                              Respond respond) {
        // The client address's rate limit before anything else.
        if (auto refused = gateway.AdmitClient(*request)) return respond(std::move(*refused));
        // The model is answered here: the gateway may not include src/sim (DESIGN layering).
        if (auto sim = HandleSimRequest(*request)) return respond(std::move(*sim));
        if (devnet != nullptr) {
          if (auto answer = chain::HandleDevnetRpc(*request, *devnet)) {
            return respond(std::move(*answer));
          }
        }
        // The admin surface lives on --admin-listen only: here it is an unknown endpoint.
        if (IsAdminSurfacePath(request->Path())) return respond(NoSuchEndpoint());
        gateway.HandleAsync(std::move(request), std::move(respond));
      },
      PublicHooks(gateway, settlement->devnet, identity));
  if (!server.ok()) {
    return Fail("--listen " + options.listen + ": " + server.status().message(), &log);
  }
  const bool tls = identity != nullptr;
  if (options.public_url.empty()) {
    // The URL as bound: with --listen HOST:0 the port is known only now.
    gateway.SetPublicUrl(ListenerUrl(listen->first, (*server)->port(), tls));
    if (IsWildcardAddress(listen->first)) {
      log.Warn("public_url_unset",
               "--listen " + options.listen +
                   " binds every address of this machine and names none a client can use: the "
                   "402 challenge names its resources under " +
                   ListenerUrl(listen->first, (*server)->port(), tls) +
                   "; give --public-url with the URL clients reach the gateway at",
               {{"listen", options.listen}});
    }
  }
  std::unique_ptr<HttpServer> admin_server;
  if (admin_listen) {
    ServerLimits admin_limits;
    admin_limits.max_body_bytes = kMaxAdminBodyBytes;
    admin_limits.max_connections = kMaxAdminConnections;
    admin_limits.io_threads = 1;
    // A flood of half-sent heads must not lock the operator out: when every slot is taken, the
    // connection that has waited longest for its head and never showed the token gives way.
    admin_limits.evict_idle_when_full = true;
    admin_limits.header_timeout_ms =
        std::min<int64_t>(options.header_timeout_ms, kAdminHeaderTimeoutMs);
    auto origins = AdminOriginsOf(options);
    if (!origins.ok()) return Fail(origins.status().message(), &log);
    auto guard = std::make_shared<BrowserGuard>(admin_listen->first, tls, *origins);
    guard->SetPort(admin_listen->second);  // 0 (the system picks) is set below, once bound
    auto started = HttpServer::StartAsync(
        admin_listen->first, admin_listen->second, admin_limits,
        AdminListenerHandler(gateway, settlement->devnet, config->admin_token, guard),
        AdminHooks(config->admin_token, identity));
    if (!started.ok()) {
      return Fail("--admin-listen " + options.admin_listen + ": " + started.status().message() +
                      " (give another HOST:PORT, or --admin-listen off)",
                  &log);
    }
    admin_server = std::move(*started);
    guard->SetPort(admin_server->port());
  }
  std::unique_ptr<Facilitator> facilitator;
  std::unique_ptr<HttpServer> facilitator_server;
  if (facilitator_listen) {
    if (gateway.x402() == nullptr) {
      return Fail(
          "--facilitator-listen settles x402 payments, and this gateway has no chain to "
          "settle on: give --chain-rpc (a PostgreSQL store has no built-in devnet)",
          &log);
    }
    facilitator = std::make_unique<Facilitator>(
        *gateway.x402(),
        [&gateway](Respond respond) { return gateway.TrackPaid(std::move(respond)); },
        config->facilitator_sellers, static_cast<uint64_t>(config->chain.chain_id),
        settlement->settler->relayer(), gateway.metrics());
    ServerLimits facilitator_limits = limits;
    facilitator_limits.max_body_bytes = x402::kMaxFacilitatorBodyBytes;
    facilitator_limits.io_threads = 1;
    ServerHooks hooks;
    hooks.tls = identity;
    auto started = HttpServer::StartAsync(
        facilitator_listen->first, facilitator_listen->second, facilitator_limits,
        [&gateway, &facilitator](std::shared_ptr<const HttpRequest> request, Respond respond) {
          // The client address's rate limit first, as on the public listener.
          if (auto refused = gateway.AdmitClient(*request)) return respond(std::move(*refused));
          facilitator->Handle(std::move(request), std::move(respond));
        },
        std::move(hooks));
    if (!started.ok()) {
      return Fail(
          "--facilitator-listen " + options.facilitator_listen + ": " + started.status().message(),
          &log);
    }
    facilitator_server = std::move(*started);
  }
  gateway.AttachServer(server->get());
  constexpr int kSweepBatch = 500;
  std::string unpaid_cursor;  // the sweeper's place among unpaid x402 operations
  PeriodicWorker sweeper(config->sweep_interval_ms, [&] {
    auto report = SweepExpiredHolds(**store, clock, random, kSweepBatch, &unpaid_cursor);
    gateway.metrics().CountSweep(report.ok() ? report->released : 0,
                                 report.ok() ? report->alerts : 0, !report.ok());
    LogSweep(log, report);
  });

  PeriodicWorker reconciler(config->sweep_interval_ms, reconcile);
  // Retention pruning on the sweeper's period: when nothing is due it is one indexed lookup.
  constexpr int kPruneBatch = 500;
  constexpr int kPruneBatchesPerPass = 4;
  PeriodicWorker pruner(config->sweep_interval_ms, [&] {
    auto report = PruneExpiredResults(**store, clock, kPruneBatch, kPruneBatchesPerPass);
    gateway.metrics().CountPrune(report.ok() ? report->pruned : 0,
                                 report.ok() ? report->keys_deleted : 0, !report.ok());
    if (!report.ok()) {
      log.Error("pruner_failed", "pruner: " + report.status().ToString(),
                {{"code", report.status().code()}});
    }
  });

  // The rate limits' usage exchanged with the other gateways of the database (issue 36 item 8):
  // a store error loses this exchange's counts only, and is logged once until one succeeds.
  RateSync rate_sync(**store, gateway.rate_limiters());
  bool rate_sync_failing = false;
  PeriodicWorker rate_syncer(config->rate_limit_sync_ms, [&] {
    Status synced = rate_sync.Run(clock.NowMs(), timers.MonotonicMs());
    if (!synced.ok() && !rate_sync_failing) {
      log.Error("rate_sync_failed", "rate limit exchange: " + synced.ToString(),
                {{"code", synced.code()}});
    }
    rate_sync_failing = !synced.ok();
  });

  const std::string base = ListenerUrl(listen->first, (*server)->port(), tls);
  const std::string admin_base =
      admin_server ? ListenerUrl(admin_listen->first, admin_server->port(), tls) : "";
  AnnounceStart(log, base, admin_base, options, *config, *settlement);
  AnnounceDemo(log, base, admin_base, options, *config, demo_account, demo_buyer);
  std::fflush(stdout);

  while (signals.Wait() == SIGHUP) {
    if (!identity) {
      log.Info("reload_skipped", "SIGHUP: no --tls-cert to reload");
      continue;
    }
    if (Status reloaded = identity->Reload(); reloaded.ok()) {
      log.Info("tls_reloaded",
               "SIGHUP: " + options.tls_cert +
                   " reloaded; new connections get it, open ones keep theirs",
               {{"cert", options.tls_cert}});
    } else {
      log.Error("tls_reload_failed", "SIGHUP: the certificate in use stays: " + reloaded.message(),
                {{"code", reloaded.code()}});
    }
  }
  log.Info("stopping", "stopping");
  (*server)->Stop();
  if (admin_server) admin_server->Stop();
  if (facilitator_server) facilitator_server->Stop();
  // Paid requests in flight finish their decisions (their answers can no longer be sent): a
  // stopped gateway leaves holds kept or captured, never half-written.
  // The longest a paid request can still take: a receipt wait and an upstream call, or a
  // duplicate's attach wait.
  int64_t max_timeout_ms = config->attach_wait_ms;
  for (const auto& route : config->routes) {
    max_timeout_ms = std::max(max_timeout_ms, route.timeout_ms + config->receipt_timeout_ms);
  }
  // A seller's settle waits for its receipt and has nothing upstream.
  if (facilitator) max_timeout_ms = std::max(max_timeout_ms, config->receipt_timeout_ms);
  if (int64_t left = gateway.Drain(max_timeout_ms + kLeaseMarginMs); left > 0) {
    log.Warn("stopped_with_requests_in_flight",
             std::to_string(left) + " paid request(s) still in flight at exit",
             {{"in_flight", static_cast<long long>(left)}});
  }
  if (demo_seller_server) demo_seller_server->Stop();
  return 0;
}

}  // namespace agentpay
