// See admin_command.h.
#include "cli/admin_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/serve_config.h"
#include "http/client.h"

namespace agentpay {
namespace {

struct AdminOptions {
  std::string url = "http://127.0.0.1:8402";
  std::string token_file = "./agentpay-data/admin-token";
  std::string name, account, amount, reference, settlement, fulfillment;
  std::string operation, outcome, note;
  int limit = 100;
};

int Call(const AdminOptions& options, const std::string& method, const std::string& path,
         const std::string& body) {
  auto endpoint = ParseHttpUrl(options.url);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "agentpay admin: %s\n", endpoint.status().message().c_str());
    return 2;
  }
  auto token = ReadSecretFile(options.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "agentpay admin: %s\n", token.status().message().c_str());
    return 2;
  }
  ClientRequest request;
  request.method = method;
  request.target = endpoint->base_path + path;
  request.headers.push_back({"Authorization", "Bearer " + *token});
  if (!body.empty()) request.headers.push_back({"Content-Type", "application/json"});
  request.body = body;
  ClientResponse response = SendHttp(*endpoint, request, ClientOptions{});
  if (response.error != ClientError::kNone) {
    std::fprintf(stderr, "agentpay admin: %s: %s\n", std::string(ClientErrorName(response.error)).c_str(),
                 response.detail.c_str());
    return 1;
  }
  auto json = nlohmann::json::parse(response.body, nullptr, false);
  std::string shown = json.is_discarded() ? response.body : json.dump(2);
  std::printf("%s\n", shown.c_str());
  return response.status >= 200 && response.status < 300 ? 0 : 1;
}

}  // namespace

std::function<int()> AddAdminCommands(CLI::App& admin) {
  auto options = std::make_shared<AdminOptions>();
  admin.add_option("--url", options->url, "gateway base URL")->capture_default_str();
  admin.add_option("--token-file", options->token_file, "file with the admin token")
      ->capture_default_str();
  admin.require_subcommand(1);

  auto* create = admin.add_subcommand("create-account", "create an account and print its API key");
  create->add_option("name", options->name, "account name")->required();
  auto* deposit = admin.add_subcommand("deposit", "deposit into an account (idempotent by reference)");
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
      "no_action; only refunded moves money: a wallet operation's capture goes back to the wallet)");
  resolve->add_option("operation", options->operation, "operation id")->required();
  resolve->add_option("--outcome", options->outcome, "delivered|refunded|written_off|no_action")
      ->required()
      ->check(CLI::IsMember({"delivered", "refunded", "written_off", "no_action"}));
  resolve->add_option("--note", options->note, "why (1-1000 characters; kept in the audit trail)")
      ->required();

  return [options, create, deposit, show, ops, alerts, resolve]() {
    if (create->parsed()) {
      return Call(*options, "POST", "/admin/v1/accounts",
                  nlohmann::json({{"name", options->name}}).dump());
    }
    if (deposit->parsed()) {
      return Call(*options, "POST", "/admin/v1/accounts/" + options->account + "/deposits",
                  nlohmann::json({{"amount", options->amount}, {"reference", options->reference}})
                      .dump());
    }
    if (show->parsed()) return Call(*options, "GET", "/admin/v1/accounts/" + options->account, "");
    if (alerts->parsed()) {
      return Call(*options, "GET", "/admin/v1/alerts?limit=" + std::to_string(options->limit), "");
    }
    if (resolve->parsed()) {
      return Call(*options, "POST", "/admin/v1/operations/" + options->operation + "/resolve",
                  nlohmann::json({{"outcome", options->outcome}, {"note", options->note}}).dump());
    }
    std::string query = "?limit=" + std::to_string(options->limit);
    if (!options->settlement.empty()) query += "&settlement=" + options->settlement;
    if (!options->fulfillment.empty()) query += "&fulfillment=" + options->fulfillment;
    (void)ops;
    return Call(*options, "GET", "/admin/v1/operations" + query, "");
  };
}

}  // namespace agentpay
