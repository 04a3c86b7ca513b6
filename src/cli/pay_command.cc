// See pay_command.h. Flags become client::PayOptions; progress and the outcome go to stderr in
// plain words, the response body to stdout, or, with --json, one JSON object to stdout.
#include "cli/pay_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "agentpay/client.h"
#include "chain/bytes.h"
#include "cli/payment_flags.h"
#include "cli/serve_config.h"
#include "client/json_views.h"
#include "core/money.h"
#include "x402/wire.h"

namespace agentpay {
namespace {

using Json = nlohmann::json;

struct PayFlags {
  PaymentFlags payment;  // how it pays (shared with `agentpay mcp`)
  client::PayOptions& options = payment.options;
  std::vector<std::string> headers;
  bool json = false;
  CLI::Option* method = nullptr;
  CLI::Option* data = nullptr;
  client::ReconcileOptions reconcile;
  std::string list_db = std::string(client::kDefaultBudgetDb);
  bool list_json = false, reconcile_json = false;
};

void Say(std::string_view line) {
  std::fprintf(stderr, "agentpay pay: %.*s\n", static_cast<int>(line.size()), line.data());
}

bool Fail(std::string_view line) {
  Say(line);
  return false;
}

// Usage errors exit 2, as CLI11's own do in main.cc (nothing was paid).
constexpr int kUsage = 2;

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Reads the secret files and the text flags into the options; false (after saying why) on error.
bool Resolve(PayFlags& flags) {
  client::PayOptions& o = flags.options;
  if (Status s = ResolvePaymentFlags(flags.payment); !s.ok()) return Fail(s.message());
  for (const std::string& header : flags.headers) {
    auto colon = header.find(':');
    if (colon == std::string::npos || colon == 0) {
      return Fail("--header must look like 'Name: value', got '" + header + "'");
    }
    std::string value = header.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    o.headers.emplace_back(header.substr(0, colon), value);
  }
  // Like curl: a request with a body is a POST unless --method says otherwise.
  if (flags.data->count() > 0 && flags.method->count() == 0) o.method = "POST";
  return true;
}

int RunPayFlags(PayFlags& flags) {
  if (!Resolve(flags)) return kUsage;
  client::PayResult result = client::Pay(flags.options, Say);
  if (flags.json) {
    std::printf("%s\n", Dump(client::PayResultJson(result, false)).c_str());
  } else if (result.exit_code == client::ExitCode::kPaid) {
    std::fwrite(result.body.data(), 1, result.body.size(), stdout);
    if (!result.body.empty() && result.body.back() != '\n') std::fputc('\n', stdout);
  }
  Say(result.message);
  return static_cast<int>(result.exit_code);
}

int RunBudget(const PayFlags& flags) {
  client::BudgetReport report = client::ReadBudget(flags.list_db);
  if (!report.error.empty()) {
    Say(report.error);
    return static_cast<int>(client::ExitCode::kError);
  }
  const client::BudgetAssetView& asset = report.asset;
  if (flags.list_json) {
    std::printf("%s\n", Dump(client::BudgetReportJson(report)).c_str());
    return 0;
  }
  std::printf("budget %s: total %lld, committed %lld (spent %lld), available %lld\n",
              flags.list_db.c_str(), static_cast<long long>(report.total),
              static_cast<long long>(report.committed), static_cast<long long>(report.spent),
              static_cast<long long>(report.total - report.committed));
  std::string asset_words = "not bound yet (the first payment binds it)";
  if (asset.state == "mixed")
    asset_words = "several (a file from before budgets named their asset)";
  if (asset.state == "bound") {
    asset_words = asset.address + " on eip155:" + std::to_string(asset.chain_id);
    if (!asset.name.empty()) asset_words += " (" + asset.name + ")";
    if (asset.decimals) asset_words += ", " + std::to_string(*asset.decimals) + " decimals";
  }
  std::printf("asset: %s\n", asset_words.c_str());
  for (const client::Reservation& r : report.reservations) {
    std::printf("%-9s %10lld  %-6s %s %s  key %s%s%s\n", r.state.c_str(),
                static_cast<long long>(r.amount), r.scheme.c_str(), r.method.c_str(), r.url.c_str(),
                r.key.c_str(), r.note.empty() ? "" : "\n          ", r.note.c_str());
  }
  return 0;
}

int RunReconcile(const PayFlags& flags) {
  client::ReconcileReport report = client::Reconcile(flags.reconcile, Say);
  if (!report.error.empty()) {
    Say(report.error);
    return static_cast<int>(client::ExitCode::kError);
  }
  if (flags.reconcile_json) {
    std::printf("%s\n", Dump(client::ReconcileReportJson(report)).c_str());
  }
  Say(std::to_string(report.changes.size()) + " reservation(s) settled, " +
      std::to_string(report.kept.size()) + " still open; committed " +
      std::to_string(report.committed) + " of " + std::to_string(report.total));
  // 3: some outcomes are still unknown (run again later), like `pay` itself.
  return report.kept.empty() ? 0 : static_cast<int>(client::ExitCode::kUnknown);
}

void AddPayFlags(CLI::App& pay, PayFlags& f) {
  client::PayOptions& o = f.options;
  pay.add_option("url", o.url, "the paid URL (http:// or https://HOST[:PORT]/PATH)");
  f.method = pay.add_option("--method,-X", o.method, "HTTP method (default GET, POST with --data)");
  f.data = pay.add_option("--data,-d", o.body, "request body");
  pay.add_option("--header,-H", f.headers, "extra request header 'Name: value' (repeatable)");
  AddPaymentFlags(pay, f.payment, /*with_api_key_flag=*/true);
  auto* task = pay.add_option("--task", o.task, "the agent's task name (key derivation)");
  auto* step = pay.add_option("--step", o.step, "the step number within the task (key derivation)");
  auto* key = pay.add_option("--idempotency-key", o.idempotency_key,
                             "the key naming this business action, instead of --task/--step");
  task->needs(step);
  step->needs(task);
  key->excludes(task)->excludes(step);
  pay.add_flag("--json", f.json, "print one JSON object on stdout instead of the body");
}

}  // namespace

std::function<int()> AddPayCommand(CLI::App& pay) {
  auto flags = std::make_shared<PayFlags>();
  pay.footer(
      "Exit codes: 0 paid and served; 1 could not run (nothing reserved or paid); 2 rejected: by "
      "the server, or refused by this client because the offer is outside --x402-version, "
      "--network, --chain-rpc's chain, --asset, --payee, --max-amount or the budget file's asset "
      "(nothing reserved, signed or sent), or bad flags; 3 outcome unknown (state kept for "
      "`agentpay pay reconcile`); 4 over budget (nothing sent).\n"
      "A budget file counts in one asset (network and token), bound by its first payment.\n"
      "The key of --task T --step N is \"task:\" + first 32 hex digits of HMAC-SHA256(credential, "
      "len(T):T:N) + \":step:\" + N, the credential being the buyer key (0x + lower-case hex) or "
      "the API key: only its payer can compute it. See docs/agent-client.md.");
  AddPayFlags(pay, *flags);
  CLI::App* budget = pay.add_subcommand("budget", "list the budget file's reservations");
  // CLI11 copies a parent's footer into each subcommand made after it: without a footer of their
  // own, `pay budget --help` and `pay reconcile --help` would print pay's exit codes and --task.
  // Options are not inherited (no fallthrough), so each help lists only its own flags.
  budget->footer("Exit codes: 0 listed, 1 the budget file could not be read.");
  budget->add_option("--budget-db", flags->list_db, "the budget file")->capture_default_str();
  budget->add_flag("--json", flags->list_json, "one JSON object on stdout");
  CLI::App* reconcile =
      pay.add_subcommand("reconcile", "settle the reservations whose outcome is unknown");
  reconcile->footer(
      "An x402 reservation is released only once its authorization has expired (validBefore plus "
      "--expiry-buffer-seconds) and the chain confirms it was never used; if the chain says it "
      "was used, it is spent. A wallet reservation follows the gateway's operation (settled: "
      "spent; released: released).\n"
      "Exit codes: 0 nothing left open, 1 could not run, 3 some outcomes still unknown (run it "
      "again later). See docs/agent-client.md.");
  reconcile->add_option("--budget-db", flags->reconcile.budget_db, "the budget file")
      ->capture_default_str();
  reconcile->add_option("--chain-rpc", flags->reconcile.chain_rpc,
                        "EVM JSON-RPC URL (needed for x402 reservations)");
  reconcile->add_option("--ca-file", flags->reconcile.ca_file,
                        "PEM file of CA certificates trusted for https URLs besides the system's "
                        "store");
  reconcile->add_option("--api-key", flags->reconcile.api_key,
                        "the wallet API key the payments were made with (needed for wallet "
                        "reservations: the gateway shows an operation only to its account)");
  reconcile
      ->add_option("--expiry-buffer-seconds", flags->reconcile.expiry_buffer_seconds,
                   "seconds after validBefore before an unused authorization is released")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  reconcile->add_flag("--json", flags->reconcile_json, "one JSON object on stdout");
  return [flags, budget, reconcile]() -> int {
    if (budget->parsed()) return RunBudget(*flags);
    if (reconcile->parsed()) return RunReconcile(*flags);
    if (flags->options.url.empty()) {
      Say("give the URL to pay for (agentpay pay --help)");
      return kUsage;
    }
    return RunPayFlags(*flags);
  };
}

}  // namespace agentpay
