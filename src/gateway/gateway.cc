// Request routing, the 402 challenge and crash recovery. The payment paths are in wallet_path.cc
// and x402_path.cc, the read-only answers in views.cc, the admin API in admin_api.cc.
#include "gateway/gateway.h"

#include <future>
#include <map>

#include "core/check.h"
#include "core/money.h"
#include "gateway/answers.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"
#include "http/request_target.h"

namespace agentpay {

namespace {
constexpr size_t kMaxBlockingQueue = 4096;
// The paid path's reads: two threads keep the CPU cost of a replay at what it was when the read ran
// on the I/O thread (bench/README.md, "Issue 37: no event thread waits"); the bound is the blocking
// pool's, and a read refused past it is no error (the decision reads for itself, or 503).
constexpr size_t kReaderThreads = 2;
constexpr size_t kMaxQueuedReads = 4096;

// The gateway's own endpoints and pages: never forwarded to a paid route.
bool IsReservedPath(std::string_view path) {
  return path == "/healthz" || path == "/metrics" || path.starts_with("/v1/") ||
         path.starts_with("/admin/") || path == "/console" || path.starts_with("/console/") ||
         path == "/inspector" || path.starts_with("/inspector/");
}

// The route table of a valid configuration. Routes that differ only in their prefix are of the
// same terms: a reading that moves a request between them changes neither price nor upstream.
RouteTable RouteTableOf(const std::vector<RouteConfig>& routes) {
  std::vector<RoutePrefix> prefixes;
  for (size_t i = 0; i < routes.size(); ++i) {
    size_t terms = i;
    for (size_t j = 0; j < i; ++j) {
      const RouteConfig& a = routes[i];
      const RouteConfig& b = routes[j];
      if (a.price == b.price && a.upstream_url == b.upstream_url && a.timeout_ms == b.timeout_ms &&
          a.require_idempotency_key == b.require_idempotency_key && a.settle == b.settle) {
        terms = j;
        break;
      }
    }
    prefixes.push_back({routes[i].prefix, terms});
  }
  auto table = RouteTable::Make(prefixes);
  AGENTPAY_CHECK(table.ok());  // serve_config.cc refuses such prefixes at start
  return std::move(*table);
}
}  // namespace

Gateway::Gateway(GatewayConfig config, Store& store, Clock& clock, Random& random, Timers& timers,
                 Upstream& upstream, Settler* settler, GatewayExecutors executors)
    : config_(std::move(config)),
      store_(store),
      clock_(clock),
      random_(random),
      settler_(settler),
      x402_offers_(config_.chain, config_.routes, config_.public_url),
      route_table_(RouteTableOf(config_.routes)),
      instance_id_("gw_" + RandomHex(random, 8)),
      own_pool_(executors.blocking != nullptr
                    ? nullptr
                    : std::make_unique<WorkerPool>(config_.blocking_threads, kMaxBlockingQueue)),
      blocking_(executors.blocking != nullptr ? *executors.blocking : *own_pool_),
      own_readers_(executors.readers != nullptr
                       ? nullptr
                       : std::make_unique<WorkerPool>(kReaderThreads, kMaxQueuedReads)),
      readers_(executors.readers != nullptr ? *executors.readers : *own_readers_),
      attachments_(store, timers, blocking_, metrics_, config_.attach_wait_ms),
      rate_limiters_(config_.rate_limits),
      answer_cache_(config_.answer_cache_bytes, config_.answer_cache_margin_ms),
      context_{config_,  store,        clock,        random,         timers,   upstream,
               metrics_, attachments_, instance_id_, rate_limiters_, readers_, answer_cache_},
      api_keys_(store, clock),
      wallet_(context_, api_keys_),
      views_(context_, api_keys_),
      admin_(context_) {
  // No route at all is a facilitator only (serve --facilitator-listen): every path is 404 here.
  for (const auto& route : config_.routes) AGENTPAY_CHECK(route.price > 0);
  if (settler_ != nullptr) {
    // What the settler settles is what the challenge advertises and payments are verified against.
    const SettlerConfig& settles = settler_->config();
    const x402::Requirements& offered = x402_offers_.Common();
    AGENTPAY_CHECK(settles.chain_id == offered.chain_id && settles.token == offered.asset &&
                   settles.asset_name == offered.asset_name &&
                   settles.asset_version == offered.asset_version);
    x402_ = std::make_unique<X402Path>(context_, *settler_, x402_offers_, executors.chain);
  }
}

Gateway::~Gateway() {
  // Tasks on the pools use the members declared after them; they finish before anything goes. (An
  // injected executor's owner must not run this gateway's tasks once it is gone: the simulator
  // drops them with the process that scheduled them.)
  if (own_pool_) own_pool_->Stop();
  if (own_readers_) own_readers_->Stop();
  // Duplicates still attached (only when Drain timed out) are answered now, while the members their
  // answers touch still exist; their later timers then find them answered.
  attachments_.Close();
  x402_.reset();
  if (registered_) (void)store_.ReleaseInstance(instance_id_);
}

Status Gateway::RegisterInstance() {
  AGENTPAY_CHECK(!registered_);
  Status status = store_.RegisterInstance(instance_id_);
  registered_ = status.ok();
  return status;
}

HttpResponse Gateway::Handle(const HttpRequest& request) {
  std::promise<HttpResponse> answer;
  auto future = answer.get_future();
  HandleAsync(std::make_shared<HttpRequest>(request),
              [&answer](HttpResponse response) { answer.set_value(std::move(response)); });
  return future.get();
}

namespace {
// Whether a request offers a payment (CONTRACT §3): without one, a paid route answers 402.
bool OffersPayment(const HttpRequest& request) {
  return request.Header("Authorization") || request.Header("PAYMENT-SIGNATURE") ||
         request.Header("X-PAYMENT");
}

HttpResponse InvalidTarget(const Status& status) {
  return ProblemResponse(400, ProblemCode::kInvalidTarget, status.message());
}

}  // namespace

std::optional<HttpResponse> Gateway::AdmitClient(const HttpRequest& request) {
  auto retry_after_s =
      rate_limiters_.client.Take(ClientKey(request.remote_address), context_.timers.MonotonicMs());
  if (!retry_after_s) return std::nullopt;
  metrics_.CountResponse(429);
  return TooManyRequests(*retry_after_s, "client address");
}

HttpResponse Gateway::AnswerFromHead(const HttpRequest& head, HttpResponse answer) {
  if (auto refused = AdmitClient(head)) return std::move(*refused);
  if (!answer.Header("Idempotent-Replayed")) answer.SetHeader("Idempotent-Replayed", "false");
  metrics_.CountResponse(answer.status);
  return answer;
}

HeadDecision Gateway::AnswerHead(const HttpRequest& head, HeadDone done) {
  Destination destination = Route(head.target);
  switch (destination.kind) {
    case Destination::Kind::kRefused:
      return HeadDecision::Answer(AnswerFromHead(head, std::move(destination.refusal)));
    case Destination::Kind::kGateway:
      return HeadDecision::ReadBody();
    case Destination::Kind::kPaid:
      break;
  }
  const RouteConfig* route = destination.route;
  // Only the paths that read the target copy the head (no body yet: headers only).
  auto normal = [&head, &destination] {
    HttpRequest copy = head;
    copy.target = destination.target;
    return copy;
  };
  if (!OffersPayment(head)) {
    return HeadDecision::Answer(
        AnswerFromHead(head, RouteChallenge(x402_offers_, destination.target, *route)));
  }
  // Called once, last, on the paths that let the body in: it moves the target out of `destination`.
  auto make_verdict = [this, &destination, route] {
    auto verdict = std::make_shared<HeadVerdict>();
    verdict->target = std::move(destination.target);
    verdict->route = route;
    verdict->head_ms = clock_.NowMs();
    return verdict;
  };
  // The payment is checked before the body is read: a stranger cannot make the gateway hold a
  // body (memory) for a key it does not have or a payment header that will be refused anyway.
  // The key's account goes on with the request (HeadVerdict): it is not looked up twice.
  if (head.Header("Authorization")) {
    auto decide = [this](const HttpRequest& head, std::shared_ptr<HeadVerdict> verdict,
                         ApiKeys::Lookup account) {
      if (auto refused = ApiKeys::Refusal(account)) {
        return HeadDecision::Answer(AnswerFromHead(head, std::move(*refused)));
      }
      verdict->account = std::move(**account);
      return HeadDecision::ReadBody(std::move(verdict));
    };
    auto verdict = make_verdict();
    auto later = [decide, head_copy = head, verdict, done](ApiKeys::Lookup account) {
      done(decide(head_copy, verdict, std::move(account)));
    };
    auto account = api_keys_.AuthenticateOrDefer(head, readers_, std::move(later));
    if (!account) return HeadDecision::Later();
    return decide(head, std::move(verdict), std::move(*account));
  }
  if (x402_) {
    if (auto refused = x402_->RefuseFromHead(normal(), *route)) {
      return HeadDecision::Answer(AnswerFromHead(head, std::move(*refused)));
    }
  }
  return HeadDecision::ReadBody(make_verdict());
}

void Gateway::HandleAsync(std::shared_ptr<const HttpRequest> request, Respond respond) {
  // Routes, prices, fingerprints and the upstream all see the normalised target (issue 13 item 6).
  // A paid request whose head AnswerHead let through was routed (and its key authenticated) then.
  auto verdict = std::dynamic_pointer_cast<const HeadVerdict>(request->head_note);
  Destination destination =
      verdict ? Destination{Destination::Kind::kPaid, verdict->target, verdict->route, {}}
              : Route(request->target);
  if (destination.kind == Destination::Kind::kRefused) {
    return respond(std::move(destination.refusal));
  }
  if (destination.target != request->target) {
    auto normal = std::make_shared<HttpRequest>(*request);  // rare: a target sent unnormalised
    normal->target = std::move(destination.target);
    request = std::move(normal);
  }
  if (destination.kind == Destination::Kind::kPaid) {
    std::optional<std::string> account;
    const int64_t now_ms = clock_.NowMs();
    if (verdict && now_ms >= verdict->head_ms && now_ms - verdict->head_ms < kMaxHeadVerdictAgeMs) {
      account = verdict->account;
    }
    return HandlePaid(std::move(request), *destination.route, std::move(account),
                      std::move(respond));
  }
  bool queued = blocking_.TrySubmit([this, request, respond] {
    // Nothing here is meant to throw; if something does, the pool thread must not die with it and
    // the client learns only an error id (the reason goes to the log).
    HttpResponse response;
    try {
      response = HandleBlocking(*request);
    } catch (const std::exception& error) {
      response = InternalErrorResponse(error.what());
    }
    respond(std::move(response));
  });
  if (!queued) respond(RetryLater(ProblemCode::kLimitExceeded, "the gateway is at capacity"));
}

HttpResponse Gateway::HandleBlocking(const HttpRequest& request) {
  std::string_view path = request.Path();
  if (path == "/healthz") return views_.Health();
  if (path == "/metrics") return views_.Metrics(server_);
  constexpr std::string_view kOperations = "/v1/operations/";
  if (path.starts_with(kOperations)) {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    std::string_view rest = path.substr(kOperations.size());
    constexpr std::string_view kTrace = "/trace";
    bool trace = rest.ends_with(kTrace);
    if (trace) rest.remove_suffix(kTrace.size());
    return views_.Operation(request, rest, trace);
  }
  if (path == "/v1/account") {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return views_.Account(request);
  }
  if (path.starts_with("/admin/")) return admin_.Handle(request);
  return ProblemResponse(
      404, ProblemCode::kNotFound,
      IsReservedPath(path) ? "no such endpoint" : "no paid route serves this path");
}

Gateway::Destination Gateway::Route(std::string_view raw_target) const {
  auto target = NormalizeTarget(raw_target);
  if (!target.ok()) {
    return {Destination::Kind::kRefused, {}, nullptr, InvalidTarget(target.status())};
  }
  Destination destination;  // kGateway
  destination.target = std::move(*target);
  const std::string_view path =
      std::string_view(destination.target).substr(0, destination.target.find('?'));
  if (IsReservedPath(path)) return destination;
  const RouteMatch match = route_table_.Match(path);
  switch (match.outcome) {
    case RouteOutcome::kMatched:
      destination.kind = Destination::Kind::kPaid;
      destination.route = &config_.routes[match.route];
      return destination;
    case RouteOutcome::kUnmatched:
      return destination;
    case RouteOutcome::kAmbiguous:
      return {Destination::Kind::kRefused,
              {},
              nullptr,
              ProblemResponse(400, ProblemCode::kAmbiguousTarget,
                              "some servers read this path as one below " +
                                  config_.routes[match.route].prefix +
                                  ", another paid route (they drop ';' parameters and trailing "
                                  "dots and spaces, ignore letter case, decode escapes twice or "
                                  "fold Unicode to ASCII); the gateway does not: send the path "
                                  "as the route it is meant for spells it")};
  }
  return destination;
}

void Gateway::HandlePaid(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                         std::optional<std::string> account, Respond respond) {
  // Every answer on a paid route is counted and says whether it was replayed; answers given before
  // any operation existed (402 challenge, 401, 400) were not.
  Respond answer = TrackPaid([respond = std::move(respond)](HttpResponse response) {
    if (!response.Header("Idempotent-Replayed")) response.SetHeader("Idempotent-Replayed", "false");
    respond(std::move(response));
  });
  bool has_wallet = request->Header("Authorization").has_value();
  if (!OffersPayment(*request)) return answer(RouteChallenge(x402_offers_, request->target, route));
  if (has_wallet) {
    return wallet_.Pay(std::move(request), route, std::move(account), std::move(answer));
  }
  if (!x402_) {
    return answer(ProblemResponse(501, ProblemCode::kX402NotEnabled,
                                  "x402 payments are not enabled on this gateway; pay with a "
                                  "wallet API key (Authorization: Bearer)"));
  }
  x402_->Pay(std::move(request), route, std::move(answer));
}

// T12 with several processes on one store: whether an attempt is dead is asked of the store
// (Store::InstanceAlive), outside the decision, since liveness lives in locks, not in rows; the
// decision then re-reads the operations and lets the core decide each one.
Result<int> Gateway::RecoverInterrupted() {
  const int64_t listed_at = clock_.NowMs();
  OperationFilter filter;
  filter.fulfillment = Fulfillment::kInProgress;
  filter.limit = 1000000;
  std::vector<Operation> listed;
  Status read = store_.Read([&](Transaction& tx) {
    auto ops = tx.ListOperations(filter);
    if (!ops.ok()) return ops.status();
    listed = std::move(*ops);
    return Status::Ok();
  });
  if (!read.ok()) return read;
  std::map<std::string, bool> alive;  // claimant instance -> alive
  for (const Operation& op : listed) {
    if (op.claimed_by.empty() || op.lease_expires_ms <= listed_at ||
        alive.contains(op.claimed_by)) {
      continue;  // recovered whatever its claimant says, or already asked
    }
    if (op.claimed_by == instance_id_) {
      alive.emplace(op.claimed_by, true);  // ourselves: never probe our own lock
      continue;
    }
    auto answer = store_.InstanceAlive(op.claimed_by);
    if (!answer.ok()) return answer.status();
    alive.emplace(op.claimed_by, *answer);
  }
  int recovered = 0;
  Status status = store_.Write([&](Transaction& tx) {
    recovered = 0;
    const int64_t now = clock_.NowMs();
    auto ops = tx.ListOperations(filter);
    if (!ops.ok()) return ops.status();
    for (const Operation& op : *ops) {
      // A claim taken after the listing was taken by a process alive at that moment: left alone
      // (its lease, or a later recovery, decides it).
      auto known = alive.find(op.claimed_by);
      const bool claimant_alive = !op.claimed_by.empty() && (known == alive.end() || known->second);
      auto next = ::agentpay::RecoverInterrupted(op, now, claimant_alive);
      if (!next) continue;
      if (Status updated = tx.UpdateOperation(*next); !updated.ok()) return updated;
      const bool wallet = WalletAccountOf(op.principal).has_value();
      const std::string who = op.lease_expires_ms <= now ? "its claim expired"
                              : op.claimed_by.empty()
                                  ? "its gateway process is gone"
                                  : "its gateway process (" + op.claimed_by + ") is gone";
      Status appended = tx.AppendEvent(
          {op.id, now, TraceActor::kGateway, "recovered",
           "attempt " + std::to_string(op.attempts) + " was interrupted (" + who + ")" +
               (wallet ? "; hold kept"
                       : "; settlement " + std::string(SettlementName(op.settlement))) +
               ", fulfillment pending_retry",
           TraceFacts()
               .Attempt(op.attempts)
               .Reason(op.lease_expires_ms <= now ? "claim_expired" : "gateway_process_gone")});
      if (!appended.ok()) return appended;
      ++recovered;
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  metrics_.CountRecovered(static_cast<uint64_t>(recovered));
  return recovered;
}

Respond Gateway::TrackPaid(Respond respond) {
  {
    std::lock_guard lock(in_flight_mutex_);
    ++paid_in_flight_;
  }
  // The request's decisions are all committed when its answer is given: it stops counting as in
  // flight first, and `respond` comes last. Whoever waits for the answer (Handle, a test, shutdown
  // after Drain) may destroy the gateway as soon as it has it; nothing here touches the gateway
  // after that (it once did, and a test that destroyed its gateway right away corrupted the heap).
  return [this, respond = std::move(respond)](HttpResponse response) {
    metrics_.CountResponse(response.status);
    {
      std::lock_guard lock(in_flight_mutex_);
      --paid_in_flight_;
      in_flight_cv_.notify_all();  // under the lock: Drain cannot return before it is done
    }
    respond(std::move(response));
  };
}

int64_t Gateway::Drain(int64_t timeout_ms) {
  std::unique_lock lock(in_flight_mutex_);
  in_flight_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                         [this] { return paid_in_flight_ == 0; });
  return paid_in_flight_;
}

}  // namespace agentpay
