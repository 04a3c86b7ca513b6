// Ledger account names shared by every backend: a posting moves money from `debit` to `credit`.
#pragma once

#include <string>
#include <string_view>

namespace agentpay {

// "external" and "revenue" are gateway-wide; "wallet" and "hold" are per account ("wallet:<id>").
inline std::string LedgerAccountName(std::string_view kind, std::string_view account_id) {
  if (kind == "wallet" || kind == "hold") return std::string(kind) + ":" + std::string(account_id);
  return std::string(kind);
}

}  // namespace agentpay
