// `agentpay`: one binary, one subcommand per face of the product (CONTRACT §2).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/admin_command.h"
#include "cli/mcp_command.h"
#include "cli/pay_command.h"
#include "cli/seller.h"
#include "cli/serve.h"
#include "cli/sim_command.h"

int main(int argc, char** argv) {
  // Every file agentpay creates (databases, the demo's token and key files, instance locks, the
  // budget file) is its user's alone, whatever each creation site asks for (issue 13).
  ::umask(077);
  // Named, not taken from argv[0]: usage lines then read as the docs write them, without the
  // path the binary was started from.
  CLI::App app{"AgentPay: a payment gateway for AI agents that never charges twice", "agentpay"};
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

  CLI::App* pay = app.add_subcommand("pay", "the agent client: pay for one request");
  auto run_pay = agentpay::AddPayCommand(*pay);

  CLI::App* mcp = app.add_subcommand(
      "mcp", "the agent client as an MCP server: tools pay_request, budget, reconcile");
  auto run_mcp = agentpay::AddMcpCommand(*mcp);

  CLI::App* sim = app.add_subcommand("sim", "run the request/effect model (docs/request-effect-model.md)");
  auto run_sim = agentpay::AddSimCommand(*sim);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version print and succeed; every other parse error is a usage error: exit 2,
    // whatever code CLI11 gives it (agentpay pay reserves 3 and 4 for payment outcomes).
    return app.exit(error) == 0 ? 0 : 2;
  }
  if (serve->parsed()) return agentpay::RunServe(*serve, serve_options);
  if (seller->parsed()) return agentpay::RunSeller(seller_listen, seller_fault);
  if (admin->parsed()) return run_admin();
  if (pay->parsed()) return run_pay();
  if (mcp->parsed()) return run_mcp();
  if (sim->parsed()) return run_sim();
  return 2;
}
