// The facilitator (gateway/facilitator.h) without sockets: Facilitator::Handle in front of a real
// gateway on SQLite, settling on the built-in devnet (real EIP-3009 rules and signature recovery).
// Who may call, what each answer says, one settlement per authorization however often and by
// whomever it is asked for, and the token's books at the end of every test.
#include "gateway/facilitator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "chain/devnet.h"
#include "chain/eip712.h"
#include "gateway/gateway.h"
#include "gateway_test_support.h"
#include "http/timers.h"
#include "workers/reconciler.h"
#include "x402/facilitator.h"

namespace agentpay {
namespace {

using testing_support::CountingRandom;
using testing_support::FreshTestDir;
using testing_support::Key;
using testing_support::ManualClock;
using testing_support::OpenTestDevnet;
using testing_support::ScriptedUpstream;
using testing_support::TestSettlerConfig;

constexpr int64_t kPrice = 1000;
constexpr uint64_t kChainId = 1337;
constexpr int64_t kFunding = 1'000'000;
const std::string kShopKey = std::string(40, 'a');
const std::string kOtherKey = std::string(40, 'b');

class FacilitatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("agentpay-facilitator-");
    auto store = OpenStore("sqlite:" + (dir_ / "gw.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    token_ = *chain::ParseAddress("0xa6e0000000000000000000000000000000000402");
    shop_ = *chain::ParseAddress("0x5e11e50000000000000000000000000000000001");
    other_shop_ = *chain::ParseAddress("0x5e11e50000000000000000000000000000000002");
    auto opened = OpenTestDevnet(clock_, token_, kChainId);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
    ASSERT_TRUE(devnet_->Mint(buyer(), chain::U256(kFunding)).ok());
    settler_ = std::make_unique<Settler>(*devnet_, TestSettlerConfig(token_, kChainId), Key(0x99));
    MakeGateway(300, 2000);
  }

  // A gateway with no route (a facilitator only) and its facilitator, anew.
  void MakeGateway(int64_t receipt_timeout_ms, int64_t attach_wait_ms) {
    facilitator_.reset();
    gateway_.reset();
    GatewayConfig config;
    config.chain.chain_id = kChainId;
    config.chain.asset = chain::ToChecksumHex(token_);
    config.chain.pay_to = "0x9a7e000000000000000000000000000000000402";  // no route pays it
    config.receipt_timeout_ms = receipt_timeout_ms;
    config.expiry_buffer_seconds = 5;
    config.attach_wait_ms = attach_wait_ms;
    config.public_url = "https://pay.example.com";
    config.admin_token = "admin-secret";
    config_ = config;
    gateway_ = std::make_unique<Gateway>(config, *store_, clock_, random_, timers_, upstream_,
                                         settler_.get());
    auto sellers =
        ParseSellers("shop " + kShopKey + " " + chain::ToChecksumHex(shop_) + "\nother " +
                     kOtherKey + " " + chain::ToChecksumHex(other_shop_) + "\n");
    ASSERT_TRUE(sellers.ok()) << sellers.status().ToString();
    facilitator_ = std::make_unique<Facilitator>(
        *gateway_->x402(), [this](Respond r) { return gateway_->TrackPaid(std::move(r)); },
        std::move(*sellers), kChainId, settler_->relayer(), gateway_->metrics());
  }

  void TearDown() override {
    ExpectTokenBooksBalance();
    facilitator_.reset();
    gateway_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  chain::Address buyer() const { return chain::AddressOf(Key(0x01)); }

  // A payment the buyer signed to `to`, with its facilitator body: {x402Version: 2,
  // paymentPayload, paymentRequirements}, as @x402/core's HTTPFacilitatorClient sends it.
  struct Signed {
    nlohmann::json body;
    chain::Hash32 nonce;
  };
  Signed Sign(const chain::Address& to, int64_t value = kPrice) {
    chain::TransferAuthorization a;
    a.from = buyer();
    a.to = to;
    a.value = chain::U256(static_cast<uint64_t>(value));
    a.valid_after = chain::U256(0);
    a.valid_before = chain::U256(static_cast<uint64_t>(clock_.NowMs() / 1000 + 60));
    a.nonce[0] = 0x77;
    a.nonce[31] = static_cast<uint8_t>(++nonces_);
    auto digest =
        chain::Eip3009Digest(chain::DomainSeparator("USD Coin", "2", kChainId, token_), a);
    const chain::Signature signature = *chain::SignDigest(digest, Key(0x01));
    nlohmann::json requirement = {{"scheme", "exact"},
                                  {"network", "eip155:1337"},
                                  {"amount", std::to_string(kPrice)},
                                  {"asset", chain::ToChecksumHex(token_)},
                                  {"payTo", chain::ToChecksumHex(to)},
                                  {"maxTimeoutSeconds", 60},
                                  {"extra", {{"name", "USD Coin"}, {"version", "2"}}}};
    nlohmann::json payload = {{"x402Version", 2},
                              {"resource", {{"url", "https://shop.example/report"}}},
                              {"accepted", requirement},
                              {"payload",
                               {{"signature", chain::Hex(signature.bytes)},
                                {"authorization",
                                 {{"from", chain::ToChecksumHex(a.from)},
                                  {"to", chain::ToChecksumHex(a.to)},
                                  {"value", a.value.ToDecimal()},
                                  {"validAfter", "0"},
                                  {"validBefore", a.valid_before.ToDecimal()},
                                  {"nonce", chain::Hex(a.nonce)}}}}}};
    return {{{"x402Version", 2}, {"paymentPayload", payload}, {"paymentRequirements", requirement}},
            a.nonce};
  }

  HttpResponse Call(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& key) {
    auto request = std::make_shared<HttpRequest>();
    request->method = method;
    request->target = path;
    request->headers = {{"Content-Type", "application/json"}};
    if (!key.empty()) request->headers.push_back({"Authorization", "Bearer " + key});
    request->body = body;
    std::promise<HttpResponse> answered;
    auto future = answered.get_future();
    facilitator_->Handle(
        request, [&answered](HttpResponse response) { answered.set_value(std::move(response)); });
    return future.get();
  }
  HttpResponse Settle(const nlohmann::json& body, const std::string& key = kShopKey) {
    return Call("POST", "/settle", body.dump(), key);
  }
  HttpResponse Verify(const nlohmann::json& body, const std::string& key = kShopKey) {
    return Call("POST", "/verify", body.dump(), key);
  }
  static nlohmann::json Json(const HttpResponse& response) {
    return nlohmann::json::parse(response.body, nullptr, false);
  }

  int64_t TokenBalance(const chain::Address& owner) {
    auto balance = devnet_->BalanceOf(token_, owner);
    EXPECT_TRUE(balance.ok());
    return balance.ok() ? balance->ToInt64() : -1;
  }
  uint64_t RelayerTransactions() {
    auto count = devnet_->PendingNonce(settler_->relayer());
    return count.ok() ? *count : 0;
  }
  int64_t Operations() {
    int64_t count = 0;
    EXPECT_TRUE(store_
                    ->Read([&](Transaction& tx) {
                      OperationFilter filter;
                      filter.limit = 1000;
                      auto ops = tx.ListOperations(filter);
                      if (!ops.ok()) return ops.status();
                      count = static_cast<int64_t>(ops->size());
                      return Status::Ok();
                    })
                    .ok());
    return count;
  }

  // The token's books against the store's: the sellers hold exactly the price times the settled
  // operations, and the buyer lost exactly that.
  void ExpectTokenBooksBalance() {
    int64_t settled = 0;
    ASSERT_TRUE(store_
                    ->Read([&](Transaction& tx) {
                      OperationFilter filter;
                      filter.settlement = Settlement::kSettled;
                      filter.limit = 1000;
                      auto ops = tx.ListOperations(filter);
                      if (!ops.ok()) return ops.status();
                      settled = static_cast<int64_t>(ops->size());
                      return Status::Ok();
                    })
                    .ok());
    const int64_t sellers = TokenBalance(shop_) + TokenBalance(other_shop_);
    EXPECT_EQ(sellers, settled * kPrice);
    EXPECT_EQ(TokenBalance(buyer()) + sellers, kFunding);
  }

  ReconcileReport Reconcile() {
    ReconcilerConfig config;
    config.receipt_timeout_ms = config_.receipt_timeout_ms;
    config.expiry_buffer_seconds = config_.expiry_buffer_seconds;
    auto report = ReconcileSettlements(*store_, *settler_, clock_, random_, config);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? *report : ReconcileReport{};
  }

  std::filesystem::path dir_;
  ManualClock clock_;
  AsioTimers timers_;
  CountingRandom random_;
  ScriptedUpstream upstream_;
  std::unique_ptr<Store> store_;
  chain::Address token_, shop_, other_shop_;
  std::unique_ptr<chain::Devnet> devnet_;
  std::unique_ptr<Settler> settler_;
  GatewayConfig config_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<Facilitator> facilitator_;
  int nonces_ = 0;
};

TEST_F(FacilitatorTest, SupportedNamesTheChainAndTheRelayerToAnyone) {
  HttpResponse supported = Call("GET", "/supported", "", "");
  ASSERT_EQ(supported.status, 200) << supported.body;
  nlohmann::json body = Json(supported);
  ASSERT_EQ(body["kinds"].size(), 1u);  // chain 1337 has no x402 v1 name
  EXPECT_EQ(body["kinds"][0],
            (nlohmann::json{{"x402Version", 2}, {"scheme", "exact"}, {"network", "eip155:1337"}}));
  EXPECT_EQ(body["signers"]["eip155:*"][0], chain::ToChecksumHex(settler_->relayer()));
  EXPECT_EQ(Call("POST", "/supported", "", "").status, 405);
  EXPECT_EQ(Call("GET", "/settle", "", kShopKey).status, 405);
  EXPECT_EQ(Call("GET", "/v1/operations", "", kShopKey).status, 404);
}

TEST_F(FacilitatorTest, StrangersCanNeitherSettleNorVerifyNorLearnAnything) {
  const Signed payment = Sign(shop_);
  // No key, a wrong key, a key sent another way: 401, nothing stored, nothing sent.
  for (const std::string& key : {std::string(), std::string(40, 'c'), kShopKey + "x"}) {
    HttpResponse settle = Settle(payment.body, key);
    EXPECT_EQ(settle.status, 401) << settle.body;
    EXPECT_EQ(Json(settle)["code"], "unauthorized");
    EXPECT_EQ(Verify(payment.body, key).status, 401);
  }
  // Another seller's key, for the shop's payment read from its 402 or the mempool: 403.
  HttpResponse theirs = Settle(payment.body, kOtherKey);
  EXPECT_EQ(theirs.status, 403) << theirs.body;
  EXPECT_EQ(Json(theirs)["code"], "payee_not_allowed");
  EXPECT_EQ(Verify(payment.body, kOtherKey).status, 403);
  // The shop's key with a requirement naming the shop but a payment to the other shop: 403.
  nlohmann::json crossed = Sign(other_shop_).body;
  crossed["paymentRequirements"]["payTo"] = chain::ToChecksumHex(shop_);
  EXPECT_EQ(Settle(crossed).status, 403);
  EXPECT_EQ(Operations(), 0);
  EXPECT_EQ(RelayerTransactions(), 0u);
  // The shop itself settles it; then the other seller still learns nothing of it.
  HttpResponse settled = Settle(payment.body);
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_EQ(Json(settled)["success"], true);
  EXPECT_EQ(Settle(payment.body, kOtherKey).status, 403);
}

TEST_F(FacilitatorTest, ASettleSettlesOnceAndEveryRetryAnswersTheSameTransaction) {
  const Signed payment = Sign(shop_);
  HttpResponse first = Settle(payment.body);
  ASSERT_EQ(first.status, 200) << first.body;
  nlohmann::json answer = Json(first);
  EXPECT_EQ(answer["success"], true) << first.body;
  EXPECT_EQ(answer["network"], "eip155:1337");
  EXPECT_EQ(answer["payer"], chain::ToChecksumHex(buyer()));
  const std::string tx = answer["transaction"];
  EXPECT_EQ(tx.size(), 66u);
  // The seller's retry after a lost answer, a second seller process, a restarted one: the same.
  for (int i = 0; i < 3; ++i) {
    HttpResponse again = Settle(payment.body);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(Json(again)["success"], true);
    EXPECT_EQ(Json(again)["transaction"], tx);
  }
  EXPECT_EQ(TokenBalance(shop_), kPrice);
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_EQ(Operations(), 1);
  // Every answer counted on the gateway's /metrics, by call and status class.
  HttpRequest metrics;
  metrics.method = "GET";
  metrics.target = "/metrics";
  metrics.headers = {{"Authorization", "Bearer admin-secret"}};
  const std::string text = gateway_->Handle(metrics).body;
  EXPECT_NE(text.find("agentpay_facilitator_requests_total{call=\"settle\",status=\"2xx\"} 4\n"),
            std::string::npos)
      << text;
  // Verify of a settled payment: the token says the authorization is used.
  HttpResponse verified = Verify(payment.body);
  ASSERT_EQ(verified.status, 200) << verified.body;
  EXPECT_EQ(Json(verified)["isValid"], false);
  EXPECT_EQ(Json(verified)["invalidReason"], "invalid_exact_evm_nonce_already_used")
      << verified.body;
}

TEST_F(FacilitatorTest, ConcurrentSettlesOfOnePaymentMakeOneTransfer) {
  const Signed payment = Sign(shop_);
  constexpr int kSellers = 8;
  std::vector<std::future<HttpResponse>> answers;
  for (int i = 0; i < kSellers; ++i) {
    answers.push_back(std::async(std::launch::async, [&] { return Settle(payment.body); }));
  }
  std::set<std::string> transactions;
  for (auto& answer : answers) {
    HttpResponse response = answer.get();
    ASSERT_EQ(response.status, 200) << response.body;
    nlohmann::json body = Json(response);
    EXPECT_EQ(body["success"], true) << response.body;
    transactions.insert(body["transaction"].get<std::string>());
  }
  EXPECT_EQ(transactions.size(), 1u);
  EXPECT_EQ(TokenBalance(shop_), kPrice);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(FacilitatorTest, APendingSettleIsAnsweredPendingThenSettledByTheReconciler) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const Signed payment = Sign(shop_);
  HttpResponse pending = Settle(payment.body);
  ASSERT_EQ(pending.status, 200) << pending.body;
  nlohmann::json body = Json(pending);
  EXPECT_EQ(body["success"], false);
  EXPECT_EQ(body["errorReason"], "settlement_pending");
  const std::string tx = body["transaction"];
  EXPECT_EQ(tx.size(), 66u);
  // Asked again while still unmined, by three sellers at once: pending, the same transaction,
  // nothing sent again; each a settle answer, whether it attached to another or not.
  std::vector<std::future<HttpResponse>> again;
  for (int i = 0; i < 3; ++i) {
    again.push_back(std::async(std::launch::async, [&] { return Settle(payment.body); }));
  }
  for (auto& answer : again) {
    HttpResponse still = answer.get();
    ASSERT_EQ(still.status, 200) << still.body;
    EXPECT_EQ(Json(still)["errorReason"], "settlement_pending") << still.body;
    EXPECT_EQ(Json(still)["transaction"], tx);
  }
  EXPECT_EQ(RelayerTransactions(), 1u);
  // The status query says the same, to the shop only.
  const std::string status_path =
      "/settlements/" + chain::ToChecksumHex(buyer()) + "/" + chain::Hex(payment.nonce);
  HttpResponse status = Call("GET", status_path, "", kShopKey);
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(Json(status)["errorReason"], "settlement_pending");
  EXPECT_EQ(Json(status)["transaction"], tx);
  EXPECT_EQ(Call("GET", status_path, "", kOtherKey).status, 404);
  EXPECT_EQ(Call("GET", status_path, "", "").status, 401);
  ASSERT_TRUE(devnet_->Mine().ok());
  clock_.Advance(1000);
  EXPECT_EQ(Reconcile().settled, 1);
  status = Call("GET", status_path, "", kShopKey);
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(Json(status)["success"], true) << status.body;
  EXPECT_EQ(Json(status)["transaction"], tx);
  HttpResponse settled = Settle(payment.body);
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_EQ(Json(settled)["success"], true) << settled.body;
  EXPECT_EQ(Json(settled)["transaction"], tx);
  EXPECT_EQ(TokenBalance(shop_), kPrice);
}

// A second seller's settle that attaches to the first one's receipt wait and outwaits the attach
// wait is still answered as a settle: settlement_pending with the transaction.
TEST_F(FacilitatorTest, ADuplicateThatOutwaitsTheAttachWaitGetsASettleAnswer) {
  MakeGateway(/*receipt_timeout_ms=*/3000, /*attach_wait_ms=*/200);
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const Signed payment = Sign(shop_);
  auto first = std::async(std::launch::async, [&] { return Settle(payment.body); });
  // The first one's operation exists (its transaction stored and sent) before the second comes.
  for (int i = 0; i < 200 && Operations() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(Operations(), 1);
  HttpResponse second = Settle(payment.body);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(Json(second)["success"], false);
  EXPECT_EQ(Json(second)["errorReason"], "settlement_pending") << second.body;
  EXPECT_EQ(Json(second)["transaction"].get<std::string>().size(), 66u) << second.body;
  ASSERT_TRUE(devnet_->Mine().ok());
  HttpResponse settled = first.get();
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_EQ(Json(settled)["success"], true) << settled.body;
  EXPECT_EQ(Json(settled)["transaction"], Json(second)["transaction"]);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

// A settle whose transaction the node lost, past validBefore with the authorization unused on
// chain: the reconciler voids it, and the settle asked again answers that, finally.
TEST_F(FacilitatorTest, ExpiredUnusedTheAnswerIsFinalVoid) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const Signed payment = Sign(shop_);  // validBefore: now + 60 s
  HttpResponse pending = Settle(payment.body);
  ASSERT_EQ(Json(pending)["errorReason"], "settlement_pending") << pending.body;
  const auto hash = *chain::ParseHash32(Json(pending)["transaction"].get<std::string>());
  // The node loses it; before validBefore the reconciler sends the same bytes again, and the
  // answer stays pending.
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  clock_.Advance(30'000);
  ASSERT_TRUE(devnet_->Mine().ok());  // an empty block: chain time moves on
  EXPECT_EQ(Reconcile().voided, 0);
  EXPECT_EQ(Json(Settle(payment.body))["errorReason"], "settlement_pending");
  // Lost again, and now past validBefore and the buffer with the nonce unused: void.
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  clock_.Advance(40'000);
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(Reconcile().voided, 1);
  for (int i = 0; i < 2; ++i) {
    HttpResponse final_answer = Settle(payment.body);
    ASSERT_EQ(final_answer.status, 200) << final_answer.body;
    EXPECT_EQ(Json(final_answer)["success"], false);
    EXPECT_EQ(Json(final_answer)["errorReason"], "settlement_void") << final_answer.body;
  }
  ASSERT_TRUE(devnet_->Mine().ok());  // the filler of the relayer's nonce reverts: expired
  EXPECT_EQ(TokenBalance(shop_), 0);
  EXPECT_FALSE(*devnet_->AuthorizationState(token_, buyer(), payment.nonce));
}

TEST_F(FacilitatorTest, RequirementsThisFacilitatorDoesNotSettleAreRefusedWithAReason) {
  auto refused = [&](nlohmann::json body, const std::string& reason) {
    HttpResponse settle = Settle(body);
    ASSERT_EQ(settle.status, 200) << settle.body;
    EXPECT_EQ(Json(settle)["success"], false);
    EXPECT_EQ(Json(settle)["errorReason"], reason) << settle.body;
    HttpResponse verify = Verify(body);
    ASSERT_EQ(verify.status, 200) << verify.body;
    EXPECT_EQ(Json(verify)["isValid"], false);
    EXPECT_EQ(Json(verify)["invalidReason"], reason) << verify.body;
  };
  nlohmann::json asset = Sign(shop_).body;
  asset["paymentRequirements"]["asset"] = "0x1111111111111111111111111111111111111111";
  refused(asset, "invalid_payment_requirements");
  nlohmann::json network = Sign(shop_).body;
  network["paymentRequirements"]["network"] = "eip155:8453";
  refused(network, "invalid_network");
  nlohmann::json domain = Sign(shop_).body;
  domain["paymentRequirements"]["extra"]["name"] = "USDC";
  refused(domain, "invalid_payment_requirements");
  nlohmann::json amount = Sign(shop_).body;
  amount["paymentRequirements"]["amount"] = "999";
  refused(amount, "invalid_exact_evm_payload_authorization_value_mismatch");
  EXPECT_EQ(Operations(), 0);
  EXPECT_EQ(RelayerTransactions(), 0u);
}

TEST_F(FacilitatorTest, VerifyAsksTheTokenAndStoresNothing) {
  const Signed payment = Sign(shop_);
  HttpResponse valid = Verify(payment.body);
  ASSERT_EQ(valid.status, 200) << valid.body;
  EXPECT_EQ(Json(valid)["isValid"], true) << valid.body;
  EXPECT_EQ(Json(valid)["payer"], chain::ToChecksumHex(buyer()));
  // More than the buyer holds: the token's simulation refuses it.
  HttpResponse poor = Verify(Sign(shop_, kFunding + 1).body);
  ASSERT_EQ(poor.status, 200) << poor.body;
  EXPECT_EQ(Json(poor)["isValid"], false);
  EXPECT_EQ(Operations(), 0);
  EXPECT_EQ(RelayerTransactions(), 0u);
  // The verified payment still settles, once.
  EXPECT_EQ(Json(Settle(payment.body))["success"], true);
}

TEST_F(FacilitatorTest, MalformedBodiesAreRefusedWithTheField) {
  for (const std::string& body :
       {std::string("not json"), std::string("[]"), std::string("{\"x402Version\":3}"),
        std::string("{\"x402Version\":2,\"paymentPayload\":{}}")}) {
    HttpResponse settle = Call("POST", "/settle", body, kShopKey);
    EXPECT_EQ(settle.status, 400) << body;
    EXPECT_EQ(Json(settle)["code"], "malformed_payment") << settle.body;
  }
  nlohmann::json no_signature = Sign(shop_).body;
  no_signature["paymentPayload"]["payload"].erase("signature");
  HttpResponse settle = Settle(no_signature);
  EXPECT_EQ(settle.status, 400);
  EXPECT_NE(Json(settle)["detail"].get<std::string>().find("signature"), std::string::npos)
      << settle.body;
  EXPECT_EQ(Operations(), 0);
}

TEST_F(FacilitatorTest, TheStatusQueryTellsNothingOfWhatIsNotTheCallers) {
  const std::string unknown =
      "/settlements/" + chain::ToChecksumHex(buyer()) + "/0x" + std::string(64, '7');
  HttpResponse none = Call("GET", unknown, "", kShopKey);
  EXPECT_EQ(none.status, 404) << none.body;
  EXPECT_EQ(Json(none)["code"], "not_found");
  for (const std::string& bad :
       {std::string("/settlements/"), std::string("/settlements/0x12/0x34"),
        "/settlements/" + chain::ToChecksumHex(buyer())}) {
    HttpResponse refused = Call("GET", bad, "", kShopKey);
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(Json(refused)["code"], "invalid_request") << refused.body;
  }
  EXPECT_EQ(Call("POST", unknown, "", kShopKey).status, 405);
  // Settled for the shop: the other seller gets the same 404 as for nothing at all.
  const Signed payment = Sign(shop_);
  ASSERT_EQ(Json(Settle(payment.body))["success"], true);
  const std::string path =
      "/settlements/" + chain::ToChecksumHex(buyer()) + "/" + chain::Hex(payment.nonce);
  EXPECT_EQ(Json(Call("GET", path, "", kShopKey))["success"], true);
  HttpResponse theirs = Call("GET", path, "", kOtherKey);
  EXPECT_EQ(theirs.status, 404);
  EXPECT_EQ(theirs.body, none.body);
  // An authorization to the shop's payee that paid one of the gateway's own routes (here as that
  // route's arrival stores it): not a settle the shop asked for, the same 404.
  const Signed routed = Sign(shop_);
  ASSERT_TRUE(store_
                  ->Write([&](Transaction& tx) -> Status {
                    X402PaymentRecord payment;
                    payment.operation_id = "op_routed";
                    payment.authorization = {chain::ToLowerHex(buyer()), chain::Hex(routed.nonce),
                                             0, clock_.NowMs() / 1000 + 600, kPrice};
                    payment.pay_to = chain::ToLowerHex(shop_);
                    payment.signature_hex = "0x" + std::string(130, '1');
                    auto inserted = tx.InsertX402Payment(payment);
                    if (!inserted.ok()) return inserted.status();
                    return tx.InsertOperation(NewX402Operation(
                        {"op_routed", "payer:" + chain::ToLowerHex(buyer()), "k", "fp", "/", kPrice,
                         SettleOrder::kAfterUpstream, 2000, "gw"},
                        clock_.NowMs()));
                  })
                  .ok());
  HttpResponse routed_answer =
      Call("GET", "/settlements/" + chain::ToChecksumHex(buyer()) + "/" + chain::Hex(routed.nonce),
           "", kShopKey);
  EXPECT_EQ(routed_answer.status, 404) << routed_answer.body;
  EXPECT_EQ(routed_answer.body, none.body);
}

TEST(FacilitatorSellers, TheFileIsCheckedLineByLine) {
  const std::string key(32, 'k');
  auto good = ParseSellers("# sellers\n\nshop " + key +
                           " 0x5e11e50000000000000000000000000000000001,"
                           "0x5e11e50000000000000000000000000000000002\r\n");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->size(), 1u);
  EXPECT_EQ((*good)[0].name, "shop");
  EXPECT_EQ((*good)[0].payees.size(), 2u);
  EXPECT_EQ((*good)[0].key_sha256.size(), 64u);
  EXPECT_EQ((*good)[0].key_sha256.find(key), std::string::npos);
  const std::string payee = " 0x5e11e50000000000000000000000000000000001";
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"shop " + key, "line 1: expected NAME KEY"},
           {"shop short" + payee, "line 1: the key must be 32"},
           {"sh@p " + key + payee, "line 1: the name must be"},
           {"shop " + key + " 0x12", "line 1: payee 0x12 is not"},
           {"a " + key + payee + "\na " + std::string(33, 'k') + payee, "line 2: the name a"},
           {"a " + key + payee + "\nb " + key + payee, "line 2: this key is another seller's"}}) {
    auto refused = ParseSellers(text);
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_NE(refused.status().message().find(why), std::string::npos)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace agentpay
