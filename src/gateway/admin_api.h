// The admin API (docs/protocol.md §9): accounts, deposits idempotent by reference, the operation
// listing, alerts and their resolution, API key rotation and revocation. Every call needs `Authorization: Bearer <admin token>`;
// without a configured token the whole API answers 403 admin_disabled.
#pragma once

#include <string_view>

#include "gateway/context.h"
#include "http/message.h"

namespace agentpay {

class AdminApi {
 public:
  explicit AdminApi(const GatewayContext& context) : ctx_(context) {}

  // Any request under /admin/; blocking (it reads and writes the store).
  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpResponse CreateAccount(const HttpRequest& request);
  HttpResponse Deposit(const HttpRequest& request, std::string_view account_id);
  // /admin/v1/accounts/{id}/api-keys[/{key_id}]: `rest` is what follows the account id.
  HttpResponse ApiKeys(const HttpRequest& request, std::string_view account_id,
                       std::string_view rest);
  HttpResponse CreateApiKey(std::string_view account_id);
  HttpResponse ListApiKeys(std::string_view account_id);
  HttpResponse RevokeApiKey(std::string_view account_id, std::string_view key_id);
  HttpResponse ListOperations(const HttpRequest& request);
  HttpResponse ListAlerts(const HttpRequest& request);
  HttpResponse ResolveOperation(const HttpRequest& request, std::string_view operation_id);

  GatewayContext ctx_;
};

}  // namespace agentpay
