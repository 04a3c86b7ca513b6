// The gateway's request pipeline: routes a request to the wallet path, the operation and account
// views, or the admin API. Plain functions of (request, injected world) → response; no sockets here.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/world.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/upstream.h"
#include "http/message.h"
#include "http/server.h"
#include "store/store.h"

namespace agentpay {

class Gateway {
 public:
  // Preconditions: config.routes is non-empty and valid; the referenced objects outlive the gateway.
  Gateway(GatewayConfig config, Store& store, Clock& clock, Random& random, Upstream& upstream);

  HttpResponse Handle(const HttpRequest& request);

  // Crash recovery, before the listener accepts traffic: every upstream call that was in progress
  // when a previous process died becomes pending_retry with its hold kept. Returns how many.
  Result<int> RecoverInterrupted();

  // Lets /metrics include the listener's counters (optional).
  void AttachServer(const HttpServer* server) { server_ = server; }

  const GatewayConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }

 private:
  struct PaidRequest;
  enum class BeginKind { kProceed, kReplay, kMismatch, kAttach, kInsufficientFunds };
  struct Begin;

  HttpResponse HandlePaid(const HttpRequest& request, const RouteConfig& route);
  HttpResponse PayWithWallet(const PaidRequest& paid);
  Result<Begin> BeginWalletOperation(const PaidRequest& paid);
  HttpResponse CallAndFinish(const PaidRequest& paid, const Operation& op);
  HttpResponse AwaitInFlight(const Operation& op);
  HttpResponse Challenge(const HttpRequest& request, const RouteConfig& route) const;

  HttpResponse GetOperation(std::string_view id, bool trace);
  HttpResponse GetAccount(const HttpRequest& request);
  HttpResponse HandleAdmin(const HttpRequest& request);
  HttpResponse CreateAccount(const HttpRequest& request);
  HttpResponse Deposit(const HttpRequest& request, std::string_view account_id);
  HttpResponse AdminGetAccount(std::string_view account_id);
  HttpResponse ListOperations(const HttpRequest& request);
  HttpResponse ListAlerts(const HttpRequest& request);

  // The account id behind the request's bearer API key, if any. Remembered per key hash: an
  // account's id and key never change, so only the first request of a key reads the store.
  Result<std::optional<std::string>> Authenticate(const HttpRequest& request);
  const RouteConfig* MatchRoute(std::string_view path) const;
  void NotifyCompletion();

  GatewayConfig config_;
  Store& store_;
  Clock& clock_;
  Random& random_;
  Upstream& upstream_;
  Metrics metrics_;
  static constexpr size_t kMaxCachedKeys = 100000;
  std::mutex key_cache_mutex_;
  std::unordered_map<std::string, std::string> account_by_key_hash_;
  const HttpServer* server_ = nullptr;

  // Duplicates attached to an in-flight operation wait here; any completion wakes them to re-read.
  std::mutex completion_mutex_;
  std::condition_variable completion_cv_;
  uint64_t completions_ = 0;
};

}  // namespace agentpay
