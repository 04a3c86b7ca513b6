// `agentpay serve` flags and their TOML file (--config): every flag can be set in the file, and a flag
// given on the command line wins. Produces a validated GatewayConfig.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "core/result.h"
#include "gateway/config.h"
#include "http/origin.h"

namespace agentpay {

struct ServeOptions {
  std::string config_file;
  std::string listen = "127.0.0.1:8402";
  // The gateway's public base URL, which the 402 names resources under; "": --listen's own URL.
  std::string public_url;
  // The admin API, devnet controls, /metrics and /console/; "off": not served at all.
  std::string admin_listen = "127.0.0.1:8404";
  // The x402 facilitator's listener (gateway/facilitator.h) and the sellers who may call it.
  std::string facilitator_listen = "off";
  std::string facilitator_sellers_file;
  // Origins the admin listener is reached at besides its own address (a DNS name, a proxy).
  std::vector<std::string> admin_origin;
  std::string db = "sqlite:./agentpay-data/agentpay.db";
  std::string upstream;
  std::string price;
  int64_t upstream_timeout_ms = 10000;
  std::string admin_token_file;
  int64_t hold_ttl_ms = 600000;
  int64_t retention_ms = 86400000;
  int64_t sweep_interval_ms = 1000;
  // How often the rate limits' usage is exchanged with the other gateways of the database
  // (gateway/rate_sync.h).
  int64_t rate_limit_sync_ms = 200;
  int64_t receipt_timeout_ms = 5000;
  int64_t attach_wait_ms = 5000;
  int64_t answer_cache_mb = 64;
  int64_t min_idempotency_key_bits = 96;
  int64_t max_body_bytes = 1048576;
  // Request body bytes the public listener holds at once (a quarter of it per client address).
  int64_t max_body_bytes_in_flight = 64LL * 1024 * 1024;
  int64_t workers = 16;
  int64_t max_connections = 4096;
  int64_t max_connections_per_client = 512;
  int64_t header_timeout_ms = 10000;
  // PER_SECOND[:BURST] or "off"; the per-kind ones, when given, win over rate_limit for their kind.
  std::string rate_limit = "100000:200000";
  std::string rate_limit_per_client, rate_limit_per_account, rate_limit_per_payer;
  // Threads that serve client connections; 0: half the CPUs, at least 1 (ServeIoThreads).
  int64_t io_threads = 0;
  // Threads that make x402 chain calls (one JSON-RPC call each at a time;
  // GatewayConfig::chain_threads).
  int64_t chain_threads = 8;
  // Settlements signed into one transaction at most (GatewayConfig::settle_batch_max), and how
  // long the first one waits for company (GatewayConfig::settle_batch_window_ms).
  int64_t settle_batch_max = 1;
  int64_t settle_batch_window_ms = 10;
  std::string chain = "devnet";
  // Any EVM JSON-RPC node instead of the devnet (CONTRACT §2); several: endpoints of one chain,
  // used with failover (chain/rpc_pool.h).
  std::vector<std::string> chain_rpc;
  int64_t chain_id = 0;
  std::string asset, asset_name, asset_version, pay_to;
  std::string relayer_key_file;
  int64_t rpc_timeout_ms = 5000;
  int64_t max_timeout_seconds = 120;
  int64_t expiry_buffer_seconds = 30;
  int64_t max_in_flight_per_payer = 128;
  int64_t reconcile_rpc_per_second = 20;
  int64_t replace_after_ms = 30000;
  int64_t reorg_watch_ms = 900000;
  int64_t confirmations = 1;
  // Wei per gas, decimal; "0": no cap.
  std::string max_fee_per_gas = "0", max_priority_fee_per_gas = "0";
  int64_t devnet_mine_delay_ms = 500;
  std::string log_format = "text";
  // TLS: a private CA for https upstreams and --chain-rpc (the system store is always used), and
  // the certificate and key both listeners serve HTTPS with (both or neither).
  std::string ca_file, tls_cert, tls_key;
  bool demo = false;
};

void AddServeFlags(CLI::App& command, ServeOptions& options);

// Fills options not given as flags from --config, then validates everything into a GatewayConfig.
// Routes come from the file's [[route]] tables, else from --upstream/--price (route "/"); in demo
// mode without either, the caller adds the in-process seller route.
Result<GatewayConfig> ResolveServeConfig(const CLI::App& command, ServeOptions& options);

// The same for the text of a config file (named options.config_file in messages), reading no file:
// the admin token is not read (config.admin_token stays empty). For tests and the fuzz target
// fuzz/serve_config_fuzzer.cc.
Result<GatewayConfig> ResolveServeConfigText(const CLI::App& command, ServeOptions& options,
                                             std::string_view toml_text);

// The --admin-origin values, parsed (at most kMaxAdminOrigins); the message names a bad one.
inline constexpr size_t kMaxAdminOrigins = 16;
Result<std::vector<WebOrigin>> AdminOriginsOf(const ServeOptions& options);

// The node the gateway settles on, when --chain-rpc is given; nullopt for the built-in devnet.
struct RpcChainOptions {
  std::vector<std::string> urls;  // at least one
  int64_t rpc_timeout_ms = 5000;
  std::string relayer_key_file;
};
std::optional<RpcChainOptions> RpcChainOf(const ServeOptions& options);

// Makes sure the SQLite file's directory is there: ./agentpay-data (the default) is created
// (0700); any other directory must exist and be writable. The message names the path.
Status PrepareStoreDirectory(const ServeOptions& options);

// "PER_SECOND[:BURST]" (BURST defaults to PER_SECOND) or "off" (also "0"): no limit.
Result<RateLimit> ParseRateLimit(const std::string& text, const std::string& flag);

// Whether a secret file may be reached through a symbolic link: files the operator names may
// (a mounted secret often is one); files agentpay writes itself may not.
enum class SecretLinks { kFollow, kRefuse };

// Reads a secret from a file (trailing whitespace removed). Refused, with the fix named: a file
// group or others can access in any way (as ssh does: "chmod 600 FILE"), one owned by another
// user (root excepted), not a regular file, empty, or larger than 64 KiB.
Result<std::string> ReadSecretFile(const std::string& path,
                                   SecretLinks links = SecretLinks::kFollow);

// Writes `content` and a newline as a new file of mode 0600 (O_CREAT | O_EXCL | O_NOFOLLOW),
// renamed over `path`: never written through a link, never readable by others, even for a moment.
Status WriteSecretFile(const std::string& path, const std::string& content);

}  // namespace agentpay
