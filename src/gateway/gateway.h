// The gateway: routes a request to the wallet path (wallet_path.h), the x402 path (x402_path.h),
// the operation and account views, or the admin API, and owns what they share (gateway/context.h).
// Plain functions of (request, injected world) → response; no sockets here.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/world.h"
#include "gateway/admin_api.h"
#include "gateway/api_keys.h"
#include "gateway/attachments.h"
#include "gateway/config.h"
#include "gateway/context.h"
#include "gateway/metrics.h"
#include "gateway/rate_limiter.h"
#include "gateway/upstream.h"
#include "gateway/views.h"
#include "gateway/wallet_path.h"
#include "gateway/x402_offer.h"
#include "gateway/x402_path.h"
#include "http/message.h"
#include "http/route_table.h"
#include "http/server.h"
#include "http/worker_pool.h"
#include "settlement/relayer_watch.h"
#include "settlement/settler.h"
#include "store/store.h"

namespace agentpay {

// Where the gateway's blocking work runs, when not on pools of its own: a simulator's executors
// (null: the gateway's own pool of that kind).
struct GatewayExecutors {
  Executor* blocking = nullptr;  // admin, views, attached duplicates' re-reads
  Executor* chain = nullptr;     // x402 chain calls, one blocking call per task
  Executor* readers = nullptr;   // the paid path's reads (Store::ReadAsync)
};

class Gateway {
 public:
  // Preconditions: config.routes is non-empty and valid, config.chain's addresses parse, the
  // settler (if any) settles config.chain's asset, domain and payee; the referenced objects outlive
  // the gateway. Without a settler, x402 payments are refused (501 x402_not_enabled). Blocking
  // work (admin, views, re-reads) runs on `executors.blocking`, or, when it is null, on a pool of
  // config.blocking_threads threads of the gateway's own; x402 chain calls on `executors.chain`,
  // or a pool of config.chain_threads. The gateway
  // draws an instance id ("gw_" + 16 hex) that it stamps on every claim its attempts take.
  Gateway(GatewayConfig config, Store& store, Clock& clock, Random& random, Timers& timers,
          Upstream& upstream, Settler* settler = nullptr, GatewayExecutors executors = {});
  // Releases the instance registration, if any: claims still open become recoverable.
  ~Gateway();

  // Proves this gateway's liveness through the store (Store::RegisterInstance) for its lifetime,
  // so that the crash recovery of other processes sharing the store leaves its claims alone.
  // Call it before serving (and before RecoverInterrupted): until then its claims look dead.
  Status RegisterInstance();
  const std::string& instance_id() const { return instance_id_; }

  // Answers through `respond`, from any thread. Paid requests run as a non-blocking pipeline (store
  // decisions, upstream and chain calls complete asynchronously, waits are timers); everything
  // else runs on the gateway's own blocking pool. Call it from an I/O thread.
  void HandleAsync(std::shared_ptr<const HttpRequest> request, Respond respond);
  // The client address's rate limit (issue 13 item 5), to be consulted once per request before
  // anything else: nullopt to go on, else the 429 to send. serve.cc calls it first for every
  // request of the public listener (HandleAsync does not).
  std::optional<HttpResponse> AdmitClient(const HttpRequest& request);
  // What can be decided from a request's head alone, before its body is read (the listener's
  // HeadHandler): an unpaid request to a paid route gets its 402 challenge, a target that does not
  // normalise its 400, a wallet key that does not authenticate its 401 (a key not remembered is
  // read on the blocking pool: kLater, then `done`), an x402 payment header that the payment path
  // would refuse before reading anything its 400 or 402. Each answer takes the client address's
  // token as AdmitClient would. kReadBody: read the body and handle the request as usual.
  // Non-blocking.
  HeadDecision AnswerHead(const HttpRequest& head, HeadDone done);
  // HandleAsync, waiting for the answer (tests, tools). Never call it from a store callback.
  HttpResponse Handle(const HttpRequest& request);

  // Crash recovery, before the listener accepts traffic: every attempt that was in progress in a
  // gateway process that has since died (its instance is no longer alive, or its lease expired)
  // becomes pending_retry with its hold or settlement kept. Attempts of live processes sharing
  // the store are left alone. Returns how many were recovered.
  Result<int> RecoverInterrupted();

  // `respond` as a paid request's: counted in flight until it runs (Drain waits for it), its
  // status counted in the metrics. For paid work arriving by another listener (the facilitator).
  Respond TrackPaid(Respond respond);
  // The x402 path; null without a settler.
  X402Path* x402() { return x402_.get(); }

  // Waits until every paid request in flight has been answered, at most `timeout_ms`; returns
  // how many are still in flight. Call it after the listener stopped, before destruction: store,
  // upstream, chain and timer callbacks must not outlive the gateway.
  int64_t Drain(int64_t timeout_ms);

  // Lets /metrics include the listener's counters (optional).
  void AttachServer(const HttpServer* server) { server_ = server; }
  // The base URL of the 402's resources, replacing config.public_url: `serve` sets it once the
  // public listener is bound when it is derived from a --listen of port 0. Thread-safe.
  void SetPublicUrl(std::string public_url) { x402_offers_.SetPublicUrl(std::move(public_url)); }
  // The relayer's readings for the admin overview; `watch` outlives the gateway's serving.
  void AttachRelayerWatch(const RelayerWatch* watch) { admin_.AttachRelayerWatch(watch); }

  const GatewayConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }
  // The rate limits' buckets, for the exchange with the other gateways (gateway/rate_sync.h).
  RateLimiters& rate_limiters() { return rate_limiters_; }

 private:
  HttpResponse HandleBlocking(const HttpRequest& request);
  // An answer given from a request's head: the client address's rate limit first, then counted.
  HttpResponse AnswerFromHead(const HttpRequest& head, HttpResponse answer);
  // `account`: the wallet key's account when AnswerHead authenticated it already.
  void HandlePaid(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                  std::optional<std::string> account, Respond respond);
  // Where a target goes (T10, T21). AnswerHead and HandleAsync both ask this one function, so the
  // early 402 and the paid pipeline never disagree on a route.
  struct Destination {
    enum class Kind {
      kRefused,  // `refusal`: the target does not normalise, or may be read as another route
      kGateway,  // the gateway's own endpoint, or no route: HandleBlocking answers it
      kPaid,     // `route`
    };
    Kind kind = Kind::kGateway;
    std::string target;                  // kGateway, kPaid: the normalised target
    const RouteConfig* route = nullptr;  // kPaid
    HttpResponse refusal;                // kRefused: the 400
  };
  Destination Route(std::string_view target) const;
  // What AnswerHead learnt of a paid request whose body it let in (its HttpRequest::head_note):
  // HandleAsync goes on from there instead of routing, and authenticating a wallet key, again.
  struct HeadVerdict : RequestNote {
    std::string target;                  // the normalised target
    const RouteConfig* route = nullptr;  // the paid route
    std::optional<std::string> account;  // a wallet key's account, authenticated from the head
    int64_t head_ms = 0;                 // clock_ when the head was decided
  };
  // How long a key authenticated from a head is believed for its body. A body that took longer
  // (a slow client) has its key looked up again: with ApiKeys::kMaxKeyStalenessMs, a key revoked
  // while a body was on its way is still refused within a second, as for any other request.
  static constexpr int64_t kMaxHeadVerdictAgeMs = 250;

  GatewayConfig config_;
  Store& store_;
  Clock& clock_;
  Random& random_;
  Settler* settler_;
  // Per route, what the 402 challenge advertises and what x402 payments are verified against.
  X402Offers x402_offers_;  // its public URL may be set once the listener is bound
  // The routes' prefixes, in config_.routes' order, for Route.
  const RouteTable route_table_;
  const std::string instance_id_;
  bool registered_ = false;
  Metrics metrics_;
  // Admin, views, attached duplicates' re-reads: all that may block. own_pool_ when not injected.
  std::unique_ptr<WorkerPool> own_pool_;
  Executor& blocking_;
  // The paid path's reads (API keys not remembered, the fast-path look, x402's first look): short,
  // and one per paid request on SQLite. A pool of their own, of few threads (kReaderThreads):
  // under load its threads stay busy draining the queue instead of each task waking one of the
  // blocking pool's 16 sleeping threads. own_readers_ when not injected.
  std::unique_ptr<WorkerPool> own_readers_;
  Executor& readers_;
  Attachments attachments_;
  RateLimiters rate_limiters_;
  AnswerCache answer_cache_;
  const GatewayContext context_;
  ApiKeys api_keys_;
  WalletPath wallet_;
  Views views_;
  AdminApi admin_;
  std::unique_ptr<X402Path> x402_;  // with a settler only
  const HttpServer* server_ = nullptr;

  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_cv_;
  int64_t paid_in_flight_ = 0;  // guarded by in_flight_mutex_
};

}  // namespace agentpay
