// See payment_flags.h.
#include "cli/payment_flags.h"

#include "chain/bytes.h"
#include "cli/serve_config.h"
#include "core/money.h"
#include "x402/wire.h"

namespace agentpay {
namespace {

// Flag checks: a bad spend control is a usage error, found before anything is sent.
CLI::Validator AddressCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return chain::ParseAddress(value).ok() ? "" : "not an address (0x + 40 hex digits)";
      },
      "ADDRESS");
}

CLI::Validator NetworkCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return x402::ChainIdForNetwork(value) ? "" : "not a network: give eip155:<chain id>";
      },
      "NETWORK");
}

Status Invalid(std::string message) {
  return Status::Error(ErrorCode::kInvalidConfig, std::move(message));
}

}  // namespace

void AddPaymentFlags(CLI::App& app, PaymentFlags& f, bool with_api_key_flag) {
  client::PayOptions& o = f.options;
  auto* api_key_file =
      app.add_option("--api-key-file", f.api_key_file, "file holding the wallet API key");
  auto* buyer = app.add_option("--buyer-key-file", f.buyer_key_file,
                               "pay with x402: file holding the buyer's private key (0x + 64 hex)");
  api_key_file->excludes(buyer);
  if (with_api_key_flag) {
    f.api_key = app.add_option("--api-key", o.api_key, "pay from a wallet: the account's API key");
    f.api_key->excludes(api_key_file)->excludes(buyer);
  }
  app.add_option("--budget-db", o.budget_db, "the budget file (shared by concurrent runs)")
      ->capture_default_str();
  app.add_option(
      "--budget", f.budget_text,
      "total of the budget file in atomic units; required to create it, must match after");
  app.add_option("--max-attempts", o.max_attempts, "paid sends at most, the first included")
      ->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "deadline of the whole run, polling included")
      ->capture_default_str();
  app.add_option("--attempt-timeout-ms", o.attempt_timeout_ms, "deadline of one HTTP exchange")
      ->capture_default_str();
  app.add_option("--x402-version", o.x402_version,
                 "1 or 2 (default: 2 when the server offers it, else 1); a version that cannot "
                 "name the offered network is refused before anything is signed")
      ->check(CLI::IsMember({1, 2}));
  app.add_option("--asset", o.assets,
                 "pay only an offer in this token, 0x + 40 hex (repeatable; default: any); others "
                 "are refused before anything is reserved")
      ->check(AddressCheck());
  app.add_option("--payee", o.payees,
                 "x402: pay only this address (the offer's payTo), 0x + 40 hex (repeatable; "
                 "default: any)")
      ->check(AddressCheck());
  app.add_option("--max-amount", f.max_amount_text,
                 "the most one payment may cost, in atomic units (default " +
                     std::to_string(client::kDefaultMaxAmount) +
                     ": 1.00 of a 6-decimal token); a dearer offer is refused");
  app.add_option("--network", o.networks,
                 "pay only an offer on this network, eip155:<chain id> (repeatable; default: any); "
                 "others are refused before anything is reserved")
      ->check(NetworkCheck());
  app.add_option("--chain-rpc", o.chain_rpc,
                 "EVM JSON-RPC URL: evidence on chain when a paid answer was lost; when given, "
                 "only an offer on the chain it serves is paid");
  app.add_option("--ca-file", o.ca_file,
                 "PEM file of CA certificates trusted for https URLs besides the system's store; "
                 "a server whose certificate does not verify is never paid");
}

Status ResolvePaymentFlags(PaymentFlags& flags) {
  client::PayOptions& o = flags.options;
  if (!flags.budget_text.empty()) {
    auto amount = ParseAmount(flags.budget_text);
    if (!amount) return Invalid("--budget must be a whole number of atomic units");
    o.budget = *amount;
  }
  if (!flags.max_amount_text.empty()) {
    auto amount = ParseAmount(flags.max_amount_text);
    if (!amount || *amount <= 0) {
      return Invalid("--max-amount must be a positive whole number of atomic units");
    }
    o.max_amount = *amount;
  }
  for (auto [file, target] : {std::pair{&flags.api_key_file, &o.api_key},
                              std::pair{&flags.buyer_key_file, &o.buyer_key}}) {
    if (file->empty()) continue;
    auto secret = ReadSecretFile(*file);
    if (!secret.ok()) return Invalid(secret.status().message());
    *target = *secret;
  }
  if (o.max_attempts < 1 || o.timeout_ms < 1 || o.attempt_timeout_ms < 1) {
    return Invalid("--max-attempts, --timeout-ms and --attempt-timeout-ms must be positive");
  }
  return Status::Ok();
}

}  // namespace agentpay
