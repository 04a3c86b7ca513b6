// The gateway's request pipeline: routes a request to the wallet path, the operation and account
// views, or the admin API. Plain functions of (request, injected world) → response; no sockets here.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/world.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/upstream.h"
#include "gateway/x402_offer.h"
#include "http/message.h"
#include "http/server.h"
#include "http/worker_pool.h"
#include "settlement/settler.h"
#include "store/store.h"

namespace agentpay {

class Gateway {
 public:
  // Preconditions: config.routes is non-empty and valid, config.chain's addresses parse, the
  // settler (if any) settles config.chain's asset, domain and payee; the referenced objects outlive
  // the gateway. Without a settler, x402 payments are refused (501 x402_not_enabled). The gateway
  // draws an instance id ("gw_" + 16 hex) that it stamps on every claim its attempts take.
  Gateway(GatewayConfig config, Store& store, Clock& clock, Random& random, Upstream& upstream,
          Settler* settler = nullptr);
  // Releases the instance registration, if any: claims still open become recoverable.
  ~Gateway();

  // Proves this gateway's liveness through the store (Store::RegisterInstance) for its lifetime,
  // so that the crash recovery of other processes sharing the store leaves its claims alone.
  // Call it before serving (and before RecoverInterrupted): until then its claims look dead.
  Status RegisterInstance();
  const std::string& instance_id() const { return instance_id_; }

  // Answers through `respond`, from any thread. Paid requests run as a non-blocking pipeline
  // (store decisions and upstream calls complete asynchronously); everything else runs on the
  // gateway's own blocking pool. Call it from an I/O thread.
  void HandleAsync(std::shared_ptr<const HttpRequest> request, Respond respond);
  // HandleAsync, waiting for the answer (tests, tools). Never call it from a store callback.
  HttpResponse Handle(const HttpRequest& request);

  // Crash recovery, before the listener accepts traffic: every attempt that was in progress in a
  // gateway process that has since died (its instance is no longer alive, or its lease expired)
  // becomes pending_retry with its hold or settlement kept. Attempts of live processes sharing
  // the store are left alone. Returns how many were recovered.
  Result<int> RecoverInterrupted();

  // Waits until every paid request in flight has been answered, at most `timeout_ms`; returns
  // how many are still in flight. Call it after the listener stopped, before destruction: store
  // and upstream callbacks must not outlive the gateway.
  int64_t Drain(int64_t timeout_ms);

  // Lets /metrics include the listener's counters (optional).
  void AttachServer(const HttpServer* server) { server_ = server; }

  const GatewayConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }

 private:
  struct PaidRequest;
  enum class BeginKind { kProceed, kReplay, kMismatch, kAttach, kInsufficientFunds };
  struct Begin;
  struct X402Request;
  struct X402Begin;

  HttpResponse HandleBlocking(const HttpRequest& request);
  void HandlePaid(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                  Respond respond);
  void PayWithWallet(std::shared_ptr<PaidRequest> paid);
  // The two decisions of a paid request, each run as one store transaction.
  Status DecideBegin(Transaction& tx, PaidRequest& paid);
  Status DecideExistingKey(Transaction& tx, PaidRequest& paid, int64_t now, int64_t lease_ms,
                           bool* start_new);
  Status DecideFinish(Transaction& tx, PaidRequest& paid, const UpstreamOutcome& outcome);
  void OnBegun(std::shared_ptr<PaidRequest> paid, Status status);
  void OnUpstreamAnswered(std::shared_ptr<PaidRequest> paid, UpstreamOutcome outcome);
  HttpResponse FinishAnswer(const PaidRequest& paid, const UpstreamOutcome& outcome,
                            const Status& status);
  // Waits (at most attach_wait_ms) until `answer_when_done` gives an answer for the operation as
  // re-read from the store; then 202 operation_in_progress.
  using AnswerWhenDone = std::function<std::optional<HttpResponse>(const Operation&)>;
  HttpResponse AwaitInFlight(const Operation& op, const AnswerWhenDone& answer_when_done);
  HttpResponse Challenge(const HttpRequest& request, const RouteConfig& route,
                         std::string_view code = "payment_required",
                         std::string_view detail = "") const;

  // The x402 path (x402_path.cc). It waits on the chain, so it runs on the blocking pool.
  HttpResponse PayWithX402(std::shared_ptr<const HttpRequest> request, const RouteConfig& route);
  std::optional<HttpResponse> PrepareX402(X402Request& x);
  Status DecideX402Arrival(Transaction& tx, const X402Request& x, const TxInputs* inputs,
                           X402Begin& begin);
  Status DecideX402New(Transaction& tx, const X402Request& x, const TxInputs& inputs,
                       int64_t now, X402Begin& begin);
  HttpResponse RunX402Attempt(const X402Request& x, Operation op, X402PaymentRecord payment);
  HttpResponse SettleAndContinue(const X402Request& x, Operation op, X402PaymentRecord payment,
                                 const std::optional<UpstreamOutcome>& upstream_2xx);
  HttpResponse CallAndFinishX402(const X402Request& x, Operation op, X402PaymentRecord payment);
  UpstreamOutcome CallUpstreamBlocking(const X402Request& x, const std::string& operation_id);
  // Writes `next` if the attempt `held` still holds the claim; false when it lost it.
  Result<bool> WriteClaimed(const Operation& held, const Operation& next, const TraceEvent* event,
                            const std::function<Status(Transaction&)>& also = {});
  HttpResponse X402Answer(HttpResponse response, const X402Request& x, const Operation& op,
                          const X402PaymentRecord& payment) const;
  HttpResponse X402StateAnswer(const X402Request& x, const Operation& op,
                               const X402PaymentRecord& payment, bool replayed) const;

  HttpResponse GetOperation(std::string_view id, bool trace);
  HttpResponse GetAccount(const HttpRequest& request);
  HttpResponse HandleAdmin(const HttpRequest& request);
  HttpResponse CreateAccount(const HttpRequest& request);
  HttpResponse Deposit(const HttpRequest& request, std::string_view account_id);
  HttpResponse AdminGetAccount(std::string_view account_id);
  HttpResponse ListOperations(const HttpRequest& request);
  HttpResponse ListAlerts(const HttpRequest& request);
  HttpResponse ResolveOperation(const HttpRequest& request, std::string_view operation_id);

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
  Settler* settler_;
  // Per route, what the 402 challenge advertises and what x402 payments are verified against.
  const X402Offers x402_offers_;
  const std::string instance_id_;
  bool registered_ = false;
  Metrics metrics_;
  WorkerPool blocking_pool_;  // admin, views, attached duplicates: everything that may block
  static constexpr size_t kMaxCachedKeys = 100000;
  std::mutex key_cache_mutex_;
  std::unordered_map<std::string, std::string> account_by_key_hash_;
  const HttpServer* server_ = nullptr;

  // Duplicates attached to an in-flight operation wait here; any completion wakes them to re-read.
  std::mutex completion_mutex_;
  std::condition_variable completion_cv_;
  uint64_t completions_ = 0;
  int64_t paid_in_flight_ = 0;  // guarded by completion_mutex_
};

}  // namespace agentpay
