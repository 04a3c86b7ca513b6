// See serve.h.
#include "cli/serve.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/devnet_admin.h"
#include "cli/seller.h"
#include "cli/sim_http.h"
#include "cli/system_world.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "cli/signals.h"
#include "http/server.h"
#include "store/store.h"
#include "chain/devnet.h"
#include "chain/devnet_rpc.h"
#include "chain/rpc_chain.h"
#include "core/check.h"
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
constexpr int64_t kDemoPrice = 10000;            // 0.01 USDC
constexpr int64_t kDemoFunding = 10'000'000;     // 10 USDC

int Fail(const std::string& message) {
  std::fprintf(stderr, "agentpay serve: %s\n", message.c_str());
  return 2;
}

Status WriteSecretFile(const std::string& path, const std::string& content) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return Status::Error("io_error", "cannot write " + path);
  file << content << "\n";
  file.close();
  chmod(path.c_str(), 0600);
  return Status::Ok();
}

// The demo account survives restarts: its id and API key live in agentpay-data/demo-account.json.
Result<std::pair<std::string, std::string>> EnsureDemoAccount(Store& store, Clock& clock,
                                                              Random& random) {
  const std::string path = std::string(kDemoDir) + "/demo-account.json";
  std::string account_id, api_key;
  if (std::ifstream file(path); file) {
    auto saved = nlohmann::json::parse(file, nullptr, false);
    if (saved.is_object() && saved.value("account_id", "") != "" && saved.value("api_key", "") != "") {
      account_id = saved["account_id"];
      api_key = saved["api_key"];
    }
  }
  if (account_id.empty()) {
    account_id = NewAccountId(random);
    api_key = NewApiKey(random);
  }
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
    return Status::Ok();
  });
  if (!status.ok()) return status;
  Status saved = WriteSecretFile(
      path, nlohmann::json({{"account_id", account_id}, {"api_key", api_key}}).dump());
  if (!saved.ok()) return saved;
  return std::make_pair(account_id, api_key);
}

// Keys of the built-in devnet only: its tokens are worth nothing, so the keys are no secret. The
// relayer submits settlements; the demo buyer is funded by `serve --demo` for x402 clients.
constexpr char kDevnetRelayerKey[] =
    "0x6167656e74706179206465766e65742072656c61796572206b65792030303031";
constexpr char kDevnetDemoBuyerKey[] =
    "0x6167656e74706179206465766e65742064656d6f206275796572202030303031";
constexpr int64_t kDevnetEmptyBlockIntervalMs = 2000;

// The chain x402 payments settle on: a JSON-RPC node (--chain-rpc), checked to be the chain the
// configuration names, or the built-in devnet persisted beside the SQLite store.
struct SettlementChain {
  std::unique_ptr<chain::Chain> node;
  chain::Devnet* devnet = nullptr;  // set when node is the devnet
  std::unique_ptr<Settler> settler;
};

Result<std::unique_ptr<chain::Chain>> OpenRpcNode(const RpcChainOptions& rpc,
                                                  const GatewayConfig& config) {
  auto endpoint = ParseHttpUrl(rpc.url);
  if (!endpoint.ok()) return endpoint.status();
  auto node = std::make_unique<chain::RpcChain>(*endpoint, rpc.rpc_timeout_ms);
  auto chain_id = node->ChainId();
  if (!chain_id.ok()) {
    return Status::Error("chain_unavailable",
                         "--chain-rpc " + rpc.url + ": " + chain_id.status().message());
  }
  if (static_cast<int64_t>(*chain_id) != config.chain.chain_id) {
    return Status::Error("invalid_config", "--chain-rpc " + rpc.url + " is chain " +
                                               std::to_string(*chain_id) + ", not --chain-id " +
                                               std::to_string(config.chain.chain_id));
  }
  return std::unique_ptr<chain::Chain>(std::move(node));
}

Result<SettlementChain> OpenSettlementChain(const ServeOptions& options,
                                            const GatewayConfig& config, Clock& clock) {
  SettlementChain out;
  std::string key_text = kDevnetRelayerKey;
  if (auto rpc = RpcChainOf(options)) {
    auto secret = ReadSecretFile(rpc->relayer_key_file);
    if (!secret.ok()) return secret.status();
    key_text = *secret;
    auto node = OpenRpcNode(*rpc, config);
    if (!node.ok()) return node.status();
    out.node = std::move(*node);
  } else {
    if (!options.db.starts_with("sqlite:")) {
      return Status::Error("invalid_config", "the devnet is kept beside a sqlite: store");
    }
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
  if (!key.ok()) return Status::Error("invalid_config", "relayer key: " + key.status().message());
  SettlerConfig settler;
  settler.chain_id = static_cast<uint64_t>(config.chain.chain_id);
  settler.token = *chain::ParseAddress(config.chain.asset);
  settler.pay_to = *chain::ParseAddress(config.chain.pay_to);
  settler.asset_name = config.chain.asset_name;
  settler.asset_version = config.chain.asset_version;
  out.settler = std::make_unique<Settler>(*out.node, settler, *key);
  return out;
}

// Tops the demo buyer up to kDemoFunding on the devnet; returns its address.
Result<std::string> FundDemoBuyer(chain::Devnet& devnet, const GatewayConfig& config) {
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
  }
  return chain::ToChecksumHex(buyer);
}

void LogReconcile(const Result<ReconcileReport>& report) {
  if (!report.ok()) {
    std::fprintf(stderr, "agentpay serve: reconciler: %s\n", report.status().ToString().c_str());
    return;
  }
  if (!report->changed() && report->errors == 0) return;
  std::fprintf(stderr,
               "agentpay serve: reconciler: %d settled, %d re-broadcast, %d void, %d failed, %d "
               "marked unknown, %d relayer nonce gap(s) filled, %d error(s)\n",
               report->settled, report->rebroadcast, report->voided, report->failed,
               report->marked_unknown, report->gaps_filled, report->errors);
}

}  // namespace

int RunServe(const CLI::App& command, ServeOptions& options) {
  auto config = ResolveServeConfig(command, options);
  if (!config.ok()) return Fail(config.status().message());
  auto listen = ParseListenAddress(options.listen);
  if (!listen.ok()) return Fail(listen.status().message());

  TerminationSignals signals;  // before any thread starts: they inherit the mask

  SystemClock clock;
  SystemRandom random;
  std::unique_ptr<Seller> demo_seller;
  std::unique_ptr<HttpServer> demo_seller_server;
  if (options.demo) {
    std::error_code ec;
    std::filesystem::create_directories(kDemoDir, ec);
    if (ec) return Fail(std::string("cannot create ") + kDemoDir + ": " + ec.message());
    if (options.admin_token_file.empty()) {
      std::string token_path = std::string(kDemoDir) + "/admin-token";
      if (!std::filesystem::exists(token_path)) {
        if (Status s = WriteSecretFile(token_path, "adm_" + RandomHex(random, 32)); !s.ok()) {
          return Fail(s.message());
        }
      }
      auto token = ReadSecretFile(token_path);
      if (!token.ok()) return Fail(token.status().message());
      config->admin_token = *token;
      options.admin_token_file = token_path;
    }
    if (config->routes.empty()) {
      demo_seller = std::make_unique<Seller>("ok");
      auto started = HttpServer::Start("127.0.0.1", 0, ServerLimits{},
                                       [seller = demo_seller.get()](const HttpRequest& request) {
                                         return seller->Handle(request);
                                       });
      if (!started.ok()) return Fail(started.status().message());
      demo_seller_server = std::move(*started);
      RouteConfig route;
      route.upstream_url = "http://127.0.0.1:" + std::to_string(demo_seller_server->port());
      route.upstream = *ParseHttpUrl(route.upstream_url);
      route.price = kDemoPrice;
      route.timeout_ms = options.upstream_timeout_ms;
      config->routes.push_back(route);
    }
  }

  auto store = OpenStore(options.db);
  if (!store.ok()) return Fail(store.status().message());
  auto settlement = OpenSettlementChain(options, *config, clock);
  if (!settlement.ok()) return Fail(settlement.status().message());
  HttpUpstream upstream(config->max_upstream_response_bytes);
  Gateway gateway(*config, **store, clock, random, upstream, settlement->settler.get());
  // Liveness first, for the whole process lifetime: other gateway processes on this database then
  // leave this one's calls alone, and its own recovery below only takes over dead processes' calls.
  if (Status registered = gateway.RegisterInstance(); !registered.ok()) {
    return Fail("cannot register this gateway instance with the store: " + registered.message());
  }
  auto recovered = gateway.RecoverInterrupted();
  if (!recovered.ok()) return Fail("crash recovery failed: " + recovered.status().message());
  if (*recovered > 0) {
    std::fprintf(stderr,
                 "agentpay serve: recovered %d operation(s) interrupted mid-flight in gateway "
                 "processes that are gone: holds kept, settlements left to the reconciler, "
                 "fulfillment pending_retry\n",
                 *recovered);
  }
  ReconcilerConfig reconciler_config;
  reconciler_config.receipt_timeout_ms = config->receipt_timeout_ms;
  reconciler_config.expiry_buffer_seconds = config->expiry_buffer_seconds;
  reconciler_config.retention_ms = config->retention_ms;
  auto reconcile = [&] {
    auto report = ReconcileSettlements(**store, *settlement->settler, clock, random,
                                       reconciler_config, &gateway.metrics());
    LogReconcile(report);
  };
  reconcile();  // settlements a previous process left behind, before traffic is accepted

  std::optional<std::pair<std::string, std::string>> demo_account;
  if (options.demo) {
    auto ensured = EnsureDemoAccount(**store, clock, random);
    if (!ensured.ok()) return Fail("demo account: " + ensured.status().message());
    demo_account = *ensured;
  }
  std::optional<std::string> demo_buyer;
  if (options.demo && settlement->devnet != nullptr) {
    auto funded = FundDemoBuyer(*settlement->devnet, *config);
    if (!funded.ok()) return Fail("demo buyer: " + funded.status().message());
    demo_buyer = *funded;
  }

  ServerLimits limits;
  limits.max_body_bytes = config->max_body_bytes;
  limits.max_connections = static_cast<size_t>(options.max_connections);
  limits.io_threads = ServeIoThreads(options.io_threads);
  auto server = HttpServer::StartAsync(
      listen->first, listen->second, limits,
      [&gateway, devnet = settlement->devnet, token = config->admin_token](
          std::shared_ptr<const HttpRequest> request, Respond respond) {
        // The model is answered here: the gateway may not include src/sim (DESIGN layering).
        if (auto sim = HandleSimRequest(*request)) return respond(std::move(*sim));
        if (devnet != nullptr) {
          if (auto answer = chain::HandleDevnetRpc(*request, *devnet)) {
            return respond(std::move(*answer));
          }
          if (auto answer = HandleDevnetAdmin(*request, *devnet, token)) {
            return respond(std::move(*answer));
          }
        }
        gateway.HandleAsync(std::move(request), std::move(respond));
      });
  if (!server.ok()) return Fail(server.status().message());
  gateway.AttachServer(server->get());
  constexpr int kSweepBatch = 500;
  PeriodicWorker sweeper(config->sweep_interval_ms, [&] {
    auto report = SweepExpiredHolds(**store, clock, random, kSweepBatch);
    gateway.metrics().CountSweep(report.ok() ? report->released : 0,
                                 report.ok() ? report->alerts : 0, !report.ok());
    if (!report.ok()) {
      std::fprintf(stderr, "agentpay serve: hold sweeper: %s\n",
                   report.status().ToString().c_str());
    } else if (report->released > 0) {
      std::fprintf(stderr,
                   "agentpay serve: hold sweeper released %d expired hold(s) and raised %d "
                   "alert(s)\n",
                   report->released, report->alerts);
    }
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
      std::fprintf(stderr, "agentpay serve: pruner: %s\n", report.status().ToString().c_str());
    }
  });

  const std::string base = "http://" + listen->first + ":" + std::to_string((*server)->port());
  std::printf("agentpay gateway listening on %s (store %s)\n", base.c_str(), options.db.c_str());
  if (settlement->devnet != nullptr) {
    std::printf("  x402 on the built-in devnet: chain %s, asset %s (\"%s\" v%s), pay to %s\n",
                config->chain.Network().c_str(), config->chain.asset.c_str(),
                config->chain.asset_name.c_str(), config->chain.asset_version.c_str(),
                config->chain.pay_to.c_str());
    std::printf("  devnet JSON-RPC (reads): %s%s\n", base.c_str(), chain::kDevnetRpcPath.data());
  } else {
    std::printf("  x402 on %s: chain %s, asset %s, relayer %s\n", options.chain_rpc.c_str(),
                config->chain.Network().c_str(), config->chain.asset.c_str(),
                chain::ToChecksumHex(settlement->settler->relayer()).c_str());
  }
  std::printf("  request/effect inspector: %s/inspector/\n", base.c_str());
  for (const auto& route : config->routes) {
    std::printf("  paid route %s -> %s at %lld atomic units\n", route.prefix.c_str(),
                route.upstream_url.c_str(), static_cast<long long>(route.price));
  }
  if (demo_account) {
    std::printf(
        "\nDemo account %s, funded with %lld atomic units (10 USDC).\n"
        "  API key:      %s\n"
        "  admin token:  in %s\n"
        "\nA paid request (run it twice: the second is a free replay):\n"
        "  curl -i -H 'Authorization: Bearer %s' -H 'Idempotency-Key: demo-1' "
        "-d '{\"query\":\"hello\"}' %s/hello\n"
        "Then look at the account and the operation:\n"
        "  curl -s -H 'Authorization: Bearer %s' %s/v1/account\n"
        "  curl -s %s/v1/operations/<AgentPay-Operation-Id from the first answer>\n",
        demo_account->first.c_str(), static_cast<long long>(kDemoFunding),
        demo_account->second.c_str(), options.admin_token_file.c_str(),
        demo_account->second.c_str(), base.c_str(), demo_account->second.c_str(), base.c_str(),
        base.c_str());
  }
  if (demo_buyer) {
    std::printf(
        "\nDemo x402 buyer on the devnet: %s, funded with %lld atomic units.\n"
        "  private key (devnet only, worth nothing): %s\n"
        "  Any x402 client can pay with it (network %s, asset %s).\n",
        demo_buyer->c_str(), static_cast<long long>(kDemoFunding), kDevnetDemoBuyerKey,
        config->chain.Network().c_str(), config->chain.asset.c_str());
  }
  std::fflush(stdout);

  signals.Wait();
  std::fprintf(stderr, "agentpay serve: stopping\n");
  (*server)->Stop();
  // Paid requests in flight finish their decisions (their answers can no longer be sent): a
  // stopped gateway leaves holds kept or captured, never half-written.
  // The longest a paid request can still take: a receipt wait and an upstream call, or a
  // duplicate's attach wait.
  int64_t max_timeout_ms = config->attach_wait_ms;
  for (const auto& route : config->routes) {
    max_timeout_ms = std::max(max_timeout_ms, route.timeout_ms + config->receipt_timeout_ms);
  }
  if (int64_t left = gateway.Drain(max_timeout_ms + kLeaseMarginMs); left > 0) {
    std::fprintf(stderr, "agentpay serve: %lld paid request(s) still in flight at exit\n",
                 static_cast<long long>(left));
  }
  if (demo_seller_server) demo_seller_server->Stop();
  return 0;
}

}  // namespace agentpay
