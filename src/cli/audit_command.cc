// See audit_command.h.
#include "cli/audit_command.h"

#include <cstdio>

#include "chain/rpc_chain.h"
#include "chain/settlement_tx.h"
#include "core/audit.h"
#include "core/money.h"
#include "http/client.h"

namespace agentpay {
namespace {

// Settled payments asked for per page, and how often progress is printed on stderr.
constexpr int kPaymentPage = 1000;
constexpr int64_t kProgressEvery = 1000;
constexpr int64_t kRpcTimeoutMs = 10000;

// The chain check's outcome: the chain_transfers row and its violations, or why it stopped.
struct ChainCheck {
  AuditReport report;
  std::string error;  // non-empty: not completed
};

std::string Text(const nlohmann::json& value, const char* field) {
  if (!value.is_object() || !value.contains(field) || !value[field].is_string()) return "";
  return value[field].get<std::string>();
}

ChainCheck CheckChain(const AuditCommandOptions& options, const nlohmann::json& gateway,
                      const AdminGet& get) {
  ChainCheck check;
  std::vector<Endpoint> endpoints;
  for (const std::string& url : options.chain_rpc) {
    auto endpoint = ParseHttpUrl(url);
    if (!endpoint.ok()) {
      check.error = "--chain-rpc " + url + ": " + endpoint.status().message();
      return check;
    }
    endpoints.push_back(*endpoint);
  }
  auto trust = TlsTrust::Load(options.ca_file);
  if (!trust.ok()) {
    check.error = trust.status().message();
    return check;
  }
  const nlohmann::json& chain_json = gateway["chain"];
  auto asset = chain::ParseAddress(Text(chain_json, "asset"));
  if (!chain_json.is_object() || !chain_json.contains("chain_id") ||
      !chain_json["chain_id"].is_number_integer() || !asset.ok()) {
    check.error = "the gateway's audit answer names no chain";
    return check;
  }
  chain::RpcChain node(endpoints, kRpcTimeoutMs, *trust);
  auto chain_id = node.ChainId();
  if (!chain_id.ok()) {
    check.error = "cannot ask the node its chain id: " + chain_id.status().message();
    return check;
  }
  const int64_t expected = chain_json["chain_id"].get<int64_t>();
  if (static_cast<int64_t>(*chain_id) != expected) {
    check.error = "the node is chain " + std::to_string(*chain_id) + ", the gateway settles on " +
                  std::to_string(expected);
    return check;
  }
  BooksAudit audit(AuditOptions{0, 0, 100});
  std::string after;
  int64_t checked = 0;
  for (;;) {
    auto page = get("/admin/v1/audit/payments?limit=" + std::to_string(kPaymentPage) +
                    (after.empty() ? "" : "&after=" + after));
    if (!page || !page->contains("payments") || !(*page)["payments"].is_array()) {
      check.error = "the gateway did not list its settled payments";
      return check;
    }
    for (const nlohmann::json& item : (*page)["payments"]) {
      SettledPayment payment{Text(item, "operation_id"), Text(item, "payer"),
                             Text(item, "pay_to"),       0,
                             Text(item, "tx_hash"),      Text(item, "nonce")};
      const std::string value = Text(item, "value");
      auto hash = chain::ParseHash32(payment.tx_hash);
      auto payer = chain::ParseAddress(payment.payer);
      auto pay_to = chain::ParseAddress(payment.pay_to);
      auto amount = ParseAmount(value);
      auto nonce = chain::ParseHash32(payment.nonce);
      if (!hash.ok() || !payer.ok() || !pay_to.ok() || !amount || !nonce.ok()) {
        check.error = "the gateway listed a payment that is not well-formed: " + item.dump();
        return check;
      }
      payment.value = *amount;
      auto receipt = node.GetReceipt(*hash);
      if (!receipt.ok()) {
        check.error =
            "cannot read the receipt of " + payment.tx_hash + ": " + receipt.status().message();
        return check;
      }
      ChainTransferFacts facts;
      if (receipt->has_value()) {
        facts.receipt_succeeded = (*receipt)->status == 1;
        chain::TransferAuthorization authorization;
        authorization.from = *payer;
        authorization.to = *pay_to;
        authorization.value = chain::U256(static_cast<uint64_t>(payment.value));
        authorization.nonce = *nonce;
        facts.matching_transfers =
            chain::ShowsAuthorizationSettled(**receipt, *asset, authorization) ? 1 : 0;
      }
      audit.AddChainTransfer(payment, facts);
      if (++checked % kProgressEvery == 0) {
        std::fprintf(stderr, "agentpay admin audit: %lld settled payments checked on chain\n",
                     static_cast<long long>(checked));
      }
    }
    const nlohmann::json& next = (*page)["next_after"];
    if (!next.is_string()) break;
    after = next.get<std::string>();
  }
  check.report = std::move(audit).Finish();
  return check;
}

// The gateway's report with the chain check's row and violations merged in.
void Merge(nlohmann::json& report, const AuditReport& chain) {
  const AuditCheckResult& row = chain.Of(AuditCheck::kChainTransfers);
  for (nlohmann::json& check : report["checks"]) {
    if (check.value("name", "") != AuditCheckName(AuditCheck::kChainTransfers)) continue;
    check["ran"] = true;
    check["examined"] = row.examined;
    check["violations"] = row.violations;
  }
  for (const AuditViolation& v : chain.listed) {
    report["listed"].push_back(
        {{"check", AuditCheckName(v.check)}, {"subject", v.subject}, {"detail", v.detail}});
  }
  report["violations"] = report.value("violations", int64_t{0}) + chain.violations;
  report["ok"] = report["violations"].get<int64_t>() == 0;
}

void PrintTable(const nlohmann::json& report) {
  std::printf("%-32s %10s %10s\n", "check", "examined", "violations");
  for (const nlohmann::json& check : report["checks"]) {
    const std::string name = check.value("name", "");
    if (!check.value("ran", false)) {
      std::printf("%-32s %21s\n", name.c_str(), "not run (--chain-rpc)");
      continue;
    }
    std::printf("%-32s %10lld %10lld\n", name.c_str(),
                static_cast<long long>(check.value("examined", int64_t{0})),
                static_cast<long long>(check.value("violations", int64_t{0})));
  }
  const nlohmann::json& t = report["totals"];
  std::printf(
      "\n%lld accounts, %lld operations (%lld x402 settled); deposited %s, balance %s, "
      "held %s, captured %s\n",
      static_cast<long long>(t.value("accounts", int64_t{0})),
      static_cast<long long>(t.value("operations", int64_t{0})),
      static_cast<long long>(t.value("x402_settled", int64_t{0})), Text(t, "deposited").c_str(),
      Text(t, "balance").c_str(), Text(t, "held").c_str(), Text(t, "captured").c_str());
  for (const nlohmann::json& v : report["listed"]) {
    std::printf("VIOLATION %s %s: %s\n", Text(v, "check").c_str(), Text(v, "subject").c_str(),
                Text(v, "detail").c_str());
  }
  const int64_t violations = report.value("violations", int64_t{0});
  if (violations == 0) {
    std::printf("OK: the books hold\n");
  } else {
    const int64_t listed = static_cast<int64_t>(report["listed"].size());
    std::printf(
        "FAILED: %lld violation(s)%s\n", static_cast<long long>(violations),
        listed < violations ? (", the first " + std::to_string(listed) + " listed").c_str() : "");
  }
}

}  // namespace

int RunAudit(const AuditCommandOptions& options, const AdminGet& get) {
  std::optional<nlohmann::json> report = get("/admin/v1/audit");
  if (!report) return 2;
  if (!report->is_object() || !(*report)["checks"].is_array() || !(*report)["listed"].is_array() ||
      !(*report)["totals"].is_object()) {
    std::fprintf(stderr, "agentpay admin audit: the gateway's answer is not an audit report\n");
    return 1;
  }
  if (!options.chain_rpc.empty()) {
    ChainCheck chain = CheckChain(options, *report, get);
    if (!chain.error.empty()) {
      std::fprintf(stderr, "agentpay admin audit: the chain check did not complete: %s\n",
                   chain.error.c_str());
      return 2;
    }
    Merge(*report, chain.report);
  }
  if (options.json) {
    std::printf("%s\n", report->dump(2).c_str());
  } else {
    PrintTable(*report);
  }
  return report->value("ok", false) ? 0 : 1;
}

}  // namespace agentpay
