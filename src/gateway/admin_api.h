// The admin API (docs/protocol.md §9): accounts, deposits idempotent by reference, the operation
// listing, alerts and their resolution, API key rotation and revocation. Every call needs
// `Authorization: Bearer <admin token>`; without a configured token the whole API answers 403
// admin_disabled. Browsers' cross-origin calls are refused before they get here, by the admin
// listener's guard (http/browser_guard.h), which every request on that listener passes.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gateway/context.h"
#include "http/message.h"

namespace agentpay {

class RelayerWatch;

class AdminApi {
 public:
  explicit AdminApi(const GatewayContext& context) : ctx_(context) {}

  // Any request under /admin/; blocking (it reads and writes the store).
  HttpResponse Handle(const HttpRequest& request);

  // The relayer's last reading, shown by the overview (none without x402 settlement). `watch`
  // outlives the API; attach before serving.
  void AttachRelayerWatch(const RelayerWatch* watch) { relayer_watch_ = watch; }

 private:
  HttpResponse CreateAccount(const HttpRequest& request);
  HttpResponse Deposit(const HttpRequest& request, std::string_view account_id);
  // /admin/v1/accounts/{id}/api-keys[/{key_id}]: `rest` is what follows the account id.
  HttpResponse ApiKeys(const HttpRequest& request, std::string_view account_id,
                       std::string_view rest);
  HttpResponse CreateApiKey(std::string_view account_id);
  HttpResponse ListApiKeys(std::string_view account_id);
  HttpResponse RevokeApiKey(std::string_view account_id, std::string_view key_id);
  // GET /admin/v1/operations?intent=&settlement=&fulfillment=&account=&payer=&route=&key=&tx_hash=
  // &older_than_ms=&before=&limit=: newest first, `next_before` for the next page.
  HttpResponse ListOperations(const HttpRequest& request);
  // GET /admin/v1/accounts?after=&limit=: accounts in id order, `next_after` for the next page.
  HttpResponse ListAccounts(const HttpRequest& request);
  // GET /admin/v1/overview: what the console shows first.
  HttpResponse Overview();
  // GET /admin/v1/operations/{id}: the operation with its alerts, postings and x402 payment;
  // with `trace`, GET /admin/v1/operations/{id}/trace: its events.
  HttpResponse OperationDetail(std::string_view id, bool trace);
  HttpResponse ListAlerts(const HttpRequest& request);
  // GET /admin/v1/audit: the books audit over the whole store (store/books_audit.h).
  HttpResponse Audit();
  // GET /admin/v1/audit/payments?after=&limit=: settled x402 payments, for a chain check.
  HttpResponse AuditPayments(const HttpRequest& request);
  HttpResponse ResolveOperation(const HttpRequest& request, std::string_view operation_id);

  GatewayContext ctx_;
  const RelayerWatch* relayer_watch_ = nullptr;
  // The last books audit this process ran (GET /admin/v1/audit, from the console or
  // `agentpay admin audit`), as answered; null before the first. The overview shows it.
  std::mutex last_audit_mutex_;
  nlohmann::json last_audit_;
};

}  // namespace agentpay
