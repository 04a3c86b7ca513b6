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

Status LedgerAuditBuilder::Add(const std::string& ledger_account, std::string_view kind_name,
                               int64_t net) {
  const std::optional<MoveKind> kind = ParseMoveKind(kind_name);
  if (!kind) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "postings of an unknown kind on ledger account " + ledger_account);
  }
  if (ledger_account == "external") audit_.external_total += net;
  if (ledger_account == "revenue") audit_.revenue_total += net;
  auto colon = ledger_account.find(':');
  if (colon == std::string::npos) return Status::Ok();
  std::string prefix = ledger_account.substr(0, colon);
  auto& entry = by_account_[ledger_account.substr(colon + 1)];
  entry.account_id = ledger_account.substr(colon + 1);
  if (prefix == "wallet" && kind == MoveKind::kDeposit) entry.from_ledger.deposited += net;
  if (prefix == "hold" && kind == MoveKind::kCapture) entry.from_ledger.captured -= net;
  if (prefix == "wallet" && kind == MoveKind::kRefund) entry.from_ledger.captured -= net;
  if (prefix == "hold") entry.from_ledger.held += net;
  if (prefix == "wallet") entry.wallet_net += net;
  return Status::Ok();
}

LedgerAudit LedgerAuditBuilder::Finish() && {
  for (auto& [id, entry] : by_account_) audit_.accounts.push_back(std::move(entry));
  return std::move(audit_);
}

std::string OperationUpdateSql(Placeholder p, bool claimed) {
  std::string sql = "UPDATE operations SET intent = " + p(7) + ", settlement = " + p(8) +
                    ", fulfillment = " + p(9) + ", hold_expires_ms = " + p(10) +
                    ", lease_expires_ms = " + p(11) + ", attempts = " + p(12) +
                    ", response_status = " + p(13) + ", response_content_type = " + p(14) +
                    ", response_body = " + p(15) + ", retained_until_ms = " + p(16) +
                    ", updated_ms = " + p(18) + ", claimed_by = " + p(19) + " WHERE id = " + p(1) +
                    " AND principal = " + p(2) + " AND idempotency_key = " + p(3) +
                    " AND fingerprint = " + p(4) + " AND route = " + p(5) +
                    " AND amount = " + p(6) + " AND created_ms = " + p(17);
  if (claimed) sql += " AND fulfillment = 'in_progress' AND attempts = " + p(20);
  return sql;
}

std::string OperationBooksSql(Placeholder p) {
  auto postings = [](MoveKind kind) {
    return std::string(
               "COALESCE((SELECT SUM(l.amount) FROM ledger_entries l WHERE l.operation_id = "
               "o.id AND l.kind = '") +
           std::string(MoveKindName(kind)) + "'), 0), ";
  };
  return "SELECT o.id, o.principal, o.idempotency_key, o.amount, o.settlement, o.fulfillment, "
         "o.hold_expires_ms, o.lease_expires_ms, o.created_ms, " +
         postings(MoveKind::kHold) + postings(MoveKind::kCapture) + postings(MoveKind::kRelease) +
         postings(MoveKind::kRefund) +
         "(SELECT COUNT(*) FROM ledger_entries l WHERE l.operation_id = o.id AND l.kind = '" +
         std::string(MoveKindName(MoveKind::kCapture)) +
         "'), "
         "(SELECT COUNT(*) FROM alerts a WHERE a.operation_id = o.id), "
         "(SELECT COUNT(*) FROM alerts a WHERE a.operation_id = o.id AND a.kind = "
         "'hold_expired_after_possible_work'), "
         "(SELECT COUNT(*) FROM operation_events e WHERE e.operation_id = o.id AND e.kind = "
         "'hold_expired'), o.updated_ms "
         "FROM operations o WHERE o.id > " +
         p(1) + " ORDER BY o.id LIMIT " + p(2);
}

std::string RepeatedChargesSql(Placeholder p) {
  // Keys with two settled operations first (one pass, grouped), then only their pairs: joining
  // every settled operation with its principal's others would be quadratic on a busy account.
  return "SELECT a.principal, a.idempotency_key, a.id, b.id, b.created_ms, a.retained_until_ms "
         "FROM (SELECT principal, idempotency_key FROM operations WHERE settlement = 'settled' "
         "GROUP BY principal, idempotency_key HAVING COUNT(*) > 1) AS d "
         "JOIN operations a ON a.principal = d.principal AND a.idempotency_key = d.idempotency_key "
         "JOIN operations b ON b.principal = d.principal AND b.idempotency_key = d.idempotency_key "
         "AND b.id <> a.id "
         "WHERE a.settlement = 'settled' AND b.settlement = 'settled' "
         "AND (a.created_ms < b.created_ms OR (a.created_ms = b.created_ms AND a.id < b.id)) "
         "AND (a.retained_until_ms IS NULL OR b.created_ms < a.retained_until_ms) "
         "ORDER BY a.id, b.id LIMIT " +
         p(1);
}

std::string SharedPaymentsSql(Placeholder p) {
  return "SELECT * FROM (SELECT 'authorization ' || payer || '/' || nonce, COUNT(*) "
         "FROM x402_payments GROUP BY payer, nonce HAVING COUNT(*) > 1 LIMIT " +
         p(1) +
         ") AS authorizations UNION ALL SELECT * FROM (SELECT 'transaction ' || tx_hash, COUNT(*) "
         "FROM x402_payments WHERE tx_hash <> '' GROUP BY tx_hash HAVING COUNT(*) > " +
         std::to_string(kMaxPaymentsPerTransaction) +
         " OR COUNT(DISTINCT relayer_nonce) > 1 OR COUNT(DISTINCT raw_tx) > 1 LIMIT " + p(1) +
         ") AS transactions";
}

std::string SettledPaymentsSql(Placeholder p) {
  return "SELECT p.operation_id, p.payer, p.pay_to, p.value, p.tx_hash, p.nonce FROM x402_payments "
         "p "
         "JOIN operations o ON o.id = p.operation_id "
         "WHERE o.settlement = 'settled' AND p.operation_id > " +
         p(1) + " ORDER BY p.operation_id LIMIT " + p(2);
}

SqlWithParams OperationListSql(const OperationFilter& filter, Placeholder p) {
  SqlWithParams query;
  // State names go into the SQL text (our own enum names, never client input): only a literal
  // lets SQLite (and PostgreSQL's planner) use the partial indexes over unfinished operations.
  query.sql = std::string("SELECT ") + kOperationColumns + " FROM operations o WHERE 1 = 1";
  if (filter.intent) {
    query.sql += " AND intent = '" + std::string(IntentName(*filter.intent)) + "'";
  }
  if (filter.settlement) {
    query.sql += " AND settlement = '" + std::string(SettlementName(*filter.settlement)) + "'";
  }
  if (filter.fulfillment) {
    query.sql += " AND fulfillment = '" + std::string(FulfillmentName(*filter.fulfillment)) + "'";
  }
  auto add = [&](const char* condition, SqlParam value) {
    query.params.push_back(std::move(value));
    query.sql += std::string(" AND ") + condition + p(static_cast<int>(query.params.size()));
  };
  if (filter.principal) add("principal = ", {*filter.principal});
  if (filter.route) add("route = ", {*filter.route});
  if (filter.idempotency_key) add("idempotency_key = ", {*filter.idempotency_key});
  if (filter.tx_hash) {
    add("id IN (SELECT operation_id FROM x402_payments WHERE tx_hash = ", {*filter.tx_hash});
    query.sql += ")";
  }
  if (filter.before_id) add("id < ", {*filter.before_id});
  if (filter.created_before_ms) add("created_ms < ", {std::nullopt, *filter.created_before_ms});
  query.params.push_back({std::nullopt, int64_t{filter.limit}});
  query.sql += " ORDER BY id DESC LIMIT " + p(static_cast<int>(query.params.size()));
  return query;
}

std::string OverviewCapturedSql(Placeholder p) {
  const std::string capture(MoveKindName(MoveKind::kCapture));
  const std::string refund(MoveKindName(MoveKind::kRefund));
  return "SELECT COALESCE(SUM(CASE WHEN kind = '" + capture +
         "' THEN amount ELSE -amount END), 0) FROM ledger_entries WHERE kind IN ('" + capture +
         "', '" + refund + "') AND at_ms >= " + p(1);
}

}  // namespace agentpay
