// The gateway pipeline without sockets: Gateway::Handle on a real SQLite store with an injected
// clock, randomness and a scripted upstream. Every test ends with a ledger audit.
#include "gateway/gateway.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/event_threads.h"
#include "gateway/attempts_in_hand.h"
#include "gateway/hashing.h"
#include "gateway_test_support.h"
#include "http/timers.h"
#include "workers/hold_sweeper.h"
#include "x402/base64.h"

namespace agentpay {
namespace {

using testing_support::CountingRandom;
using testing_support::FreshTestDir;
using testing_support::ManualClock;
using testing_support::ScriptedUpstream;

constexpr int64_t kPrice = 250;

// Releases a blocked upstream when a test ends early (a failed ASSERT): declared after the future of
// the blocked call, it runs first, so that future's destructor does not wait forever.
struct ReleaseAtExit {
  ScriptedUpstream& upstream;
  ~ReleaseAtExit() { upstream.Release(); }
};

class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("agentpay-gw-");
    auto store = OpenStore("sqlite:" + (dir_ / "gw.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    MakeGateway(GatewayConfig{});
  }

  // With one route "/" at kPrice, and after it `more_routes` of other prefixes and prices.
  void MakeGateway(GatewayConfig config,
                   const std::vector<std::pair<std::string, int64_t>>& more_routes = {}) {
    RouteConfig route;
    route.prefix = "/";
    route.upstream_url = "http://127.0.0.1:9";
    route.upstream = *ParseHttpUrl(route.upstream_url);
    route.price = kPrice;
    route.timeout_ms = 1000;
    config.routes = {route};
    for (const auto& [prefix, price] : more_routes) {
      route.prefix = prefix;
      route.price = price;
      config.routes.push_back(route);
    }
    config.admin_token = "admin-secret";
    config.attach_wait_ms = attach_wait_ms_;
    gateway_ = std::make_unique<Gateway>(config, *store_, clock_, random_, timers_, upstream_);
  }

  void TearDown() override {
    if (store_) ExpectConserved();
    gateway_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  HttpResponse Admin(const std::string& method, const std::string& target, const std::string& body) {
    HttpRequest request;
    request.method = method;
    request.target = target;
    request.headers = {{"Authorization", "Bearer admin-secret"}};
    request.body = body;
    return gateway_->Handle(request);
  }

  // Creates an account funded with `amount`; returns {id, api key}.
  std::pair<std::string, std::string> Account(int64_t amount) {
    auto created = nlohmann::json::parse(Admin("POST", "/admin/v1/accounts", R"({"name":"t"})").body);
    std::string id = created["account_id"];
    HttpResponse deposit =
        Admin("POST", "/admin/v1/accounts/" + id + "/deposits",
              nlohmann::json({{"amount", std::to_string(amount)}, {"reference", "seed"}}).dump());
    EXPECT_EQ(deposit.status, 201) << deposit.body;
    return {id, created["api_key"]};
  }

  // Through the fixture's gateway, or through `via` (another gateway on the same database).
  HttpResponse Pay(const std::string& api_key, const std::string& key, const std::string& body,
                   Gateway* via = nullptr) {
    HttpRequest request;
    request.method = "POST";
    request.target = "/work";
    request.headers = {{"Authorization", "Bearer " + api_key}, {"Content-Type", "application/json"}};
    if (!key.empty()) request.headers.push_back({"Idempotency-Key", key});
    request.body = body;
    return (via != nullptr ? via : gateway_.get())->Handle(request);
  }

  // Another gateway process on the same database: a Store of its own on the same SQLite file.
  std::unique_ptr<Store> OpenSecondStore() {
    auto store = OpenStore("sqlite:" + (dir_ / "gw.db").string());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::vector<TraceEvent> EventsOf(const std::string& op_id) {
    std::vector<TraceEvent> events;
    EXPECT_TRUE(store_->Read([&](Transaction& tx) {
      auto listed = tx.ListEvents(op_id);
      if (!listed.ok()) return listed.status();
      events = *listed;
      return Status::Ok();
    }).ok());
    return events;
  }

  // A counter or gauge of the fixture's gateway's /metrics (0 when absent).
  uint64_t MetricOf(const std::string& name) {
    HttpResponse metrics = Admin("GET", "/metrics", "");
    EXPECT_EQ(metrics.status, 200);
    const std::string prefix = "\n" + name + " ";
    size_t at = ("\n" + metrics.body).find(prefix);
    if (at == std::string::npos) return 0;
    return std::stoull(metrics.body.substr(at + prefix.size() - 1));
  }

  Balances BalancesOf(const std::string& account_id) {
    Balances balances;
    EXPECT_TRUE(store_->Read([&](Transaction& tx) {
      auto account = tx.FindAccount(account_id);
      if (!account.ok()) return account.status();
      balances = (*account)->balances;
      return Status::Ok();
    }).ok());
    return balances;
  }

  Operation OperationOf(const HttpResponse& response) {
    std::string id(response.Header("AgentPay-Operation-Id").value_or(""));
    Operation op;
    EXPECT_TRUE(store_->Read([&](Transaction& tx) {
      auto found = tx.FindOperation(id);
      if (!found.ok()) return found.status();
      if (!found->has_value()) return Status::Error(ErrorCode::kStoreNotFound, id);
      op = **found;
      return Status::Ok();
    }).ok()) << id;
    return op;
  }

  void ExpectConserved() {
    LedgerAudit audit;
    ASSERT_TRUE(store_->Read([&](Transaction& tx) {
      auto result = tx.Audit();
      if (!result.ok()) return result.status();
      audit = *result;
      return Status::Ok();
    }).ok());
    int64_t balances = 0;
    for (const auto& account : audit.accounts) {
      EXPECT_TRUE(account.stored.Valid()) << account.account_id;
      EXPECT_EQ(account.stored, account.from_ledger) << account.account_id;
      EXPECT_EQ(account.wallet_net, account.stored.available()) << account.account_id;
      balances += account.stored.balance();
    }
    EXPECT_EQ(balances + audit.revenue_total, -audit.external_total);
  }

  std::filesystem::path dir_;
  ManualClock clock_;
  AsioTimers timers_;  // real waits: the pipeline polls and attaches in real time
  CountingRandom random_;
  ScriptedUpstream upstream_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Gateway> gateway_;
  int64_t attach_wait_ms_ = 5000;
};

TEST_F(GatewayTest, CaptureThenReplay) {
  auto [id, key] = Account(1000);
  HttpResponse first = Pay(key, "k1", "{}");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.Header("Idempotent-Replayed"), "false");
  HttpResponse again = Pay(key, "k1", "{}");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(upstream_.last_operation(), first.Header("AgentPay-Operation-Id"));
}

// Issue 36 item 2: a path that the gateway reads under "/" but an upstream could read under
// "/expensive" is refused alike by the head handler (the early 402) and the pipeline, and by both
// before any operation, hold or upstream call exists.
TEST_F(GatewayTest, TargetsReadAsAnotherRouteAreRefusedBeforeAnyMoneyMoves) {
  MakeGateway(GatewayConfig{}, {{"/expensive", 500000}});
  auto [id, key] = Account(1000000);
  const char* variants[] = {"/expensive;jsessionid=1/report",
                            "/Expensive/report",
                            "/EXPENSIVE/report",
                            "/expensive%3b/report",
                            "/expensive./report",
                            "/%EF%BD%85xpensive/report",
                            "/;x/expensive/report",
                            "/expensive.json"};
  for (const char* target : variants) {
    SCOPED_TRACE(target);
    HttpRequest head;
    head.method = "POST";
    head.target = target;
    HeadDecision early = gateway_->AnswerHead(head, [](HeadDecision) { ADD_FAILURE(); });
    ASSERT_EQ(early.kind, HeadDecision::Kind::kAnswer);
    EXPECT_EQ(early.answer.status, 400);
    EXPECT_EQ(nlohmann::json::parse(early.answer.body)["code"], "ambiguous_target");
    HttpRequest paid = head;
    paid.headers = {{"Authorization", "Bearer " + key}, {"Idempotency-Key", target}};
    paid.body = "{}";
    HttpResponse answer = gateway_->Handle(paid);
    EXPECT_EQ(answer.status, 400);
    EXPECT_EQ(nlohmann::json::parse(answer.body)["code"], "ambiguous_target");
    EXPECT_NE(answer.body.find("/expensive"), std::string::npos) << answer.body;
    EXPECT_FALSE(answer.Header("AgentPay-Operation-Id").has_value());
  }
  EXPECT_EQ(upstream_.calls(), 0);
  EXPECT_EQ(BalancesOf(id), (Balances{1000000, 0, 0}));
  // Spelt as the route means it, the same request is sold at the route's price.
  HttpRequest plain;
  plain.method = "POST";
  plain.target = "/expensive/report";
  plain.headers = {{"Authorization", "Bearer " + key}, {"Idempotency-Key", "plain"}};
  EXPECT_EQ(gateway_->Handle(plain).status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{1000000, 500000, 0}));
}

// A wallet key checked on the request's head is not looked up again for its body (the head's
// note carries the account), but only while the note is fresh: a key revoked while a slow body was
// on its way is refused within the staleness bound, as for any other request, and nothing moves.
TEST_F(GatewayTest, AKeyCheckedOnTheHeadIsBelievedForItsBodyOnlyWhileFresh) {
  auto [id, key] = Account(1000);
  auto head_of = [&key](const std::string& idempotency_key) {
    HttpRequest head;
    head.method = "POST";
    head.target = "/work";
    head.headers = {{"Authorization", "Bearer " + key},
                    {"Idempotency-Key", idempotency_key},
                    {"Content-Length", "2"}};
    return head;
  };
  auto with_body = [](HttpRequest head, const HeadDecision& early) {
    head.body = "{}";
    head.head_note = early.note;
    return head;
  };
  // A key not remembered is read on the blocking pool: the decision then comes through `done`.
  auto decide = [this](const HttpRequest& head) {
    auto later = std::make_shared<std::promise<HeadDecision>>();
    HeadDecision early =
        gateway_->AnswerHead(head, [later](HeadDecision decision) { later->set_value(decision); });
    return early.kind == HeadDecision::Kind::kLater ? later->get_future().get() : early;
  };
  HttpRequest quick = head_of("quick");
  HeadDecision quick_early = decide(quick);
  ASSERT_EQ(quick_early.kind, HeadDecision::Kind::kReadBody);
  ASSERT_NE(quick_early.note, nullptr);
  HttpRequest slow = head_of("slow");
  HeadDecision slow_early = decide(slow);
  ASSERT_EQ(slow_early.kind, HeadDecision::Kind::kReadBody);

  auto keys =
      nlohmann::json::parse(Admin("GET", "/admin/v1/accounts/" + id + "/api-keys", "").body);
  const std::string key_id = keys["api_keys"][0]["key_id"];
  ASSERT_EQ(Admin("DELETE", "/admin/v1/accounts/" + id + "/api-keys/" + key_id, "").status, 200);
  // Authenticated on its head a moment before the revocation: served, as a request in flight.
  clock_.Advance(10);
  EXPECT_EQ(gateway_->Handle(with_body(quick, quick_early)).status, 200);
  // Its body came after the note and the remembered key had both gone stale: looked up, refused.
  clock_.Advance(ApiKeys::kMaxKeyStalenessMs);
  HttpResponse refused = gateway_->Handle(with_body(slow, slow_early));
  EXPECT_EQ(refused.status, 401);
  EXPECT_FALSE(refused.Header("AgentPay-Operation-Id").has_value());
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

TEST(UpstreamRequest, ReplacesCredentialsAndKeyWithTheOperationsOwn) {
  RouteConfig route;
  route.upstream = *ParseHttpUrl("http://127.0.0.1:9/base");
  HttpRequest request;
  request.method = "PUT";
  request.target = "/work?x=1";
  request.body = "payload";
  request.headers = {{"Authorization", "Bearer ak_secret"}, {"Idempotency-Key", "client-key"},
                     {"PAYMENT-SIGNATURE", "sig"}, {"X-PAYMENT", "v1"}, {"Connection", "close"},
                     {"Host", "gateway"}, {"Content-Length", "7"}, {"X-Custom", "kept"},
                     {"Content-Type", "text/plain"}, {"Connection", "keep-alive, X-Hop"},
                     {"X-Hop", "secret"}};
  ClientRequest forward = BuildUpstreamRequest(route, request, "op_abc");
  EXPECT_EQ(forward.method, "PUT");
  EXPECT_EQ(forward.target, "/base/work?x=1");
  EXPECT_EQ(forward.body, "payload");
  std::vector<std::string> names;
  std::string key;
  for (const auto& header : forward.headers) {
    names.push_back(header.name);
    if (header.name == "Idempotency-Key") key = header.value;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"X-Custom", "Content-Type", "Idempotency-Key"}));
  EXPECT_EQ(key, UpstreamIdempotencyKey("op_abc"));
  EXPECT_EQ(key.find("op_abc"), std::string::npos);
  EXPECT_EQ(UpstreamIdempotencyKey("op_abc"), UpstreamIdempotencyKey("op_abc"));
  EXPECT_NE(UpstreamIdempotencyKey("op_abc"), UpstreamIdempotencyKey("op_abd"));
}

TEST_F(GatewayTest, MismatchChangesNothing) {
  auto [id, key] = Account(1000);
  HttpResponse first = Pay(key, "k1", "{\"a\":1}");
  ASSERT_EQ(first.status, 200);
  HttpResponse other = Pay(key, "k1", "{\"a\":2}");
  EXPECT_EQ(other.status, 422);
  EXPECT_EQ(other.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(nlohmann::json::parse(other.body)["code"], "idempotency_key_mismatch");
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(upstream_.calls(), 1);
}

TEST_F(GatewayTest, InsufficientFundsReservesNothing) {
  auto [id, key] = Account(100);
  HttpResponse poor = Pay(key, "k1", "{}");
  EXPECT_EQ(poor.status, 402);
  EXPECT_EQ(nlohmann::json::parse(poor.body)["code"], "insufficient_funds");
  EXPECT_EQ(upstream_.calls(), 0);
  // The key was not reserved: after a deposit the same key is a fresh, successful payment.
  ASSERT_EQ(Admin("POST", "/admin/v1/accounts/" + id + "/deposits",
                  R"({"amount":"500","reference":"top-up"})").status, 201);
  EXPECT_EQ(Pay(key, "k1", "{}").status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{600, kPrice, 0}));
}

TEST_F(GatewayTest, KeepThenResumeCapturesOnce) {
  auto [id, key] = Account(1000);
  upstream_.Push(UpstreamKind::kResponded, 503);
  HttpResponse failed = Pay(key, "k1", "{}");
  EXPECT_EQ(failed.status, 502);
  EXPECT_EQ(nlohmann::json::parse(failed.body)["code"], "fulfillment_pending");
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));
  upstream_.Push(UpstreamKind::kTimeout);
  EXPECT_EQ(Pay(key, "k1", "{}").status, 504);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));
  HttpResponse done = Pay(key, "k1", "{}");
  EXPECT_EQ(done.status, 200);
  EXPECT_EQ(done.Header("AgentPay-Operation-Id"), failed.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(OperationOf(done).attempts, 3);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(upstream_.calls(), 3);
}

TEST_F(GatewayTest, RefusalReleasesAndIsReplayed) {
  auto [id, key] = Account(1000);
  upstream_.Push(UpstreamKind::kResponded, 400);
  HttpResponse refused = Pay(key, "k1", "{}");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));
  HttpResponse again = Pay(key, "k1", "{}");
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(upstream_.calls(), 1);
}

TEST_F(GatewayTest, DuplicateAttachesToTheAttemptInFlight) {
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto first = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(1);
  auto second = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  upstream_.Release();
  HttpResponse a = first.get(), b = second.get();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(a.Header("Idempotent-Replayed"), "false");
  EXPECT_EQ(b.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

// Threat model T4: a wallet operation's view and trace answer its account's API key or the admin
// token; another account, a wrong key or no credentials get the 404 of an unknown id.
TEST_F(GatewayTest, OperationViewsNeedTheAccountsKeyOrTheAdminToken) {
  MakeGateway(GatewayConfig{});
  auto [id, key] = Account(1000);
  auto [other_id, other_key] = Account(1000);
  HttpResponse paid = Pay(key, "k1", "{}");
  ASSERT_EQ(paid.status, 200) << paid.body;
  const std::string op(*paid.Header("AgentPay-Operation-Id"));
  auto get = [&](const std::string& target, std::vector<HttpHeader> headers) {
    HttpRequest request;
    request.method = "GET";
    request.target = target;
    request.headers = std::move(headers);
    return gateway_->Handle(request);
  };
  HttpResponse unknown = get("/v1/operations/op_doesnotexist", {});
  ASSERT_EQ(unknown.status, 404);
  for (const std::string suffix : {"", "/trace"}) {
    const std::string target = "/v1/operations/" + op + suffix;
    for (const std::vector<HttpHeader>& strangers :
         {std::vector<HttpHeader>{}, {{"Authorization", "Bearer " + other_key}},
          {{"Authorization", "Bearer wrong"}}, {{"Idempotency-Key", "k1"}}}) {
      HttpResponse refused = get(target, strangers);
      EXPECT_EQ(refused.status, 404) << target;
      EXPECT_EQ(refused.body, unknown.body) << target;
    }
    EXPECT_EQ(get(target, {{"Authorization", "Bearer " + key}}).status, 200) << target;
    EXPECT_EQ(get(target, {{"Authorization", "Bearer admin-secret"}}).status, 200) << target;
  }
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(BalancesOf(other_id), (Balances{1000, 0, 0}));
}

TEST_F(GatewayTest, AttachWaitEndsIn202WithLocation) {
  attach_wait_ms_ = 50;
  MakeGateway(GatewayConfig{});
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto first = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(1);
  HttpResponse waiting = Pay(key, "k1", "{}");
  EXPECT_EQ(waiting.status, 202);
  EXPECT_EQ(nlohmann::json::parse(waiting.body)["code"], "operation_in_progress");
  EXPECT_EQ(waiting.Header("Location"),
            "/v1/operations/" + std::string(*waiting.Header("AgentPay-Operation-Id")));
  EXPECT_TRUE(waiting.Header("Retry-After").has_value());
  upstream_.Release();
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

// An expired lease only matters when another request takes over; alone, the slow attempt finishes.
TEST_F(GatewayTest, ExpiredLeaseWithoutTakeoverStillCompletes) {
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto stalled = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(1);
  clock_.Advance(1000 + kLeaseMarginMs);  // the route timeout plus the margin
  upstream_.Release();
  HttpResponse stalled_answer = stalled.get();
  EXPECT_EQ(stalled_answer.status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
}

TEST_F(GatewayTest, TakeoverAfterLeaseExpiryThenStaleFinishChangesNothing) {
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto stalled = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(1);
  clock_.Advance(1000 + kLeaseMarginMs + 1);
  // The retry finds the lease expired, resumes (attempt 2) and blocks in the upstream too.
  auto retry = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(2);
  upstream_.Release();
  HttpResponse a = stalled.get(), b = retry.get();
  // Exactly one of them captured; the other learned that the operation was taken over or replayed.
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_TRUE(a.status == 202 || b.status == 202) << a.status << " " << b.status;
  EXPECT_EQ(upstream_.calls(), 2);
}

TEST_F(GatewayTest, ForgottenKeyIsANewAction) {
  GatewayConfig config;
  config.retention_ms = 1000;
  MakeGateway(config);
  auto [id, key] = Account(1000);
  HttpResponse first = Pay(key, "k1", "{}");
  ASSERT_EQ(first.status, 200);
  clock_.Advance(999);
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
  clock_.Advance(1);
  HttpResponse late = Pay(key, "k1", "{}");
  EXPECT_EQ(late.status, 200);
  EXPECT_EQ(late.Header("Idempotent-Replayed"), "false");
  EXPECT_NE(late.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 2 * kPrice, 0}));
}

// Issue 40: /metrics shows where the store writer's time goes, phase by phase (bench/ reads it to
// say how busy the writer is), and what its commits wrote to SQLite's WAL (a paid request's two
// decisions: at least a page each).
TEST_F(GatewayTest, MetricsSayWhereTheStoreWritersTimeGoes) {
  auto [id, key] = Account(1000);
  const uint64_t decided = MetricOf(R"(agentpay_store_writer_microseconds_total{phase="decide"})");
  const uint64_t wal = MetricOf("agentpay_store_wal_bytes_total");
  ASSERT_EQ(Pay(key, "w1", R"({"a":1})").status, 200);
  EXPECT_GT(MetricOf(R"(agentpay_store_writer_microseconds_total{phase="decide"})"), decided);
  EXPECT_GE(MetricOf("agentpay_store_wal_bytes_total") - wal, 2u * (4096 + 24));
  HttpResponse metrics = Admin("GET", "/metrics", "");
  for (const char* phase : {"decide", "commit", "sync", "complete"}) {
    EXPECT_NE(metrics.body.find(std::string("agentpay_store_writer_microseconds_total{phase=\"") +
                                phase + "\"} "),
              std::string::npos)
        << phase;
  }
}

// Issue 40: what the answer cache answers (a replay, a refused reuse of the key) is what the store
// answers, byte for byte: a second gateway on the same database without a cache answers from the
// store, and the two agree on every header and the body.
TEST_F(GatewayTest, AnAnswerFromTheAnswerCacheIsTheStoredAnswer) {
  auto [id, key] = Account(1000);
  HttpResponse first = Pay(key, "k1", R"({"a":1})");
  ASSERT_EQ(first.status, 200);
  const uint64_t hits = MetricOf("agentpay_answer_cache_hits_total");
  HttpResponse cached = Pay(key, "k1", R"({"a":1})");
  HttpResponse cached_refusal = Pay(key, "k1", R"({"a":2})");
  EXPECT_EQ(MetricOf("agentpay_answer_cache_hits_total"), hits + 2);
  auto second_store = OpenSecondStore();
  ASSERT_NE(second_store, nullptr);
  GatewayConfig without_cache = gateway_->config();
  without_cache.answer_cache_bytes = 0;
  Gateway second(without_cache, *second_store, clock_, random_, timers_, upstream_);
  HttpResponse stored = Pay(key, "k1", R"({"a":1})", &second);
  HttpResponse stored_refusal = Pay(key, "k1", R"({"a":2})", &second);
  EXPECT_EQ(cached.status, 200);
  EXPECT_EQ(cached.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(cached_refusal.status, 422);
  for (auto [from_cache, from_store] :
       {std::pair{&cached, &stored}, std::pair{&cached_refusal, &stored_refusal}}) {
    EXPECT_EQ(from_cache->status, from_store->status);
    EXPECT_EQ(from_cache->headers, from_store->headers);
    EXPECT_EQ(from_cache->body, from_store->body);
  }
  EXPECT_EQ(cached.body, first.body);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

// A payment without an Idempotency-Key gets a key nobody can send again: its answer is not kept.
TEST_F(GatewayTest, TheAnswerCacheKeepsNothingOfAPaymentWithoutAKey) {
  auto [id, key] = Account(1000);
  ASSERT_EQ(Pay(key, "", "{}").status, 200);
  EXPECT_EQ(MetricOf("agentpay_answer_cache_entries"), 0u);
  ASSERT_EQ(Pay(key, "k1", "{}").status, 200);
  EXPECT_EQ(MetricOf("agentpay_answer_cache_entries"), 1u);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 2 * kPrice, 0}));
}

// A key is forgotten once its retention ends, and then it is a new action on whichever gateway it
// arrives first. The cache stops answering it a margin (a minute) before, so a gateway whose cache
// held the old answer never gives it for the key's new operation.
TEST_F(GatewayTest, TheAnswerCacheLetsAKeyGoBeforeItsRetentionEnds) {
  GatewayConfig config;
  config.retention_ms = 180000;
  MakeGateway(config);
  auto [id, key] = Account(1000);
  HttpResponse first = Pay(key, "k1", "{}");
  ASSERT_EQ(first.status, 200);
  const uint64_t hits = MetricOf("agentpay_answer_cache_hits_total");
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(MetricOf("agentpay_answer_cache_hits_total"), hits + 1);
  clock_.Advance(config.retention_ms - config.answer_cache_margin_ms);
  // Still replayed, from the store now, and not cached again this close to the end.
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(MetricOf("agentpay_answer_cache_hits_total"), hits + 1);
  EXPECT_EQ(MetricOf("agentpay_answer_cache_entries"), 0u);
  clock_.Advance(config.answer_cache_margin_ms);
  auto second_store = OpenSecondStore();
  ASSERT_NE(second_store, nullptr);
  Gateway second(gateway_->config(), *second_store, clock_, random_, timers_, upstream_);
  HttpResponse again = Pay(key, "k1", "{}", &second);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "false");
  ASSERT_NE(again.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  HttpResponse replay = Pay(key, "k1", "{}");
  EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.Header("AgentPay-Operation-Id"), again.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(upstream_.calls(), 2);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 2 * kPrice, 0}));
}

// Whoever gets an answer may destroy the gateway at once, even from inside the callback that
// delivers it (the store's thread, for a paid request): nothing of the gateway is touched after the
// answer is given. It once was (the in-flight count was decremented after the answer), and a test
// that destroyed its gateway right after an answer corrupted the heap. ctest runs this test with
// MALLOC_PERTURB_ set, so freed memory is scribbled over and such a late touch crashes.
TEST_F(GatewayTest, GatewayMayBeDestroyedFromItsOwnAnswer) {
  auto [id, key] = Account(100000);
  for (int i = 0; i < 50; ++i) {
    auto request = std::make_shared<HttpRequest>();
    request->method = "POST";
    request->target = "/work";
    request->headers = {{"Authorization", "Bearer " + key},
                        {"Idempotency-Key", "k" + std::to_string(i)}};
    request->body = "{}";
    std::promise<int> answered;
    gateway_->HandleAsync(request, [&](HttpResponse response) {
      gateway_.reset();
      answered.set_value(response.status);
    });
    ASSERT_EQ(answered.get_future().get(), 200);
    // The callback's thread returns into the gateway's code after the promise is set: give it
    // time to touch (freed) memory if it were going to.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    MakeGateway(GatewayConfig{});
  }
  EXPECT_EQ(BalancesOf(id), (Balances{100000, 50 * kPrice, 0}));
}

// The HTTP server's I/O threads are event threads (core/event_threads.h): a paid request's
// every step that may wait on the store (the API key's lookup, the key's fast-path read, the
// durability an answer waits for) runs elsewhere and comes back by callback. Here each request is
// handed to the gateway on a thread marked as an I/O thread, as the server does: a blocking store
// call on it would abort the test. Covered: an unknown key (a read), a new payment, its replay (a
// read, then durability), a tampered retry (422), and a refusal for want of funds.
TEST_F(GatewayTest, APaidRequestNeverWaitsOnItsIoThread) {
  auto [id, key] = Account(2 * kPrice);
  auto send = [this](std::vector<HttpHeader> headers, const std::string& body) {
    auto request = std::make_shared<HttpRequest>();
    request->method = "POST";
    request->target = "/work";
    request->headers = std::move(headers);
    request->body = body;
    auto answered = std::make_shared<std::promise<HttpResponse>>();
    std::thread io([&, request, answered] {
      MarkEventThread("http-io");
      gateway_->HandleAsync(request, [answered](HttpResponse r) { answered->set_value(r); });
    });
    io.join();
    return answered->get_future().get();
  };
  const std::string bearer = "Bearer " + key;
  EXPECT_EQ(send({{"Authorization", "Bearer ap_unknown"}, {"Idempotency-Key", "a"}}, "{}").status,
            401);
  EXPECT_EQ(send({{"Authorization", bearer}, {"Idempotency-Key", "a"}}, "{}").status, 200);
  HttpResponse replay = send({{"Authorization", bearer}, {"Idempotency-Key", "a"}}, "{}");
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.Header("Idempotent-Replayed").value_or(""), "true");
  EXPECT_EQ(send({{"Authorization", bearer}, {"Idempotency-Key", "a"}}, "{\"x\":1}").status, 422);
  EXPECT_EQ(send({{"Authorization", bearer}, {"Idempotency-Key", "b"}}, "{}").status, 200);
  EXPECT_EQ(send({{"Authorization", bearer}, {"Idempotency-Key", "c"}}, "{}").status, 402);
  EXPECT_EQ(BalancesOf(id), (Balances{2 * kPrice, 2 * kPrice, 0}));
}

// The readers' pool full: the key's fast-path read cannot be queued, so the writer decides
// against the key as it is (it reads it itself). New payments and replays are still served, once.
TEST_F(GatewayTest, APaymentWhoseReadFindsNoFreeReaderIsDecidedByTheWriter) {
  // Runs tasks at once while open (the API key's first lookup), refuses them once closed.
  struct Closable final : Executor {
    bool TrySubmit(std::function<void()> task) override {
      if (closed) return false;
      task();
      return true;
    }
    std::atomic<bool> closed{false};
  } pool;
  GatewayExecutors executors;
  executors.blocking = &pool;
  executors.readers = &pool;
  auto [id, key] = Account(1000);
  auto full = std::make_unique<Gateway>(gateway_->config(), *store_, clock_, random_, timers_,
                                        upstream_, nullptr, executors);
  EXPECT_EQ(Pay(key, "k0", "{}", full.get()).status, 200);  // the key is remembered now
  pool.closed = true;
  EXPECT_EQ(Pay(key, "k1", "{}", full.get()).status, 200);
  HttpResponse replay = Pay(key, "k1", "{}", full.get());
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.Header("Idempotent-Replayed").value_or(""), "true");
  EXPECT_EQ(Pay(key, "k1", "{\"x\":1}", full.get()).status, 422);
  full.reset();
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 2 * kPrice, 0}));
}

TEST_F(GatewayTest, KeysAreScopedByAccount) {
  auto [a_id, a_key] = Account(1000);
  auto [b_id, b_key] = Account(1000);
  EXPECT_EQ(Pay(a_key, "shared", "{\"who\":\"a\"}").status, 200);
  EXPECT_EQ(Pay(b_key, "shared", "{\"who\":\"b\"}").status, 200);
  EXPECT_EQ(BalancesOf(a_id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(BalancesOf(b_id), (Balances{1000, kPrice, 0}));
}

TEST_F(GatewayTest, RecoveryKeepsTheHoldOfAnInterruptedCall) {
  // A gateway that never registered its instance (as a process from before claims were recorded)
  // looks dead to every other process.
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto interrupted = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  upstream_.WaitBlocked(1);
  // A second gateway on the same store plays the restarted process.
  Gateway restarted(gateway_->config(), *store_, clock_, random_, timers_, upstream_);
  auto recovered = restarted.RecoverInterrupted();
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 1);
  upstream_.Release();
  // The old attempt lost its claim to the recovery: its answer is not applied.
  EXPECT_EQ(interrupted.get().status, 202);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));
  HttpResponse retry = Pay(key, "k1", "{}");
  EXPECT_EQ(retry.status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

// Issue 4 (found by the fault suite): two gateway processes share one database; the second starts
// while the first is calling a slow upstream. Its recovery must leave that call alone, so the first
// delivers the answer (200, one execution) instead of losing its claim and answering 202.
TEST_F(GatewayTest, RecoveryLeavesTheCallOfALiveProcessAlone) {
  ASSERT_TRUE(gateway_->RegisterInstance().ok());
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto in_flight = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  ReleaseAtExit release_at_exit{upstream_};
  upstream_.WaitBlocked(1);
  auto second_store = OpenSecondStore();
  ASSERT_NE(second_store, nullptr);
  Gateway second(gateway_->config(), *second_store, clock_, random_, timers_, upstream_);
  ASSERT_NE(second.instance_id(), gateway_->instance_id());
  ASSERT_TRUE(second.RegisterInstance().ok());
  auto recovered = second.RecoverInterrupted();
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(*recovered, 0);
  upstream_.Release();
  HttpResponse answer = in_flight.get();
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.Header("Idempotent-Replayed"), "false");
  EXPECT_EQ(OperationOf(answer).claimed_by, gateway_->instance_id());
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  // The retry through the second process replays; nothing runs twice.
  EXPECT_EQ(Pay(key, "k1", "{}", &second).Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(upstream_.calls(), 1);
}

TEST_F(GatewayTest, RecoveryTakesOverTheCallOfADeadProcess) {
  ASSERT_TRUE(gateway_->RegisterInstance().ok());
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto in_flight = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  ReleaseAtExit release_at_exit{upstream_};
  upstream_.WaitBlocked(1);
  auto second_store = OpenSecondStore();
  ASSERT_NE(second_store, nullptr);
  Gateway second(gateway_->config(), *second_store, clock_, random_, timers_, upstream_);
  ASSERT_TRUE(second.RegisterInstance().ok());
  ASSERT_EQ(*second.RecoverInterrupted(), 0);  // alive: left alone
  // The first process dies: its lock goes with it (played here by releasing its registration;
  // the store conformance suite kills a real process).
  ASSERT_TRUE(store_->ReleaseInstance(gateway_->instance_id()).ok());
  auto recovered = second.RecoverInterrupted();
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(*recovered, 1);
  upstream_.Release();
  HttpResponse lost = in_flight.get();
  EXPECT_EQ(lost.status, 202);  // the presumed-dead attempt lost its claim: nothing applied
  Operation op = OperationOf(lost);
  EXPECT_EQ(op.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));  // hold kept
  bool traced = false;
  for (const TraceEvent& event : EventsOf(op.id)) {
    traced |= event.kind == "recovered" &&
              event.detail.find(gateway_->instance_id()) != std::string::npos;
  }
  EXPECT_TRUE(traced);
  HttpResponse retry = Pay(key, "k1", "{}", &second);
  EXPECT_EQ(retry.status, 200);
  EXPECT_EQ(OperationOf(retry).claimed_by, second.instance_id());
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));  // charged once
}

TEST_F(GatewayTest, RecoveryTakesOverAnExpiredLeaseEvenOfALiveProcess) {
  ASSERT_TRUE(gateway_->RegisterInstance().ok());
  auto [id, key] = Account(1000);
  upstream_.Block();
  auto in_flight = std::async(std::launch::async, [&, k = key] { return Pay(k, "k1", "{}"); });
  ReleaseAtExit release_at_exit{upstream_};
  upstream_.WaitBlocked(1);
  auto second_store = OpenSecondStore();
  ASSERT_NE(second_store, nullptr);
  Gateway second(gateway_->config(), *second_store, clock_, random_, timers_, upstream_);
  ASSERT_TRUE(second.RegisterInstance().ok());
  clock_.Advance(1000 + kLeaseMarginMs);  // the route timeout plus the margin: the lease is over
  EXPECT_EQ(*second.RecoverInterrupted(), 1);
  upstream_.Release();
  EXPECT_EQ(in_flight.get().status, 202);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));
}

// The fixture's store, with one decision going wrong as a database that goes away does it: its
// answer lost after it committed (the connection dropped as the COMMIT landed), or refused without
// running (nothing reachable). Everything else goes straight through.
class FlakyStore final : public Store {
 public:
  enum class Fault { kAnswerLost, kRefused };
  explicit FlakyStore(Store& inner) : inner_(inner) {}

  // The decision after `skip` more decisions goes wrong as `fault` says.
  void Next(int skip, Fault fault) {
    std::lock_guard lock(mutex_);
    countdown_ = skip;
    fault_ = fault;
  }

  void WriteAsync(TransactionFn fn, WriteDone done) override {
    std::optional<Fault> fault;
    {
      std::lock_guard lock(mutex_);
      if (countdown_ >= 0 && countdown_-- == 0) fault = fault_;
    }
    const Status away = Status::Error(ErrorCode::kStoreUnavailable, "injected: database away");
    if (!fault) return inner_.WriteAsync(std::move(fn), std::move(done));
    if (*fault == Fault::kRefused) return done(away);
    inner_.WriteAsync(std::move(fn), [done = std::move(done), away](Status status) {
      done(status.ok() ? away : status);
    });
  }
  Status Read(const TransactionFn& fn) override { return inner_.Read(fn); }
  Status ReadUnsynced(const TransactionFn& fn) override { return inner_.ReadUnsynced(fn); }
  void AwaitDurable() override { inner_.AwaitDurable(); }
  void WhenDurable(std::function<void()> then) override { inner_.WhenDurable(std::move(then)); }
  StoreStats Stats() override { return inner_.Stats(); }
  // Remote reads: the wallet path presumes each key new and reads only a key found taken, as it
  // does on PostgreSQL.
  bool ReadsAreRemote() const override { return remote_reads_; }
  void SetRemoteReads(bool remote) { remote_reads_ = remote; }
  Status RegisterInstance(const std::string& id) override { return inner_.RegisterInstance(id); }
  Status ReleaseInstance(const std::string& id) override { return inner_.ReleaseInstance(id); }
  Result<bool> InstanceAlive(const std::string& id) override { return inner_.InstanceAlive(id); }

 private:
  Store& inner_;
  std::mutex mutex_;
  int countdown_ = -1;
  Fault fault_ = Fault::kRefused;
  bool remote_reads_ = false;
};

// Each test twice: reading the key before the begin decision (SQLite without the answer cache),
// and presuming it new (PostgreSQL's way, and SQLite's with the cache).
class OutcomeNotRecordedTest : public GatewayTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    attach_wait_ms_ = 200;  // a duplicate attached to an attempt nobody runs is not kept long
    GatewayTest::SetUp();
    flaky_ = std::make_unique<FlakyStore>(*store_);
    flaky_->SetRemoteReads(GetParam());
    GatewayConfig config = gateway_->config();
    if (!GetParam()) config.answer_cache_bytes = 0;  // else the key is presumed new anyway
    flaky_gateway_ =
        std::make_unique<Gateway>(config, *flaky_, clock_, random_, timers_, upstream_);
  }
  void TearDown() override {
    flaky_gateway_.reset();
    flaky_.reset();
    GatewayTest::TearDown();
  }
  std::unique_ptr<FlakyStore> flaky_;
  std::unique_ptr<Gateway> flaky_gateway_;
};

// The upstream was called, its answer could not be recorded: 503, the hold stays, and the
// operation is left in progress under a lease naming this gateway. The retry it receives takes the
// operation over at once (it knows nobody runs it), before that lease: one capture, no new hold.
TEST_P(OutcomeNotRecordedTest, ARetryOnTheSameGatewayTakesItOverWithoutWaitingForTheLease) {
  auto [id, key] = Account(1000);
  flaky_->Next(1, FlakyStore::Fault::kRefused);  // the begin decision goes through, the next not
  HttpResponse first = Pay(key, "k1", "{}", flaky_gateway_.get());
  ASSERT_EQ(first.status, 503) << first.body;
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));
  Operation left = OperationOf(first);
  EXPECT_EQ(left.fulfillment, Fulfillment::kInProgress);
  ASSERT_GT(left.lease_expires_ms, clock_.NowMs());  // the lease still stands

  HttpResponse retry = Pay(key, "k1", "{}", flaky_gateway_.get());
  EXPECT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(retry.Header("Idempotent-Replayed"), "false");
  EXPECT_EQ(retry.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(upstream_.calls(), 2);  // the upstream sees the operation's id again, as on any retry
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(OperationOf(retry).attempts, 2);
  bool told = false;
  for (const TraceEvent& event : EventsOf(left.id)) {
    told |= event.kind == "retry_resumed" &&
            event.detail.find("attempt 1 ended on this gateway") != std::string::npos;
  }
  EXPECT_TRUE(told) << "the trace says why the attempt was taken over before its lease";
}

// The begin decision committed but its answer was lost: 503, nothing called. The retry here takes
// the operation over at once; another gateway cannot know the attempt ended, and attaches (202)
// until the lease runs out.
TEST_P(OutcomeNotRecordedTest, ALostBeginAnswerFreesTheClaimHereOnly) {
  auto [id, key] = Account(1000);
  flaky_->Next(0, FlakyStore::Fault::kAnswerLost);
  HttpResponse first = Pay(key, "k1", "{}", flaky_gateway_.get());
  ASSERT_EQ(first.status, 503) << first.body;
  EXPECT_EQ(upstream_.calls(), 0);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, kPrice}));  // it committed: the hold is there

  HttpResponse elsewhere = Pay(key, "k1", "{}");  // the fixture's gateway: another process
  EXPECT_EQ(elsewhere.status, 202) << elsewhere.body;
  EXPECT_EQ(upstream_.calls(), 0);

  HttpResponse here = Pay(key, "k1", "{}", flaky_gateway_.get());
  EXPECT_EQ(here.status, 200) << here.body;
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  EXPECT_EQ(Pay(key, "k1", "{}").Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(upstream_.calls(), 1);
}

// A decision refused before it ran leaves nothing: the retry is a new operation's first attempt.
// And an attempt that is running is never taken over by a retry on its own gateway: it attaches.
TEST_P(OutcomeNotRecordedTest, ARunningAttemptIsAttachedToNotTakenOver) {
  auto [id, key] = Account(1000);
  flaky_->Next(0, FlakyStore::Fault::kRefused);
  EXPECT_EQ(Pay(key, "k1", "{}", flaky_gateway_.get()).status, 503);
  EXPECT_EQ(upstream_.calls(), 0);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));

  upstream_.Block();
  ReleaseAtExit release_at_exit{upstream_};
  auto running = std::async(std::launch::async,
                            [&, k = key] { return Pay(k, "k1", "{}", flaky_gateway_.get()); });
  upstream_.WaitBlocked(1);
  HttpResponse duplicate = Pay(key, "k1", "{}", flaky_gateway_.get());
  EXPECT_EQ(duplicate.status, 202) << duplicate.body;
  upstream_.Release();
  EXPECT_EQ(running.get().status, 200);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

INSTANTIATE_TEST_SUITE_P(KeyReadFirstOrPresumedNew, OutcomeNotRecordedTest, ::testing::Bool());

TEST(AttemptsInHand, OnlyTheDecisionThatTookAnAttemptEndsIt) {
  AttemptsInHand attempts("gw_here");
  Operation op;
  op.id = "op_1";
  op.fulfillment = Fulfillment::kInProgress;
  op.claimed_by = "gw_here";
  op.attempts = 2;
  EXPECT_EQ(attempts.ViewOf(op), ClaimView::kEndedHere);  // claimed here, nobody runs it
  // Two decisions of one batch take the same attempt: the first failed after it ran (PostgreSQL
  // finds a held-over write failed at the next statement), the second resumed it. The first's
  // answer comes first and must not end the second's attempt.
  const uint64_t failed = attempts.Take(op);
  const uint64_t running = attempts.Take(op);
  attempts.Drop(op.id, failed);
  EXPECT_EQ(attempts.ViewOf(op), ClaimView::kLease);
  Operation earlier = op;
  earlier.attempts = 1;  // an attempt before the one in hand ended here
  EXPECT_EQ(attempts.ViewOf(earlier), ClaimView::kEndedHere);
  attempts.Drop(op.id, running);
  EXPECT_EQ(attempts.ViewOf(op), ClaimView::kEndedHere);
  EXPECT_EQ(attempts.size(), 0u);
  // Only this process's claims, and only in progress, are known beyond their lease.
  op.claimed_by = "gw_other";
  EXPECT_EQ(attempts.ViewOf(op), ClaimView::kLease);
  op.claimed_by = "gw_here";
  op.fulfillment = Fulfillment::kPendingRetry;
  EXPECT_EQ(attempts.ViewOf(op), ClaimView::kLease);
}

TEST_F(GatewayTest, RequestValidation) {
  auto [id, key] = Account(1000);
  HttpRequest bare;
  bare.method = "GET";
  bare.target = "/work";
  HttpResponse challenge = gateway_->Handle(bare);
  EXPECT_EQ(challenge.status, 402);
  EXPECT_TRUE(challenge.Header("PAYMENT-REQUIRED").has_value());
  EXPECT_EQ(Pay("ak_wrong", "k", "{}").status, 401);
  EXPECT_EQ(Pay(key, std::string(256, 'x'), "{}").status, 400);
  EXPECT_EQ(Pay(key, "bad key", "{}").status, 400);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));
  EXPECT_EQ(upstream_.calls(), 0);
}

// The resource a 402 names (v2 header resource.url, v1 body accepts[0].resource): both, or "" for
// a missing one.
std::pair<std::string, std::string> ChallengeResources(const HttpResponse& challenge) {
  EXPECT_EQ(challenge.status, 402) << challenge.body;
  auto header = challenge.Header("PAYMENT-REQUIRED");
  auto decoded = x402::Base64Decode(header.value_or(""));
  const auto v2 = nlohmann::json::parse(decoded.ok() ? *decoded : "", nullptr, false);
  const auto v1 = nlohmann::json::parse(challenge.body, nullptr, false);
  std::pair<std::string, std::string> urls;
  if (v2.is_object() && v2["resource"].is_object()) urls.first = v2["resource"].value("url", "");
  if (v1.is_object() && v1["accepts"].is_array()) {
    urls.second = v1["accepts"][0].value("resource", "");
  }
  return urls;
}

// Issue 36: the 402's resource is the configured public URL plus the request's normalised target,
// on the early 402 (the head, before the body) and the late one alike. The request's Host, which
// any client sets as it likes, changes nothing (it used to be copied in, always as http://).
TEST_F(GatewayTest, TheChallengeNamesThePublicUrlNeverTheHost) {
  GatewayConfig config;
  config.public_url = "https://pay.example.com/base";
  MakeGateway(config);
  using Urls = std::pair<std::string, std::string>;
  const std::string expected = "https://pay.example.com/base/work/item?q=1";
  HttpRequest unpaid;
  unpaid.method = "GET";
  unpaid.target = "/work/../work//item?q=1";
  unpaid.headers = {{"Host", "evil.example"},
                    {"X-Forwarded-Host", "evil.example"},
                    {"X-Forwarded-Proto", "http"}};
  EXPECT_EQ(ChallengeResources(gateway_->Handle(unpaid)), (Urls{expected, expected}));
  HttpRequest head;
  head.method = "POST";
  head.target = "/work/item?q=1";
  head.headers = {{"Host", "evil.example:80"}, {"Content-Length", "5"}};
  HeadDecision early = gateway_->AnswerHead(head, [](HeadDecision) { ADD_FAILURE(); });
  ASSERT_EQ(early.kind, HeadDecision::Kind::kAnswer);
  EXPECT_EQ(ChallengeResources(early.answer), (Urls{expected, expected}));
  // `serve` sets the URL again once a --listen of port 0 is bound.
  gateway_->SetPublicUrl("http://127.0.0.1:49152");
  EXPECT_EQ(ChallengeResources(gateway_->Handle(unpaid)),
            (Urls{"http://127.0.0.1:49152/work/item?q=1", "http://127.0.0.1:49152/work/item?q=1"}));
}

TEST_F(GatewayTest, DepositsAreIdempotentByReference) {
  auto [id, key] = Account(1000);
  std::string path = "/admin/v1/accounts/" + id + "/deposits";
  EXPECT_EQ(Admin("POST", path, R"({"amount":"5","reference":"r"})").status, 201);
  HttpResponse replay = Admin("POST", path, R"({"amount":"5","reference":"r"})");
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(Admin("POST", path, R"({"amount":"6","reference":"r"})").status, 422);
  for (const char* bad : {R"({"amount":5,"reference":"x"})", R"({"amount":"-5","reference":"x"})",
                          R"({"amount":"0","reference":"x"})", R"({"amount":"5"})", "[]", "{",
                          R"({"amount":"99999999999999999999","reference":"x"})"}) {
    EXPECT_EQ(Admin("POST", path, bad).status, 400) << bad;
  }
  EXPECT_EQ(Admin("POST", path, R"({"amount":"9223372036854775807","reference":"big"})").status,
            422);
  EXPECT_EQ(Admin("POST", "/admin/v1/accounts/acct_none/deposits",
                  R"({"amount":"5","reference":"r"})").status, 404);
  EXPECT_EQ(BalancesOf(id), (Balances{1005, 0, 0}));
  HttpRequest no_token;
  no_token.method = "GET";
  no_token.target = "/admin/v1/accounts/" + id;
  EXPECT_EQ(gateway_->Handle(no_token).status, 401);
}

class ResolveTest : public GatewayTest {
 protected:
  HttpResponse Resolve(const std::string& op_id, const std::string& outcome,
                       const std::string& note) {
    return Admin("POST", "/admin/v1/operations/" + op_id + "/resolve",
                 nlohmann::json({{"outcome", outcome}, {"note", note}}).dump());
  }
  // A kept hold (upstream 503) swept past its TTL: released, one alert. Returns the operation id.
  std::string Swept(const std::string& api_key, const std::string& key) {
    upstream_.Push(UpstreamKind::kResponded, 503);
    HttpResponse kept = Pay(api_key, key, "{}");
    EXPECT_EQ(kept.status, 502);
    clock_.Advance(GatewayConfig{}.hold_ttl_ms + 1);
    auto swept = SweepExpiredHolds(*store_, clock_, random_, 10);
    EXPECT_TRUE(swept.ok() && swept->alerts == 1);
    return std::string(kept.Header("AgentPay-Operation-Id").value_or(""));
  }
  std::vector<TraceEvent> Events(const std::string& op_id) {
    std::vector<TraceEvent> events;
    EXPECT_TRUE(store_->Read([&](Transaction& tx) {
      auto listed = tx.ListEvents(op_id);
      if (!listed.ok()) return listed.status();
      events = *listed;
      return Status::Ok();
    }).ok());
    return events;
  }
};

TEST_F(ResolveTest, ResolutionIsAuditedAndIdempotent) {
  auto [id, key] = Account(1000);
  std::string op_id = Swept(key, "k1");
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));
  HttpResponse first = Resolve(op_id, "written_off", "seller confirmed it did no work");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.Header("Idempotent-Replayed"), "false");
  auto json = nlohmann::json::parse(first.body);
  EXPECT_EQ(json["outcome"], "written_off");
  EXPECT_EQ(json["refunded"], "0");
  ASSERT_EQ(json["alerts"].size(), 1u);
  EXPECT_EQ(json["alerts"][0]["resolved"], true);
  EXPECT_EQ(json["alerts"][0]["note"], "seller confirmed it did no work");
  clock_.Advance(1000);
  HttpResponse again = Resolve(op_id, "written_off", "seller confirmed it did no work");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  HttpResponse other = Resolve(op_id, "refunded", "seller confirmed it did no work");
  EXPECT_EQ(other.status, 409);
  EXPECT_EQ(nlohmann::json::parse(other.body)["code"], "already_resolved");
  EXPECT_EQ(Resolve(op_id, "written_off", "another note").status, 409);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));  // no resolution here moves money
  std::vector<TraceEvent> events = Events(op_id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().actor, TraceActor::kAdmin);
  EXPECT_EQ(events.back().kind, "resolved");
  int resolved_events = 0;
  for (const auto& event : events) resolved_events += event.kind == "resolved";
  EXPECT_EQ(resolved_events, 1);
  // The operation is unchanged: a retry of its key still resumes it and charges once.
  EXPECT_EQ(Pay(key, "k1", "{}").status, 200);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

TEST_F(ResolveTest, RefundReturnsTheCaptureOnceThroughTheLedger) {
  auto [id, key] = Account(1000);
  std::string op_id = Swept(key, "k1");
  ASSERT_EQ(Pay(key, "k1", "{}").status, 200);  // resumed after the sweep, captured
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
  HttpResponse refunded = Resolve(op_id, "refunded", "the seller ran it twice; goodwill refund");
  ASSERT_EQ(refunded.status, 200) << refunded.body;
  EXPECT_EQ(nlohmann::json::parse(refunded.body)["refunded"], std::to_string(kPrice));
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));
  HttpResponse replay = Resolve(op_id, "refunded", "the seller ran it twice; goodwill refund");
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.body, refunded.body);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));  // refunded once
  std::vector<MoveKind> kinds;
  ASSERT_TRUE(store_->Read([&](Transaction& tx) {
    auto postings = tx.ListPostings(op_id);
    for (const auto& posting : *postings) kinds.push_back(posting.kind);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(kinds, (std::vector<MoveKind>{MoveKind::kHold, MoveKind::kRelease, MoveKind::kHold,
                                          MoveKind::kCapture, MoveKind::kRefund}));
  // The stored answer still replays, with no new charge.
  HttpResponse replayed = Pay(key, "k1", "{}");
  EXPECT_EQ(replayed.status, 200);
  EXPECT_EQ(replayed.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(BalancesOf(id), (Balances{1000, 0, 0}));
}

TEST_F(ResolveTest, RefusalsChangeNothing) {
  auto [id, key] = Account(1000);
  HttpResponse paid = Pay(key, "k-ok", "{}");
  std::string plain(paid.Header("AgentPay-Operation-Id").value_or(""));
  HttpResponse no_alerts = Resolve(plain, "no_action", "n");
  EXPECT_EQ(no_alerts.status, 409);
  EXPECT_EQ(nlohmann::json::parse(no_alerts.body)["code"], "no_alerts");
  EXPECT_EQ(Resolve("op_none", "no_action", "n").status, 404);
  std::string op_id = Swept(key, "k1");
  for (const char* bad :
       {R"({"outcome":"paid","note":"x"})", R"({"outcome":"no_action"})",
        R"({"outcome":"no_action","note":""})", R"({"note":"x"})", "[]", "{"}) {
    EXPECT_EQ(Admin("POST", "/admin/v1/operations/" + op_id + "/resolve", bad).status, 400) << bad;
  }
  EXPECT_EQ(Admin("GET", "/admin/v1/operations/" + op_id + "/resolve", "").status, 405);
  auto alerts = nlohmann::json::parse(Admin("GET", "/admin/v1/alerts", "").body)["alerts"];
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0]["resolved"], false);
  EXPECT_EQ(BalancesOf(id), (Balances{1000, kPrice, 0}));
}

}  // namespace
}  // namespace agentpay
