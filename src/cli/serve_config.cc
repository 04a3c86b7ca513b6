// See serve_config.h.
#include "cli/serve_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <variant>

#include "chain/bytes.h"
#include "chain/multicall.h"
#include "cli/closest_name.h"
#include "core/money.h"
#include "http/request_target.h"
#include "http/route_table.h"
#include "http/server.h"

namespace agentpay {
namespace {

constexpr int64_t kMaxTimeoutMs = 3600 * 1000;
// More than any chain needs (Ethereum finalizes in 64 blocks); a typo of 10000 is refused.
constexpr int64_t kMaxConfirmations = 1000;
constexpr char kDataDir[] = "agentpay-data";  // the default store's directory, relative to the cwd
constexpr int64_t kMaxBodyLimit = 64 * 1024 * 1024;
constexpr int64_t kMaxBodyBytesInFlight = 16LL * 1024 * 1024 * 1024;

struct Flag {
  const char* name;  // the long flag without "--"; the TOML key is the same with '_' for '-'
  // A list: the flag may be repeated, and the TOML key is a string or an array of strings.
  std::variant<std::string*, int64_t*, std::vector<std::string>*> target;
  const char* help;
};

std::vector<Flag> Flags(ServeOptions& o) {
  return {
      {"listen", &o.listen, "HOST:PORT to listen on"},
      {"public-url", &o.public_url,
       "the gateway's public base URL, http(s)://HOST[:PORT][/PATH]: a 402 names its resource as "
       "this URL plus the request's path, never from the request's Host (default: --listen's "
       "address, https with --tls-cert); set it behind a proxy or load balancer"},
      {"admin-listen", &o.admin_listen,
       "HOST:PORT of the admin listener: the admin API, devnet controls, /metrics and /console/ "
       "(never on --listen); off: no admin listener"},
      {"admin-origin", &o.admin_origin,
       "an origin the admin listener is also reached at, http(s)://HOST[:PORT] (a DNS name, a "
       "proxy in front); repeatable. Its host is accepted in Host, and browser writes from it are "
       "allowed; the listener's own address (and, on loopback, localhost) always is"},
      {"facilitator-listen", &o.facilitator_listen,
       "HOST:PORT of the x402 facilitator listener (GET /supported, POST /verify, POST /settle) "
       "for sellers who run the x402 middleware; off: none. Needs --facilitator-sellers-file"},
      {"facilitator-sellers-file", &o.facilitator_sellers_file,
       "file of the sellers who may call the facilitator, one a line: NAME KEY "
       "PAYEE[,PAYEE...] (KEY: 32+ characters, sent as Authorization: Bearer KEY; PAYEE: the "
       "addresses its payments may go to); private to this user"},
      {"db", &o.db,
       "store URL: sqlite:PATH (the default directory is created, 0700; a directory you name "
       "must exist), or postgresql://USER:PASSWORD@HOST:PORT/DATABASE for several gateways on "
       "one PostgreSQL database"},
      {"upstream", &o.upstream, "upstream URL of the single paid route \"/\""},
      {"price", &o.price, "price of that route, in atomic units of the asset"},
      {"upstream-timeout-ms", &o.upstream_timeout_ms, "upstream call timeout"},
      {"admin-token-file", &o.admin_token_file, "file holding the admin API bearer token"},
      {"hold-ttl-ms", &o.hold_ttl_ms, "how long a wallet hold lives"},
      {"retention-ms", &o.retention_ms, "how long a completed key's result is kept"},
      {"sweep-interval-ms", &o.sweep_interval_ms, "hold sweeper period"},
      {"receipt-timeout-ms", &o.receipt_timeout_ms, "x402: wait for a receipt before 202"},
      {"attach-wait-ms", &o.attach_wait_ms, "how long a duplicate waits for the one in flight"},
      {"answer-cache-mb", &o.answer_cache_mb,
       "MiB of memory for final answers, so that a wallet route's replays (and refused key reuses, "
       "422) are answered without reading the database; it answers a key only until a minute "
       "before its retention ends (0: off)"},
      {"min-idempotency-key-bits", &o.min_idempotency_key_bits,
       "x402: the estimated bits (docs/protocol.md 5a) an Idempotency-Key or payment-identifier "
       "id needs to prove the payer with the payment's public authorization; a weaker key still "
       "deduplicates, but its retry needs a fresh authorization once the payment is on chain "
       "(0: every key proves)"},
      {"max-body-bytes", &o.max_body_bytes, "largest request body accepted (413 past it)"},
      {"max-body-bytes-in-flight", &o.max_body_bytes_in_flight,
       "request body bytes held at once by the public listener, a quarter of it per client "
       "address (a chunked body counts as --max-body-bytes until whole); a body past it is not "
       "read: 503 with Retry-After"},
      {"workers", &o.workers, "threads for admin calls, views and attached duplicates' re-reads"},
      {"max-connections", &o.max_connections, "open connections accepted (503 past it)"},
      {"max-connections-per-client", &o.max_connections_per_client,
       "open connections from one client address (an IPv6 /64 counts as one; 503 past it)"},
      {"header-timeout-ms", &o.header_timeout_ms,
       "a request's header must arrive whole within this (from the first byte; a new "
       "connection's from its accept), else the connection is closed"},
      {"rate-limit", &o.rate_limit,
       "PER_SECOND[:BURST] token bucket per client address, per account and per payer (429 "
       "with Retry-After past it); off: none"},
      {"rate-limit-per-client", &o.rate_limit_per_client,
       "PER_SECOND[:BURST] or off for client addresses only (default: --rate-limit)"},
      {"rate-limit-per-account", &o.rate_limit_per_account,
       "PER_SECOND[:BURST] or off for wallet accounts only (default: --rate-limit)"},
      {"rate-limit-per-payer", &o.rate_limit_per_payer,
       "PER_SECOND[:BURST] or off for x402 payers only (default: --rate-limit)"},
      {"rate-limit-sync-ms", &o.rate_limit_sync_ms,
       "how often the tokens each rate limit took are exchanged with the other gateways of the "
       "database, so that a client over its rate on one is over it on all within about twice "
       "this"},
      {"io-threads", &o.io_threads,
       "threads serving client connections (0: half the CPUs, at least 1)"},
      {"chain-threads", &o.chain_threads,
       "x402: threads making chain calls, each holding one JSON-RPC call at a time (raise it for "
       "a node far away: they bound x402 payments/s to about this / (calls per payment x round "
       "trip))"},
      {"settle-batch-max", &o.settle_batch_max,
       "x402: settle up to this many payments in one transaction (Multicall3 aggregate3, each "
       "payment's call allowed to fail on its own); 1: one transaction per payment. Above 1 the "
       "node must have Multicall3 at 0xcA11bde05977b3631167028862bE2a173976CA11 (checked at "
       "start)"},
      {"settle-batch-window-ms", &o.settle_batch_window_ms,
       "x402: how long the first settlement signed waits for others to share its transaction "
       "(and its broadcast): a payment's receipt comes at most this much later"},
      {"chain", &o.chain, "chain: devnet (built in); see --chain-rpc for any EVM node"},
      {"chain-rpc", &o.chain_rpc,
       "JSON-RPC URL of an EVM node to settle x402 payments on; repeat it for failover between "
       "endpoints of the same chain (each one's chain id is checked at start)"},
      {"chain-id", &o.chain_id, "that node's chain id (checked at start)"},
      {"asset", &o.asset, "the EIP-3009 token (address) x402 payments are made in"},
      {"asset-name", &o.asset_name, "the token's EIP-712 domain name (e.g. USDC)"},
      {"asset-version", &o.asset_version, "the token's EIP-712 domain version (e.g. 2)"},
      {"pay-to", &o.pay_to, "the address x402 payments go to"},
      {"relayer-key-file", &o.relayer_key_file,
       "file holding the 0x-hex private key that submits settlements and pays their gas"},
      {"rpc-timeout-ms", &o.rpc_timeout_ms, "timeout of each JSON-RPC call"},
      {"max-timeout-seconds", &o.max_timeout_seconds,
       "x402 maxTimeoutSeconds advertised (clients sign validBefore = now + this)"},
      {"confirmations", &o.confirmations,
       "x402: blocks deep a settlement's receipt must be before it counts as settled and the "
       "paid response is released (1: the block that includes it)"},
      {"max-fee-per-gas", &o.max_fee_per_gas,
       "x402: the most the relayer pays per gas, in wei (0: no cap); while the chain's base fee "
       "is above it, payments get 503 chain_fees_too_high and nothing is broadcast"},
      {"max-priority-fee-per-gas", &o.max_priority_fee_per_gas,
       "x402: the most the relayer tips per gas, in wei (0: no cap)"},
      {"devnet-mine-delay-ms", &o.devnet_mine_delay_ms,
       "devnet: how long a settlement waits before it is mined"},
      {"expiry-buffer-seconds", &o.expiry_buffer_seconds,
       "an unknown settlement is void this long after validBefore, if its nonce is unused"},
      {"max-in-flight-per-payer", &o.max_in_flight_per_payer,
       "x402 payments of one payer checked or settling at once (429 + Retry-After past it)"},
      {"reconcile-rpc-per-second", &o.reconcile_rpc_per_second,
       "chain calls per second the reconciler may make, all unresolved settlements together"},
      {"replace-after-ms", &o.replace_after_ms,
       "x402: a settlement transaction left unmined this long is replaced at its relayer nonce "
       "with a higher fee, within --max-fee-per-gas and --max-priority-fee-per-gas"},
      {"reorg-watch-ms", &o.reorg_watch_ms,
       "x402: how long a settlement is watched for a reorganisation that removes its block (it "
       "then goes back to unknown and the same transaction settles it again); 0: not watched"},
      {"ca-file", &o.ca_file,
       "PEM file of CA certificates trusted for https upstreams and --chain-rpc, besides the "
       "system's store (which is always used)"},
      {"tls-cert", &o.tls_cert,
       "PEM certificate chain: --listen and --admin-listen serve HTTPS (with --tls-key; both "
       "files are read again on SIGHUP)"},
      {"tls-key", &o.tls_key, "PEM private key of --tls-cert"},
      {"log-format", &o.log_format,
       "text (lines for a person) or json (one object per line: time, level, event, message, "
       "operation_id and other fields)"},
  };
}

std::string TomlKey(std::string name) {
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

Status Invalid(const std::string& message) {
  return Status::Error(ErrorCode::kInvalidConfig, message);
}

Status CheckRange(const char* name, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) {
    return Invalid(std::string("--") + name + " must be between " + std::to_string(low) + " and " +
                   std::to_string(high) + ", got " + std::to_string(value));
  }
  return Status::Ok();
}

Result<int64_t> ParsePrice(const std::string& text, const std::string& where) {
  auto price = ParseAmount(text);
  if (!price || *price == 0) {
    return Invalid(where + ": price must be a positive integer of atomic units, got '" + text +
                   "'");
  }
  return *price;
}

Result<RouteConfig> MakeRoute(std::string prefix, const std::string& upstream,
                              const std::string& price, int64_t timeout_ms, bool require_key,
                              const std::string& settle, const std::string& where) {
  RouteConfig route;
  if (prefix.empty() || prefix[0] != '/') return Invalid(where + ": prefix must start with '/'");
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  // Requests are matched by their normalised path (http/request_target.h): a prefix that is not
  // itself normal ("/a/../b", "/%7Ex", "/a?b") could never match, or not what it says.
  if (auto normal = NormalizeTarget(prefix);
      !normal.ok() || *normal != prefix || prefix.find('?') != std::string::npos) {
    return Invalid(where + ": prefix " + prefix +
                   " is not a normalised path (no '.', '..', '//', '?', or escapes of letters, "
                   "digits and -._~)");
  }
  // Nor one that some upstream reads otherwise (';', a trailing dot, non-ASCII...): the requests
  // that server means by it could not be told apart from the other routes' (T21).
  if (Status stable = CheckRoutePrefix(prefix); !stable.ok()) {
    return Invalid(where + ": " + stable.message());
  }
  route.prefix = prefix;
  auto endpoint = ParseHttpUrl(upstream);
  if (!endpoint.ok()) return Invalid(where + ": " + endpoint.status().message());
  route.upstream_url = upstream;
  route.upstream = *endpoint;
  auto parsed_price = ParsePrice(price, where);
  if (!parsed_price.ok()) return parsed_price.status();
  route.price = *parsed_price;
  if (Status s = CheckRange("upstream-timeout-ms", timeout_ms, 1, kMaxTimeoutMs); !s.ok()) return s;
  route.timeout_ms = timeout_ms;
  route.require_idempotency_key = require_key;
  if (settle == "before") {
    route.settle = SettleTiming::kBefore;
  } else if (settle == "after") {
    route.settle = SettleTiming::kAfter;
  } else {
    return Invalid(where + ": settle must be \"before\" or \"after\"");
  }
  return route;
}

// The fields a [[route]] table may hold.
const std::vector<std::string>& RouteFields() {
  static const std::vector<std::string> fields = {
      "prefix", "upstream", "price", "timeout_ms", "require_idempotency_key", "settle"};
  return fields;
}

// "FILE:LINE: " for messages about a node of the config file.
std::string At(const std::string& file, const toml::source_region& source) {
  return file + ":" + std::to_string(source.begin.line) + ": ";
}

// Every key of `table` must be one of `valid`; the first that is not is refused with the closest
// valid one named (a misspelt key silently ignored is a setting the operator thinks they made).
Status CheckKnownKeys(const toml::table& table, const std::vector<std::string>& valid,
                      const std::string& file, std::string_view what) {
  for (const auto& [key, node] : table) {
    if (std::find(valid.begin(), valid.end(), key.str()) != valid.end()) continue;
    std::string message = UnknownNameMessage(what, key.str(), valid);
    if (key.str().find('-') != std::string_view::npos) {
      message += " (keys in the file use '_' where flags use '-')";
    }
    return Invalid(At(file, key.source()) + message);
  }
  return Status::Ok();
}

// A [[route]] field of one type, or its default when absent; any other type is refused.
template <typename T>
Result<T> RouteField(const toml::table& table, const char* key, T fallback, const char* type_name,
                     const std::string& where) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return fallback;
  if (auto value = node->value_exact<T>()) return *value;
  return Invalid(where + ": '" + key + "' must be " + type_name);
}

Result<std::vector<RouteConfig>> RoutesFromToml(const toml::array& tables, int64_t default_timeout,
                                                const std::string& file) {
  std::vector<RouteConfig> routes;
  for (size_t i = 0; i < tables.size(); ++i) {
    const toml::table* table = tables[i].as_table();
    std::string where = At(file, tables[i].source()) + "[[route]] #" + std::to_string(i + 1);
    if (table == nullptr) return Invalid(where + " is not a table");
    if (Status s = CheckKnownKeys(*table, RouteFields(), file, "[[route]] field"); !s.ok()) {
      return s;
    }
    std::string price;
    if (const toml::node* node = table->get("price")) {
      if (auto text = node->value_exact<std::string>()) {
        price = *text;
      } else if (auto number = node->value_exact<int64_t>()) {
        price = std::to_string(*number);
      } else {
        return Invalid(where + ": 'price' must be a string or an integer of atomic units");
      }
    }
    auto prefix = RouteField<std::string>(*table, "prefix", "/", "a string", where);
    auto upstream = RouteField<std::string>(*table, "upstream", "", "a string", where);
    auto timeout_ms =
        RouteField<int64_t>(*table, "timeout_ms", default_timeout, "an integer", where);
    auto require_key =
        RouteField<bool>(*table, "require_idempotency_key", false, "true or false", where);
    auto settle = RouteField<std::string>(*table, "settle", "before", "a string", where);
    for (const Status* s : {&prefix.status(), &upstream.status(), &timeout_ms.status(),
                            &require_key.status(), &settle.status()}) {
      if (!s->ok()) return *s;
    }
    if (upstream->empty()) return Invalid(where + ": 'upstream' is required");
    auto route = MakeRoute(*prefix, *upstream, price, *timeout_ms, *require_key, *settle, where);
    if (!route.ok()) return route.status();
    for (const auto& existing : routes) {
      if (existing.prefix == route->prefix) {
        return Invalid(where + ": duplicate prefix " + route->prefix);
      }
    }
    routes.push_back(std::move(*route));
  }
  // Two prefixes that a case-insensitive upstream reads alike ("/Pro", "/pro") would each make
  // the other's requests ambiguous: one of them must go.
  std::vector<RoutePrefix> prefixes;
  for (size_t i = 0; i < routes.size(); ++i) prefixes.push_back({routes[i].prefix, i});
  if (auto table = RouteTable::Make(prefixes); !table.ok()) {
    return Invalid(file + ": [[route]] " + table.status().message());
  }
  return routes;
}

// config.public_url: --public-url, else the URL of --listen (https with --tls-cert; a port of 0 is
// replaced by `serve` once bound).
Status ResolvePublicUrl(const ServeOptions& options, GatewayConfig& config) {
  if (!options.public_url.empty()) {
    auto url = ParsePublicUrl(options.public_url);
    if (!url.ok()) return Invalid("--public-url: " + url.status().message());
    config.public_url = *url;
    return Status::Ok();
  }
  auto listen = ParseListenAddress(options.listen);
  if (!listen.ok()) return Invalid("--listen " + options.listen + ": " + listen.status().message());
  config.public_url = ListenerUrl(listen->first, listen->second, !options.tls_cert.empty());
  return Status::Ok();
}

// --chain-rpc and the flags that must come with it.
Status ResolveRpcChain(const ServeOptions& options, ChainConfig& chain) {
  constexpr size_t kMaxRpcEndpoints = 8;
  if (options.chain_rpc.size() > kMaxRpcEndpoints) {
    return Invalid("--chain-rpc: at most " + std::to_string(kMaxRpcEndpoints) + " endpoints");
  }
  for (const std::string& url : options.chain_rpc) {
    auto endpoint = ParseHttpUrl(url);
    if (!endpoint.ok()) return Invalid("--chain-rpc: " + endpoint.status().message());
  }
  const std::pair<const char*, const std::string*> required[] = {
      {"asset", &options.asset},
      {"asset-name", &options.asset_name},
      {"asset-version", &options.asset_version},
      {"pay-to", &options.pay_to},
      {"relayer-key-file", &options.relayer_key_file}};
  for (const auto& [name, value] : required) {
    if (value->empty()) return Invalid(std::string("--chain-rpc needs --") + name);
  }
  if (options.chain_id <= 0 || options.chain_id > (int64_t{1} << 53)) {
    return Invalid("--chain-rpc needs --chain-id between 1 and 2^53");
  }
  auto asset = chain::ParseAddress(options.asset);
  if (!asset.ok()) return Invalid("--asset must be a 0x address of 40 hex digits");
  auto pay_to = chain::ParseAddress(options.pay_to);
  if (!pay_to.ok()) return Invalid("--pay-to must be a 0x address of 40 hex digits");
  chain.chain_id = options.chain_id;
  chain.asset = chain::ToChecksumHex(*asset);
  chain.asset_name = options.asset_name;
  chain.asset_version = options.asset_version;
  chain.pay_to = chain::ToChecksumHex(*pay_to);
  return Status::Ok();
}

}  // namespace

Result<std::vector<WebOrigin>> AdminOriginsOf(const ServeOptions& options) {
  if (options.admin_origin.size() > kMaxAdminOrigins) {
    return Invalid("--admin-origin: at most " + std::to_string(kMaxAdminOrigins) + " origins");
  }
  std::vector<WebOrigin> origins;
  for (const std::string& text : options.admin_origin) {
    auto origin = ParseWebOrigin(text);
    if (!origin.ok()) return Invalid("--admin-origin: " + origin.status().message());
    origins.push_back(*origin);
  }
  return origins;
}

std::optional<RpcChainOptions> RpcChainOf(const ServeOptions& options) {
  if (options.chain_rpc.empty()) return std::nullopt;
  return RpcChainOptions{options.chain_rpc, options.rpc_timeout_ms, options.relayer_key_file};
}

void AddServeFlags(CLI::App& command, ServeOptions& options) {
  command.add_option("--config", options.config_file,
                     "TOML file with any of these settings (keys are the flag names with '_' for "
                     "'-', plus [[route]] tables); a flag given here wins over the file; an "
                     "unknown key is an error");
  for (const Flag& flag : Flags(options)) {
    std::visit(
        [&](auto* target) {
          command.add_option(std::string("--") + flag.name, *target, flag.help)
              ->capture_default_str();
        },
        flag.target);
  }
  command.add_flag("--demo", options.demo,
                   "everything in process for a first look: data in ./agentpay-data, demo seller, "
                   "funded demo account");
}

Result<RateLimit> ParseRateLimit(const std::string& text, const std::string& flag) {
  if (text == "off" || text == "0") return RateLimit{0, 0};
  const size_t colon = text.find(':');
  auto number = [](std::string_view digits) -> std::optional<int64_t> {
    if (digits.empty() || digits.size() > 10) return std::nullopt;
    int64_t value = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + (c - '0');
    }
    return value;
  };
  auto per_second = number(std::string_view(text).substr(0, colon));
  auto burst =
      colon == std::string::npos ? per_second : number(std::string_view(text).substr(colon + 1));
  if (!per_second || !burst || *per_second < 1 || *per_second > kMaxRatePerSecond || *burst < 1 ||
      *burst > kMaxRateBurst) {
    return Invalid("--" + flag + " must be PER_SECOND[:BURST] with both between 1 and " +
                   std::to_string(kMaxRatePerSecond) + ", or off; got '" + text + "'");
  }
  return RateLimit{*per_second, *burst};
}

Result<std::string> ReadSecretFile(const std::string& path, SecretLinks links) {
  // Opened once and checked through that descriptor: what is checked is what is read.
  const int flags =
      O_RDONLY | O_CLOEXEC | O_NONBLOCK | (links == SecretLinks::kRefuse ? O_NOFOLLOW : 0);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP && links == SecretLinks::kRefuse) {
      return Invalid(path +
                     " is a symbolic link; this file is written by agentpay itself and is "
                     "never read through a link: remove the link");
    }
    return Invalid("cannot read " + path + " (" + std::strerror(errno) + ")");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Invalid(path + " is not a regular file");
  }
  // As ssh does with private keys: a secret others can read is no longer a secret.
  if ((info.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Invalid(path + " is accessible by group or others (mode " + mode +
                   "); a secret must be readable by its owner only: chmod 600 " + path);
  }
  if (info.st_uid != ::geteuid() && info.st_uid != 0) {
    ::close(fd);
    return Invalid(path + " is owned by uid " + std::to_string(info.st_uid) +
                   ", not by this user (uid " + std::to_string(::geteuid()) +
                   "): a secret must belong to the user that reads it");
  }
  constexpr size_t kMaxSecretBytes = 64 * 1024;
  std::string secret;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    secret.append(buffer, static_cast<size_t>(n));
    if (secret.size() > kMaxSecretBytes) {
      ::close(fd);
      return Invalid(path + " is larger than " + std::to_string(kMaxSecretBytes) +
                     " bytes: not a token or key file");
    }
  }
  ::close(fd);
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.empty()) return Invalid(path + " is empty");
  return secret;
}

Status WriteSecretFile(const std::string& path, const std::string& content) {
  // A new file (O_EXCL, O_NOFOLLOW: never an existing file, never through a link), 0600 from
  // creation, then renamed over `path`: a link planted at `path` is replaced, not followed.
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(temporary.c_str());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Invalid("cannot create " + temporary + " (" + std::strerror(errno) + ")");
  const std::string text = content + "\n";
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                 ::fsync(fd) == 0;
  written = ::close(fd) == 0 && written;
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    return Invalid("cannot write " + path + " (" + reason + ")");
  }
  return Status::Ok();
}

Status PrepareStoreDirectory(const ServeOptions& options) {
  if (!options.db.starts_with("sqlite:")) return Status::Ok();
  const std::filesystem::path file = options.db.substr(7);
  if (file.empty())
    return Invalid("--db sqlite: needs a path, e.g. sqlite:./agentpay-data/agentpay.db");
  const std::filesystem::path directory = file.has_parent_path() ? file.parent_path() : ".";
  std::error_code ec;
  const auto status = std::filesystem::status(directory, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status)) {
      return Invalid("--db " + options.db + ": " + directory.string() + " is not a directory");
    }
    if (access(directory.c_str(), W_OK | X_OK) != 0) {
      return Invalid("--db " + options.db + ": cannot write in " + directory.string() + " (" +
                     std::strerror(errno) + ")");
    }
    return Status::Ok();
  }
  // ./agentpay-data is the default place whatever the file's name in it; any other directory is
  // the operator's to make (a typo there should not silently scatter data into a new tree).
  if (directory.lexically_normal() != std::filesystem::path(kDataDir)) {
    return Invalid("--db " + options.db + ": the directory " + directory.string() +
                   " does not exist; create it (mkdir -p " + directory.string() +
                   ") or keep the data in ./agentpay-data, which serve creates");
  }
  // The default place is ours to make; private, since it holds keys and the books.
  std::filesystem::create_directories(directory, ec);
  if (ec) return Invalid("cannot create " + directory.string() + ": " + ec.message());
  std::filesystem::permissions(directory, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec) return Invalid("cannot make " + directory.string() + " private: " + ec.message());
  return Status::Ok();
}

namespace {

// Applies the text of --config (named options.config_file in messages): every key must be a flag's
// (with '_' for '-') or a [[route]] table; a flag given on the command line wins over the file.
// Returns the parsed file for its routes.
Result<toml::table> ApplyConfigText(const CLI::App& command, ServeOptions& options,
                                    std::string_view text) {
  const std::string& path = options.config_file;
  toml::table file;
  try {
    file = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    return Invalid(At(path, error.source()) + std::string(error.description()));
  }
  std::vector<std::string> keys = {"route"};
  for (const Flag& flag : Flags(options)) keys.push_back(TomlKey(flag.name));
  if (Status s = CheckKnownKeys(file, keys, path, "key"); !s.ok()) return s;
  if (const toml::node* routes = file.get("route"); routes != nullptr && !routes->is_array()) {
    return Invalid(At(path, routes->source()) +
                   "routes are [[route]] tables (an array of tables), not [route]");
  }
  for (const Flag& flag : Flags(options)) {
    const toml::node* node = file.get(TomlKey(flag.name));
    if (node == nullptr) continue;
    if (command.count(std::string("--") + flag.name) > 0) continue;
    bool ok = std::visit(
        [&](auto* target) {
          using T = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<T, std::string>) {
            if (auto text = node->value_exact<std::string>()) return (*target = *text, true);
            if (auto number = node->value_exact<int64_t>()) {
              return (*target = std::to_string(*number), true);
            }
            return false;
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (auto text = node->value_exact<std::string>()) return (*target = {*text}, true);
            const toml::array* array = node->as_array();
            if (array == nullptr || array->empty()) return false;
            std::vector<std::string> texts;
            for (const toml::node& element : *array) {
              auto text = element.value_exact<std::string>();
              if (!text) return false;
              texts.push_back(*text);
            }
            return (*target = std::move(texts), true);
          } else {
            if (auto number = node->value_exact<int64_t>()) return (*target = *number, true);
            return false;
          }
        },
        flag.target);
    if (!ok) {
      const char* expected = std::holds_alternative<int64_t*>(flag.target) ? "an integer"
                             : std::holds_alternative<std::string*>(flag.target)
                                 ? "a string"
                                 : "a string or a non-empty array of strings";
      return Invalid(At(path, node->source()) + "'" + TomlKey(flag.name) + "' must be " + expected);
    }
  }
  return file;
}

// Reads and applies --config, if given.
Result<std::optional<toml::table>> ApplyConfigFile(const CLI::App& command, ServeOptions& options) {
  if (options.config_file.empty()) return std::optional<toml::table>();
  const std::string& path = options.config_file;
  std::ifstream stream(path);
  if (!stream) {
    return Invalid("--config " + path + ": cannot open it (" + std::strerror(errno) + ")");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Invalid("--config " + path + ": is a directory, not a TOML file");
  }
  std::stringstream text;
  text << stream.rdbuf();
  auto file = ApplyConfigText(command, options, text.str());
  if (!file.ok()) return file.status();
  return std::optional<toml::table>(std::move(*file));
}

// A setting given on the command line or in the file (as opposed to left at its default).
bool Given(const CLI::App& command, const toml::table* file, const char* name) {
  return command.count(std::string("--") + name) > 0 ||
         (file != nullptr && file->contains(TomlKey(name)));
}

// The node's settings mean nothing to the built-in devnet (it has its own token, payee and
// relayer), and the devnet's mean nothing to a node: given on the wrong side, they would be
// silently ignored, so they are refused.
Status CheckChainFlagsApply(const CLI::App& command, const ServeOptions& options,
                            const toml::table* file) {
  if (options.chain_rpc.empty()) {
    for (const char* name : {"chain-id", "asset", "asset-name", "asset-version", "pay-to",
                             "relayer-key-file", "rpc-timeout-ms"}) {
      if (Given(command, file, name)) {
        return Invalid(std::string("--") + name +
                       " applies only with --chain-rpc; the built-in devnet has its own token, "
                       "payee and relayer");
      }
    }
  } else if (Given(command, file, "devnet-mine-delay-ms")) {
    return Invalid(
        "--devnet-mine-delay-ms applies only to the built-in devnet, not with --chain-rpc");
  }
  return Status::Ok();
}

// Validates the options (and the file's routes) into a GatewayConfig; reads no file.
Result<GatewayConfig> ValidateServeOptions(const CLI::App& command, ServeOptions& options,
                                           const std::optional<toml::table>& file) {
  GatewayConfig config;
  struct Range {
    const char* name;
    int64_t value, low, high;
  };
  for (const Range& r :
       {Range{"upstream-timeout-ms", options.upstream_timeout_ms, 1, kMaxTimeoutMs},
        Range{"hold-ttl-ms", options.hold_ttl_ms, 1000, 30LL * 86400 * 1000},
        Range{"retention-ms", options.retention_ms, 0, 365LL * 86400 * 1000},
        Range{"sweep-interval-ms", options.sweep_interval_ms, 10, kMaxTimeoutMs},
        Range{"rate-limit-sync-ms", options.rate_limit_sync_ms, 10, 60000},
        Range{"receipt-timeout-ms", options.receipt_timeout_ms, 1, kMaxTimeoutMs},
        Range{"attach-wait-ms", options.attach_wait_ms, 0, kMaxTimeoutMs},
        Range{"answer-cache-mb", options.answer_cache_mb, 0, 65536},
        Range{"min-idempotency-key-bits", options.min_idempotency_key_bits, 0, 1024},
        Range{"max-body-bytes", options.max_body_bytes, 1, kMaxBodyLimit},
        Range{"max-body-bytes-in-flight", options.max_body_bytes_in_flight, options.max_body_bytes,
              kMaxBodyBytesInFlight},
        Range{"workers", options.workers, 1, 1024},
        Range{"max-connections", options.max_connections, 1, 1000000},
        Range{"max-connections-per-client", options.max_connections_per_client, 1, 1000000},
        Range{"header-timeout-ms", options.header_timeout_ms, 100, kMaxTimeoutMs},
        Range{"io-threads", options.io_threads, 0, 256},
        Range{"chain-threads", options.chain_threads, 1, 256},
        Range{"settle-batch-max", options.settle_batch_max, 1,
              static_cast<int64_t>(chain::kMaxAggregate3Calls)},
        Range{"settle-batch-window-ms", options.settle_batch_window_ms, 0, 1000}}) {
    if (Status s = CheckRange(r.name, r.value, r.low, r.high); !s.ok()) return s;
  }
  if (options.chain != "devnet") {
    return Invalid("--chain " + options.chain +
                   ": the built-in chain is 'devnet'; give --chain-rpc URL for any other node");
  }
  for (const Range& r :
       {Range{"rpc-timeout-ms", options.rpc_timeout_ms, 1, kMaxTimeoutMs},
        Range{"max-timeout-seconds", options.max_timeout_seconds, 10, 86400},
        Range{"expiry-buffer-seconds", options.expiry_buffer_seconds, 0, 86400},
        Range{"max-in-flight-per-payer", options.max_in_flight_per_payer, 1, 100000},
        Range{"reconcile-rpc-per-second", options.reconcile_rpc_per_second, 5, 100000},
        Range{"replace-after-ms", options.replace_after_ms, 1000, kMaxTimeoutMs},
        Range{"reorg-watch-ms", options.reorg_watch_ms, 0, kMaxTimeoutMs},
        Range{"confirmations", options.confirmations, 1, kMaxConfirmations},
        Range{"devnet-mine-delay-ms", options.devnet_mine_delay_ms, 0, kMaxTimeoutMs}}) {
    if (Status s = CheckRange(r.name, r.value, r.low, r.high); !s.ok()) return s;
  }
  config.chain.max_timeout_seconds = options.max_timeout_seconds;
  config.expiry_buffer_seconds = options.expiry_buffer_seconds;
  config.max_in_flight_per_payer = options.max_in_flight_per_payer;
  config.reconcile_rpc_per_second = options.reconcile_rpc_per_second;
  config.replace_after_ms = options.replace_after_ms;
  config.reorg_watch_ms = options.reorg_watch_ms;
  config.chain.confirmations = options.confirmations;
  for (auto [flag, text, target] :
       {std::tuple{"max-fee-per-gas", &options.max_fee_per_gas, &config.chain.max_fee_per_gas},
        std::tuple{"max-priority-fee-per-gas", &options.max_priority_fee_per_gas,
                   &config.chain.max_priority_fee_per_gas}}) {
    auto wei = chain::ParseU256Decimal(*text);
    if (!wei) {
      return Invalid(std::string("--") + flag +
                     " must be a whole number of wei (0: no cap), got '" + *text + "'");
    }
    *target = *wei;
  }
  if (Status s = CheckChainFlagsApply(command, options, file ? &*file : nullptr); !s.ok()) {
    return s;
  }
  if (!options.chain_rpc.empty()) {
    if (Status s = ResolveRpcChain(options, config.chain); !s.ok()) return s;
  }
  if (options.log_format != "text" && options.log_format != "json") {
    return Invalid("--log-format must be json or text");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return Invalid("--tls-cert and --tls-key go together: give both to serve HTTPS, or neither");
  }
  if (Status s = ResolvePublicUrl(options, config); !s.ok()) return s;
  if (auto origins = AdminOriginsOf(options); !origins.ok()) return origins.status();
  if ((options.facilitator_listen != "off") == options.facilitator_sellers_file.empty()) {
    return Invalid(
        "--facilitator-listen and --facilitator-sellers-file go together: give both to run the "
        "facilitator, or neither");
  }
  if (!options.admin_origin.empty() && options.admin_listen == "off") {
    return Invalid("--admin-origin applies to the admin listener, and --admin-listen is off");
  }
  config.hold_ttl_ms = options.hold_ttl_ms;
  config.retention_ms = options.retention_ms;
  config.sweep_interval_ms = options.sweep_interval_ms;
  config.rate_limit_sync_ms = options.rate_limit_sync_ms;
  config.receipt_timeout_ms = options.receipt_timeout_ms;
  config.attach_wait_ms = options.attach_wait_ms;
  config.answer_cache_bytes = static_cast<uint64_t>(options.answer_cache_mb) << 20;
  config.min_idempotency_key_bits = options.min_idempotency_key_bits;
  config.max_body_bytes = static_cast<uint64_t>(options.max_body_bytes);
  auto rate_limit = ParseRateLimit(options.rate_limit, "rate-limit");
  if (!rate_limit.ok()) return rate_limit.status();
  for (auto [flag, text, target] :
       {std::tuple{"rate-limit-per-client", &options.rate_limit_per_client,
                   &config.rate_limits.per_client},
        std::tuple{"rate-limit-per-account", &options.rate_limit_per_account,
                   &config.rate_limits.per_account},
        std::tuple{"rate-limit-per-payer", &options.rate_limit_per_payer,
                   &config.rate_limits.per_payer}}) {
    *target = *rate_limit;
    if (text->empty()) continue;
    auto own = ParseRateLimit(*text, flag);
    if (!own.ok()) return own.status();
    *target = *own;
  }
  config.blocking_threads = static_cast<size_t>(options.workers);
  config.chain_threads = static_cast<size_t>(options.chain_threads);
  config.settle_batch_max = static_cast<size_t>(options.settle_batch_max);
  config.settle_batch_window_ms = options.settle_batch_window_ms;

  const toml::array* route_tables = file ? file->get_as<toml::array>("route") : nullptr;
  if (route_tables != nullptr && (!options.upstream.empty() || !options.price.empty())) {
    return Invalid("give either --upstream/--price or [[route]] tables, not both");
  }
  if (route_tables != nullptr) {
    auto routes = RoutesFromToml(*route_tables, options.upstream_timeout_ms, options.config_file);
    if (!routes.ok()) return routes.status();
    config.routes = std::move(*routes);
  } else if (!options.upstream.empty() || !options.price.empty()) {
    if (options.upstream.empty() || options.price.empty()) {
      return Invalid("--upstream and --price go together");
    }
    auto route = MakeRoute("/", options.upstream, options.price, options.upstream_timeout_ms, false,
                           "before", "--upstream");
    if (!route.ok()) return route.status();
    config.routes.push_back(std::move(*route));
  }
  if (config.routes.empty() && !options.demo && options.facilitator_listen == "off") {
    return Invalid(
        "no paid route: give --upstream URL --price ATOMIC or [[route]] tables (or run only the "
        "facilitator: --facilitator-listen)");
  }
  return config;
}

}  // namespace

Result<GatewayConfig> ResolveServeConfig(const CLI::App& command, ServeOptions& options) {
  auto applied = ApplyConfigFile(command, options);
  if (!applied.ok()) return applied.status();
  auto config = ValidateServeOptions(command, options, *applied);
  if (!config.ok()) return config;
  if (!options.admin_token_file.empty()) {
    auto token = ReadSecretFile(options.admin_token_file);
    if (!token.ok()) return Invalid("--admin-token-file: " + token.status().message());
    config->admin_token = *token;
  }
  return config;
}

Result<GatewayConfig> ResolveServeConfigText(const CLI::App& command, ServeOptions& options,
                                             std::string_view toml_text) {
  auto file = ApplyConfigText(command, options, toml_text);
  if (!file.ok()) return file.status();
  return ValidateServeOptions(command, options, std::optional<toml::table>(std::move(*file)));
}

}  // namespace agentpay
