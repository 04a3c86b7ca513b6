// The gateway's read-only answers: liveness, metrics, an operation (and its trace) by id, and an
// account. Who may call them is in docs/protocol.md §1; each runs on the gateway's blocking pool.
#pragma once

#include <string_view>

#include "gateway/api_keys.h"
#include "gateway/context.h"
#include "http/message.h"
#include "http/server.h"

namespace agentpay {

class Views {
 public:
  Views(const GatewayContext& context, ApiKeys& api_keys) : ctx_(context), api_keys_(api_keys) {}

  // GET /healthz: 200 while the store answers, else 503 store_unavailable.
  HttpResponse Health();
  // GET /metrics (Prometheus text); the listener's counters too when `server` is given.
  HttpResponse Metrics(const HttpServer* server);
  // GET /v1/operations/{id} and /v1/operations/{id}/trace, for the operation's payer (the wallet
  // account's API key; for x402, `Idempotency-Key:` the secret it paid with) or the admin token.
  // Anyone else gets the 404 of an id that does not exist.
  HttpResponse Operation(const HttpRequest& request, std::string_view id, bool trace);
  // GET /v1/account: the account of the request's API key.
  HttpResponse Account(const HttpRequest& request);

 private:
  // Whether `request` carries the credentials of `op`'s payer or the admin token.
  Result<bool> MayRead(const HttpRequest& request, const ::agentpay::Operation& op);

  GatewayContext ctx_;
  ApiKeys& api_keys_;
};

// What an operation's views read, in one read transaction: the operation, its x402 payment (none
// for a wallet operation), and on request its ledger postings and trace events (`trace`) and its
// alerts (`alerts`). Nullopt when no operation has this id.
struct OperationRecords {
  ::agentpay::Operation op;
  std::optional<X402PaymentRecord> payment;
  std::vector<PostingRecord> postings;  // with `trace` or `alerts`
  std::vector<TraceEvent> events;       // with `trace`
  std::vector<Alert> alerts;            // with `alerts`
  // The trace view (GET …/trace): BuildTrace over the above.
  std::vector<TraceEvent> Trace() const { return BuildTrace(op, postings, events); }
};
struct OperationReads {
  bool trace = false;
  bool alerts = false;
};
Result<std::optional<OperationRecords>> ReadOperationRecords(Store& store, std::string_view id,
                                                             OperationReads reads);

// The account view of `account_id` (the admin API's and /v1/account's): 200, or 404 not_found.
HttpResponse AccountAnswer(Store& store, std::string_view account_id);

}  // namespace agentpay
