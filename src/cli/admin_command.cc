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

  return [options, create, deposit, show, ops]() {
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
    std::string query = "?limit=" + std::to_string(options->limit);
    if (!options->settlement.empty()) query += "&settlement=" + options->settlement;
    if (!options->fulfillment.empty()) query += "&fulfillment=" + options->fulfillment;
    (void)ops;
    return Call(*options, "GET", "/admin/v1/operations" + query, "");
  };
}

}  // namespace agentpay
