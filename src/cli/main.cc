// `agentpay`: one binary, one subcommand per face of the product (CONTRACT §2).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/admin_command.h"
#include "cli/seller.h"
#include "cli/serve.h"

int main(int argc, char** argv) {
  CLI::App app{"AgentPay: a payment gateway for AI agents that never charges twice"};
  app.require_subcommand(1);

  agentpay::ServeOptions serve_options;
  CLI::App* serve = app.add_subcommand("serve", "run the gateway");
  agentpay::AddServeFlags(*serve, serve_options);

  std::string seller_listen = "127.0.0.1:8403";
  std::string seller_fault = "ok";
  CLI::App* seller = app.add_subcommand("seller", "run the demo seller upstream");
  seller->add_option("--listen", seller_listen, "HOST:PORT")->capture_default_str();
  seller->add_option("--fault", seller_fault, "ok, 4xx, 5xx, slow:MS, hang or drop")
      ->capture_default_str();

  CLI::App* admin = app.add_subcommand("admin", "admin calls over HTTP");
  auto run_admin = agentpay::AddAdminCommands(*admin);

  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return agentpay::RunServe(*serve, serve_options);
  if (seller->parsed()) return agentpay::RunSeller(seller_listen, seller_fault);
  if (admin->parsed()) return run_admin();
  return 2;
}
