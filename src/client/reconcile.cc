// `agentpay pay reconcile`: settles reservations whose outcome is open (CONTRACT §5, §6). Wallet
// reservations follow the gateway's operation; x402 ones follow the chain, and are released only
// once validBefore plus the buffer has passed and authorizationState(payer, nonce) is false.
#include <memory>

#include "chain/rpc_chain.h"
#include "client/attempt.h"
#include "client/budget_db.h"
#include "client/chain_facts.h"
#include "client/pay.h"
#include "http/client.h"

namespace agentpay::client {
namespace {

struct Verdict {
  ReconcileVerdict verdict = ReconcileVerdict::kKeep;
  std::string why;
  std::string tx_hash = "";  // the transaction found on chain that used the authorization, if any
};

Verdict JudgeWallet(const StoredReservation& row, const std::string& api_key, int64_t timeout_ms,
                    std::shared_ptr<const TlsTrust> trust) {
  if (row.sends == 0) {
    return {ReconcileVerdict::kMarkReleased, "never sent: nothing can have been charged"};
  }
  if (row.operation_id.empty()) {
    return {ReconcileVerdict::kKeep,
            "no operation id was seen: run the same step again to resume it with its key"};
  }
  if (api_key.empty()) {
    return {ReconcileVerdict::kKeep, "needs --api-key: the gateway shows operation " +
                                         row.operation_id + " only to its account"};
  }
  auto endpoint = ParseHttpUrl(row.url);
  if (!endpoint.ok()) return {ReconcileVerdict::kKeep, endpoint.status().message()};
  ClientRequest request;
  request.target = "/v1/operations/" + row.operation_id;
  request.headers.push_back({"Authorization", "Bearer " + api_key});
  ClientOptions options;
  options.timeout_ms = timeout_ms;
  options.trust = std::move(trust);
  ClientResponse response = SendHttp(*endpoint, request, options);
  std::optional<OperationView> op = ReadOperation(response);
  if (!op) {
    return {ReconcileVerdict::kKeep, "the gateway did not show operation " + row.operation_id +
                                         " (" + DescribeAnswer(response) + ")"};
  }
  return {ReconcileWalletSettlement(op->settlement),
          "gateway operation " + row.operation_id + " settlement " +
              std::string(op->settlement ? SettlementName(*op->settlement) : "(unreadable)")};
}

Verdict JudgeX402(const StoredReservation& row, chain::RpcChain* chain, int64_t buffer_s) {
  if (chain == nullptr) return {ReconcileVerdict::kKeep, "needs --chain-rpc to ask the chain"};
  auto facts = ReadAuthorizationFacts(*chain, row.asset, row.payer, row.nonce,
                                      /*find_transaction=*/true);
  if (!facts.ok()) {
    return {ReconcileVerdict::kKeep, "the chain could not be asked: " + facts.status().message()};
  }
  ReconcileVerdict verdict = ReconcileAuthorization(facts->chain_time_s, row.valid_before_s,
                                                    buffer_s, facts->authorization_used);
  std::string when = "chain time " + std::to_string(facts->chain_time_s) + ", valid before " +
                     std::to_string(row.valid_before_s) + " + " + std::to_string(buffer_s) +
                     " s buffer";
  switch (verdict) {
    case ReconcileVerdict::kMarkSpent:
      return {verdict,
              "authorization used on chain" +
                  (facts->transaction.empty() ? "" : " by " + facts->transaction),
              facts->transaction};
    case ReconcileVerdict::kMarkReleased:
      return {verdict, "expired unused (" + when + ", authorizationState false)",
              facts->transaction};
    case ReconcileVerdict::kKeep:
      return {verdict, "unused but not expired yet (" + when + ")", facts->transaction};
  }
  return {};
}

}  // namespace

ReconcileReport RunReconcile(const ReconcileOptions& options, ClientWorld& world,
                             const Progress& progress) {
  ReconcileReport report;
  auto budget = BudgetDb::OpenExisting(options.budget_db);
  if (!budget.ok()) {
    report.error = budget.status().message();
    return report;
  }
  auto rows = (*budget)->List();
  if (!rows.ok()) {
    report.error = rows.status().message();
    return report;
  }
  auto trust = TlsTrust::Load(options.ca_file);
  if (!trust.ok()) {
    report.error = trust.status().message();
    return report;
  }
  std::unique_ptr<chain::RpcChain> chain;
  if (!options.chain_rpc.empty()) {
    auto endpoint = ParseHttpUrl(options.chain_rpc);
    if (!endpoint.ok()) {
      report.error = endpoint.status().message();
      return report;
    }
    chain = std::make_unique<chain::RpcChain>(*endpoint, options.timeout_ms, *trust);
  }
  for (const StoredReservation& row : *rows) {
    if (row.state != ReservationState::kReserved && row.state != ReservationState::kUnknown) {
      continue;
    }
    const int64_t now = world.clock->NowMs();
    ReconcileChange change{row.key, std::string(ReservationStateName(row.state)), "", ""};
    if (row.lease_until_ms > now) {
      change.to = change.from;
      change.why = "a running `agentpay pay` holds it";
      report.kept.push_back(change);
      continue;
    }
    Verdict verdict = row.scheme == "wallet"
                          ? JudgeWallet(row, options.api_key, options.timeout_ms, *trust)
                          : JudgeX402(row, chain.get(), options.expiry_buffer_seconds);
    if (const std::string& tx_hash = verdict.tx_hash; !tx_hash.empty()) {
      // Best effort: the hash is on chain whatever happens here, and the verdict stands.
      Status kept = (*budget)->RecordEvidence(row.key, "", tx_hash, now);
      if (!kept.ok() && progress) {
        progress(row.key + ": warning: could not record transaction " + tx_hash + " (" +
                 kept.message() + ")");
      }
    }
    auto after = (*budget)->ApplyReconcile(row.key, row.state, verdict.verdict, verdict.why, now);
    change.why = after.ok() ? verdict.why : after.status().message();
    change.to = after.ok() ? std::string(ReservationStateName(after->state)) : change.from;
    if (progress)
      progress(row.key + ": " + change.from + " -> " + change.to + " (" + change.why + ")");
    (change.to == change.from ? report.kept : report.changes).push_back(change);
  }
  if (auto figures = (*budget)->Figures(); figures.ok()) {
    report.committed = figures->committed;
    report.total = figures->total;
  }
  return report;
}

ReconcileReport Reconcile(const ReconcileOptions& options, const Progress& progress) {
  return RunReconcile(options, RealWorld(), progress);
}

BudgetReport ReadBudget(const std::string& budget_db) {
  BudgetReport report;
  auto budget = BudgetDb::OpenExisting(budget_db);
  if (!budget.ok()) {
    report.error = budget.status().message();
    return report;
  }
  // One snapshot: read one by one, the figures could count rows written after the list was read.
  auto snapshot = (*budget)->Snapshot();
  if (!snapshot.ok()) {
    report.error = snapshot.status().message();
    return report;
  }
  const BudgetAssetBinding& asset = snapshot->binding;
  const BudgetFigures& figures = snapshot->figures;
  switch (asset.state) {
    case BudgetAssetState::kUnbound:
      report.asset.state = "unbound";
      break;
    case BudgetAssetState::kMixed:
      report.asset.state = "mixed";
      break;
    case BudgetAssetState::kBound:
      report.asset.state = "bound";
      report.asset.chain_id = asset.asset.chain_id;
      report.asset.address = asset.asset.address;
      report.asset.name = asset.asset.name;
      report.asset.decimals = asset.asset.decimals;
      break;
  }
  report.total = figures.total;
  report.committed = figures.committed;
  report.spent = figures.spent;
  for (const StoredReservation& row : snapshot->reservations) {
    report.reservations.push_back(ToPublic(row));
  }
  return report;
}

}  // namespace agentpay::client
