// The non-template parts of records.h.
#include "store/records.h"

namespace agentpay {

std::string JoinWords(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return joined;
}

std::vector<std::string> SplitWords(const std::string& joined) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < joined.size()) {
    size_t end = joined.find(' ', at);
    if (end == std::string::npos) end = joined.size();
    if (end > at) words.push_back(joined.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

LedgerAuditBuilder::LedgerAuditBuilder(const std::vector<AccountRecord>& accounts) {
  for (const auto& account : accounts) {
    by_account_[account.id] = AccountAudit{account.id, account.balances, Balances{}};
  }
}

void LedgerAuditBuilder::Add(const std::string& ledger_account, const std::string& kind,
                             int64_t net) {
  if (ledger_account == "external") audit_.external_total += net;
  if (ledger_account == "revenue") audit_.revenue_total += net;
  auto colon = ledger_account.find(':');
  if (colon == std::string::npos) return;
  std::string prefix = ledger_account.substr(0, colon);
  auto& entry = by_account_[ledger_account.substr(colon + 1)];
  entry.account_id = ledger_account.substr(colon + 1);
  if (prefix == "wallet" && kind == "deposit") entry.from_ledger.deposited += net;
  if (prefix == "hold" && kind == "capture") entry.from_ledger.captured -= net;
  if (prefix == "wallet" && kind == "refund") entry.from_ledger.captured -= net;
  if (prefix == "hold") entry.from_ledger.held += net;
  if (prefix == "wallet") entry.wallet_net += net;
}

LedgerAudit LedgerAuditBuilder::Finish() && {
  for (auto& [id, entry] : by_account_) audit_.accounts.push_back(std::move(entry));
  return std::move(audit_);
}

}  // namespace agentpay
