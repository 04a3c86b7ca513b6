// See admin_command.h. Every call prints the answer's JSON on stdout; failures also get one line on
// stderr that names the URL tried, and a replayed call (Idempotent-Replayed: true) says so there.
#include "cli/admin_command.h"

#include <cctype>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/audit_command.h"
#include "cli/serve_config.h"
#include "http/client.h"

namespace agentpay {
namespace {

constexpr char kDemoTokenFile[] = "./agentpay-data/admin-token";

struct AdminOptions {
  std::string url = "http://127.0.0.1:8404";  // serve's default --admin-listen
  std::string token_file = kDemoTokenFile;
  std::string ca_file;  // trusted for an https --url besides the system's store
  std::string name, account, amount, reference, settlement, fulfillment;
  std::string operation, outcome, note;
  int limit = 100;
  bool env = false;  // create-account: shell assignments instead of JSON
  std::string automine, transaction;
  std::string key_id;
  int64_t mine_delay_ms = 0;
};

std::string LowerFirst(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// A value in single quotes, safe for `eval` in any POSIX shell.
std::string ShellQuote(const std::string& value) {
  std::string quoted = "'";
  for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// How the answer is printed on stdout.
enum class Output { kJson, kEnv };

// An id or key as the gateway makes them ("acct_" or "ak_" + hex): the only values --env prints,
// so that whatever a gateway (or whoever stands between it and us) answers, `eval` runs nothing.
bool IsPlainToken(const std::string& value) {
  if (value.empty() || value.size() > 256) return false;
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// Prints `NAME='value'` lines for create-account --env; false (nothing printed) when the answer
// lacks a field or a value is not a plain id.
bool PrintEnv(const nlohmann::json& answer) {
  const std::pair<const char*, const char*> fields[] = {
      {"ACCOUNT_ID", "account_id"}, {"API_KEY", "api_key"}, {"KEY_ID", "key_id"}};
  for (const auto& [variable, field] : fields) {
    if (!answer.is_object() || !answer.contains(field) || !answer[field].is_string() ||
        !IsPlainToken(answer[field].get<std::string>())) {
      return false;
    }
  }
  for (const auto& [variable, field] : fields) {
    std::printf("%s=%s\n", variable, ShellQuote(answer[field].get<std::string>()).c_str());
  }
  return true;
}

void ReportProblem(const std::string& method, const std::string& url, int status,
                   const nlohmann::json& answer) {
  std::string what = std::to_string(status);
  if (answer.is_object() && answer.contains("code") && answer["code"].is_string()) {
    what += " " + answer["code"].get<std::string>();
  }
  if (answer.is_object() && answer.contains("detail") && answer["detail"].is_string()) {
    what += ": " + answer["detail"].get<std::string>();
  }
  std::fprintf(stderr, "agentpay admin: %s %s: %s\n", method.c_str(), url.c_str(), what.c_str());
}

// One exchange with the gateway; `exit` is non-zero when no answer came (already reported).
struct Exchange {
  int exit = 0;
  std::string url;
  ClientResponse response;
};

Exchange Send(const AdminOptions& options, const std::string& method, const std::string& path,
              const std::string& body) {
  Exchange exchange;
  auto endpoint = ParseHttpUrl(options.url);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "agentpay admin: --url %s: %s\n", options.url.c_str(),
                 endpoint.status().message().c_str());
    exchange.exit = 2;
    return exchange;
  }
  auto trust = TlsTrust::Load(options.ca_file);
  if (!trust.ok()) {
    std::fprintf(stderr, "agentpay admin: %s\n", trust.status().message().c_str());
    exchange.exit = 2;
    return exchange;
  }
  std::string base = options.url;
  while (base.ends_with("/")) base.pop_back();
  exchange.url = base + path;
  auto token = ReadSecretFile(options.token_file);
  if (!token.ok()) {
    std::fprintf(stderr,
                 "agentpay admin: cannot read the admin token from %s (%s); `agentpay serve "
                 "--demo` writes one at %s, otherwise give --token-file with the file the "
                 "gateway was started with (--admin-token-file)\n",
                 options.token_file.c_str(), token.status().message().c_str(), kDemoTokenFile);
    exchange.exit = 2;
    return exchange;
  }
  ClientRequest request;
  request.method = method;
  request.target = endpoint->base_path + path;
  request.headers.push_back({"Authorization", "Bearer " + *token});
  if (!body.empty()) request.headers.push_back({"Content-Type", "application/json"});
  request.body = body;
  ClientOptions client;
  client.trust = *trust;
  exchange.response = SendHttp(*endpoint, request, client);
  const ClientResponse& response = exchange.response;
  if (response.error == ClientError::kConnect || response.error == ClientError::kTls) {
    std::fprintf(stderr, "agentpay admin: cannot reach %s: %s\n", exchange.url.c_str(),
                 LowerFirst(response.detail).c_str());
    exchange.exit = 1;
  } else if (response.error != ClientError::kNone) {
    std::fprintf(stderr, "agentpay admin: no complete answer from %s %s (%s: %s)\n", method.c_str(),
                 exchange.url.c_str(), std::string(ClientErrorName(response.error)).c_str(),
                 LowerFirst(response.detail).c_str());
    exchange.exit = 1;
  }
  return exchange;
}

// A GET's JSON answer, or nullopt (reported on stderr) when it failed or was not a 2xx.
std::optional<nlohmann::json> GetJson(const AdminOptions& options, const std::string& path) {
  Exchange exchange = Send(options, "GET", path, "");
  if (exchange.exit != 0) return std::nullopt;
  auto json = nlohmann::json::parse(exchange.response.body, nullptr, false);
  const int status = exchange.response.status;
  if (status < 200 || status >= 300 || json.is_discarded()) {
    ReportProblem("GET", exchange.url, status, json);
    return std::nullopt;
  }
  return json;
}

int Call(const AdminOptions& options, const std::string& method, const std::string& path,
         const std::string& body, Output output = Output::kJson) {
  Exchange exchange = Send(options, method, path, body);
  if (exchange.exit != 0) return exchange.exit;
  const std::string& url = exchange.url;
  const ClientResponse& response = exchange.response;
  auto json = nlohmann::json::parse(response.body, nullptr, false);
  const bool ok = response.status >= 200 && response.status < 300;
  if (!ok) ReportProblem(method, url, response.status, json);
  if (output == Output::kEnv) {
    // Nothing but the assignments on stdout: an error answer would be run by `eval`.
    if (ok && !PrintEnv(json)) {
      std::fprintf(stderr,
                   "agentpay admin: %s %s: the answer has no plain account_id and api_key; "
                   "nothing printed for the shell\n",
                   method.c_str(), url.c_str());
      return 1;
    }
  } else {
    std::printf("%s\n", json.is_discarded() ? response.body.c_str() : json.dump(2).c_str());
  }
  for (const HttpHeader& header : response.headers) {
    if (ok && HeaderNameEquals(header.name, "Idempotent-Replayed") && header.value == "true") {
      std::fprintf(stderr,
                   "agentpay admin: replayed (Idempotent-Replayed: true): the gateway had "
                   "already done this very call, nothing changed now\n");
    }
  }
  return ok ? 0 : 1;
}

// POST of a JSON body built from the command line; an argument that is not UTF-8 is refused here
// (nlohmann would throw) rather than sent mangled.
int PostJson(const AdminOptions& options, const std::string& path, const nlohmann::json& body,
             Output output = Output::kJson) {
  std::string text;
  try {
    text = body.dump();
  } catch (const nlohmann::json::type_error&) {
    std::fprintf(stderr, "agentpay admin: an argument is not valid UTF-8; nothing was sent\n");
    return 2;
  }
  return Call(options, "POST", path, text, output);
}

// An account or operation id on the command line goes into a URL path: only the characters ids
// are made of.
bool CheckId(const char* what, const std::string& id) {
  if (IsPlainToken(id)) return true;
  std::fprintf(stderr, "agentpay admin: %s takes letters, digits, _ and - only, got '%s'\n", what,
               id.c_str());
  return false;
}

// `agentpay admin api-keys ...`: rotation (create a new key, move clients, revoke the old one) and
// revocation of an account's API keys.
struct ApiKeyCommands {
  CLI::App* keys = nullptr;
  CLI::App* list = nullptr;
  CLI::App* create = nullptr;
  CLI::App* revoke = nullptr;
};

ApiKeyCommands AddApiKeyCommands(CLI::App& admin, AdminOptions& options) {
  ApiKeyCommands c;
  c.keys = admin.add_subcommand(
      "api-keys",
      "an account's API keys: list them, create a new one (rotation: the old keys keep working "
      "until revoked), revoke one (refused by every gateway process within a second)");
  c.keys->require_subcommand(1);
  c.list = c.keys->add_subcommand("list", "the account's keys (ids and times, never the keys)");
  c.list->add_option("account", options.account, "account id")->required();
  c.create = c.keys->add_subcommand("create", "a new key for the account, printed once");
  c.create->add_option("account", options.account, "account id")->required();
  c.create->add_flag("--env", options.env,
                     "print ACCOUNT_ID='...', API_KEY='...' and KEY_ID='...' lines instead of JSON");
  c.revoke = c.keys->add_subcommand("revoke", "revoke one key (idempotent)");
  c.revoke->add_option("account", options.account, "account id")->required();
  c.revoke->add_option("key_id", options.key_id, "the key's id (key_...), from list or create")
      ->required();
  return c;
}

int RunApiKeys(const ApiKeyCommands& c, const AdminOptions& options) {
  if (!CheckId("ACCOUNT", options.account)) return 2;
  const std::string path = "/admin/v1/accounts/" + options.account + "/api-keys";
  if (c.list->parsed()) return Call(options, "GET", path, "");
  if (c.create->parsed()) {
    return Call(options, "POST", path, "", options.env ? Output::kEnv : Output::kJson);
  }
  if (!CheckId("KEY_ID", options.key_id)) return 2;
  return Call(options, "DELETE", path + "/" + options.key_id, "");
}

// `agentpay admin devnet ...`: the built-in devnet's controls (GET/POST /admin/v1/devnet).
struct DevnetCommands {
  CLI::App* devnet = nullptr;
  CLI::App* show = nullptr;
  CLI::App* automine = nullptr;
  CLI::App* mine = nullptr;
  CLI::App* drop = nullptr;
  CLI::App* mine_delay = nullptr;
};

DevnetCommands AddDevnetCommands(CLI::App& admin, AdminOptions& options) {
  DevnetCommands c;
  c.devnet = admin.add_subcommand(
      "devnet",
      "the built-in devnet of `serve` (demo chain): show it, hold settlements back, "
      "mine, drop a pending transaction; without a subcommand: show");
  c.devnet->require_subcommand(0, 1);
  c.show = c.devnet->add_subcommand("show", "block number and latest block time");
  c.automine = c.devnet->add_subcommand(
      "automine",
      "on: transactions are mined once the mine delay has passed; off: only by "
      "`mine` (the gateway then answers 202 settlement_unknown)");
  c.automine->add_option("state", options.automine, "on or off")
      ->required()
      ->check(CLI::IsMember({"on", "off"}));
  c.mine = c.devnet->add_subcommand("mine", "mine one block now with every pending transaction");
  c.drop = c.devnet->add_subcommand(
      "drop", "remove a pending transaction from the pool, as if the node had lost it");
  c.drop->add_option("transaction", options.transaction, "the transaction hash (0x + 64 hex)")
      ->required();
  c.mine_delay = c.devnet->add_subcommand(
      "mine-delay", "how long after it arrives a transaction is mined (applies to later ones)");
  c.mine_delay->add_option("milliseconds", options.mine_delay_ms, "0 to 3600000")->required();
  return c;
}

int RunDevnet(const DevnetCommands& c, const AdminOptions& options) {
  constexpr char kPath[] = "/admin/v1/devnet";
  nlohmann::json body;
  if (c.automine->parsed()) {
    body["automine"] = options.automine == "on";
  } else if (c.mine->parsed()) {
    body["mine"] = true;
  } else if (c.drop->parsed()) {
    body["drop"] = options.transaction;
  } else if (c.mine_delay->parsed()) {
    body["mine_delay_ms"] = options.mine_delay_ms;
  } else {
    return Call(options, "GET", kPath, "");
  }
  return PostJson(options, kPath, body);
}

}  // namespace

std::function<int()> AddAdminCommands(CLI::App& admin) {
  auto options = std::make_shared<AdminOptions>();
  admin
      .add_option("--url", options->url,
                  "the gateway's admin listener (serve --admin-listen), not its public --listen")
      ->capture_default_str();
  admin
      .add_option("--token-file", options->token_file,
                  "file with the admin token (`serve --demo` writes ./agentpay-data/admin-token)")
      ->capture_default_str();
  admin.add_option("--ca-file", options->ca_file,
                   "PEM file of CA certificates trusted for an https --url (and audit --chain-rpc) "
                   "besides the system's "
                   "store");
  admin.require_subcommand(1);

  auto* create = admin.add_subcommand("create-account", "create an account and print its API key");
  create->add_option("name", options->name, "account name")->required();
  create->add_flag("--env", options->env,
                   "print ACCOUNT_ID='...' and API_KEY='...' lines instead of JSON, for "
                   "eval \"$(agentpay admin create-account NAME --env)\"");
  auto* deposit = admin.add_subcommand(
      "deposit", "deposit into an account (idempotent by reference: a repeat says it replayed)");
  deposit->add_option("account", options->account, "account id")->required();
  deposit->add_option("amount", options->amount, "atomic units")->required();
  deposit->add_option("--reference", options->reference, "unique reference of this deposit")
      ->required();
  auto* show = admin.add_subcommand("account", "show an account's balances");
  show->add_option("account", options->account, "account id")->required();
  auto* ops = admin.add_subcommand("operations", "list operations, newest first");
  ops->add_option("--settlement", options->settlement, "filter by settlement state");
  ops->add_option("--fulfillment", options->fulfillment, "filter by fulfillment state");
  ops->add_option("--limit", options->limit, "at most this many (1-1000)");
  auto* alerts = admin.add_subcommand("alerts", "list alerts, newest first");
  alerts->add_option("--limit", options->limit, "at most this many (1-1000)");
  auto* resolve = admin.add_subcommand(
      "resolve",
      "resolve an operation's open alerts (idempotent; outcomes: delivered, refunded, written_off, "
      "no_action; only refunded moves money: a wallet operation's capture goes back to the "
      "wallet)");
  resolve->add_option("operation", options->operation, "operation id")->required();
  resolve->add_option("--outcome", options->outcome, "delivered|refunded|written_off|no_action")
      ->required()
      ->check(CLI::IsMember({"delivered", "refunded", "written_off", "no_action"}));
  resolve->add_option("--note", options->note, "why (1-1000 characters; kept in the audit trail)")
      ->required();
  auto* audit = admin.add_subcommand(
      "audit",
      "check the books: conservation per account and in total, one charge per key, one payment "
      "per authorization, holds within their TTL, settled operations accounted for; with "
      "--chain-rpc also every settled x402 payment's Transfer on chain. Exit 1 on a violation");
  auto audit_options = std::make_shared<AuditCommandOptions>();
  audit->add_flag("--json", audit_options->json, "print the report as JSON instead of a table");
  audit->add_option("--chain-rpc", audit_options->chain_rpc,
                    "JSON-RPC URL of a node of the gateway's chain (repeat for failover): check "
                    "each settled x402 payment's transaction there");
  const DevnetCommands devnet = AddDevnetCommands(admin, *options);
  const ApiKeyCommands api_keys = AddApiKeyCommands(admin, *options);

  return [options, create, deposit, show, ops, alerts, resolve, audit, audit_options, devnet,
          api_keys]() {
    if (api_keys.keys->parsed()) return RunApiKeys(api_keys, *options);
    if (audit->parsed()) {
      audit_options->ca_file = options->ca_file;
      return RunAudit(*audit_options,
                      [options](const std::string& path) { return GetJson(*options, path); });
    }
    if (create->parsed()) {
      return PostJson(*options, "/admin/v1/accounts", nlohmann::json({{"name", options->name}}),
                      options->env ? Output::kEnv : Output::kJson);
    }
    if ((deposit->parsed() || show->parsed()) && !CheckId("ACCOUNT", options->account)) return 2;
    if (resolve->parsed() && !CheckId("OPERATION", options->operation)) return 2;
    if (deposit->parsed()) {
      return PostJson(
          *options, "/admin/v1/accounts/" + options->account + "/deposits",
          nlohmann::json({{"amount", options->amount}, {"reference", options->reference}}));
    }
    if (show->parsed()) return Call(*options, "GET", "/admin/v1/accounts/" + options->account, "");
    if (alerts->parsed()) {
      return Call(*options, "GET", "/admin/v1/alerts?limit=" + std::to_string(options->limit), "");
    }
    if (resolve->parsed()) {
      return PostJson(*options, "/admin/v1/operations/" + options->operation + "/resolve",
                      nlohmann::json({{"outcome", options->outcome}, {"note", options->note}}));
    }
    if (devnet.devnet->parsed()) return RunDevnet(devnet, *options);
    for (const auto& [what, value] :
         {std::pair<const char*, const std::string*>{"--settlement", &options->settlement},
          {"--fulfillment", &options->fulfillment}}) {
      if (!value->empty() && !CheckId(what, *value)) return 2;
    }
    std::string query = "?limit=" + std::to_string(options->limit);
    if (!options->settlement.empty()) query += "&settlement=" + options->settlement;
    if (!options->fulfillment.empty()) query += "&fulfillment=" + options->fulfillment;
    (void)ops;
    return Call(*options, "GET", "/admin/v1/operations" + query, "");
  };
}

}  // namespace agentpay
