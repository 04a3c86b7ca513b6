// See swarm.h. One Run is one seed: a world (swarm_world.h), the real Gateway on it, the clients
// and the checks.
#include "sim/swarm.h"

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/audit.h"
#include "core/check.h"
#include "core/mutants.h"
#include "gateway/gateway.h"
#include "gateway/json_views.h"
#include "gateway/views.h"
#include "sim/swarm_world.h"
#include "store/books_audit.h"
#include "workers/hold_sweeper.h"

namespace agentpay::sim {
namespace {

constexpr int64_t kPrice = 10;
constexpr int64_t kMaxCommitDelayMs = 5;
// A client gives an attempt up after this; each seed draws the route's timeout on either side.
constexpr int64_t kClientTimeoutMs = 2500;
constexpr int kMaxAttempts = 10;
constexpr int64_t kMaxBackoffMs = 2000;
// A run that has not ended by then is a violation of its own (something never settles).
constexpr int64_t kMaxSimulatedMs = 15 * 60 * 1000;
constexpr uint64_t kMaxSteps = 500'000;
const char* const kAdminToken = "sim-admin-token";

enum class Kind { kWellBehaved, kNaive, kTamperer };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kWellBehaved:
      return "well-behaved";
    case Kind::kNaive:
      return "naive";
    case Kind::kTamperer:
      return "tamperer";
  }
  return "?";
}

// What a seed draws: the shape of its world and the rate of every fault.
struct Mix {
  int accounts = 1;
  int clients = 1;
  int actions = 1;  // per client
  int crowd = 1;    // copies of each well-behaved client (its actions, key for key) at once
  int64_t deposit = 0;
  int drop_request = 0;  // per mille of requests lost on the way
  int drop_answer = 0;   // per mille of answers lost on the way back
  int duplicate = 0;     // per mille of requests delivered twice
  int64_t max_delay_ms = 1;
  int crash = 0;       // per mille of client sends after which the gateway crashes soon
  int clock_step = 0;  // per mille of client sends after which the wall clock jumps
  SellerMix seller;
  // The gateway's own settings, anywhere in what `serve` accepts that a test would use.
  int64_t route_timeout_ms = 1000;
  int64_t hold_ttl_ms = 4000;
  int64_t sweep_interval_ms = 500;
  int64_t attach_wait_ms = 800;

  static Mix Draw(SeededRandom& r) {
    Mix m;
    m.accounts = static_cast<int>(r.Between(1, 3));
    m.clients = static_cast<int>(r.Between(1, 6));
    m.actions = static_cast<int>(r.Between(1, 4));
    m.crowd = r.Chance(300) ? static_cast<int>(r.Between(2, 5)) : 1;
    m.deposit = r.Chance(300) ? kPrice * r.Between(1, 6) : kPrice * 1000;
    const auto rate = [&r](int max) {
      return r.Chance(300) ? 0 : static_cast<int>(r.Between(0, max));
    };
    m.drop_request = rate(200);
    m.drop_answer = rate(200);
    m.duplicate = rate(200);
    m.max_delay_ms = r.Between(1, 400);
    m.crash = rate(40);
    m.clock_step = rate(30);
    m.seller.client_error = rate(150);
    m.seller.server_error = rate(200);
    m.seller.slow = rate(200);
    m.seller.hang = rate(100);
    m.seller.work_then_drop = rate(100);
    m.seller.broken = rate(50);
    m.route_timeout_ms = r.Between(50, 3000);
    m.hold_ttl_ms = r.Between(1000, 10000);
    m.sweep_interval_ms = r.Between(10, 1000);
    m.attach_wait_ms = r.Between(0, 2000);
    return m;
  }

  std::string Describe() const {
    return "accounts=" + std::to_string(accounts) + " clients=" + std::to_string(clients) +
           " actions=" + std::to_string(actions) + " crowd=" + std::to_string(crowd) +
           " deposit=" + std::to_string(deposit) + " drop_req=" + std::to_string(drop_request) +
           " drop_ans=" + std::to_string(drop_answer) + " dup=" + std::to_string(duplicate) +
           " delay<=" + std::to_string(max_delay_ms) + "ms crash=" + std::to_string(crash) +
           " clock_step=" + std::to_string(clock_step) +
           " seller(4xx=" + std::to_string(seller.client_error) +
           " 5xx=" + std::to_string(seller.server_error) + " slow=" + std::to_string(seller.slow) +
           " hang=" + std::to_string(seller.hang) +
           " drop=" + std::to_string(seller.work_then_drop) +
           " broken=" + std::to_string(seller.broken) +
           ") gateway(timeout=" + std::to_string(route_timeout_ms) +
           " hold_ttl=" + std::to_string(hold_ttl_ms) +
           " sweep=" + std::to_string(sweep_interval_ms) +
           " attach_wait=" + std::to_string(attach_wait_ms) + ")";
  }
};

struct Action {
  std::string key;
  std::string body;
  std::vector<std::string> keys;  // every key it was sent with (a naive client's grow)
  int attempts = 0;
  bool finished = false;
};

struct Client {
  int id = 0;
  Kind kind = Kind::kWellBehaved;
  size_t account = 0;
  std::vector<Action> actions;
  size_t next = 0;            // the action under way
  uint64_t live_attempt = 0;  // the attempt whose answer (or timeout) counts; 0: none
  int64_t backoff_ms = 0;
  bool done() const { return next >= actions.size(); }
};

struct Account {
  std::string id;
  std::string api_key;
  std::string principal() const { return "account:" + id; }
};

class Run {
 public:
  Run(uint64_t seed, bool tracing)
      : seed_(seed),
        tracing_(tracing),
        world_(seed),
        ids_(seed ^ 0x5eed5eed5eed5eedULL),
        clock_(scheduler_),
        timers_(scheduler_),
        mix_(Mix::Draw(world_)),
        upstream_(scheduler_, world_, mix_.seller) {
    outcome_.seed = seed;
    outcome_.mix = mix_.Describe();
    RouteConfig route;
    route.prefix = "/";
    route.upstream_url = "http://seller.sim";
    route.price = kPrice;
    route.timeout_ms = mix_.route_timeout_ms;
    config_.routes = {route};
    config_.admin_token = kAdminToken;
    config_.hold_ttl_ms = mix_.hold_ttl_ms;
    config_.sweep_interval_ms = mix_.sweep_interval_ms;
    config_.attach_wait_ms = mix_.attach_wait_ms;
  }

  SeedOutcome Go() {
    auto store = SimStore::Open(scheduler_, world_, kMaxCommitDelayMs);
    if (!store.ok()) {
      Violate("store_opens", store.status().ToString());
      return Finish();
    }
    store_ = std::move(*store);
    executor_ = std::make_unique<SimExecutor>(scheduler_, *store_);
    StartGateway();
    for (int i = 0; i < mix_.accounts && !violated(); ++i) CreateAccount(i);
    if (!violated()) MakeClients();
    for (Client& c : clients_)
      scheduler_.After(world_.Between(0, 50), Scheduler::kWorld, [this, &c] { Send(c); });
    RunUntil([this] { return AllDone(); });
    if (!violated()) FinalPhase();
    return Finish();
  }

  // The run as a trace (RunSeedTraced): the world's events, then every operation's own trace.
  nlohmann::json Trace() {
    std::vector<TraceEvent> events = std::move(world_events_);
    OperationFilter page;
    page.limit = 100;
    while (store_) {  // none when the store did not open
      std::vector<Operation> ops;
      Status listed = store_->ReadUnsynced([&](Transaction& tx) -> Status {
        auto found = tx.ListOperations(page);
        if (!found.ok()) return found.status();
        ops = std::move(*found);
        return Status::Ok();
      });
      if (!listed.ok() || ops.empty()) break;
      for (const Operation& op : ops) {
        auto records = ReadOperationRecords(*store_, op.id, OperationReads{true, false});
        if (!records.ok() || !*records) continue;
        for (TraceEvent& event : (*records)->Trace()) {
          event.detail = op.idempotency_key + ": " + event.detail;
          events.push_back(std::move(event));
        }
      }
      page.before_id = ops.back().id;
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const TraceEvent& a, const TraceEvent& b) { return a.at_ms < b.at_ms; });
    nlohmann::json trace = TraceJson(events);
    trace["seed"] = std::to_string(seed_);
    trace["mix"] = outcome_.mix;
    if (outcome_.violation) {
      trace["violation"] = {{"step", outcome_.violation->step},
                            {"invariant", outcome_.violation->invariant},
                            {"detail", outcome_.violation->detail}};
    }
    return trace;
  }

 private:
  // ---- bookkeeping ----
  // A world event for the trace (clients, crashes), stamped with the gateway's wall clock.
  void Record(std::string actor, std::string kind, std::string detail, TraceFacts facts = {}) {
    if (!tracing_) return;
    world_events_.emplace_back("", clock_.NowMs(), std::move(actor), std::move(kind),
                               std::move(detail), std::move(facts));
  }
  void Note(const std::string& text) {
    for (unsigned char ch : text) {
      hash_ ^= ch;
      hash_ *= 0x100000001b3ULL;
    }
    hash_ ^= 0xff;
    hash_ *= 0x100000001b3ULL;
  }
  bool violated() const { return outcome_.violation.has_value(); }
  void Violate(std::string invariant, std::string detail) {
    if (violated()) return;
    outcome_.violation =
        SwarmViolation{scheduler_.steps(), std::move(invariant), std::move(detail)};
  }
  SeedOutcome Finish() {
    outcome_.steps = scheduler_.steps();
    outcome_.simulated_ms = scheduler_.now_ms();
    outcome_.event_hash = hash_;
    // The gateway goes before the world its callbacks point into.
    if (gateway_) scheduler_.Kill(scheduler_.gateway_epoch());
    gateway_.reset();
    return outcome_;
  }

  // Runs events until `stop` holds, a violation, or the bounds; checks the books after each.
  template <typename Stop>
  void RunUntil(Stop stop) {
    while (!violated() && !stop()) {
      if (scheduler_.steps() >= kMaxSteps || scheduler_.now_ms() > kMaxSimulatedMs) {
        Violate("run_ends", "the run did not end within its bounds (" +
                                std::to_string(scheduler_.steps()) + " steps, " +
                                std::to_string(scheduler_.now_ms()) + " ms simulated)");
        return;
      }
      if (!scheduler_.RunNext(kMaxSimulatedMs)) {
        Violate("run_ends", scheduler_.pending() == 0
                                ? "nothing left to happen, yet the run is not over"
                                : "the run did not end within " +
                                      std::to_string(kMaxSimulatedMs / 60000) +
                                      " simulated minutes");
        return;
      }
      CheckStep();
    }
  }

  // After every step: the books audit (core/audit.h, the fault suite's checker), and no
  // account's balances break the wallet's rules (held and captured within what was deposited).
  void CheckStep() {
    CheckBooks();
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      auto accounts = tx.ListAccounts();
      if (!accounts.ok()) return accounts.status();
      for (const AccountRecord& a : *accounts) {
        if (!a.balances.Valid()) {
          Violate("balances_valid", a.id + ": deposited " + std::to_string(a.balances.deposited) +
                                        ", captured " + std::to_string(a.balances.captured) +
                                        ", held " + std::to_string(a.balances.held));
        }
      }
      return Status::Ok();
    });
    if (!read.ok()) Violate("store_reads", read.ToString());
  }

  // ---- the gateway process ----
  void StartGateway() {
    const uint64_t epoch = scheduler_.NewEpoch();
    scheduler_.set_gateway_epoch(epoch);
    gateway_ = std::make_unique<Gateway>(config_, *store_, clock_, ids_, timers_, upstream_,
                                         nullptr, executor_.get());
    SimStore::Inline blocking(*store_);
    if (Status s = gateway_->RegisterInstance(); !s.ok())
      return Violate("gateway_starts", s.ToString());
    auto recovered = gateway_->RecoverInterrupted();
    if (!recovered.ok()) return Violate("gateway_starts", recovered.status().ToString());
    Note("start " + std::to_string(epoch) + " recovered " + std::to_string(*recovered));
    Record("gateway", "started",
           "gateway process " + std::to_string(epoch) + " started; it recovered " +
               std::to_string(*recovered) + " operation(s) of a dead one");
    ScheduleSweep(epoch);
  }

  void ScheduleSweep(uint64_t epoch) {
    scheduler_.After(mix_.sweep_interval_ms, epoch, [this, epoch] {
      SimStore::Inline blocking(*store_);
      auto swept = SweepExpiredHolds(*store_, clock_, ids_, 64);
      if (!swept.ok()) return Violate("sweeper_runs", swept.status().ToString());
      ScheduleSweep(epoch);
    });
  }

  void CrashSoon() {
    scheduler_.After(world_.Between(0, 300), Scheduler::kWorld, [this] {
      if (!gateway_) return;
      ++outcome_.crashes;
      Note("crash");
      Record("gateway", "crashed", "the gateway process was killed (kill -9)");
      if (Status s = store_->Crash(gateway_->instance_id()); !s.ok()) {
        return Violate("store_recovers",
                       "the database did not open after a crash: " + s.ToString());
      }
      scheduler_.Kill(scheduler_.gateway_epoch());
      scheduler_.set_gateway_epoch(0);
      gateway_.reset();
      scheduler_.After(world_.Between(50, 1500), Scheduler::kWorld, [this] {
        if (!gateway_) StartGateway();
      });
    });
  }

  // One request answered before anything else happens (setting up the run).
  HttpResponse CallNow(HttpRequest request) {
    std::optional<HttpResponse> answer;
    gateway_->HandleAsync(std::make_shared<const HttpRequest>(std::move(request)),
                          [&answer](HttpResponse r) { answer = std::move(r); });
    RunUntil([&answer] { return answer.has_value(); });
    return answer.value_or(HttpResponse{});
  }

  HttpRequest AdminRequest(const std::string& target, const nlohmann::json& body) {
    HttpRequest request;
    request.method = "POST";
    request.target = target;
    request.headers = {{"Authorization", std::string("Bearer ") + kAdminToken},
                       {"Content-Type", "application/json"}};
    request.body = body.dump();
    return request;
  }

  void CreateAccount(int i) {
    HttpResponse created =
        CallNow(AdminRequest("/admin/v1/accounts", {{"name", "sim-" + std::to_string(i)}}));
    auto json = nlohmann::json::parse(created.body, nullptr, false);
    if (created.status != 201 || !json.is_object() || !json["account_id"].is_string() ||
        !json["api_key"].is_string()) {
      return Violate("setup",
                     "account not created: " + std::to_string(created.status) + " " + created.body);
    }
    Account account{json["account_id"].get<std::string>(), json["api_key"].get<std::string>()};
    HttpResponse deposit =
        CallNow(AdminRequest("/admin/v1/accounts/" + account.id + "/deposits",
                             {{"amount", std::to_string(mix_.deposit)},
                              {"reference", "sim-deposit-" + std::to_string(i)}}));
    if (deposit.status != 201) return Violate("setup", "deposit refused: " + deposit.body);
    accounts_.push_back(std::move(account));
  }

  std::string NewKey() { return "k-" + RandomHex(world_, 8); }

  void MakeClients() {
    int id = 0;
    for (int i = 0; i < mix_.clients; ++i) {
      const uint64_t draw = world_.Below(10);
      const Kind kind = draw < 6 ? Kind::kWellBehaved : draw < 8 ? Kind::kNaive : Kind::kTamperer;
      Client c;
      c.kind = kind;
      c.account = world_.Below(accounts_.size());
      for (int a = 0; a < mix_.actions; ++a) {
        Action action;
        action.key = NewKey();
        action.body = "{\"task\":\"" + RandomHex(world_, 4) + "\"}";
        action.keys = {action.key};
        c.actions.push_back(std::move(action));
      }
      // A crowd: the same actions from several well-behaved clients at once.
      const int copies = kind == Kind::kWellBehaved ? mix_.crowd : 1;
      for (int k = 0; k < copies; ++k) {
        Client copy = c;
        copy.id = id++;
        clients_.push_back(std::move(copy));
      }
    }
  }

  bool AllDone() const {
    return std::all_of(clients_.begin(), clients_.end(), [](const Client& c) { return c.done(); });
  }

  // ---- clients and the network ----
  static std::string ClientActor(const Client& c) { return "client " + std::to_string(c.id); }

  int64_t Delay() { return world_.Between(0, mix_.max_delay_ms); }

  void Send(Client& c) {
    if (c.done()) return;
    Action& a = c.actions[c.next];
    ++a.attempts;
    ++outcome_.requests;
    const uint64_t attempt = ++attempts_;
    c.live_attempt = attempt;
    Record(ClientActor(c), "sent",
           a.key + ": sent by " + std::string(KindName(c.kind)) + " client " + std::to_string(c.id),
           TraceFacts().Attempt(a.attempts));
    auto request = std::make_shared<HttpRequest>();
    request->method = "POST";
    request->target = "/work";
    request->headers = {{"Authorization", "Bearer " + accounts_[c.account].api_key},
                        {"Content-Type", "application/json"},
                        {"Idempotency-Key", a.key}};
    request->body = a.body;
    const int copies = faults_ && world_.Chance(mix_.duplicate) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      if (faults_ && world_.Chance(mix_.drop_request)) continue;
      scheduler_.After(Delay(), Scheduler::kWorld,
                       [this, &c, attempt, request] { Arrive(c, attempt, request); });
    }
    scheduler_.After(kClientTimeoutMs, Scheduler::kWorld,
                     [this, &c, attempt] { Answer(c, attempt, std::nullopt, "timeout"); });
    if (faults_ && world_.Chance(mix_.crash)) CrashSoon();
    if (faults_ && world_.Chance(mix_.clock_step)) {
      const int64_t step = world_.Between(-2000, 2000);
      clock_.Step(step);
      Note("clock " + std::to_string(step));
    }
  }

  void Arrive(Client& c, uint64_t attempt, std::shared_ptr<const HttpRequest> request) {
    if (!gateway_) {
      scheduler_.After(Delay(), Scheduler::kWorld,
                       [this, &c, attempt] { Answer(c, attempt, std::nullopt, "refused"); });
      return;
    }
    const uint64_t epoch = scheduler_.gateway_epoch();
    gateway_->HandleAsync(std::move(request), [this, &c, attempt, epoch](HttpResponse response) {
      if (!scheduler_.Alive(epoch)) return;                    // a dead process sends nothing
      if (faults_ && world_.Chance(mix_.drop_answer)) return;  // lost: the client times out
      scheduler_.After(Delay(), Scheduler::kWorld,
                       [this, &c, attempt, response = std::move(response)] {
                         Answer(c, attempt, response, "");
                       });
    });
  }

  void Answer(Client& c, uint64_t attempt, std::optional<HttpResponse> response,
              const std::string& failure) {
    if (c.done() || attempt != c.live_attempt) return;  // an attempt already decided
    c.live_attempt = 0;
    Action& a = c.actions[c.next];
    if (!response) {
      Note(std::to_string(c.id) + " " + a.key + " " + failure);
      Record(ClientActor(c), failure, a.key + ": no answer (" + failure + ")",
             TraceFacts().Attempt(a.attempts));
      // A refusal was never sent; a timeout may have been acted on.
      return Retry(c, /*timed_out=*/failure == "timeout");
    }
    ++outcome_.answers;
    const int status = response->status;
    Note(std::to_string(c.id) + " " + a.key + " " + std::to_string(status) + " " + response->body);
    Record(ClientActor(c), "answered", a.key + ": answered " + std::to_string(status),
           TraceFacts().Attempt(a.attempts).HttpStatus(status));
    if (status >= 200 && status < 300 && status != 202) {  // 202: still in flight, not an answer
      auto [it, first] = delivered_.emplace(a.key, response->body);
      if (!first && it->second != response->body && c.kind != Kind::kTamperer) {
        return Violate("one_answer_per_key", "key " + a.key + " was answered " + it->second +
                                                 " and then " + response->body);
      }
      return NextAction(c);
    }
    switch (status) {
      case 422:  // the key was first used with another body
        if (c.kind != Kind::kTamperer) {
          return Violate("well_behaved_not_refused",
                         "client " + std::to_string(c.id) + " (" + KindName(c.kind) +
                             ") sent key " + a.key +
                             " with one body only, yet got 422: " + response->body);
        }
        return NextAction(c);
      case 402:  // not enough money: nothing was held
      case 400:
      case 404:  // the seller refused: the hold was released
        return NextAction(c);
      case 202:
      case 409:
      case 429:
      case 500:
      case 502:
      case 503:
      case 504:
        return Retry(c, /*timed_out=*/false);
      default:
        return Violate("expected_answers", "client " + std::to_string(c.id) + " got " +
                                               std::to_string(status) + ": " + response->body);
    }
  }

  void Retry(Client& c, bool timed_out) {
    Action& a = c.actions[c.next];
    // Bounded: it gives up (the mutant never does).
    if (a.attempts >= kMaxAttempts && !MutantActive(Mutant::kUnboundedRetries)) {
      return NextAction(c);
    }
    c.backoff_ms = std::min(kMaxBackoffMs, std::max<int64_t>(50, c.backoff_ms * 2));
    const bool fresh =
        c.kind == Kind::kNaive || (timed_out && MutantActive(Mutant::kFreshRetryOnTimeout));
    if (fresh) {  // a new key for the same action: the mistake naive clients stand for
      a.key = NewKey();
      a.keys.push_back(a.key);
    } else if (c.kind == Kind::kTamperer && world_.Chance(500)) {
      a.body = "{\"task\":\"" + RandomHex(world_, 4) + "\"}";
    }
    scheduler_.After(c.backoff_ms + world_.Between(0, c.backoff_ms / 2), Scheduler::kWorld,
                     [this, &c] { Send(c); });
  }

  void NextAction(Client& c) {
    c.actions[c.next].finished = true;
    ++c.next;
    c.backoff_ms = 0;
    if (!c.done())
      scheduler_.After(world_.Between(0, 200), Scheduler::kWorld, [this, &c] { Send(c); });
  }

  // ---- the end of the run ----
  // Faults stop; every well-behaved action is asked once more with its key (as a client that comes
  // back later would), until its answer is final; time runs past every hold's expiry; then the
  // books must balance and every charge must have bought the client its answer.
  void FinalPhase() {
    faults_ = false;
    upstream_.SetMix(SellerMix{});  // operations already broken stay broken
    if (!gateway_) StartGateway();
    for (Client& c : clients_) {
      if (c.kind != Kind::kWellBehaved) continue;
      for (Action& a : c.actions) {
        a.attempts = 0;
        a.finished = false;
      }
      c.next = 0;
      c.backoff_ms = 0;
      scheduler_.After(0, Scheduler::kWorld, [this, &c] { Send(c); });
    }
    RunUntil([this] { return AllDone(); });
    const int64_t until = scheduler_.now_ms() + mix_.hold_ttl_ms + kLeaseMarginMs +
                          4 * mix_.sweep_interval_ms + mix_.route_timeout_ms;
    RunUntil([this, until] { return scheduler_.now_ms() >= until; });
    if (violated()) return;
    CheckBooks();
    CheckCharges();
  }

  void CheckBooks() {
    AuditOptions options;
    options.now_ms = clock_.NowMs();
    options.hold_slack_ms = 2 * mix_.sweep_interval_ms + kAuditHoldSlackMs;
    auto report = AuditStore(*store_, options);
    if (!report.ok()) return Violate("audit_runs", report.status().ToString());
    if (!report->ok()) {
      const AuditViolation& first = report->listed.front();
      Violate("audit_" + std::string(AuditCheckName(first.check)),
              first.subject + ": " + first.detail + " (" + std::to_string(report->violations) +
                  " violation(s))");
    }
  }

  // Every captured operation bought work the seller did; a well-behaved client is charged at most
  // once per action and holds the answer of every action it was charged for; and work the seller
  // did that nobody paid for was at least reported (an alert: the upstream may have done it).
  void CheckCharges() {
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      for (const Client& c : clients_) {
        const Account& account = accounts_[c.account];
        for (const Action& a : c.actions) {
          int charged = 0;
          for (const std::string& key : a.keys) {
            auto found = tx.FindKey(account.principal(), key);
            if (!found.ok()) return found.status();
            if (!*found) continue;
            auto op = tx.FindOperation((*found)->operation_id);
            if (!op.ok()) return op.status();
            if (!*op || (*op)->settlement != Settlement::kSettled) continue;
            const std::string& id = (*op)->id;
            ++charged;
            if (charged_.insert(id).second) ++outcome_.charges;
            if (upstream_.work().count(id) == 0) {
              Violate("charged_for_work",
                      "operation " + id + " was captured but the seller never did its work");
            }
            if (c.kind == Kind::kWellBehaved && delivered_.count(key) == 0) {
              Violate("charged_means_answered",
                      "client " + std::to_string(c.id) + " was charged for key " + key +
                          " but never received its answer, even asking again");
            }
          }
          if (c.kind == Kind::kWellBehaved && charged > 1) {
            Violate("charged_once_per_action", "client " + std::to_string(c.id) + " was charged " +
                                                   std::to_string(charged) +
                                                   " times for one action");
          }
        }
      }
      for (const auto& [id, times] : upstream_.work()) {
        auto op = tx.FindOperation(id);
        if (!op.ok()) return op.status();
        if (*op && (*op)->settlement == Settlement::kSettled) continue;
        auto alerts = tx.ListAlertsOf(id);
        if (!alerts.ok()) return alerts.status();
        if (alerts->empty()) {
          std::string state = "unknown to the store";
          if (*op) {
            state = std::string(SettlementName((*op)->settlement)) + "/" +
                    std::string(FulfillmentName((*op)->fulfillment));
          }
          Violate("unpaid_work_alerted", "the seller did the work of " + id + " (" +
                                             std::to_string(times) + " time(s)); it ended " +
                                             state + ", not charged, and no alert says so");
        }
      }
      return Status::Ok();
    });
    if (!read.ok()) Violate("store_reads", read.ToString());
  }

  const uint64_t seed_;
  const bool tracing_;
  std::vector<TraceEvent> world_events_;  // when tracing
  SeededRandom world_;  // the world's draws: faults, delays, the seller, the clients
  SeededRandom ids_;    // the gateway's randomness (ids, keys)
  Scheduler scheduler_;
  SimClock clock_;
  SimTimers timers_;
  Mix mix_;
  SimUpstream upstream_;
  GatewayConfig config_;
  std::unique_ptr<SimStore> store_;
  std::unique_ptr<SimExecutor> executor_;
  std::unique_ptr<Gateway> gateway_;  // null while the process is down
  std::vector<Account> accounts_;
  std::vector<Client> clients_;
  std::map<std::string, std::string> delivered_;  // key -> the first 2xx body a client received
  std::set<std::string> charged_;
  uint64_t attempts_ = 0;
  bool faults_ = true;
  uint64_t hash_ = 0xcbf29ce484222325ULL;
  SeedOutcome outcome_;
};

}  // namespace

SeedOutcome RunSeed(uint64_t seed) { return Run(seed, false).Go(); }

TracedSeed RunSeedTraced(uint64_t seed) {
  Run run(seed, true);
  TracedSeed traced;
  traced.outcome = run.Go();
  traced.trace = run.Trace();
  return traced;
}

}  // namespace agentpay::sim
