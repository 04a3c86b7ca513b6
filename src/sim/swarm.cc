// See swarm.h. One Run is one seed: a world (swarm_world.h), the real Gateway on it, the clients
// and the checks.
#include "sim/swarm.h"

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "chain/abi.h"
#include "chain/devnet.h"
#include "chain/keccak.h"
#include "client/attempt.h"
#include "client/challenge.h"
#include "client/x402_signer.h"
#include "core/audit.h"
#include "core/budget.h"
#include "core/check.h"
#include "core/mutants.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"
#include "gateway/settlement_config.h"
#include "gateway/views.h"
#include "settlement/reservations.h"
#include "sim/swarm_chain.h"
#include "sim/swarm_world.h"
#include "store/books_audit.h"
#include "workers/hold_sweeper.h"
#include "workers/reconciler.h"

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
// The chain: Base Sepolia's id and its USDC's EIP-712 domain, on the devnet.
constexpr uint64_t kChainId = 84532;
const char* const kToken = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
const char* const kPayTo = "0x9a7e000000000000000000000000000000000402";
// An idle devnet stamps an empty block this often, so chain time moves and expiry can be judged.
constexpr int64_t kEmptyBlockIntervalMs = 1000;

chain::PrivateKey KeyNumber(uint64_t number) {
  std::array<uint8_t, 32> bytes{};
  bytes[0] = 0x5e;
  for (int i = 0; i < 8; ++i) bytes[31 - i] = static_cast<uint8_t>(number >> (8 * i));
  return chain::PrivateKey(bytes);
}

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
  // x402: whether some clients pay on chain, and how the chain and the gateway's settlement behave.
  bool x402 = false;
  SettleTiming settle = SettleTiming::kBefore;
  int64_t confirmations = 1;
  int64_t receipt_timeout_ms = 1000;
  int64_t max_timeout_s = 60;  // the offer's maxTimeoutSeconds: how long an authorization lives
  int64_t expiry_buffer_s = 5;
  int64_t mine_delay_ms = 0;  // late receipts
  NodeMix node;
  int drop_tx = 0;  // per mille of client sends after which the node drops a pending transaction
  int reorg = 0;    // per mille of client sends after which the latest blocks are reorganised
  // The relayer's fee cap (--max-fee-per-gas) as a multiple of the devnet's base fee (0: no cap),
  // and the per mille of client sends after which the node's base fee spikes past it for a while.
  // Drawn from a stream of their own (Run::fee_random_), so that the rest of a seed's draw is what
  // it was before fee spikes existed.
  int64_t fee_cap_multiple = 0;
  int fee_spike = 0;
  // Batched settlement (--settle-batch-max, --settle-batch-window-ms), settle=before only; from a
  // stream of its own (Run::batch_random_) for the same reason. batch_max 0: off.
  int64_t batch_max = 0;
  int64_t batch_window_ms = 0;

  // The part (swarm.h) shapes the draw: kAll draws as the swarm always did; kWallet never pays on
  // chain; kX402 always does, each client alone; kBudget always does, in crowds of 2-5.
  static Mix Draw(SeededRandom& r, Part part) {
    Mix m;
    m.accounts = static_cast<int>(r.Between(1, 3));
    m.clients = static_cast<int>(r.Between(1, 6));
    m.actions = static_cast<int>(r.Between(1, 4));
    m.crowd = r.Chance(300) ? static_cast<int>(r.Between(2, 5)) : 1;
    if (part == Part::kX402) m.crowd = 1;
    if (part == Part::kBudget) m.crowd = static_cast<int>(r.Between(2, 5));
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
    m.x402 = r.Chance(500);
    if (part != Part::kAll) m.x402 = part != Part::kWallet;
    if (m.x402) {
      m.settle = r.Chance(500) ? SettleTiming::kBefore : SettleTiming::kAfter;
      m.confirmations = r.Between(1, 3);
      m.receipt_timeout_ms = r.Between(100, 3000);
      m.max_timeout_s = r.Between(5, 120);
      m.expiry_buffer_s = r.Between(1, 10);
      m.mine_delay_ms = r.Chance(300) ? 0 : r.Between(0, 4000);
      m.node.unreachable = rate(100);
      m.node.timeout = rate(100);
      m.node.hang = rate(50);
      m.node.max_latency_ms = r.Between(1, 300);
      m.node.rpc_timeout_ms = r.Between(1000, 6000);
      m.drop_tx = rate(100);
      m.reorg = rate(50);
    }
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
           " attach_wait=" + std::to_string(attach_wait_ms) + ")" +
           (x402 ? " x402(settle=" +
                       std::string(settle == SettleTiming::kBefore ? "before" : "after") +
                       " confirmations=" + std::to_string(confirmations) +
                       " receipt_timeout=" + std::to_string(receipt_timeout_ms) +
                       " validity=" + std::to_string(max_timeout_s) +
                       "s buffer=" + std::to_string(expiry_buffer_s) +
                       "s mine_delay=" + std::to_string(mine_delay_ms) +
                       " node(unreachable=" + std::to_string(node.unreachable) + " timeout=" +
                       std::to_string(node.timeout) + " hang=" + std::to_string(node.hang) +
                       " latency<=" + std::to_string(node.max_latency_ms) +
                       " rpc_timeout=" + std::to_string(node.rpc_timeout_ms) +
                       ") drop_tx=" + std::to_string(drop_tx) + " reorg=" + std::to_string(reorg) +
                       (fee_cap_multiple > 0 ? " fee_cap=" + std::to_string(fee_cap_multiple) +
                                                   "x fee_spike=" + std::to_string(fee_spike)
                                             : "") +
                       (batch_max > 0 ? " batch=" + std::to_string(batch_max) + "/" +
                                            std::to_string(batch_window_ms) + "ms"
                                      : "") +
                       ")"
                 : "");
  }
};

struct Action {
  std::string key;
  std::string body;
  std::vector<std::string> keys;  // every key it was sent with (a naive client's grow)
  // x402: every authorization signed for it (a well-behaved client signs one; a naive client or a
  // mutant one per fresh attempt), and the payment header the next attempt presents.
  std::vector<chain::TransferAuthorization> signed_authorizations;
  std::string payment;
  int attempts = 0;
  bool finished = false;
};

// An x402 client's budget, as `agentpay pay` keeps it in its budget file (core/budget.h decides):
// shared by the copies of a crowd, as processes share one file.
struct Budget {
  int64_t total = 0;
  struct Entry {
    ReservationState state = ReservationState::kReserved;
    int64_t amount = 0;
    std::string payment;  // the header every attempt re-presents
    chain::TransferAuthorization authorization;
  };
  std::map<std::string, Entry> by_key;
  // Released reservations a new one for the same key replaced (the file keeps one row per key):
  // kept here only so that the checks still see what they had signed.
  std::vector<Entry> replaced;
  int64_t Committed() const {
    int64_t sum = 0;
    for (const auto& [key, entry] : by_key) {
      if (CountsAgainstBudget(entry.state)) sum += entry.amount;
    }
    return sum;
  }
};

// An x402 payer: its key, what the 402 offered it, its budget.
struct Payer {
  explicit Payer(chain::PrivateKey k) : key(k), address(chain::AddressOf(k)) {}
  chain::PrivateKey key;
  chain::Address address;
  std::optional<client::Offer> offer;
  Budget budget;
  std::string principal() const { return "payer:" + chain::ToLowerHex(address); }
};

struct Client {
  int id = 0;
  Kind kind = Kind::kWellBehaved;
  size_t account = 0;
  std::shared_ptr<Payer> payer;  // x402 clients only (copies of a crowd share it)
  std::vector<Action> actions;
  size_t next = 0;            // the action under way
  uint64_t live_attempt = 0;  // the attempt whose answer (or timeout) counts; 0: none
  bool probing = false;       // the live attempt asks for the price (no payment)
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
  Run(uint64_t seed, Part part, bool tracing)
      : seed_(seed),
        part_(part),
        tracing_(tracing),
        world_(seed),
        ids_(seed ^ 0x5eed5eed5eed5eedULL),
        fee_random_(seed ^ 0xfee5fee5fee5fee5ULL),
        batch_random_(seed ^ 0xba7c4ba7c4ba7c4bULL),
        clock_(scheduler_),
        timers_(scheduler_),
        mix_(Mix::Draw(world_, part)),
        upstream_(scheduler_, world_, mix_.seller),
        chain_clock_(scheduler_) {
    if (mix_.x402 && fee_random_.Chance(500)) {
      mix_.fee_cap_multiple = fee_random_.Between(8, 40);
      mix_.fee_spike = fee_random_.Chance(300) ? 0 : static_cast<int>(fee_random_.Between(0, 50));
      config_.chain.max_fee_per_gas =
          chain::U256(static_cast<uint64_t>(mix_.fee_cap_multiple) * chain::kDevnetBaseFeePerGas);
    }
    if (mix_.x402 && mix_.settle == SettleTiming::kBefore && batch_random_.Chance(500)) {
      mix_.batch_max = batch_random_.Between(2, 8);
      mix_.batch_window_ms = batch_random_.Between(0, 100);
      config_.settle_batch_max = static_cast<size_t>(mix_.batch_max);
      config_.settle_batch_window_ms = mix_.batch_window_ms;
    }
    outcome_.seed = seed;
    outcome_.mix = mix_.Describe();
    RouteConfig route;
    route.prefix = "/";
    route.upstream_url = "http://seller.sim";
    route.price = kPrice;
    route.timeout_ms = mix_.route_timeout_ms;
    route.settle = mix_.settle;
    config_.routes = {route};
    config_.admin_token = kAdminToken;
    config_.hold_ttl_ms = mix_.hold_ttl_ms;
    config_.sweep_interval_ms = mix_.sweep_interval_ms;
    config_.attach_wait_ms = mix_.attach_wait_ms;
    config_.chain.chain_id = static_cast<int64_t>(kChainId);
    config_.chain.asset = kToken;
    config_.chain.asset_name = "USDC";
    config_.chain.asset_version = "2";
    config_.chain.pay_to = kPayTo;
    config_.chain.max_timeout_seconds = mix_.max_timeout_s;
    config_.chain.confirmations = mix_.confirmations;
    config_.receipt_timeout_ms = mix_.receipt_timeout_ms;
    config_.expiry_buffer_seconds = mix_.expiry_buffer_s;
  }

  SeedOutcome Go() {
    auto store = SimStore::Open(scheduler_, world_, kMaxCommitDelayMs);
    if (!store.ok()) {
      Violate("store_opens", store.status().ToString());
      return Finish();
    }
    store_ = std::move(*store);
    executor_ = std::make_unique<SimExecutor>(scheduler_, *store_);
    if (mix_.x402 && !OpenChain()) return Finish();
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
    // Each event with the actor it shows ("" for its actor's name): the world's first.
    std::vector<std::pair<TraceEvent, std::string>> events;
    for (WorldEvent& world : world_events_) {
      events.emplace_back(std::move(world.event), std::move(world.shown_actor));
    }
    world_events_.clear();
    // An x402 key is stored as its digest: the trace shows the key the client sent.
    std::map<std::string, std::string> keys;
    for (const Client& c : clients_) {
      for (const Action& a : c.actions) {
        for (const std::string& key : a.keys) keys.emplace(StoredKey(c, key), key);
      }
    }
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
        auto key = keys.find(op.idempotency_key);
        const std::string& shown = key != keys.end() ? key->second : op.idempotency_key;
        for (TraceEvent& event : (*records)->Trace()) {
          event.detail = shown + ": " + event.detail;
          events.emplace_back(std::move(event), "");
        }
      }
      page.before_id = ops.back().id;
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const auto& a, const auto& b) { return a.first.at_ms < b.first.at_ms; });
    std::vector<TraceEvent> plain;
    plain.reserve(events.size());
    for (const auto& [event, shown] : events) plain.push_back(event);
    nlohmann::json trace = TraceJson(plain);
    for (size_t i = 0; i < events.size(); ++i) {
      if (!events[i].second.empty()) trace["events"][i]["actor"] = events[i].second;
    }
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
  void Record(TraceActor actor, std::string kind, std::string detail, TraceFacts facts = {}) {
    if (!tracing_) return;
    world_events_.push_back(
        {{"", clock_.NowMs(), actor, std::move(kind), std::move(detail), std::move(facts)}, ""});
  }
  // A client's event: the trace names the client ("client 3"), an actor no stored trace has.
  void RecordClient(const Client& c, std::string kind, std::string detail, TraceFacts facts = {}) {
    if (!tracing_) return;
    world_events_.push_back({{"", clock_.NowMs(), TraceActor::kClient, std::move(kind),
                              std::move(detail), std::move(facts)},
                             "client " + std::to_string(c.id)});
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
    outcome_.faults.Count(FaultKind::kCrash, outcome_.crashes);
    if (store_) outcome_.faults.Count(FaultKind::kWriteCut, store_->writes_cut());
    outcome_.faults.Add(upstream_.faults());
    if (node_) {
      outcome_.faults.Add(node_->faults());
      outcome_.faults.Count(FaultKind::kTxDropped, outcome_.dropped);
      outcome_.faults.Count(FaultKind::kReorg, outcome_.reorgs);
      if (mix_.mine_delay_ms > 0) {
        outcome_.faults.Count(FaultKind::kLateReceipt,
                              static_cast<int64_t>(node_->accepted().size()));
      }
    }
    outcome_.steps = scheduler_.steps();
    outcome_.simulated_ms = scheduler_.now_ms();
    outcome_.event_hash = hash_;
    // The gateway goes before the world its callbacks point into.
    if (gateway_) scheduler_.Kill(scheduler_.gateway_epoch());
    gateway_.reset();
    scheduler_.Clear();  // a dead process's payments still hold reservations of its settler
    reconciler_.reset();
    settler_.reset();
    dead_.clear();
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
    if (devnet_) {
      CheckBudgets();
      CheckChain();
      if (node_->nonce_reused()) Violate("relayer_nonce_unique", *node_->nonce_reused());
    }
  }

  // ---- the gateway process ----
  void StartGateway() {
    const uint64_t epoch = scheduler_.NewEpoch();
    scheduler_.set_gateway_epoch(epoch);
    unpaid_cursor_.clear();  // the sweeper's place is the process's own
    // A process's settler (its caches, its payers' reservations) and reconciler are its own.
    if (node_) {
      settler_ = std::make_unique<Settler>(*node_, SettlerConfigOf(config_), KeyNumber(0),
                                           ReservationLimitsOf(config_));
    }
    gateway_ = std::make_unique<Gateway>(
        config_, *store_, clock_, ids_, timers_, upstream_, settler_.get(),
        GatewayExecutors{executor_.get(), chain_executor_.get(), executor_.get()});
    SimStore::Inline blocking(*store_);
    if (Status s = gateway_->RegisterInstance(); !s.ok())
      return Violate("gateway_starts", s.ToString());
    auto recovered = gateway_->RecoverInterrupted();
    if (!recovered.ok()) return Violate("gateway_starts", recovered.status().ToString());
    if (settler_) {
      // As `serve` does: the reservations of authorizations a dead process left in flight.
      auto restored = RestoreReservations(*store_, settler_->reservations());
      if (!restored.ok()) return Violate("gateway_starts", restored.status().ToString());
      reconciler_ = std::make_unique<Reconciler>(*store_, *settler_, clock_, ids_,
                                                 ReconcilerConfigOf(config_));
    }
    Note("start " + std::to_string(epoch) + " recovered " + std::to_string(*recovered));
    Record(TraceActor::kGateway, "started",
           "gateway process " + std::to_string(epoch) + " started; it recovered " +
               std::to_string(*recovered) + " operation(s) of a dead one");
    ScheduleSweep(epoch);
  }

  void ScheduleSweep(uint64_t epoch) {
    scheduler_.After(mix_.sweep_interval_ms, epoch, [this, epoch] {
      SimStore::Inline blocking(*store_);
      auto swept = SweepExpiredHolds(*store_, clock_, ids_, 64, &unpaid_cursor_);
      if (!swept.ok()) return Violate("sweeper_runs", swept.status().ToString());
      if (reconciler_) {  // the reconciler runs on the same interval, as in `serve`
        auto pass = reconciler_->RunPass();
        if (!pass.ok()) return Violate("reconciler_runs", pass.status().ToString());
      }
      ScheduleSweep(epoch);
    });
  }

  void CrashSoon() {
    scheduler_.After(world_.Between(0, 300), Scheduler::kWorld, [this] {
      if (!gateway_) return;
      ++outcome_.crashes;
      Note("crash");
      Record(TraceActor::kGateway, "crashed", "the gateway process was killed (kill -9)");
      if (Status s = store_->Crash(gateway_->instance_id()); !s.ok()) {
        return Violate("store_recovers",
                       "the database did not open after a crash: " + s.ToString());
      }
      scheduler_.Kill(scheduler_.gateway_epoch());
      scheduler_.set_gateway_epoch(0);
      gateway_.reset();
      // The dead process's events are dropped as they come due; what they hold (a payment's
      // reservation) points into its settler, kept until the run ends.
      dead_.push_back({std::move(settler_), std::move(reconciler_)});
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

  std::string NewKey() { return "k-" + RandomHex(world_, 16); }  // 128 bits: a secret (T25)

  void MakeClients() {
    int id = 0;
    for (int i = 0; i < mix_.clients; ++i) {
      const uint64_t draw = world_.Below(10);
      Kind kind = draw < 6 ? Kind::kWellBehaved : draw < 8 ? Kind::kNaive : Kind::kTamperer;
      if (part_ == Part::kBudget) kind = Kind::kWellBehaved;  // crowds: well-behaved copies
      Client c;
      c.kind = kind;
      c.account = world_.Below(accounts_.size());
      if (devnet_ && (part_ != Part::kAll || world_.Chance(500))) {
        c.payer = NewPayer();
        if (!c.payer) return;
      }
      for (int a = 0; a < mix_.actions; ++a) {
        Action action;
        action.key = NewKey();
        action.body = "{\"task\":\"" + RandomHex(world_, 4) + "\"}";
        action.keys = {action.key};
        c.actions.push_back(std::move(action));
      }
      // A crowd: the same actions from several well-behaved clients at once (for x402, processes
      // sharing one budget file, so one reservation and one signature per key).
      const int copies = kind == Kind::kWellBehaved ? mix_.crowd : 1;
      for (int k = 0; k < copies; ++k) {
        Client copy = c;
        copy.id = id++;
        clients_.push_back(std::move(copy));
      }
    }
  }

  // A buyer key funded on chain, with a budget of one to (actions + 1) prices.
  std::shared_ptr<Payer> NewPayer() {
    auto payer = std::make_shared<Payer>(KeyNumber(++payers_));
    payer->budget.total = kPrice * world_.Between(1, mix_.actions + 1);
    const int64_t funding = world_.Chance(300) ? kPrice * world_.Between(1, 6) : kPrice * 1000;
    if (Status s = devnet_->Mint(payer->address, chain::U256(static_cast<uint64_t>(funding)));
        !s.ok()) {
      Violate("setup", "the payer was not funded: " + s.ToString());
      return nullptr;
    }
    minted_ += funding;
    holders_.push_back(payer->address);
    return payer;
  }

  bool AllDone() const {
    return std::all_of(clients_.begin(), clients_.end(), [](const Client& c) { return c.done(); });
  }

  // ---- clients and the network ----
  int64_t Delay() { return world_.Between(0, mix_.max_delay_ms); }

  void Send(Client& c) {
    if (c.done()) return;
    Action& a = c.actions[c.next];
    auto request = std::make_shared<HttpRequest>();
    request->method = "POST";
    request->target = "/work";
    request->body = a.body;
    request->headers = {{"Content-Type", "application/json"}};
    c.probing = c.payer && !c.payer->offer;
    if (!c.payer) {
      request->headers.push_back({"Authorization", "Bearer " + accounts_[c.account].api_key});
      request->headers.push_back({"Idempotency-Key", a.key});
    } else if (!c.probing) {  // x402: the price is known; pay (or re-present what was signed)
      std::optional<std::string> payment = PaymentFor(c, a);
      if (violated()) return;
      if (!payment) {
        Note(std::to_string(c.id) + " " + a.key + " over budget");
        RecordClient(c, "over_budget", a.key + ": not sent, the budget cannot cover it");
        return NextAction(c);
      }
      request->headers.push_back({client::PaymentHeaderFor(2), *payment});
      request->headers.push_back({"Idempotency-Key", a.key});
    }
    ++a.attempts;
    ++outcome_.requests;
    const uint64_t attempt = ++attempts_;
    c.live_attempt = attempt;
    RecordClient(c, "sent",
                 a.key + ": sent by " + std::string(KindName(c.kind)) + " client " +
                     std::to_string(c.id) + (c.probing ? " (without payment, for the price)" : ""),
                 TraceFacts().Attempt(a.attempts));
    const int copies = faults_ && world_.Chance(mix_.duplicate) ? 2 : 1;
    if (copies == 2) outcome_.faults.Count(FaultKind::kDuplicate);
    for (int i = 0; i < copies; ++i) {
      if (faults_ && world_.Chance(mix_.drop_request)) {
        outcome_.faults.Count(FaultKind::kLostRequest);
        continue;
      }
      scheduler_.After(Delay(), Scheduler::kWorld,
                       [this, &c, attempt, request] { Arrive(c, attempt, request); });
    }
    scheduler_.After(kClientTimeoutMs, Scheduler::kWorld,
                     [this, &c, attempt] { Answer(c, attempt, std::nullopt, "timeout"); });
    if (faults_ && world_.Chance(mix_.crash)) CrashSoon();
    if (faults_ && world_.Chance(mix_.clock_step)) {
      outcome_.faults.Count(FaultKind::kClockStep);
      const int64_t step = world_.Between(-2000, 2000);
      clock_.Step(step);
      Note("clock " + std::to_string(step));
    }
    if (devnet_ && faults_ && world_.Chance(mix_.drop_tx)) DropSoon();
    if (devnet_ && faults_ && world_.Chance(mix_.reorg)) ReorgSoon();
    if (devnet_ && faults_ && fee_random_.Chance(mix_.fee_spike)) FeeSpikeSoon();
  }

  // The payment header of an x402 attempt. A well-behaved client works as `agentpay pay`: one
  // reservation per key, made before anything is signed (core DecideReserve), and the one
  // authorization signed for it re-presented by every attempt; nullopt when the budget cannot
  // cover it. A tamperer re-presents one authorization per action (under another body); a naive
  // client signs a fresh one for every attempt.
  std::optional<std::string> PaymentFor(Client& c, Action& a) {
    Payer& payer = *c.payer;
    if (c.kind == Kind::kNaive || (c.kind == Kind::kTamperer && a.payment.empty())) {
      return Sign(c, a);
    }
    if (c.kind == Kind::kTamperer) return a.payment;
    Budget& budget = payer.budget;
    auto found = budget.by_key.find(a.key);
    std::optional<ReservationSnapshot> existing;
    if (found != budget.by_key.end()) existing = ReservationSnapshot{found->second.state, a.body};
    ReserveVerdict verdict =
        DecideReserve(existing, a.body, payer.offer->amount, budget.total, budget.Committed());
    // Out of budget, the client reconciles what its budget holds (as its operator would run
    // `agentpay pay reconcile`) and decides once more.
    if (verdict == ReserveVerdict::kOverBudget && ReconcileBudget(payer, /*final=*/false) > 0) {
      verdict =
          DecideReserve(existing, a.body, payer.offer->amount, budget.total, budget.Committed());
    }
    if (violated()) return std::nullopt;
    switch (verdict) {
      case ReserveVerdict::kResume:
        return found->second.payment;
      case ReserveVerdict::kOverBudget:
        return std::nullopt;
      case ReserveVerdict::kMismatch:
        Violate("budget_decides", "key " + a.key + " was reserved for another body");
        return std::nullopt;
      case ReserveVerdict::kReserve:
        break;
    }
    std::optional<std::string> payment = Sign(c, a);
    if (payment && found != budget.by_key.end()) budget.replaced.push_back(found->second);
    if (payment) {
      budget.by_key[a.key] = Budget::Entry{ReservationState::kReserved, payer.offer->amount,
                                           *payment, a.signed_authorizations.back()};
    }
    return payment;
  }

  // Signs an authorization for the offer, as `agentpay pay` does (client/x402_signer.h).
  std::optional<std::string> Sign(Client& c, Action& a) {
    Payer& payer = *c.payer;
    auto signed_payment =
        client::SignPayment(*payer.offer, payer.key, chain_clock_.NowMs() / 1000, world_);
    if (!signed_payment.ok()) {
      Violate("client_signs", signed_payment.status().ToString());
      return std::nullopt;
    }
    const chain::TransferAuthorization& authorization = signed_payment->authorization;
    signed_.emplace(std::make_pair(authorization.from, authorization.nonce), authorization);
    a.signed_authorizations.push_back(authorization);
    a.payment = signed_payment->header_value;
    Note("signed " + chain::Hex(authorization.nonce));
    return a.payment;
  }

  // What an x402 attempt's outcome teaches the budget (core AfterOutcome).
  void Learn(Client& c, const Action& a, ReservationState learned) {
    if (!c.payer || c.kind != Kind::kWellBehaved) return;
    auto found = c.payer->budget.by_key.find(a.key);
    if (found == c.payer->budget.by_key.end()) return;
    found->second.state = AfterOutcome(found->second.state, learned);
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
      if (faults_ && world_.Chance(mix_.drop_answer)) {        // lost: the client times out
        outcome_.faults.Count(FaultKind::kLostAnswer);
        return;
      }
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
      RecordClient(c, failure, a.key + ": no answer (" + failure + ")",
                   TraceFacts().Attempt(a.attempts));
      // A refusal was never sent; a timeout may have been acted on.
      return Retry(c, /*timed_out=*/failure == "timeout" && !c.probing);
    }
    ++outcome_.answers;
    const int status = response->status;
    Note(std::to_string(c.id) + " " + a.key + " " + std::to_string(status) + " " + response->body);
    RecordClient(c, "answered", a.key + ": answered " + std::to_string(status),
                 TraceFacts().Attempt(a.attempts).HttpStatus(status));
    if (c.probing) return OnPrice(c, *response);
    switch (status) {  // what the contract lets a paid route answer (any 2xx the seller's)
      case 200:
      case 201:
      case 202:
      case 204:
      case 400:
      case 402:
      case 404:
      case 409:
      case 422:
      case 429:
      case 500:
      case 502:
      case 503:
      case 504:
        break;
      default:
        return Violate("expected_answers", "client " + std::to_string(c.id) + " got " +
                                               std::to_string(status) + ": " + response->body);
    }
    if (status == 422 && c.kind != Kind::kTamperer) {  // the key was first used with another body
      return Violate("well_behaved_not_refused",
                     "client " + std::to_string(c.id) + " (" + KindName(c.kind) + ") sent key " +
                         a.key + " with one body only, yet got 422: " + response->body);
    }
    if (status >= 200 && status < 300 && status != 202) {  // 202: still in flight, not an answer
      auto [it, first] = delivered_.emplace(a.key, response->body);
      if (!first && it->second != response->body && c.kind != Kind::kTamperer) {
        return Violate("one_answer_per_key", "key " + a.key + " was answered " + it->second +
                                                 " and then " + response->body);
      }
    }
    if (c.payer) return OnX402Answer(c, *response);
    switch (status) {
      case 200:
      case 201:
      case 204:
      case 402:  // not enough money: nothing was held
      case 400:
      case 404:  // the seller refused: the hold was released
      case 422:
        return NextAction(c);
      default:  // 202, 409, 429, 5xx: the same request again
        return Retry(c, /*timed_out=*/false);
    }
  }

  // The 402 of a request without payment: the offer to sign for (client/challenge.h).
  void OnPrice(Client& c, const HttpResponse& response) {
    auto challenge = client::ParseChallenge(AsClientResponse(response));
    if (response.status != 402 || !challenge.ok()) {  // a limit, the process restarting...
      return Retry(c, /*timed_out=*/false);
    }
    auto offer = client::ChooseOffer(*challenge, client::Allowance{}, /*signing=*/true);
    if (!offer.ok()) return Violate("offer_payable", offer.status().ToString());
    c.payer->offer = *offer;
    c.actions[c.next].attempts = 0;
    c.backoff_ms = 0;
    Send(c);
  }

  static ClientResponse AsClientResponse(const HttpResponse& response) {
    ClientResponse r;
    r.status = response.status;
    r.headers = response.headers;
    r.body = response.body;
    return r;
  }

  // An x402 answer, judged as `agentpay pay` judges it (client/attempt.h): the budget learns
  // what it can (spent once served or settled, else unknown until reconciled: it is released only
  // by the chain, after expiry).
  void OnX402Answer(Client& c, const HttpResponse& response) {
    const Action& a = c.actions[c.next];
    const ClientResponse r = AsClientResponse(response);
    const std::optional<x402::SettleResponse> settled = client::SettlementOf(r);
    const ReservationState moved =
        settled && settled->success ? ReservationState::kSpent : ReservationState::kUnknown;
    switch (client::ClassifyAttempt(r)) {
      case client::AttemptVerdict::kServed:
        Learn(c, a, ReservationState::kSpent);
        return NextAction(c);
      case client::AttemptVerdict::kRetry:
      case client::AttemptVerdict::kPoll:  // waits, then the same request again
        return Retry(c, /*timed_out=*/false);
      case client::AttemptVerdict::kPaymentRefused:
      case client::AttemptVerdict::kRejected:
      case client::AttemptVerdict::kUnknownFinal:
        Learn(c, a, moved);
        return NextAction(c);
    }
  }

  void Retry(Client& c, bool timed_out) {
    Action& a = c.actions[c.next];
    // Bounded: it gives up (the mutant never does), the outcome unknown.
    if (a.attempts >= kMaxAttempts && !MutantActive(Mutant::kUnboundedRetries)) {
      Learn(c, a, ReservationState::kUnknown);
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
    if (timed_out && MutantActive(Mutant::kReleaseOnTimeout)) {
      Learn(c, a, ReservationState::kReleased);  // the budget given back on a timeout
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

  // ---- the chain ----
  bool OpenChain() {
    chain::DevnetConfig config;
    config.chain_id = kChainId;
    config.token = *chain::ParseAddress(kToken);
    config.token_name = "USDC";
    config.token_version = "2";
    config.mine_delay_ms = mix_.mine_delay_ms;
    config.empty_block_interval_ms = kEmptyBlockIntervalMs;
    auto opened = chain::Devnet::Open(config, chain_clock_);
    if (!opened.ok()) {
      Violate("chain_opens", opened.status().ToString());
      return false;
    }
    devnet_ = std::move(*opened);
    node_ = std::make_unique<SimNode>(*devnet_, world_);
    node_->SetMix(mix_.node);
    chain_executor_ = std::make_unique<SimChainExecutor>(scheduler_, world_, *store_, *node_);
    holders_ = {*chain::ParseAddress(kPayTo), chain::AddressOf(KeyNumber(0))};
    return true;
  }

  // The node forgets a pending transaction (anvil_dropTransaction): the reconciler must notice.
  void DropSoon() {
    scheduler_.After(world_.Between(0, 2000), Scheduler::kWorld, [this] {
      const std::vector<chain::Hash32>& accepted = node_->accepted();
      if (accepted.empty()) return;
      const size_t from = world_.Below(accepted.size());
      for (size_t i = from; i < accepted.size(); ++i) {
        auto dropped = devnet_->DropTransaction(accepted[i]);
        if (dropped.ok() && *dropped) {
          ++outcome_.dropped;
          Note("drop " + chain::Hex(accepted[i]));
          Record(TraceActor::kChain, "dropped",
                 "the node dropped transaction " + chain::Hex(accepted[i]));
          return;
        }
      }
    });
  }

  // The node's base fee rises far past the relayer's cap for 0.2-8 s, then comes back down: the
  // settler must sign nothing meanwhile (settlement/fees.h) and settle once it is back.
  void FeeSpikeSoon() {
    scheduler_.After(fee_random_.Between(0, 2000), Scheduler::kWorld, [this] {
      if (!faults_ || node_->spiking()) return;
      const uint64_t cap =
          static_cast<uint64_t>(mix_.fee_cap_multiple) * chain::kDevnetBaseFeePerGas;
      node_->SetSpike(chain::U256(cap * static_cast<uint64_t>(fee_random_.Between(2, 20))));
      node_->Count(FaultKind::kFeeSpike);
      Note("fee spike");
      Record(TraceActor::kChain, "fee_spike", "the base fee rose above the relayer's cap");
      scheduler_.After(fee_random_.Between(200, 8000), Scheduler::kWorld, [this] {
        node_->SetSpike(std::nullopt);
        Record(TraceActor::kChain, "fee_spike_ended", "the base fee came back under the cap");
      });
    });
  }

  // The latest one to three blocks are reorganised away; their transactions are mined again.
  void ReorgSoon() {
    scheduler_.After(world_.Between(0, 2000), Scheduler::kWorld, [this] {
      auto head = devnet_->BlockNumber();
      if (!head.ok() || *head == 0) return;
      const uint64_t depth = std::min<uint64_t>(*head, world_.Between(1, 3));
      auto reorganised = devnet_->Reorg(depth);
      if (!reorganised.ok()) return Violate("chain_reorganises", reorganised.status().ToString());
      ++outcome_.reorgs;
      Note("reorg " + std::to_string(depth));
      Record(TraceActor::kChain, "reorganised",
             "a reorganisation removed the latest " + std::to_string(depth) + " block(s)");
    });
  }

  // ---- the end of the run ----
  // Faults stop; the chain catches up until no settlement is left open; every well-behaved action
  // is asked once more with its key (as a client that comes back later would), until its answer is
  // final; time runs past every hold's expiry and every authorization's validity, until no
  // settlement is left open again; the x402 clients reconcile their budgets; then the books must
  // balance and every charge must have bought the client its answer.
  void FinalPhase() {
    faults_ = false;
    upstream_.SetMix(SellerMix{});  // operations already broken stay broken
    if (node_) {
      node_->SetMix(NodeMix{});
      node_->SetSpike(std::nullopt);
    }
    if (!gateway_) StartGateway();
    RunUntil([this] { return SettlementsClosed(); });
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
                          4 * mix_.sweep_interval_ms + mix_.route_timeout_ms +
                          (devnet_ ? (mix_.max_timeout_s + mix_.expiry_buffer_s + 2) * 1000 : 0);
    RunUntil([this, until] { return scheduler_.now_ms() >= until && SettlementsClosed(); });
    if (violated()) return;
    CheckBooks();
    if (devnet_) ReconcileBudgets();
    CheckCharges();
    if (devnet_) CheckX402Charges();
    if (devnet_) CheckSettlementsRecorded();
  }

  // No x402 operation is still submitted or unknown: the reconciler decided every one.
  bool SettlementsClosed() {
    if (!devnet_) return true;
    bool open = false;
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      for (Settlement settlement : {Settlement::kSubmitted, Settlement::kUnknown}) {
        OperationFilter filter;
        filter.settlement = settlement;
        filter.limit = 1;
        auto found = tx.ListOperations(filter);
        if (!found.ok()) return found.status();
        open = open || !found->empty();
      }
      return Status::Ok();
    });
    if (!read.ok()) Violate("store_reads", read.ToString());
    return !open;
  }

  // The well-behaved x402 payers, each once (the copies of a crowd share one).
  std::vector<Payer*> BudgetedPayers() {
    std::vector<Payer*> payers;
    for (const Client& c : clients_) {
      if (!c.payer || c.kind != Kind::kWellBehaved) continue;
      if (std::find(payers.begin(), payers.end(), c.payer.get()) == payers.end()) {
        payers.push_back(c.payer.get());
      }
    }
    return payers;
  }

  bool UsedOnChain(const chain::TransferAuthorization& authorization) {
    auto used = devnet_->AuthorizationState(*chain::ParseAddress(kToken), authorization.from,
                                            authorization.nonce);
    if (!used.ok()) Violate("chain_reads", used.status().ToString());
    return used.ok() && *used;
  }

  // Each well-behaved x402 client settles what its budget still holds, as `agentpay pay reconcile`
  // does (core ReconcileAuthorization, chain time read before authorizationState): at the end, and
  // whenever it runs out of budget. At the end, past every authorization's validity and buffer,
  // nothing may stay open.
  void ReconcileBudgets() {
    for (Payer* payer : BudgetedPayers()) {
      ReconcileBudget(*payer, /*final=*/true);
      if (violated()) return;
    }
  }

  // Reconciles one budget's open reservations; how many it released. Mid-run (!final) a
  // reservation whose action a client is working on is left alone, as `agentpay pay reconcile`
  // leaves one a running `agentpay pay` holds.
  int ReconcileBudget(Payer& payer, bool final) {
    int released = 0;
    for (auto& [key, entry] : payer.budget.by_key) {
      if (entry.state != ReservationState::kReserved && entry.state != ReservationState::kUnknown) {
        continue;
      }
      if (!final && InHand(payer, key)) continue;
      auto chain_time = devnet_->LatestBlockTimestamp();
      if (!chain_time.ok()) {
        Violate("chain_reads", chain_time.status().ToString());
        return released;
      }
      const bool used = UsedOnChain(entry.authorization);
      const ReconcileVerdict verdict = ReconcileAuthorization(
          *chain_time, entry.authorization.valid_before.ToInt64(), mix_.expiry_buffer_s, used);
      if (final && verdict == ReconcileVerdict::kKeep) {
        Violate("budget_reconciles",
                "key " + key + ": chain time " + std::to_string(*chain_time) +
                    " is past valid before + buffer, yet the reservation stays open");
        return released;
      }
      if (verdict == ReconcileVerdict::kKeep) continue;  // unused, not expired yet
      if (verdict == ReconcileVerdict::kMarkReleased) {
        ++outcome_.released;
        ++released;
      }
      entry.state = AfterOutcome(entry.state, verdict == ReconcileVerdict::kMarkSpent
                                                  ? ReservationState::kSpent
                                                  : ReservationState::kReleased);
    }
    return released;
  }

  // Whether a client sharing the payer's budget is working on the action of `key` now.
  bool InHand(const Payer& payer, const std::string& key) const {
    for (const Client& c : clients_) {
      if (c.payer.get() == &payer && !c.done() && c.actions[c.next].key == key) return true;
    }
    return false;
  }

  // After every step, for x402: no budget committed past its total, and none released while its
  // authorization was used (or can still be: the release rule's whole point).
  void CheckBudgets() {
    for (Payer* payer : BudgetedPayers()) {
      const Budget& budget = payer->budget;
      if (budget.Committed() > budget.total) {
        return Violate("budget_within_total", "payer " + chain::ToLowerHex(payer->address) +
                                                  " committed " +
                                                  std::to_string(budget.Committed()) + " of " +
                                                  std::to_string(budget.total));
      }
      const auto released_used = [this](const Budget::Entry& entry) {
        return entry.state == ReservationState::kReleased && UsedOnChain(entry.authorization);
      };
      for (const auto& [key, entry] : budget.by_key) {
        if (released_used(entry)) {
          return Violate("budget_released_early",
                         "key " + key + ": the reservation was released, yet its authorization " +
                             chain::Hex(entry.authorization.nonce) + " was used on chain");
        }
      }
      for (const Budget::Entry& entry : budget.replaced) {
        if (released_used(entry)) {
          return Violate("budget_released_early", "a released reservation's authorization " +
                                                      chain::Hex(entry.authorization.nonce) +
                                                      " was used on chain");
        }
      }
    }
  }

  // After every step, for x402: every block not checked yet (or that a reorganisation replaced)
  // uses only authorizations a client signed, exactly as signed; and the token's books balance.
  void CheckChain() {
    static const chain::Hash32 kAuthorizationUsed =
        chain::Keccak256(std::string_view("AuthorizationUsed(address,bytes32)"));
    while (!scanned_blocks_.empty()) {
      auto hash = devnet_->BlockHash(scanned_blocks_.size());
      if (!hash.ok()) return Violate("chain_reads", hash.status().ToString());
      if (*hash == scanned_blocks_.back()) break;
      scanned_blocks_.pop_back();  // reorganised away
    }
    auto head = devnet_->BlockNumber();
    if (!head.ok()) return Violate("chain_reads", head.status().ToString());
    for (uint64_t number = scanned_blocks_.size() + 1; number <= *head; ++number) {
      auto block = devnet_->Block(number);
      if (!block.ok() || !*block) return Violate("chain_reads", "block " + std::to_string(number));
      for (const chain::Hash32& hash : (*block)->transactions) {
        auto receipt = devnet_->GetReceipt(hash);
        if (!receipt.ok() || !*receipt)
          return Violate("chain_reads", "receipt " + chain::Hex(hash));
        // Each Transfer right after the AuthorizationUsed of the authorization it carries out (a
        // batch's transaction holds one such pair per payment it settled).
        std::optional<chain::TransferAuthorization> used;
        for (const chain::LogEntry& log : (*receipt)->logs) {
          if (log.topics.size() == 3 && log.topics[0] == kAuthorizationUsed) {
            chain::Address from;
            std::copy(log.topics[1].end() - 20, log.topics[1].end(), from.bytes.begin());
            auto found = signed_.find({from, log.topics[2]});
            if (found == signed_.end()) {
              return Violate("authorization_integrity",
                             "transaction " + chain::Hex(hash) + " used an authorization of " +
                                 chain::ToLowerHex(from) + " that no client signed");
            }
            used = found->second;
            continue;
          }
          auto transfer = chain::DecodeTransferEvent(log.topics, log.data);
          if (!transfer.ok()) continue;
          if (!used || transfer->from != used->from || transfer->to != used->to ||
              transfer->value != used->value) {
            return Violate("authorization_integrity",
                           "transaction " + chain::Hex(hash) +
                               " moved tokens other than as a signed authorization says");
          }
          used.reset();  // one Transfer per authorization
        }
      }
      scanned_blocks_.push_back((*block)->hash);
    }
    chain::U256 held;
    for (const chain::Address& holder : holders_) {
      auto balance = devnet_->BalanceOf(*chain::ParseAddress(kToken), holder);
      if (!balance.ok()) return Violate("chain_reads", balance.status().ToString());
      held = *chain::U256::CheckedAdd(held, *balance);
    }
    if (held != chain::U256(static_cast<uint64_t>(minted_))) {
      Violate("chain_books", "the token's holders hold " + held.ToDecimal() + " of " +
                                 std::to_string(minted_) + " minted");
    }
  }

  void CheckBooks() {
    AuditOptions options;
    options.now_ms = clock_.NowMs();
    // The same books (no commit, no crash since) before any time a finding depends on
    // (AuditReport::same_until_ms): the same clean report. Most steps change nothing the audit
    // reads, and auditing every one was three quarters of a seed's CPU (200 seeds: 9.4 CPU-s
    // before, 3.2 after).
    if (store_->version() == audited_version_ && options.now_ms < audit_same_until_ms_) return;
    options.hold_slack_ms = 2 * mix_.sweep_interval_ms + kAuditHoldSlackMs;
    // Unsynced: the checker looks without touching the disk. (It once read as the admin API does,
    // which makes what it read durable: after every step, so a crash almost never lost a decision
    // committed but not yet synced, the case the simulated store exists for.)
    auto report = AuditStore(*store_, options, ReadWait::kUnsynced);
    if (!report.ok()) return Violate("audit_runs", report.status().ToString());
    if (!report->ok()) {
      const AuditViolation& first = report->listed.front();
      Violate("audit_" + std::string(AuditCheckName(first.check)),
              first.subject + ": " + first.detail + " (" + std::to_string(report->violations) +
                  " violation(s))");
    }
    audited_version_ = store_->version();
    audit_same_until_ms_ = report->same_until_ms;
  }

  std::string PrincipalOf(const Client& c) const {
    return c.payer ? c.payer->principal() : accounts_[c.account].principal();
  }
  // The key as the store holds it: an x402 key only as its digest (the secret proves the payer).
  static std::string StoredKey(const Client& c, const std::string& key) {
    return c.payer ? PayerKeyDigest(chain::ToLowerHex(c.payer->address), key) : key;
  }

  // Every charged operation bought work the seller did (x402 settling before the upstream call:
  // every one the seller served); a well-behaved client is charged at most once per action and
  // holds the answer of every wallet action it was charged for; and work the seller did that
  // nobody paid for was at least reported (an alert: the upstream may have done it).
  void CheckCharges() {
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      for (const Client& c : clients_) {
        for (const Action& a : c.actions) {
          int charged = 0;
          for (const std::string& key : a.keys) {
            auto found = tx.FindKey(PrincipalOf(c), StoredKey(c, key));
            if (!found.ok()) return found.status();
            if (!*found) continue;
            auto op = tx.FindOperation((*found)->operation_id);
            if (!op.ok()) return op.status();
            if (!*op || (*op)->settlement != Settlement::kSettled) continue;
            const std::string& id = (*op)->id;
            ++charged;
            if (charged_.insert(id).second) ++outcome_.charges;
            const bool served = (*op)->fulfillment == Fulfillment::kSucceeded;
            if (upstream_.work().count(id) == 0 && (!c.payer || served)) {
              Violate("charged_for_work",
                      "operation " + id + " was charged but the seller never did its work");
            }
            if (!c.payer && c.kind == Kind::kWellBehaved && delivered_.count(key) == 0) {
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

  // On chain, for each well-behaved x402 action (its copies in a crowd together): at most one of
  // the authorizations signed for it was used; if one was, the client received the paid answer,
  // or the seller's refusal, or the operation still offers a free retry (settled, fulfillment
  // pending); and no payer's used authorizations add up to more than its budget.
  void CheckX402Charges() {
    for (const auto& [id, authorization] : signed_) {
      if (UsedOnChain(authorization)) ++outcome_.x402_payments;
    }
    std::map<std::pair<const Payer*, std::string>, std::vector<const Action*>> actions;
    for (const Client& c : clients_) {
      if (!c.payer || c.kind != Kind::kWellBehaved) continue;
      for (const Action& a : c.actions) actions[{c.payer.get(), a.keys.front()}].push_back(&a);
    }
    std::map<const Payer*, int64_t> spent;
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      for (const auto& [group, copies] : actions) {
        const Payer& payer = *group.first;
        std::set<chain::Hash32> used;
        std::set<std::string> keys;
        for (const Action* a : copies) {
          for (const chain::TransferAuthorization& authorization : a->signed_authorizations) {
            if (UsedOnChain(authorization)) used.insert(authorization.nonce);
          }
          keys.insert(a->keys.begin(), a->keys.end());
        }
        spent[&payer] +=
            static_cast<int64_t>(used.size()) * (payer.offer ? payer.offer->amount : 0);
        if (used.size() > 1) {
          Violate("charged_once_per_action", "payer " + chain::ToLowerHex(payer.address) +
                                                 " paid " + std::to_string(used.size()) +
                                                 " times on chain for the action of key " +
                                                 group.second);
        }
        if (used.empty()) continue;
        bool answered = false;
        for (const std::string& key : keys) {
          if (delivered_.count(key) > 0) answered = true;
          auto found =
              tx.FindKey(payer.principal(), PayerKeyDigest(chain::ToLowerHex(payer.address), key));
          if (!found.ok()) return found.status();
          if (!*found) continue;
          auto op = tx.FindOperation((*found)->operation_id);
          if (!op.ok()) return op.status();
          if (*op && ((*op)->fulfillment == Fulfillment::kRejected ||
                      (*op)->fulfillment == Fulfillment::kPendingRetry)) {
            answered = true;
          }
        }
        if (!answered) {
          Violate("charged_means_answered",
                  "payer " + chain::ToLowerHex(payer.address) + " paid on chain for key " +
                      group.second + " but never received its answer, even asking again");
        }
      }
      return Status::Ok();
    });
    if (!read.ok()) Violate("store_reads", read.ToString());
    for (const auto& [payer, amount] : spent) {
      if (amount > payer->budget.total) {
        Violate("budget_not_overspent", "payer " + chain::ToLowerHex(payer->address) + " paid " +
                                            std::to_string(amount) + " on chain, its budget is " +
                                            std::to_string(payer->budget.total));
      }
    }
  }

  // At the end, for x402: the gateway's books agree with the chain. Every authorization a client
  // signed is used on chain exactly when the gateway holds it as the payment of an operation it
  // records settled: nothing it gave up on (voided, failed, never submitted) was paid after all,
  // and nothing it calls paid is missing from the chain.
  void CheckSettlementsRecorded() {
    Status read = store_->ReadUnsynced([&](Transaction& tx) -> Status {
      for (const auto& [id, authorization] : signed_) {
        const bool used = UsedOnChain(authorization);
        auto payment = tx.FindX402PaymentByAuthorization(chain::ToLowerHex(authorization.from),
                                                         chain::Hex(authorization.nonce));
        if (!payment.ok()) return payment.status();
        std::string state = "no payment of the gateway's";
        bool settled = false;
        if (*payment) {
          auto op = tx.FindOperation((*payment)->operation_id);
          if (!op.ok()) return op.status();
          state = "operation " + (*payment)->operation_id + " " +
                  (*op ? std::string(SettlementName((*op)->settlement)) : "missing");
          settled = *op && (*op)->settlement == Settlement::kSettled;
        }
        if (used != settled) {
          Violate("settlements_recorded", "authorization " + chain::Hex(authorization.nonce) +
                                              " of " + chain::ToLowerHex(authorization.from) +
                                              " is " + (used ? "used" : "unused") +
                                              " on chain, yet it is " + state);
          return Status::Ok();
        }
      }
      return Status::Ok();
    });
    if (!read.ok()) Violate("store_reads", read.ToString());
  }

  const uint64_t seed_;
  const Part part_;
  const bool tracing_;
  // A world event of the trace and the actor it shows instead of its actor's name ("" for none).
  struct WorldEvent {
    TraceEvent event;
    std::string shown_actor;
  };
  std::vector<WorldEvent> world_events_;  // when tracing
  SeededRandom world_;  // the world's draws: faults, delays, the seller, the clients
  SeededRandom ids_;    // the gateway's randomness (ids, keys)
  SeededRandom fee_random_;    // the fee cap and its spikes (Mix::fee_cap_multiple)
  SeededRandom batch_random_;  // batched settlement (Mix::batch_max)
  Scheduler scheduler_;
  SimClock clock_;
  SimTimers timers_;
  Mix mix_;
  SimUpstream upstream_;
  GatewayConfig config_;
  std::unique_ptr<SimStore> store_;
  // The last clean books audit: the store's version it read, and until when it holds.
  uint64_t audited_version_ = UINT64_MAX;
  int64_t audit_same_until_ms_ = 0;
  std::unique_ptr<SimExecutor> executor_;
  // x402 (null in a wallet-only seed): the chain, the node in front of it, the process's settler
  // and reconciler, every authorization a client signed, the blocks checked so far.
  ChainClock chain_clock_;
  std::unique_ptr<chain::Devnet> devnet_;
  std::unique_ptr<SimNode> node_;
  std::unique_ptr<SimChainExecutor> chain_executor_;
  std::unique_ptr<Settler> settler_;
  std::unique_ptr<Reconciler> reconciler_;
  struct DeadProcess {
    std::unique_ptr<Settler> settler;
    std::unique_ptr<Reconciler> reconciler;
  };
  std::vector<DeadProcess> dead_;
  std::map<std::pair<chain::Address, chain::Hash32>, chain::TransferAuthorization> signed_;
  std::vector<chain::Hash32> scanned_blocks_;  // of blocks 1, 2, ...
  std::vector<chain::Address> holders_;        // everyone who can hold the token
  int64_t minted_ = 0;
  uint64_t payers_ = 0;
  std::string unpaid_cursor_;         // the running process's sweeper's place
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

std::string_view PartName(Part part) {
  switch (part) {
    case Part::kAll:
      return "all";
    case Part::kWallet:
      return "wallet";
    case Part::kX402:
      return "x402";
    case Part::kBudget:
      return "budget";
  }
  return "?";
}

std::optional<Part> ParsePart(std::string_view name) {
  for (Part part : {Part::kAll, Part::kWallet, Part::kX402, Part::kBudget}) {
    if (PartName(part) == name) return part;
  }
  return std::nullopt;
}

std::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kLostRequest:
      return "lost requests";
    case FaultKind::kLostAnswer:
      return "lost answers";
    case FaultKind::kDuplicate:
      return "duplicates";
    case FaultKind::kCrash:
      return "crashes";
    case FaultKind::kWriteCut:
      return "writes cut";
    case FaultKind::kClockStep:
      return "clock steps";
    case FaultKind::kSeller4xx:
      return "4xx";
    case FaultKind::kSeller5xx:
      return "5xx";
    case FaultKind::kSellerSlow:
      return "slow";
    case FaultKind::kSellerHang:
      return "hangs";
    case FaultKind::kSellerDrop:
      return "drops after work";
    case FaultKind::kSellerBroken:
      return "broken";
    case FaultKind::kRpcUnreachable:
      return "unreachable";
    case FaultKind::kRpcTimeout:
      return "timeouts";
    case FaultKind::kRpcHang:
      return "hangs";
    case FaultKind::kTxDropped:
      return "drops";
    case FaultKind::kReorg:
      return "reorgs";
    case FaultKind::kLateReceipt:
      return "late receipts";
    case FaultKind::kFeeSpike:
      return "fee spikes";
    case FaultKind::kNonceGapRefusal:
      return "nonce-gap refusals";
  }
  return "?";
}

SeedOutcome RunSeed(uint64_t seed, Part part) { return Run(seed, part, false).Go(); }

TracedSeed RunSeedTraced(uint64_t seed, Part part) {
  Run run(seed, part, true);
  TracedSeed traced;
  traced.outcome = run.Go();
  traced.trace = run.Trace();
  return traced;
}

}  // namespace agentpay::sim
