// The x402 path of the gateway without sockets: Gateway::Handle on a real SQLite store, settling on
// the built-in devnet (real EIP-3009 rules and signature recovery) with a hand-moved clock, and the
// reconciler worker. Every test ends by checking the token's books: what the payer lost is what
// payTo gained, and that is the price times the operations that are settled.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "chain/devnet.h"
#include "chain/eip712.h"
#include "chain/settlement_tx.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "gateway_test_support.h"
#include "http/timers.h"
#include "sqlite/sqlite_db.h"
#include "workers/reconciler.h"
#include "x402/base64.h"
#include "x402/wire.h"

namespace agentpay {
namespace {

using testing_support::CountingRandom;
using testing_support::FreshTestDir;
using testing_support::Key;
using testing_support::ManualClock;
using testing_support::OpenTestDevnet;
using testing_support::ScriptedUpstream;
using testing_support::TestSettlerConfig;
using x402::Base64Decode;
using x402::Base64Encode;

constexpr int64_t kPrice = 1000;
constexpr uint64_t kChainId = 1337;
constexpr int64_t kFunding = 1'000'000;
// The base URL challenges name their resources under (GatewayConfig::public_url).
constexpr char kPublicUrl[] = "https://pay.example.com/base";

// The chain the settler sees: the devnet, every call counted (what a hosted node would bill).
class CountingChain final : public chain::Chain {
 public:
  explicit CountingChain(chain::Chain& chain) : chain_(chain) {}
  int64_t calls() const { return calls_.load(); }
  Result<uint64_t> ChainId() override { return (++calls_, chain_.ChainId()); }
  Result<bool> AuthorizationState(const chain::Address& token, const chain::Address& from,
                                  const chain::Hash32& nonce) override {
    return (++calls_, chain_.AuthorizationState(token, from, nonce));
  }
  Result<chain::U256> BalanceOf(const chain::Address& token, const chain::Address& owner) override {
    return (++calls_, chain_.BalanceOf(token, owner));
  }
  Result<chain::Bytes> Call(const chain::Address& to, const chain::Bytes& data) override {
    return (++calls_, chain_.Call(to, data));
  }
  Result<uint64_t> EstimateGas(const chain::Address& from, const chain::Address& to,
                               const chain::Bytes& data) override {
    return (++calls_, chain_.EstimateGas(from, to, data));
  }
  Result<chain::FeeData> Fees() override { return (++calls_, chain_.Fees()); }
  Result<uint64_t> PendingNonce(const chain::Address& account) override {
    return (++calls_, chain_.PendingNonce(account));
  }
  Result<uint64_t> MinedNonce(const chain::Address& account) override {
    return (++calls_, chain_.MinedNonce(account));
  }
  Result<std::optional<chain::U256>> NativeBalance(const chain::Address& account) override {
    return (++calls_, chain_.NativeBalance(account));
  }
  Result<std::optional<chain::Hash32>> BlockHash(uint64_t number) override {
    return (++calls_, chain_.BlockHash(number));
  }
  Result<chain::Hash32> SendRawTransaction(const chain::Bytes& raw) override {
    return (++calls_, chain_.SendRawTransaction(raw));
  }
  Result<std::optional<chain::Receipt>> GetReceipt(const chain::Hash32& hash) override {
    return (++calls_, chain_.GetReceipt(hash));
  }
  Result<std::optional<chain::TxInfo>> GetTransaction(const chain::Hash32& hash) override {
    return (++calls_, chain_.GetTransaction(hash));
  }
  Result<uint64_t> BlockNumber() override { return (++calls_, chain_.BlockNumber()); }
  Result<int64_t> LatestBlockTimestamp() override {
    return (++calls_, chain_.LatestBlockTimestamp());
  }

 private:
  chain::Chain& chain_;
  std::atomic<int64_t> calls_{0};
};

class X402GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("agentpay-x402-");
    auto store = OpenStore("sqlite:" + (dir_ / "gw.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    token_ = *chain::ParseAddress("0xa6e0000000000000000000000000000000000402");
    pay_to_ = *chain::ParseAddress("0x9a7e000000000000000000000000000000000402");
    auto opened = OpenTestDevnet(clock_, token_, kChainId);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
    ASSERT_TRUE(devnet_->Mint(buyer(), chain::U256(kFunding)).ok());
    counted_ = std::make_unique<CountingChain>(*devnet_);
    settler_ = std::make_unique<Settler>(*counted_, TestSettlerConfig(token_, kChainId), Key(0x99));
    MakeGateway(SettleTiming::kBefore);
  }

  void MakeGateway(SettleTiming settle) {
    gateway_.reset();
    RouteConfig route;
    route.upstream_url = "http://127.0.0.1:9";
    route.upstream = *ParseHttpUrl(route.upstream_url);
    route.price = kPrice;
    route.timeout_ms = 1000;
    route.settle = settle;
    GatewayConfig config;
    config.routes = {route};
    config.chain.chain_id = kChainId;
    config.chain.asset = chain::ToChecksumHex(token_);
    config.chain.pay_to = chain::ToChecksumHex(pay_to_);
    config.receipt_timeout_ms = 300;
    config.expiry_buffer_seconds = 5;
    config.attach_wait_ms = 2000;
    config.admin_token = "admin-secret";
    config.public_url = kPublicUrl;
    config.min_idempotency_key_bits = min_key_bits_;
    config.settle_batch_max = batch_max_;
    config.settle_batch_window_ms = batch_window_ms_;
    config_ = config;
    gateway_ = std::make_unique<Gateway>(config, *store_, clock_, random_, timers_, upstream_,
                                         settler_.get());
  }

  void TearDown() override {
    ExpectTokenBooksBalance();
    gateway_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  chain::Address buyer() const { return chain::AddressOf(Key(0x01)); }
  // The view headers of an x402 operation: the payer it names and the key (docs/protocol.md §5a).
  std::vector<HttpHeader> PayerView(const std::string& key, uint8_t signer = 0x01) const {
    return {{"AgentPay-Payer", chain::ToChecksumHex(chain::AddressOf(Key(signer)))},
            {"Idempotency-Key", key}};
  }

  // These tests name their keys for the reader (`lost-1`): every key proves the payer unless a
  // test asks for the default of --min-idempotency-key-bits (T25).
  int64_t min_key_bits_ = 0;
  // Batched settlement, for the tests that turn it on (MakeGateway reads them).
  size_t batch_max_ = 1;
  int64_t batch_window_ms_ = 10;

  // Waits (up to 10 s) until `count` operations are stored: the payments in flight have made their
  // arrival decisions.
  void WaitForOperations(size_t count) {
    for (int waited = 0; waited < 1000; ++waited) {
      size_t stored = 0;
      ASSERT_TRUE(store_
                      ->Read([&](Transaction& tx) {
                        OperationFilter filter;
                        filter.limit = 1000;
                        auto ops = tx.ListOperations(filter);
                        if (!ops.ok()) return ops.status();
                        stored = ops->size();
                        return Status::Ok();
                      })
                      .ok());
      if (stored >= count) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "fewer than " << count << " operations stored";
  }
  std::optional<X402PaymentRecord> StoredPayment(const std::string& op_id) {
    std::optional<X402PaymentRecord> found;
    EXPECT_TRUE(store_
                    ->Read([&](Transaction& tx) {
                      auto payment = tx.FindX402Payment(op_id);
                      if (!payment.ok()) return payment.status();
                      found = std::move(*payment);
                      return Status::Ok();
                    })
                    .ok());
    return found;
  }

  struct Signed {
    std::string header;
    chain::Hash32 nonce;
    chain::TransferAuthorization authorization;
    chain::Signature signature;
  };
  // A v2 payment signed by the buyer, as the official client builds it: validAfter 0,
  // validBefore now + 120 s, a fresh nonce.
  Signed Sign(int64_t value = kPrice, uint8_t signer = 0x01, std::string domain_name = "USD Coin",
              int64_t valid_for_s = 120) {
    chain::TransferAuthorization a;
    a.from = chain::AddressOf(Key(signer));
    a.to = pay_to_;
    a.value = chain::U256(static_cast<uint64_t>(value));
    a.valid_after = chain::U256(0);
    a.valid_before = chain::U256(static_cast<uint64_t>(clock_.NowMs() / 1000 + valid_for_s));
    a.nonce[0] = 0x42;
    a.nonce[31] = static_cast<uint8_t>(++nonces_);
    a.nonce[30] = static_cast<uint8_t>(nonces_ >> 8);
    auto digest = chain::Eip3009Digest(chain::DomainSeparator(domain_name, "2", kChainId, token_), a);
    x402::PaymentPayload payload;
    payload.version = x402::Version::kV2;
    payload.scheme = "exact";
    payload.network = "eip155:" + std::to_string(kChainId);
    payload.chain_id = kChainId;
    payload.authorization = a;
    payload.signature = *chain::SignDigest(digest, Key(signer));
    payload.accepted = x402::AcceptedEntry(Offered(""));
    return {x402::EncodePaymentHeader(payload), a.nonce, a, payload.signature};
  }

  HttpResponse Pay(const std::string& header, const std::string& key = "",
                   const std::string& body = "{}") {
    HttpRequest request;
    request.method = "POST";
    request.target = "/work";
    request.headers = {{"PAYMENT-SIGNATURE", header}, {"Content-Type", "application/json"}};
    if (!key.empty()) request.headers.push_back({"Idempotency-Key", key});
    request.body = body;
    return gateway_->Handle(request);
  }

  // A GET with the admin token (or, given `headers`, with those instead).
  HttpResponse Get(const std::string& target, std::vector<HttpHeader> headers = {
                                                  {"Authorization", "Bearer admin-secret"}}) {
    HttpRequest request;
    request.method = "GET";
    request.target = target;
    request.headers = std::move(headers);
    return gateway_->Handle(request);
  }

  nlohmann::json OperationJson(const HttpResponse& response) {
    auto id = response.Header("AgentPay-Operation-Id");
    EXPECT_TRUE(id.has_value());
    HttpResponse view = Get("/v1/operations/" + std::string(id.value_or("")));
    EXPECT_EQ(view.status, 200) << view.body;
    return nlohmann::json::parse(view.body, nullptr, false);
  }

  static std::string Code(const HttpResponse& response) {
    auto body = nlohmann::json::parse(response.body, nullptr, false);
    return body.is_object() ? body.value("code", "") : "";
  }

  static nlohmann::json SettleResponse(const HttpResponse& response) {
    auto header = response.Header("PAYMENT-RESPONSE");
    if (!header) return nullptr;
    auto decoded = Base64Decode(*header);
    return decoded.ok() ? nlohmann::json::parse(*decoded, nullptr, false) : nlohmann::json();
  }

  // `count` payments under keys prefix-0, prefix-1, … answered 202 (automine off), and their
  // transactions' hashes; a payment answered otherwise is a failure and has no hash here.
  std::vector<chain::Hash32> PayUnmined(int count, const std::string& prefix) {
    std::vector<chain::Hash32> hashes;
    for (int i = 0; i < count; ++i) {
      HttpResponse unknown = Pay(Sign().header, prefix + "-" + std::to_string(i));
      EXPECT_EQ(unknown.status, 202) << unknown.body;
      if (unknown.status != 202) continue;
      hashes.push_back(*chain::ParseHash32(OperationJson(unknown)["tx_hash"].get<std::string>()));
    }
    return hashes;
  }

  // The reconciler's settings that follow the settler's.
  ReconcilerConfig ReconcilerConfigOfTest() const {
    ReconcilerConfig config;
    config.receipt_timeout_ms = config_.receipt_timeout_ms;
    config.expiry_buffer_seconds = config_.expiry_buffer_seconds;
    return config;
  }

  ReconcileReport Reconcile(SettlementCounter* counter = nullptr) {
    auto report = ReconcileSettlements(*store_, *settler_, clock_, random_,
                                       ReconcilerConfigOfTest(), counter);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? *report : ReconcileReport{};
  }

  int64_t TokenBalance(const chain::Address& owner) {
    auto balance = devnet_->BalanceOf(token_, owner);
    EXPECT_TRUE(balance.ok());
    return balance.ok() ? balance->ToInt64() : -1;
  }
  int64_t Transfers() { return TokenBalance(pay_to_) / kPrice; }
  bool NonceUsed(const chain::Hash32& nonce) {
    auto used = devnet_->AuthorizationState(token_, buyer(), nonce);
    EXPECT_TRUE(used.ok());
    return used.ok() && *used;
  }
  uint64_t RelayerTransactions() {
    auto count = devnet_->PendingNonce(settler_->relayer());
    EXPECT_TRUE(count.ok());
    return count.ok() ? *count : 0;
  }

  // The token's books against the gateway's: payTo holds exactly price × settled operations, and
  // the buyer lost exactly that.
  void ExpectTokenBooksBalance() {
    int settled = 0;
    ASSERT_TRUE(store_->Read([&](Transaction& tx) {
      OperationFilter filter;
      filter.settlement = Settlement::kSettled;
      filter.limit = 100000;
      auto ops = tx.ListOperations(filter);
      if (!ops.ok()) return ops.status();
      settled = static_cast<int>(ops->size());
      return Status::Ok();
    }).ok());
    EXPECT_EQ(TokenBalance(pay_to_), settled * kPrice + stranger_paid_);
    const int64_t second_payer =
        second_payer_funding_ > 0 ? TokenBalance(chain::AddressOf(Key(0x02))) : 0;
    EXPECT_EQ(TokenBalance(buyer()) + second_payer + TokenBalance(pay_to_),
              kFunding + second_payer_funding_);
  }
  int64_t second_payer_funding_ = 0;  // minted to Key(0x02) by a test that counts it

  // The route's requirements as this test configured them (not read from the gateway).
  x402::Requirements Offered(std::string resource_url) const {
    x402::Requirements r;
    r.chain_id = kChainId;
    r.amount = chain::U256(static_cast<uint64_t>(kPrice));
    r.asset = token_;
    r.pay_to = pay_to_;
    r.asset_name = "USD Coin";
    r.asset_version = "2";
    r.max_timeout_seconds = 120;
    r.resource_url = std::move(resource_url);
    r.description = "Paid route /";
    return r;
  }

  // A 402 of the gateway against src/x402's encoders for `offered`: the PAYMENT-REQUIRED header
  // decoded and byte for byte, and the body without its problem-document fields.
  static void ExpectChallengeEncodes(const HttpResponse& response,
                                     const std::vector<x402::Requirements>& offered,
                                     const std::string& error, x402::UnnamedV1Chain unnamed) {
    ASSERT_EQ(response.status, 402) << response.body;
    EXPECT_EQ(response.Header("Content-Type"), "application/problem+json");
    auto header = response.Header("PAYMENT-REQUIRED");
    ASSERT_TRUE(header.has_value());
    const std::string encoded = x402::EncodePaymentRequiredHeader(offered, error);
    auto decoded = Base64Decode(*header);
    ASSERT_TRUE(decoded.ok()) << *header;
    EXPECT_EQ(nlohmann::json::parse(*decoded), nlohmann::json::parse(*Base64Decode(encoded)));
    EXPECT_EQ(*header, encoded);
    nlohmann::json body = nlohmann::json::parse(response.body);
    for (const char* problem_field : {"type", "title", "status", "code", "detail"}) {
      EXPECT_TRUE(body.contains(problem_field)) << problem_field;
      body.erase(problem_field);
    }
    EXPECT_EQ(body, x402::PaymentRequiredV1Body(offered, error, unnamed));
  }

  std::filesystem::path dir_;
  ManualClock clock_;
  AsioTimers timers_;  // real waits: the pipeline polls and attaches in real time
  CountingRandom random_;
  ScriptedUpstream upstream_;
  std::unique_ptr<Store> store_;
  chain::Address token_, pay_to_;
  std::unique_ptr<chain::Devnet> devnet_;
  std::unique_ptr<CountingChain> counted_;  // the settler's view of devnet_
  std::unique_ptr<Settler> settler_;
  GatewayConfig config_;
  std::unique_ptr<Gateway> gateway_;
  int nonces_ = 0;
  int64_t stranger_paid_ = 0;  // moved to payTo by transactions that are not the gateway's
};

TEST_F(X402GatewayTest, PaysOnceAndReplaysTheSameSignature) {
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header, "order-1");
  ASSERT_EQ(first.status, 200) << first.body;
  nlohmann::json settle = SettleResponse(first);
  ASSERT_TRUE(settle.is_object());
  EXPECT_EQ(settle["success"], true);
  EXPECT_EQ(settle["network"], "eip155:1337");
  EXPECT_EQ(settle["payer"], chain::ToChecksumHex(buyer()));
  EXPECT_EQ(OperationJson(first)["tx_hash"], settle["transaction"]);
  EXPECT_EQ(OperationJson(first)["settlement"], "settled");
  EXPECT_EQ(OperationJson(first)["fulfillment"], "succeeded");
  EXPECT_TRUE(NonceUsed(payment.nonce));
  // The response was lost: the client sends the very same header and key again.
  HttpResponse again = Pay(payment.header, "order-1");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(SettleResponse(again), settle);
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(X402GatewayTest, NewSignatureForASettledKeyGetsTheStoredResultAndIsNeverSubmitted) {
  HttpResponse first = Pay(Sign().header, "order-7");
  ASSERT_EQ(first.status, 200) << first.body;
  Signed second = Sign();
  HttpResponse again = Pay(second.header, "order-7");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_FALSE(NonceUsed(second.nonce));
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(X402GatewayTest, ConcurrentRequestsWithOneAuthorizationSettleOnce) {
  Signed payment = Sign();
  upstream_.Block();
  std::vector<std::future<HttpResponse>> answers;
  for (int i = 0; i < 6; ++i) {
    answers.push_back(
        std::async(std::launch::async, [&] { return Pay(payment.header, "together"); }));
  }
  upstream_.WaitBlocked(1);
  upstream_.Release();
  int paid = 0;
  for (auto& answer : answers) {
    HttpResponse response = answer.get();
    EXPECT_EQ(response.status, 200) << response.body;
    paid += response.status == 200;
  }
  EXPECT_EQ(paid, 6);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(X402GatewayTest, LateReceiptIs202ThenReconciledThenServedOnce) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header, "late-1");
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(Code(first), "settlement_unknown");
  EXPECT_EQ(first.Header("Location"),
            "/v1/operations/" + std::string(*first.Header("AgentPay-Operation-Id")));
  EXPECT_EQ(SettleResponse(first)["success"], false);
  EXPECT_EQ(SettleResponse(first)["errorReason"], "settlement_pending");
  EXPECT_EQ(OperationJson(first)["settlement"], "unknown");
  // A retry while unknown: 202 again, nothing submitted, never a 402.
  HttpResponse retry = Pay(Sign().header, "late-1");
  EXPECT_EQ(retry.status, 202);
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_EQ(upstream_.calls(), 0);
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(Reconcile().settled, 1);
  EXPECT_EQ(OperationJson(first)["settlement"], "settled");
  HttpResponse served = Pay(payment.header, "late-1");
  EXPECT_EQ(served.status, 200) << served.body;
  EXPECT_EQ(SettleResponse(served)["success"], true);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
}

// The reconciler (a worker, below the gateway) counts into the gateway's metrics through the
// SettlementCounter it is given: its events show on /metrics beside the gateway's own.
TEST_F(X402GatewayTest, ReconcilerEventsShowOnTheGatewaysMetrics) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  HttpResponse first = Pay(Sign().header, "counted-1");
  ASSERT_EQ(first.status, 202) << first.body;
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(Reconcile(&gateway_->metrics()).settled, 1);
  std::string text = Get("/metrics").body;
  for (std::string_view event : {"unknown", "reconciler_run", "reconciled_settled"}) {
    std::string line = "agentpay_x402_settlement_events_total{event=\"" + std::string(event) +
                       "\"} 1\n";
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  EXPECT_NE(text.find("agentpay_x402_settlement_events_total{event=\"settled\"} 0\n"),
            std::string::npos);
}

TEST_F(X402GatewayTest, DroppedTransactionIsRebroadcastThenVoidAfterExpiry) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  Signed payment = Sign(kPrice, 0x01, "USD Coin", 30);
  HttpResponse first = Pay(payment.header, "drop-1");
  ASSERT_EQ(first.status, 202) << first.body;
  auto hash = *chain::ParseHash32(OperationJson(first)["tx_hash"].get<std::string>());
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  EXPECT_FALSE(devnet_->GetTransaction(hash)->has_value());
  // Before validBefore: the same bytes go out again (same hash), by the gap check that comes first
  // in a pass: the relayer's first unmined nonce is ours and the node lost it.
  ReconcileReport refilled = Reconcile();
  EXPECT_EQ(refilled.gaps_filled, 1);
  EXPECT_EQ(refilled.rebroadcast, 0);  // the look then finds it pending: nothing more to send
  EXPECT_TRUE(devnet_->GetTransaction(hash)->has_value());
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  // Past validBefore: still waiting until the buffer has passed too. The relayer's next nonce is
  // ours and the node lost it: the same bytes go out again to fill it (they can only revert now).
  clock_.Advance(31'000);
  ASSERT_TRUE(devnet_->Mine().ok());  // an empty block: chain time moves on
  ReconcileReport waiting = Reconcile();
  EXPECT_EQ(waiting.voided, 0);
  EXPECT_EQ(waiting.gaps_filled, 1);
  EXPECT_TRUE(devnet_->GetTransaction(hash)->has_value());
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  clock_.Advance(5'000);
  ASSERT_TRUE(devnet_->Mine().ok());
  // Expired past the buffer, and lost again: the gap check sends the bytes once more, or every
  // later settlement would queue behind the gap; the look finds them pending, but no block can
  // execute them any more and the nonce is unused: void, in the same pass.
  ReconcileReport voided = Reconcile();
  EXPECT_EQ(voided.gaps_filled, 1);
  EXPECT_EQ(voided.voided, 1);
  EXPECT_EQ(voided.errors, 0);
  EXPECT_EQ(OperationJson(first)["settlement"], "void");
  ReconcileReport after = Reconcile();  // pending at that nonce now, and resolved: nothing to do
  EXPECT_EQ(after.gaps_filled, 0);
  EXPECT_EQ(after.examined, 0);
  // Mined, the filler reverts: an expired authorization cannot move money any more.
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(devnet_->RevertReason(hash), "FiatTokenV2: authorization is expired");
  EXPECT_EQ(Reconcile().voided, 0);
  EXPECT_EQ(OperationJson(first)["settlement"], "void");
  EXPECT_FALSE(NonceUsed(payment.nonce));
  EXPECT_EQ(Transfers(), 0);
  // A void key is free at once: a new payment with it starts over and is charged once.
  ASSERT_TRUE(devnet_->SetAutomine(true).ok());
  HttpResponse fresh = Pay(Sign().header, "drop-1");
  EXPECT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_NE(fresh.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(Transfers(), 1);
}

// The watch for reorganisations, paced: a settlement recorded after a reorganisation (in a block
// of the new branch) must not vouch for one recorded before it in a block the reorganisation
// removed. Block A is asked about again, found replaced, and its payment recorded where it was
// mined again.
TEST_F(X402GatewayTest, TheReorgWatchAsksAboutABlockRecordedBeforeAReorganisation) {
  ReconcilerConfig config = ReconcilerConfigOfTest();
  config.rpc_per_second = 1000;
  Reconciler reconciler(*store_, *settler_, clock_, random_, config);
  HttpResponse first = Pay(Sign(kPrice, 0x01, "USD Coin").header, "reorg-a");
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string a_id(*first.Header("AgentPay-Operation-Id"));
  auto payment_of = [&](const std::string& id) {
    X402PaymentRecord record;
    EXPECT_TRUE(store_
                    ->Read([&](Transaction& tx) {
                      auto found = tx.FindX402Payment(id);
                      if (!found.ok()) return found.status();
                      if (found->has_value()) record = **found;
                      return Status::Ok();
                    })
                    .ok());
    return record;
  };
  const X402PaymentRecord before = payment_of(a_id);
  ASSERT_GE(before.settled_block, 0);
  ASSERT_TRUE(reconciler.RunPass().ok());  // the watch finds A's block canonical
  // A's block goes; its transaction is mined again in a new block. Then B settles after it.
  clock_.Advance(2000);  // mined again later: another block hash
  ASSERT_TRUE(devnet_->Reorg(1).ok());
  HttpResponse second = Pay(Sign().header, "reorg-b");
  ASSERT_EQ(second.status, 200) << second.body;
  ASSERT_GT(payment_of(std::string(*second.Header("AgentPay-Operation-Id"))).settled_block,
            before.settled_block);
  clock_.Advance(kGapCheckIntervalMs);
  ASSERT_TRUE(reconciler.RunPass().ok());
  const X402PaymentRecord after = payment_of(a_id);
  EXPECT_NE(after.settled_block_hash, before.settled_block_hash)
      << "block " << before.settled_block << " was vouched for by B's, listed after the reorg";
  auto canonical = devnet_->BlockHash(static_cast<uint64_t>(after.settled_block));
  ASSERT_TRUE(canonical.ok() && canonical->has_value());
  EXPECT_EQ(after.settled_block_hash, chain::Hex(**canonical));
  EXPECT_EQ(OperationJson(first)["settlement"], "settled");
  EXPECT_EQ(Transfers(), 2);
  ExpectTokenBooksBalance();
}

// Issue 14 item 6: several of the relayer's transactions lost by the node while later ones wait
// (a nonce gap) come back in one gap check, in nonce order, long before each operation's own
// backoff would look at it again; then they settle, each once.
TEST_F(X402GatewayTest, SeveralDroppedTransactionsAreResentInNonceOrderByOneGapCheck) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const std::vector<chain::Hash32> hashes = PayUnmined(3, "gap");
  ASSERT_EQ(hashes.size(), 3u);
  ReconcilerConfig config = ReconcilerConfigOfTest();
  config.rpc_per_second = 1000;
  Reconciler reconciler(*store_, *settler_, clock_, random_, config);
  ASSERT_EQ(reconciler.RunPass()->examined, 3);  // each looked at: pending; again in 1 s
  clock_.Advance(1000);
  ASSERT_EQ(reconciler.RunPass()->examined, 3);  // and again in 2 s
  // The node loses the first two (nonces 0 and 1); the third waits behind the gap.
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[0]));
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[1]));
  clock_.Advance(kGapCheckIntervalMs);  // the gap check is due; the operations' backoff is not
  auto pass = reconciler.RunPass();
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->examined, 0);
  EXPECT_EQ(pass->gaps_filled, 2);
  for (const chain::Hash32& hash : hashes) EXPECT_TRUE(devnet_->GetTransaction(hash)->has_value());
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(ReconcileSettlements(*store_, *settler_, clock_, random_, config)->settled, 3);
  EXPECT_EQ(Transfers(), 3);
}

// A node that lost transactions behind one it still holds (a pool that refuses nonces past a gap
// loses every later one sent while the gap was open) gets them back too: the gap check walks past
// the nonce it holds, since its pending count stops short of what the store took.
TEST_F(X402GatewayTest, TransactionsLostBehindAPendingOneAreResentByTheGapCheck) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const std::vector<chain::Hash32> hashes = PayUnmined(4, "behind");
  ASSERT_EQ(hashes.size(), 4u);
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[1]));
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[2]));
  ASSERT_LT(*devnet_->PendingNonce(settler_->relayer()), 4u);  // the node's count stops at the gap
  ReconcilerConfig config = ReconcilerConfigOfTest();
  auto pass = ReconcileSettlements(*store_, *settler_, clock_, random_, config);
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->gaps_filled, 2);
  EXPECT_EQ(pass->rebroadcast, 0);
  for (const chain::Hash32& hash : hashes) EXPECT_TRUE(devnet_->GetTransaction(hash)->has_value());
  EXPECT_EQ(ReconcileSettlements(*store_, *settler_, clock_, random_, config)->gaps_filled, 0);
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(ReconcileSettlements(*store_, *settler_, clock_, random_, config)->settled, 4);
  EXPECT_EQ(Transfers(), 4);
}

// The paced reconciler walks past a held nonce only once the relayer's mined nonce has stopped
// moving between two gap checks (while the chain mines, the check costs no more calls); then it
// resends what the node lost behind it, long before each operation's backoff is over.
TEST_F(X402GatewayTest, ThePacedGapCheckWalksPastAHeldNonceOnceMiningStalls) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  const std::vector<chain::Hash32> hashes = PayUnmined(3, "stall");
  ASSERT_EQ(hashes.size(), 3u);
  ReconcilerConfig config = ReconcilerConfigOfTest();
  config.rpc_per_second = 1000;
  config.backoff.initial_delay_ms = 60'000;  // after their first look, the operations wait
  Reconciler reconciler(*store_, *settler_, clock_, random_, config);
  auto first = reconciler.RunPass();  // each looked at: pending; the mined nonce noted
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->examined, 3);
  EXPECT_EQ(first->gaps_filled, 0);
  // The node loses the last two while it holds the first.
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[1]));
  ASSERT_TRUE(*devnet_->DropTransaction(hashes[2]));
  clock_.Advance(kGapCheckIntervalMs);
  auto second = reconciler.RunPass();  // the mined nonce has not moved: stalled
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->examined, 0);
  EXPECT_EQ(second->gaps_filled, 2);
  for (const chain::Hash32& hash : hashes) EXPECT_TRUE(devnet_->GetTransaction(hash)->has_value());
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(ReconcileSettlements(*store_, *settler_, clock_, random_, config)->settled, 3);
  EXPECT_EQ(Transfers(), 3);
}

// Issue 14 item 3: with --confirmations 3 a settlement counts, and the upstream is called, only
// once its block is 3 deep. Until then the request waits (here past its receipt deadline: 202) and
// the reconciler waits too; the third block settles it, and the retry is served once.
TEST_F(X402GatewayTest, ASettlementCountsOnlyOnceItIsConfirmationsDeep) {
  gateway_.reset();
  SettlerConfig deep = settler_->config();
  deep.confirmations = 3;
  settler_ = std::make_unique<Settler>(*counted_, deep, Key(0x99));
  MakeGateway(SettleTiming::kBefore);
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header, "deep-1");
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(Code(first), "settlement_unknown");
  EXPECT_TRUE(NonceUsed(payment.nonce)) << "mined in one block";
  EXPECT_EQ(upstream_.calls(), 0) << "nothing released before the third block";
  EXPECT_EQ(Reconcile().settled, 0);
  ASSERT_TRUE(devnet_->Mine().ok());  // 2 deep
  EXPECT_EQ(Reconcile().settled, 0);
  EXPECT_EQ(OperationJson(first)["settlement"], "unknown");
  ASSERT_TRUE(devnet_->Mine().ok());  // 3 deep
  EXPECT_EQ(Reconcile().settled, 1);
  HttpResponse paid = Pay(payment.header, "deep-1");
  EXPECT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(X402GatewayTest, NonceSpentByAnotherTransactionIsFailed409WithAnAlertNever402) {
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header, "raced");
  ASSERT_EQ(first.status, 202) << first.body;
  auto ours = *chain::ParseHash32(OperationJson(first)["tx_hash"].get<std::string>());
  ASSERT_TRUE(*devnet_->DropTransaction(ours));
  // Someone else relays the very same authorization with a transaction of their own.
  const chain::PrivateKey stranger = Key(0x77);
  auto theirs = chain::BuildTransferWithAuthorizationTx(
      payment.authorization, payment.signature, token_, kChainId, 0, *devnet_->Fees(), 200000,
      stranger);
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(devnet_->SendRawTransaction(theirs->raw).ok());
  ASSERT_TRUE(devnet_->Mine().ok());
  ASSERT_TRUE(NonceUsed(payment.nonce));
  // Our transaction is the relayer's lost first nonce: the gap check sends it again (its
  // authorization spent, it can only revert, but the relayer's nonce must be used up).
  EXPECT_EQ(Reconcile().gaps_filled, 1);
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(devnet_->RevertReason(ours), "FiatTokenV2: authorization is used or canceled");
  EXPECT_EQ(Reconcile().failed, 1);
  nlohmann::json op = OperationJson(first);
  EXPECT_EQ(op["settlement"], "failed");
  EXPECT_EQ(op["fulfillment"], "rejected");
  // The payer may well have paid (here payTo was): never a 402 that invites a second signature.
  HttpResponse retry = Pay(Sign().header, "raced");
  EXPECT_EQ(retry.status, 409) << retry.body;
  EXPECT_EQ(Code(retry), "settlement_failed");
  EXPECT_EQ(SettleResponse(retry)["success"], false);
  EXPECT_EQ(SettleResponse(retry)["errorReason"], "settlement_failed");
  HttpRequest alerts;
  alerts.method = "GET";
  alerts.target = "/admin/v1/alerts";
  alerts.headers = {{"Authorization", "Bearer admin-secret"}};
  HttpResponse listed = gateway_->Handle(alerts);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find("settlement_failed"), std::string::npos) << listed.body;
  EXPECT_EQ(upstream_.calls(), 0);
  // The stranger's transfer reached payTo; the gateway never counted it as its own settlement.
  EXPECT_EQ(TokenBalance(pay_to_), kPrice);
  stranger_paid_ = kPrice;
}

TEST_F(X402GatewayTest, InvalidPaymentsAre402WithTheReasonAndSendNothing) {
  struct Case {
    std::string name, header, reason;
  };
  Signed used = Sign();
  ASSERT_EQ(Pay(used.header, "spent").status, 200);
  const uint64_t sent_before = RelayerTransactions();
  std::string reused_nonce_header = used.header;  // same authorization, another business key
  std::vector<Case> cases = {
      {"wrong amount", Sign(kPrice + 1).header,
       "invalid_exact_evm_payload_authorization_value_mismatch"},
      {"wrong domain name", Sign(kPrice, 0x01, "USDC").header, "invalid_exact_evm_signature"},
      {"expired", Sign(kPrice, 0x01, "USD Coin", 3).header,
       "invalid_exact_evm_payload_authorization_valid_before"},
      {"reused nonce", reused_nonce_header, "invalid_exact_evm_nonce_already_used"},
      {"insufficient balance", Sign(kPrice, 0x05).header,
       "invalid_exact_evm_insufficient_balance"},
  };
  for (const Case& c : cases) {
    std::string key = "other-" + c.name;
    std::replace(key.begin(), key.end(), ' ', '-');
    HttpResponse response = Pay(c.header, key);
    EXPECT_EQ(response.status, 402) << c.name << ": " << response.body;
    EXPECT_EQ(Code(response), c.reason) << c.name;
    auto challenge = response.Header("PAYMENT-REQUIRED");
    ASSERT_TRUE(challenge.has_value()) << c.name;
    EXPECT_EQ(nlohmann::json::parse(*Base64Decode(*challenge))["error"], c.reason) << c.name;
  }
  EXPECT_EQ(RelayerTransactions(), sent_before);
  EXPECT_EQ(Transfers(), 1);
}

// Issue 12: the 402 on the wire is what src/x402's encoders build from the route's requirements,
// for an unpaid request and for a refused payment alike; chain 1337 has no x402 v1 name, and the v1
// body names it in CAIP-2 form as it always did. The resource is under the configured public URL,
// whatever Host the request named (issue 36).
TEST_F(X402GatewayTest, ChallengeIsWhatTheX402EncodersBuild) {
  HttpRequest unpaid;
  unpaid.method = "GET";
  unpaid.target = "/work/item?x=1";
  unpaid.headers = {{"Host", "shop.example:8080"}};
  HttpResponse challenge = gateway_->Handle(unpaid);
  ExpectChallengeEncodes(challenge, {Offered(std::string(kPublicUrl) + "/work/item?x=1")},
                         "payment required", x402::UnnamedV1Chain::kNameCaip2);
  EXPECT_EQ(Code(challenge), "payment_required");
  EXPECT_EQ(nlohmann::json::parse(challenge.body)["accepts"][0]["network"], "eip155:1337");

  HttpResponse refused = Pay(Sign(kPrice + 1).header, "too-much");
  ExpectChallengeEncodes(refused, {Offered(std::string(kPublicUrl) + "/work")},
                         "invalid_exact_evm_payload_authorization_value_mismatch",
                         x402::UnnamedV1Chain::kNameCaip2);
  EXPECT_EQ(RelayerTransactions(), 0u);
}

// What the challenge advertises is what a payment is verified against: a payment signed from the
// decoded header alone (amount, payTo, domain, timeout), echoing its accepts[0], is paid.
TEST_F(X402GatewayTest, APaymentSignedFromTheChallengeAloneIsAccepted) {
  HttpResponse challenge = Get("/work", {});
  auto header = challenge.Header("PAYMENT-REQUIRED");
  ASSERT_TRUE(header.has_value());
  const nlohmann::json offer = nlohmann::json::parse(*Base64Decode(*header))["accepts"][0];
  const auto asset = chain::ParseAddress(offer["asset"].get<std::string>());
  const auto pay_to = chain::ParseAddress(offer["payTo"].get<std::string>());
  ASSERT_TRUE(asset.ok() && pay_to.ok()) << offer;
  chain::TransferAuthorization a;
  a.from = buyer();
  a.to = *pay_to;
  a.value = chain::U256(std::stoull(offer["amount"].get<std::string>()));
  a.valid_before = chain::U256(static_cast<uint64_t>(clock_.NowMs() / 1000) +
                               offer["maxTimeoutSeconds"].get<uint64_t>());
  a.nonce[0] = 0x5a;
  const auto domain =
      chain::DomainSeparator(offer["extra"]["name"].get<std::string>(),
                             offer["extra"]["version"].get<std::string>(), kChainId, *asset);
  x402::PaymentPayload payload;
  payload.version = x402::Version::kV2;
  payload.scheme = offer["scheme"].get<std::string>();
  payload.network = offer["network"].get<std::string>();
  payload.chain_id = x402::ChainIdForNetwork(payload.network);
  payload.authorization = a;
  payload.signature = *chain::SignDigest(chain::Eip3009Digest(domain, a), Key(0x01));
  payload.accepted = offer;
  HttpResponse paid = Pay(x402::EncodePaymentHeader(payload));
  EXPECT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(Transfers(), 1);
}

// On a chain x402 v1 names, the v1 body is PaymentRequiredV1Body's own (no CAIP-2 fallback
// involved), and each route gets its own price and description.
TEST_F(X402GatewayTest, ChallengeOnAChainWithAV1NameIsTheEncodersV1Body) {
  GatewayConfig config = config_;
  RouteConfig premium = config.routes.front();
  premium.prefix = "/premium";
  premium.price = 2500;
  config.routes.push_back(premium);
  config.chain.chain_id = 84532;
  config.chain.asset_name = "USDC";
  config.chain.max_timeout_seconds = 60;
  Gateway named(config, *store_, clock_, random_, timers_, upstream_);  // no settler: challenges only
  struct Case {
    std::string target, prefix;
    int64_t price;
  };
  for (const Case& c : {Case{"/premium/data", "/premium", 2500}, Case{"/other", "/", kPrice}}) {
    HttpRequest unpaid;
    unpaid.method = "POST";
    unpaid.target = c.target;
    HttpResponse challenge = named.Handle(unpaid);
    x402::Requirements offered = Offered(std::string(kPublicUrl) + c.target);
    offered.chain_id = 84532;
    offered.amount = chain::U256(static_cast<uint64_t>(c.price));
    offered.asset_name = "USDC";
    offered.max_timeout_seconds = 60;
    offered.description = "Paid route " + c.prefix;
    ExpectChallengeEncodes(challenge, {offered}, "payment required",
                           x402::UnnamedV1Chain::kLeaveOut);
    EXPECT_EQ(nlohmann::json::parse(challenge.body)["accepts"][0]["network"], "base-sepolia");
  }
}

TEST_F(X402GatewayTest, ABadSignatureNeverReadsAnotherPayersKey) {
  HttpResponse first = Pay(Sign().header, "secret-order");
  ASSERT_EQ(first.status, 200);
  // Signed by someone else but claiming the buyer as `from`: refused before any key lookup.
  auto forged = nlohmann::json::parse(*Base64Decode(Sign(kPrice, 0x07).header));
  forged["payload"]["authorization"]["from"] = chain::ToChecksumHex(buyer());
  HttpResponse response = Pay(Base64Encode(forged.dump()), "secret-order");
  EXPECT_EQ(response.status, 402);
  EXPECT_EQ(Code(response), "invalid_exact_evm_signature");
  EXPECT_NE(response.body, first.body);
  EXPECT_FALSE(response.Header("AgentPay-Operation-Id").has_value());
}

TEST_F(X402GatewayTest, MalformedHeadersAre400) {
  for (const std::string& header :
       {std::string("%%%"), Base64Encode("not json"), Base64Encode("{\"x402Version\":2}"),
        Base64Encode("[1,2,3]")}) {
    HttpResponse response = Pay(header);
    EXPECT_EQ(response.status, 400) << header;
    EXPECT_EQ(Code(response), "malformed_payment") << header;
  }
  EXPECT_EQ(RelayerTransactions(), 0u);
}

TEST_F(X402GatewayTest, Upstream5xxAfterSettlementIsFreeToRetry) {
  upstream_.Push(UpstreamKind::kResponded, 500);
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header, "flaky");
  EXPECT_EQ(first.status, 502) << first.body;
  EXPECT_EQ(Code(first), "fulfillment_pending");
  EXPECT_EQ(SettleResponse(first)["success"], true);
  EXPECT_EQ(OperationJson(first)["settlement"], "settled");
  EXPECT_EQ(OperationJson(first)["fulfillment"], "pending_retry");
  HttpResponse retry = Pay(Sign().header, "flaky");  // even with a new signature: not charged
  EXPECT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(upstream_.calls(), 2);
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

TEST_F(X402GatewayTest, SettleAfterRoutePaysOnlyForDeliveredWork) {
  MakeGateway(SettleTiming::kAfter);
  upstream_.Push(UpstreamKind::kResponded, 400);
  Signed refused = Sign();
  HttpResponse first = Pay(refused.header, "bad-input");
  EXPECT_EQ(first.status, 400) << first.body;
  EXPECT_FALSE(first.Header("PAYMENT-RESPONSE").has_value());
  EXPECT_EQ(OperationJson(first)["settlement"], "none");
  EXPECT_FALSE(NonceUsed(refused.nonce));
  EXPECT_EQ(RelayerTransactions(), 0u);
  HttpResponse delivered = Pay(Sign().header, "good-input");
  EXPECT_EQ(delivered.status, 200) << delivered.body;
  EXPECT_EQ(SettleResponse(delivered)["success"], true);
  EXPECT_EQ(Transfers(), 1);
}

// settle=after: an upstream call that failed (502) may have done the work. If the authorization
// expires before a retry can settle it, the operation closes unpaid (X16), and an operator is
// told (core/settlement.h (g)); a refusal before any failed call raises nothing.
TEST_F(X402GatewayTest, SettleAfterWorkThatCanNoLongerBePaidRaisesAnAlert) {
  MakeGateway(SettleTiming::kAfter);
  const auto alerts = [&] {
    HttpRequest request;
    request.method = "GET";
    request.target = "/admin/v1/alerts";
    request.headers = {{"Authorization", "Bearer admin-secret"}};
    return nlohmann::json::parse(gateway_->Handle(request).body)["alerts"];
  };
  upstream_.Push(UpstreamKind::kResponded, 502);
  Signed payment = Sign(kPrice, 0x01, "USD Coin", 20);
  HttpResponse failed = Pay(payment.header, "late-work");
  ASSERT_EQ(failed.status, 502) << failed.body;
  EXPECT_EQ(OperationJson(failed)["fulfillment"], "pending_retry");
  EXPECT_TRUE(alerts().empty());
  clock_.Advance(15'000);  // within x402's validBefore margin: it can no longer settle
  HttpResponse late = Pay(payment.header, "late-work");
  EXPECT_EQ(late.status, 402) << late.body;
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_FALSE(NonceUsed(payment.nonce));
  nlohmann::json raised = alerts();
  ASSERT_EQ(raised.size(), 1u) << raised.dump();
  EXPECT_EQ(raised[0]["kind"], "unpaid_after_possible_work");
  EXPECT_EQ(raised[0]["operation_id"], *failed.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(Transfers(), 0);
}

// settle=after, X6: the upstream answered 2xx, the settlement never made it on chain before the
// authorization expired, and the reconciler voids it: the work is unpaid, and an operator is told.
TEST_F(X402GatewayTest, SettleAfterVoidAfterTheUpstreamAnsweredRaisesAnAlert) {
  MakeGateway(SettleTiming::kAfter);
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  Signed payment = Sign(kPrice, 0x01, "USD Coin", 30);
  HttpResponse first = Pay(payment.header, "worked");
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(upstream_.calls(), 1);
  auto hash = *chain::ParseHash32(OperationJson(first)["tx_hash"].get<std::string>());
  ASSERT_TRUE(*devnet_->DropTransaction(hash));
  clock_.Advance(40'000);  // past validBefore and the buffer
  ASSERT_TRUE(devnet_->Mine().ok());
  ReconcileReport voided = Reconcile();
  EXPECT_EQ(voided.gaps_filled, 1);  // the expired bytes fill the relayer's nonce
  EXPECT_EQ(voided.voided, 1);       // pending, but expired and unused
  EXPECT_EQ(OperationJson(first)["settlement"], "void");
  ASSERT_TRUE(devnet_->Mine().ok());
  EXPECT_EQ(devnet_->RevertReason(hash), "FiatTokenV2: authorization is expired");
  EXPECT_EQ(Reconcile().voided, 0);
  HttpRequest request;
  request.method = "GET";
  request.target = "/admin/v1/alerts";
  request.headers = {{"Authorization", "Bearer admin-secret"}};
  nlohmann::json raised = nlohmann::json::parse(gateway_->Handle(request).body)["alerts"];
  ASSERT_EQ(raised.size(), 1u) << raised.dump();
  EXPECT_EQ(raised[0]["kind"], "unpaid_after_possible_work");
  EXPECT_EQ(Transfers(), 0);
}

// Threat model T1: a settled authorization is public (the relayer's calldata). Re-presented without
// the payer's secret, it yields no body, no operation id and no work, whatever the body.
TEST_F(X402GatewayTest, APublicAuthorizationWithoutTheKeyYieldsNothing) {
  Signed payment = Sign();
  HttpResponse first = Pay(payment.header);  // the default key (payer, nonce): no secret
  ASSERT_EQ(first.status, 200) << first.body;
  for (const std::string body : {"{}", R"({"other":1})"}) {
    HttpResponse replayed = Pay(payment.header, "", body);
    EXPECT_EQ(replayed.status, 409) << replayed.body;
    EXPECT_EQ(Code(replayed), "authorization_already_used");
    EXPECT_FALSE(replayed.Header("AgentPay-Operation-Id").has_value());
    EXPECT_FALSE(replayed.Header("Location").has_value());
    EXPECT_FALSE(replayed.Header("PAYMENT-RESPONSE").has_value());
    EXPECT_EQ(replayed.body.find(*first.Header("AgentPay-Operation-Id")), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(replayed.body).count("operation_id"), 0u);
  }
  // A key the payer never sent does not help: a new key is a new action, and the nonce is spent.
  HttpResponse guessed = Pay(payment.header, "guessed-key");
  EXPECT_EQ(guessed.status, 402) << guessed.body;
  EXPECT_FALSE(guessed.Header("AgentPay-Operation-Id").has_value());
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
}

// A flood of public authorizations re-sent under fresh keys costs the RPC node nothing: the
// gateway knows them from its own records (its hosted node bills per call, docs/threat-model.md).
TEST_F(X402GatewayTest, PublicAuthorizationsUnderNewKeysAreRefusedWithoutAskingTheChain) {
  Signed payment = Sign();
  ASSERT_EQ(Pay(payment.header, "mine").status, 200);
  const int64_t before = counted_->calls();
  for (int i = 0; i < 20; ++i) {
    HttpResponse flood = Pay(payment.header, "flood-" + std::to_string(i));
    EXPECT_EQ(flood.status, 402) << flood.body;
    EXPECT_FALSE(flood.Header("AgentPay-Operation-Id").has_value());
  }
  EXPECT_EQ(counted_->calls(), before) << "no chain call for an authorization already held";
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
}

// Issue 14 item 6: a hosted node bills per call. A settled payment asks the simulation, the send
// and the receipt; fees and the relayer's nonce are read once per refresh interval, and the reads
// that only explain a refusal (authorizationState, balanceOf) are not made on the happy path.
TEST_F(X402GatewayTest, ASettledPaymentCostsThreeChainCallsWhileFeesAndNonceAreFresh) {
  ASSERT_EQ(Pay(Sign().header, "warm").status, 200);  // reads the fees and the nonce
  const int64_t before = counted_->calls();
  constexpr int kPayments = 5;
  for (int i = 0; i < kPayments; ++i) {
    HttpResponse paid = Pay(Sign().header, "frugal-" + std::to_string(i));
    ASSERT_EQ(paid.status, 200) << paid.body;
  }
  EXPECT_EQ(counted_->calls() - before, 3 * kPayments);
  // Past both refresh intervals the fees (one Chain::Fees) and the nonce are read again.
  clock_.Advance(settler_->config().nonce_refresh_ms);
  const int64_t stale = counted_->calls();
  ASSERT_EQ(Pay(Sign().header, "refreshed").status, 200);
  EXPECT_EQ(counted_->calls() - stale, 5);
  EXPECT_EQ(Transfers(), kPayments + 2);
}

// With another payment of the payer in flight, the balance itself is read: the simulation only
// shows that it covers one. A payer funded for one price gets one broadcast, however many arrive.
TEST_F(X402GatewayTest, APayerWithAnotherPaymentInFlightHasItsBalanceRead) {
  Signed first = Sign();
  Signed second = Sign();
  const std::string payer = chain::ToLowerHex(buyer());
  auto check = [&](const Signed& s) {
    return settler_->Check(s.authorization, s.signature, clock_.NowMs());
  };
  auto held = check(first);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->failure, x402::Failure::kNone);
  EXPECT_EQ(settler_->reservations().Reserved(payer), kPrice);
  const int64_t before = counted_->calls();
  auto also = check(second);
  ASSERT_TRUE(also.ok()) << also.status().ToString();
  EXPECT_EQ(also->failure, x402::Failure::kNone) << "funded for both";
  EXPECT_EQ(counted_->calls() - before, 2) << "the simulation, then balanceOf";
  EXPECT_EQ(settler_->reservations().Reserved(payer), 2 * kPrice);
  also->hold.reset();
  held->hold.reset();
  EXPECT_EQ(settler_->reservations().Reserved(payer), 0);

  // A payer funded for exactly one price: its second is refused while the first is in flight.
  const chain::Address poor = chain::AddressOf(Key(0x02));
  ASSERT_TRUE(devnet_->Mint(poor, chain::U256(static_cast<uint64_t>(kPrice))).ok());
  Signed one = Sign(kPrice, 0x02);
  Signed two = Sign(kPrice, 0x02);
  held = check(one);
  ASSERT_TRUE(held.ok() && held->failure == x402::Failure::kNone);
  also = check(two);
  ASSERT_TRUE(also.ok());
  EXPECT_EQ(also->failure, x402::Failure::kInsufficientBalance);
  EXPECT_EQ(also->detail, "the payer's other payments in flight already reserve its balance");
  EXPECT_EQ(settler_->reservations().Reserved(chain::ToLowerHex(poor)), kPrice);
}

// T1 with a leaked key: another of the payer's public authorizations does not prove the payer.
TEST_F(X402GatewayTest, ALeakedKeyWithAnotherPublicAuthorizationYieldsNothing) {
  HttpResponse first = Pay(Sign().header, "order-a");
  ASSERT_EQ(first.status, 200) << first.body;
  Signed second = Sign();
  ASSERT_EQ(Pay(second.header, "order-b").status, 200);
  ASSERT_TRUE(NonceUsed(second.nonce));
  HttpResponse stolen = Pay(second.header, "order-a");
  EXPECT_EQ(stolen.status, 409) << stolen.body;
  EXPECT_EQ(Code(stolen), "authorization_already_used");
  EXPECT_FALSE(stolen.Header("AgentPay-Operation-Id").has_value());
  HttpResponse tampered = Pay(second.header, "order-a", R"({"other":1})");
  EXPECT_EQ(tampered.status, 409) << tampered.body;
  EXPECT_FALSE(tampered.Header("AgentPay-Operation-Id").has_value());
  EXPECT_EQ(upstream_.calls(), 2);
  EXPECT_EQ(Transfers(), 2);
}

// The official client that lost its response signs a fresh authorization for the 402 it gets on
// retrying; with its key, that fresh (unused) authorization proves the payer: the stored body, no
// new charge, the new authorization left unused.
TEST_F(X402GatewayTest, TheKeyWithAFreshAuthorizationGetsTheStoredBody) {
  HttpResponse first = Pay(Sign().header, "lost-1");
  ASSERT_EQ(first.status, 200) << first.body;
  Signed fresh = Sign();
  HttpResponse again = Pay(fresh.header, "lost-1");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_FALSE(NonceUsed(fresh.nonce));
  // A fresh authorization that fails the route's checks proves nothing.
  HttpResponse cheap = Pay(Sign(kPrice - 1).header, "lost-1");
  EXPECT_EQ(cheap.status, 409) << cheap.body;
  EXPECT_FALSE(cheap.Header("AgentPay-Operation-Id").has_value());
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(upstream_.calls(), 1);
}

// Issue 36 item 6 (T25): two payers who pick the same key string (`order-42`) have two
// operations, and neither reads the other's with its own key, whatever payer it names.
TEST_F(X402GatewayTest, AnotherPayersEqualKeyStringReadsNothing) {
  ASSERT_TRUE(devnet_->Mint(chain::AddressOf(Key(0x02)), chain::U256(kFunding)).ok());
  second_payer_funding_ = kFunding;
  HttpResponse alice = Pay(Sign().header, "order-42");
  ASSERT_EQ(alice.status, 200) << alice.body;
  HttpResponse bob = Pay(Sign(kPrice, 0x02).header, "order-42");
  ASSERT_EQ(bob.status, 200) << bob.body;
  const std::string alice_id(*alice.Header("AgentPay-Operation-Id"));
  const std::string bob_id(*bob.Header("AgentPay-Operation-Id"));
  EXPECT_NE(alice_id, bob_id);
  HttpResponse unknown = Get("/v1/operations/op_doesnotexist", {});
  for (const std::string suffix : {"", "/trace"}) {
    const std::string target = "/v1/operations/" + alice_id + suffix;
    for (const std::vector<HttpHeader>& bobs :
         {std::vector<HttpHeader>{{"Idempotency-Key", "order-42"}}, PayerView("order-42", 0x02)}) {
      HttpResponse refused = Get(target, bobs);
      EXPECT_EQ(refused.status, 404) << target;
      EXPECT_EQ(refused.body, unknown.body) << target;
    }
    EXPECT_EQ(Get(target, PayerView("order-42")).status, 200) << target;
  }
  // Equal strings of two payers do not look alike in the store or the views.
  EXPECT_NE(OperationJson(alice)["idempotency_key"], OperationJson(bob)["idempotency_key"]);
}

// Issue 36 item 6 (T25): a key too easy to guess (`order-42`) with the payment's authorization
// read off the chain gets nothing once the transaction exists; the payer's retry with a fresh
// authorization (what @x402/fetch sends) still gets its stored answer, and a strong key still
// proves with the identical authorization.
TEST_F(X402GatewayTest, AWeakKeyWithThePublicAuthorizationYieldsNothing) {
  min_key_bits_ = 96;
  MakeGateway(SettleTiming::kBefore);
  Signed paid = Sign();
  HttpResponse first = Pay(paid.header, "order-42");
  ASSERT_EQ(first.status, 200) << first.body;
  for (const std::string body : {"{}", "{\"other\":1}"}) {
    HttpResponse stolen = Pay(paid.header, "order-42", body);
    EXPECT_EQ(stolen.status, 409) << stolen.body;
    EXPECT_EQ(Code(stolen), "authorization_already_used");
    EXPECT_FALSE(stolen.Header("AgentPay-Operation-Id").has_value());
    EXPECT_FALSE(stolen.Header("PAYMENT-RESPONSE").has_value());
  }
  Signed fresh = Sign();
  HttpResponse retry = Pay(fresh.header, "order-42");
  EXPECT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(retry.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(retry.body, first.body);
  EXPECT_FALSE(NonceUsed(fresh.nonce));
  // A key that scores at least 96 bits is a secret: the identical authorization proves it.
  const std::string strong = "3f2a9c4e-71b0-4d5e-9a8f-c2e6b1d07f53";
  Signed other = Sign();
  ASSERT_EQ(Pay(other.header, strong).status, 200);
  HttpResponse again = Pay(other.header, strong);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(Transfers(), 2);
  EXPECT_EQ(upstream_.calls(), 2);
}

// An operation stored before keys named their payer has the key's digest alone ("sha256:"): its
// payer's retry still finds it (no second charge) and its payer, named, still reads it; another
// payer's equal string does not.
TEST_F(X402GatewayTest, AnOperationUnderTheOlderKeyDigestStaysItsPayers) {
  Signed paid = Sign();
  HttpResponse first = Pay(paid.header, "legacy-1");
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string id(*first.Header("AgentPay-Operation-Id"));
  const std::string payer = chain::ToLowerHex(buyer());
  ASSERT_TRUE(store_
                  ->Write([&](Transaction& tx) -> Status {
                    auto record = tx.FindKey("payer:" + payer, PayerKeyDigest(payer, "legacy-1"));
                    if (!record.ok()) return record.status();
                    if (!record->has_value())
                      return Status::Error(ErrorCode::kStoreNotFound, "key");
                    KeyRecord older = **record;
                    older.key = LegacyKeyDigest("legacy-1");
                    if (Status s = tx.DeleteKey(older.principal, (*record)->key); !s.ok()) return s;
                    auto inserted = tx.InsertKey(older);
                    return inserted.ok() ? Status::Ok() : inserted.status();
                  })
                  .ok());
  // The operation's row as an older gateway wrote it (an update never changes an operation's
  // key: in SQL, then).
  auto db = sqlite::Database::Open((dir_ / "gw.db").string(), /*read_only=*/false);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)
                  ->Exec("UPDATE operations SET idempotency_key = '" + LegacyKeyDigest("legacy-1") +
                         "' WHERE id = '" + id + "'")
                  .ok());
  Signed fresh = Sign();
  HttpResponse again = Pay(fresh.header, "legacy-1");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.Header("AgentPay-Operation-Id"), first.Header("AgentPay-Operation-Id"));
  EXPECT_FALSE(NonceUsed(fresh.nonce));
  EXPECT_EQ(Transfers(), 1);
  const std::string target = "/v1/operations/" + id;
  EXPECT_EQ(Get(target, PayerView("legacy-1")).status, 200);
  EXPECT_EQ(Get(target, PayerView("legacy-1", 0x02)).status, 404);
  EXPECT_EQ(Get(target, {{"Idempotency-Key", "legacy-1"}}).status, 404);
}

// In settle=before the transaction is in the mempool while the upstream works: a watcher's copy
// of the authorization does not attach to the call in flight.
TEST_F(X402GatewayTest, AWatcherCannotAttachToTheCallInFlight) {
  Signed payment = Sign();
  upstream_.Block();
  auto first = std::async(std::launch::async, [&] { return Pay(payment.header); });
  upstream_.WaitBlocked(1);
  HttpResponse watcher = Pay(payment.header);
  EXPECT_EQ(watcher.status, 409) << watcher.body;
  EXPECT_FALSE(watcher.Header("AgentPay-Operation-Id").has_value());
  upstream_.Release();
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(upstream_.calls(), 1);
}

// Before its transaction exists, the authorization is known to the payer and the gateway only:
// a duplicate without a key still attaches (settle=after, upstream in flight).
TEST_F(X402GatewayTest, BeforeItsTransactionADefaultKeyDuplicateStillAttaches) {
  MakeGateway(SettleTiming::kAfter);
  Signed payment = Sign();
  upstream_.Block();
  auto first = std::async(std::launch::async, [&] { return Pay(payment.header); });
  upstream_.WaitBlocked(1);
  auto second = std::async(std::launch::async, [&] { return Pay(payment.header); });
  // Released only once the duplicate has attached.
  while (Get("/metrics").body.find(R"(agentpay_idempotency_arrivals_total{outcome="attach"} 1)") ==
         std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  upstream_.Release();
  EXPECT_EQ(first.get().status, 200);
  HttpResponse attached = second.get();
  EXPECT_EQ(attached.status, 200) << attached.body;
  EXPECT_EQ(attached.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(Transfers(), 1);
}

// Threat model T4: an operation's view and trace answer its payer's secret or the admin token;
// anyone else gets exactly the answer of an id that does not exist.
TEST_F(X402GatewayTest, OperationViewsNeedThePayersKeyOrTheAdminToken) {
  HttpResponse paid = Pay(Sign().header, "view-1");
  ASSERT_EQ(paid.status, 200);
  const std::string id(*paid.Header("AgentPay-Operation-Id"));
  HttpResponse unknown = Get("/v1/operations/op_doesnotexist", {});
  EXPECT_EQ(unknown.status, 404);
  for (const std::string suffix : {"", "/trace"}) {
    const std::string target = "/v1/operations/" + id + suffix;
    for (const std::vector<HttpHeader>& strangers :
         {std::vector<HttpHeader>{},
          PayerView("view-2"),
          {{"Idempotency-Key", "view-1"}},
          PayerView("view-1", 0x02),
          {{"AgentPay-Payer", "0x1234"}, {"Idempotency-Key", "view-1"}},
          {{"Authorization", "Bearer admin-secreT"}},
          {{"Authorization", "Bearer view-1"}}}) {
      HttpResponse refused = Get(target, strangers);
      EXPECT_EQ(refused.status, 404) << target;
      EXPECT_EQ(refused.body, unknown.body) << target;
      EXPECT_EQ(refused.body.find(id), std::string::npos);
    }
    EXPECT_EQ(Get(target, PayerView("view-1")).status, 200) << target;
    // The payer's address in any case.
    EXPECT_EQ(
        Get(target, {{"AgentPay-Payer", chain::ToLowerHex(buyer())}, {"Idempotency-Key", "view-1"}})
            .status,
        200)
        << target;
    EXPECT_EQ(Get(target).status, 200) << target;  // the admin token
  }
  // The key is stored as a digest only, bound to the payer: the view never shows it.
  nlohmann::json view =
      nlohmann::json::parse(Get("/v1/operations/" + id, PayerView("view-1")).body);
  EXPECT_EQ(view["idempotency_key"].get<std::string>().rfind("payer-sha256:", 0), 0u);
  EXPECT_EQ(view.dump().find("view-1"), std::string::npos);
  // An operation paid with the default key has no secret: only the admin reads it.
  HttpResponse bare = Pay(Sign().header);
  ASSERT_EQ(bare.status, 200);
  const std::string bare_id(*bare.Header("AgentPay-Operation-Id"));
  EXPECT_EQ(Get("/v1/operations/" + bare_id, {}).status, 404);
  EXPECT_EQ(Get("/v1/operations/" + bare_id).status, 200);
}

TEST_F(X402GatewayTest, CrashAfterStoringTheTransactionIsReconciledFromTheStore) {
  // The gateway stored and broadcast, then died before it saw the receipt: the node mined it.
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  HttpResponse first = Pay(Sign().header, "crash-1");
  ASSERT_EQ(first.status, 202);
  ASSERT_TRUE(devnet_->Mine().ok());
  MakeGateway(SettleTiming::kBefore);  // a new process on the same database
  ASSERT_TRUE(gateway_->RecoverInterrupted().ok());
  EXPECT_EQ(Reconcile().settled, 1);
  HttpResponse retry = Pay(Sign().header, "crash-1");
  EXPECT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(Transfers(), 1);
}

}  // namespace
}  // namespace agentpay

namespace agentpay {
namespace {

// Issue 13 item 4: the paced reconciler pages oldest first within its RPC budget, goes on from
// where a pass stopped, and does not look at an unresolved operation again before its backoff.
TEST_F(X402GatewayTest, PacedReconcilerPagesOldestFirstWithinItsRpcBudget) {
  constexpr int kOperations = 7;
  auto state = [&](const std::string& id) {
    HttpResponse view = Get("/v1/operations/" + id);
    EXPECT_EQ(view.status, 200) << view.body;
    auto json = nlohmann::json::parse(view.body, nullptr, false);
    return json.is_object() ? json.value("settlement", "") : "";
  };
  ASSERT_TRUE(devnet_->SetAutomine(false).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < kOperations; ++i) {
    HttpResponse unknown = Pay(Sign().header, "paced-" + std::to_string(i));
    ASSERT_EQ(unknown.status, 202) << unknown.body;
    ids.emplace_back(*unknown.Header("AgentPay-Operation-Id"));
    clock_.Advance(10);  // ids carry their creation time: one per 10 ms, oldest first
  }
  ReconcilerConfig config = ReconcilerConfigOfTest();
  config.batch = 2;  // pages of two: the listing must page to see them all
  config.rpc_per_second = 1000;
  {
    // Pending transactions: one look each, then nothing until the backoff (1 s) is over.
    Reconciler reconciler(*store_, *settler_, clock_, random_, config);
    auto first = reconciler.RunPass();
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->examined, kOperations);
    clock_.Advance(100);
    auto soon = reconciler.RunPass();
    EXPECT_EQ(soon->examined, 0);
    EXPECT_EQ(soon->not_due, kOperations);
    clock_.Advance(1000);
    EXPECT_EQ(reconciler.RunPass()->examined, kOperations);
    clock_.Advance(1500);  // the second wait is 2 s
    EXPECT_EQ(reconciler.RunPass()->examined, 0);
    clock_.Advance(500);
    EXPECT_EQ(reconciler.RunPass()->examined, kOperations);
  }
  // Mined: every look now settles its operation. 10 calls a second = two looks of 5 calls each
  // per second, less the relayer-nonce check (3 calls, once a second, first in its pass); passes
  // every 500 ms take at most one look each, oldest first.
  ASSERT_TRUE(devnet_->Mine().ok());
  config.rpc_per_second = 10;
  Reconciler reconciler(*store_, *settler_, clock_, random_, config);
  auto pass = reconciler.RunPass();  // a full bucket: the gap check, then one look
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->settled, 1);
  EXPECT_TRUE(pass->out_of_rpc);
  EXPECT_EQ(state(ids[0]), "settled");
  EXPECT_EQ(state(ids[1]), "unknown");
  int settled = 1;
  int passes = 1;
  while (settled < kOperations && passes < 40) {
    clock_.Advance(500);
    pass = reconciler.RunPass();
    ASSERT_TRUE(pass.ok());
    EXPECT_LE(pass->examined, 1) << "pass " << passes;
    settled += pass->settled;
    ++passes;
  }
  EXPECT_EQ(settled, kOperations);
  // 6 more looks at about one per 500 ms, the relayer-nonce check (3 calls, once a second)
  // included.
  EXPECT_LE(passes, 1 + 6 * 2 + 4);
  for (const std::string& id : ids) {
    EXPECT_EQ(state(id), "settled") << id;
  }
}

// Issue 14 item 4: while the chain's base fee is above --max-fee-per-gas nothing is signed or
// broadcast, the payer's reservation is released and the authorization stays unused; the very
// same payment settles once the cap allows it.
TEST_F(X402GatewayTest, FeesAboveTheCapBroadcastNothingAndTheSamePaymentSettlesLater) {
  auto with_caps = [&](uint64_t max_fee) {
    gateway_.reset();
    SettlerConfig settler = settler_->config();
    settler.fee_caps = {chain::U256(max_fee), chain::U256(0)};
    settler_ = std::make_unique<Settler>(*counted_, settler, Key(0x99));
    MakeGateway(SettleTiming::kBefore);
  };
  with_caps(chain::kDevnetBaseFeePerGas - 1);
  Signed payment = Sign();
  for (int i = 0; i < 3; ++i) {
    HttpResponse refused = Pay(payment.header, "fees-1");
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_EQ(Code(refused), "chain_fees_too_high");
    EXPECT_EQ(refused.Header("Retry-After"), "5");
    EXPECT_NE(refused.body.find("above --max-fee-per-gas 999999999"), std::string::npos)
        << refused.body;
    EXPECT_FALSE(refused.Header("AgentPay-Operation-Id").has_value());
  }
  EXPECT_FALSE(NonceUsed(payment.nonce));
  EXPECT_EQ(*devnet_->PendingNonce(settler_->relayer()), 0u) << "nothing was broadcast";
  EXPECT_EQ(settler_->reservations().Reserved(chain::ToLowerHex(buyer())), 0);
  EXPECT_EQ(upstream_.calls(), 0);

  with_caps(chain::kDevnetBaseFeePerGas);  // the base fee itself is within the cap
  HttpResponse paid = Pay(payment.header, "fees-1");
  EXPECT_EQ(paid.status, 200) << paid.body;
  EXPECT_TRUE(NonceUsed(payment.nonce));
  EXPECT_EQ(Transfers(), 1);
  EXPECT_EQ(upstream_.calls(), 1);
}

}  // namespace
}  // namespace agentpay

namespace agentpay {
namespace {

// Issue 38 item 3: with --settle-batch-max, the payments settled within the window share one
// relayer transaction (Multicall3 aggregate3), and each is settled, served and counted on its own.
TEST_F(X402GatewayTest, PaymentsSettledTogetherShareOneTransactionAndEachIsPaidOnce) {
  batch_max_ = 8;
  batch_window_ms_ = 1000;
  MakeGateway(SettleTiming::kBefore);
  constexpr int kPayments = 6;
  std::vector<Signed> payments;
  for (int i = 0; i < kPayments; ++i) payments.push_back(Sign());
  std::vector<std::future<HttpResponse>> answers;
  for (int i = 0; i < kPayments; ++i) {
    answers.push_back(std::async(std::launch::async, [&, i] {
      return Pay(payments[i].header, "batched-" + std::to_string(i));
    }));
  }
  std::set<std::string> hashes;
  for (auto& answer : answers) {
    HttpResponse response = answer.get();
    EXPECT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(SettleResponse(response)["success"], true);
    hashes.insert(SettleResponse(response)["transaction"].get<std::string>());
  }
  // The window held the first until the others were signed with it: one transaction, one nonce.
  EXPECT_EQ(hashes.size(), 1u);
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_EQ(Transfers(), kPayments);
  EXPECT_EQ(upstream_.calls(), kPayments);
  for (const Signed& payment : payments) EXPECT_TRUE(NonceUsed(payment.nonce));
  // A retry of each is the stored answer, nothing sent again.
  for (int i = 0; i < kPayments; ++i) {
    EXPECT_EQ(Pay(payments[i].header, "batched-" + std::to_string(i)).status, 200);
  }
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_EQ(upstream_.calls(), kPayments);
}

// A member whose authorization another relayer spent before the batch was mined: its call fails
// inside the batch (allowFailure), it is failed with an alert and never a 402, and the others of
// the same transaction settle.
TEST_F(X402GatewayTest, ABatchMemberSpentElsewhereFailsAloneAndTheOthersSettle) {
  batch_max_ = 8;
  batch_window_ms_ = 1500;
  MakeGateway(SettleTiming::kBefore);
  Signed kept = Sign(), spent = Sign();
  auto first = std::async(std::launch::async, [&] { return Pay(kept.header, "member-kept"); });
  auto second = std::async(std::launch::async, [&] { return Pay(spent.header, "member-spent"); });
  ASSERT_NO_FATAL_FAILURE(WaitForOperations(2));
  // Within the window, someone else relays the second authorization with a transaction of theirs.
  auto theirs =
      chain::BuildTransferWithAuthorizationTx(spent.authorization, spent.signature, token_,
                                              kChainId, 0, *devnet_->Fees(), 200000, Key(0x77));
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(devnet_->SendRawTransaction(theirs->raw).ok());
  ASSERT_TRUE(NonceUsed(spent.nonce));
  stranger_paid_ = kPrice;
  HttpResponse paid = first.get(), refused = second.get();
  EXPECT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(Code(refused), "settlement_failed");
  EXPECT_EQ(OperationJson(refused)["tx_hash"], OperationJson(paid)["tx_hash"]);
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(TokenBalance(pay_to_), 2 * kPrice);  // ours once, theirs once
}

// What a crash between a payment's arrival decision and its batch's decision leaves: the
// operation `submitted`, its payment unsigned, no attempt alive. The reconciler signs it alone
// while its authorization can be paid (and it settles once), fails it once someone else spent it,
// voids it once it expired unused; each from the store as the arrival decision wrote it.
TEST_F(X402GatewayTest, AnUnsignedBatchMemberLeftByACrashIsSignedAloneOrClosedByTheReconciler) {
  struct Left {
    std::string op_id;
    Signed payment;
  };
  auto leave_unsigned = [&](int64_t valid_for_s) {
    Left left{"op_unsigned_" + std::to_string(nonces_ + 1),
              Sign(kPrice, 0x01, "USD Coin", valid_for_s)};
    const int64_t now = clock_.NowMs();
    X402PaymentRecord payment;
    payment.operation_id = left.op_id;
    payment.authorization = {chain::ToLowerHex(buyer()), chain::Hex(left.payment.nonce), 0,
                             left.payment.authorization.valid_before.ToInt64(), kPrice};
    payment.pay_to = chain::ToLowerHex(pay_to_);
    payment.signature_hex = chain::Hex(left.payment.signature.bytes);
    Operation op =
        NewX402Operation({left.op_id, "payer:" + chain::ToLowerHex(buyer()), left.op_id, "fp", "/",
                          kPrice, SettleOrder::kBeforeUpstream, 2000, "dead-instance"},
                         now);
    EXPECT_TRUE(store_
                    ->Write([&](Transaction& tx) -> Status {
                      auto inserted = tx.InsertX402Payment(payment);
                      if (!inserted.ok()) return inserted.status();
                      return tx.InsertOperation(op);
                    })
                    .ok());
    return left;
  };
  Left payable = leave_unsigned(600);
  Left spent = leave_unsigned(600);
  auto theirs = chain::BuildTransferWithAuthorizationTx(spent.payment.authorization,
                                                        spent.payment.signature, token_, kChainId,
                                                        0, *devnet_->Fees(), 200000, Key(0x77));
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(devnet_->SendRawTransaction(theirs->raw).ok());
  stranger_paid_ = kPrice;
  // While the attempt's claim lasts, the reconciler leaves them alone.
  EXPECT_EQ(Reconcile().examined, 0);
  EXPECT_FALSE(StoredPayment(payable.op_id)->submitted());
  clock_.Advance(3000);  // the claim lapsed: the attempt is gone
  ReconcileReport first = Reconcile();
  EXPECT_EQ(first.failed, 1);       // spent by someone else: failed, with an alert
  EXPECT_EQ(first.rebroadcast, 1);  // the other signed alone and sent
  EXPECT_TRUE(StoredPayment(payable.op_id)->submitted());
  EXPECT_EQ(RelayerTransactions(), 1u);
  // Mined at once (automine): the next look settles it, and a second pass changes nothing.
  EXPECT_EQ(Reconcile().settled, 1);
  EXPECT_EQ(Reconcile().examined, 0);
  EXPECT_EQ(Transfers(), 2);  // ours, signed alone, and the stranger's
  HttpResponse settled = Get("/v1/operations/" + payable.op_id);
  EXPECT_EQ(nlohmann::json::parse(settled.body)["settlement"], "settled") << settled.body;
  HttpResponse failed = Get("/v1/operations/" + spent.op_id);
  EXPECT_EQ(nlohmann::json::parse(failed.body)["settlement"], "failed") << failed.body;
  // Expired before anything was signed: void, nothing sent.
  Left late = leave_unsigned(1);
  clock_.Advance(3000 + 10'000);
  ASSERT_TRUE(devnet_->Mine().ok());  // a block past its validBefore and the buffer
  ReconcileReport third = Reconcile();
  EXPECT_EQ(third.voided, 1);
  EXPECT_EQ(RelayerTransactions(), 1u);
  EXPECT_FALSE(NonceUsed(late.payment.nonce));
  HttpResponse voided = Get("/v1/operations/" + late.op_id);
  EXPECT_EQ(nlohmann::json::parse(voided.body)["settlement"], "void") << voided.body;
}

}  // namespace
}  // namespace agentpay
