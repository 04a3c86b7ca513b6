// The `agentpay pay` run (src/client/pay.h) against a scripted seller on loopback, with a fake
// clock and recorded sleeps: price first, the same key and the same signed payment on every retry,
// exit codes, budget states, 202 polling, and the x402 payload a real facilitator would accept.
#include "client/pay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>

#include "client/budget_db.h"
#include "client/challenge.h"
#include "client/keys.h"
#include "core/idempotency.h"
#include "http/server.h"
#include "x402/base64.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace agentpay::client {
namespace {

constexpr char kBuyerKey[] = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
constexpr int64_t kStartMs = 1'800'000'000'000;
constexpr int64_t kPrice = 1000;

class FakeClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  int64_t now_ms = kStartMs;
};

class CountingRandom final : public Random {
 public:
  void Fill(unsigned char* out, size_t size) override {
    for (size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>(++counter_ * 131 + i);
  }

 private:
  uint64_t counter_ = 0;
};

x402::Requirements TestRequirements() {
  x402::Requirements r;
  r.chain_id = 84532;
  r.network = "eip155:84532";
  r.amount = chain::U256(static_cast<uint64_t>(kPrice));
  r.asset = *chain::ParseAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3");
  r.pay_to = *chain::ParseAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC");
  r.max_timeout_seconds = 60;
  r.asset_name = "USDC";
  r.asset_version = "2";
  r.resource_url = "http://127.0.0.1/paid";
  r.description = "test";
  r.mime_type = "application/json";
  return r;
}

HttpResponse Challenge(std::string_view error = "payment required") {
  HttpResponse response =
      JsonResponse(402, x402::PaymentRequiredV1Body({TestRequirements()}, error).dump());
  response.SetHeader("PAYMENT-REQUIRED",
                     x402::EncodePaymentRequiredHeader({TestRequirements()}, error));
  return response;
}

HttpResponse Dropped() {
  HttpResponse response;
  response.disposition = Disposition::kDropConnection;
  return response;
}

HttpResponse Answer(int status, std::optional<ProblemCode> code = std::nullopt) {
  HttpResponse response =
      !code ? JsonResponse(status, R"({"ok":true})") : ProblemResponse(status, *code, "scripted");
  return response;
}

// Answers unpaid requests with the 402 challenge, paid ones from `script` (then 200), and
// GET /v1/operations/* from `operations` (then a settled operation).
class ScriptedSeller {
 public:
  ScriptedSeller() {
    auto server = HttpServer::Start("127.0.0.1", 0, ServerLimits{},
                                    [this](const HttpRequest& request) { return Handle(request); });
    AGENTPAY_CHECK(server.ok());
    server_ = std::move(*server);
  }
  ~ScriptedSeller() { server_->Stop(); }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + path;
  }
  void Script(std::vector<HttpResponse> answers) {
    std::lock_guard lock(mutex_);
    for (auto& answer : answers) script_.push_back(std::move(answer));
  }
  void ScriptOperations(std::vector<std::string> settlements) {
    std::lock_guard lock(mutex_);
    for (auto& s : settlements) operations_.push_back(std::move(s));
  }
  std::vector<HttpRequest> Paid() const {
    std::lock_guard lock(mutex_);
    return paid_;
  }
  int Polls() const {
    std::lock_guard lock(mutex_);
    return polls_;
  }
  int Unpaid() const {
    std::lock_guard lock(mutex_);
    return unpaid_;
  }
  HttpResponse challenge = Challenge();

 private:
  HttpResponse Handle(const HttpRequest& request) {
    std::lock_guard lock(mutex_);
    if (request.Path().rfind("/v1/operations/", 0) == 0) {
      ++polls_;
      std::string settlement = "settled";
      if (!operations_.empty()) {
        settlement = operations_.front();
        operations_.pop_front();
      }
      return JsonResponse(
          200,
          nlohmann::json{{"id", "op_1"}, {"settlement", settlement}, {"fulfillment", "not_started"}}
              .dump());
    }
    if (!request.Header("PAYMENT-SIGNATURE") && !request.Header("X-PAYMENT") &&
        !request.Header("Authorization")) {
      ++unpaid_;
      return challenge;
    }
    paid_.push_back(request);
    if (script_.empty()) return Answer(200);
    HttpResponse next = std::move(script_.front());
    script_.pop_front();
    return next;
  }

  mutable std::mutex mutex_;
  std::deque<HttpResponse> script_;
  std::deque<std::string> operations_;
  std::vector<HttpRequest> paid_;
  int polls_ = 0;
  int unpaid_ = 0;
  std::unique_ptr<HttpServer> server_;
};

class PayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/agentpay-pay-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    world_.clock = &clock_;
    world_.random = &random_;
    world_.sleep_ms = [this](int64_t ms) {
      sleeps_.push_back(ms);
      clock_.now_ms += ms;
    };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  PayOptions Options(const std::string& path = "/paid") {
    PayOptions o;
    o.url = seller_.Url(path);
    o.buyer_key = kBuyerKey;
    o.task = "report";
    o.step = 1;
    o.budget_db = dir_ + "/budget.db";
    o.budget = 5 * kPrice;
    o.max_attempts = 4;
    return o;
  }
  PayResult Run(const PayOptions& options) {
    return RunPay(options, world_, [this](std::string_view line) { lines_.emplace_back(line); });
  }
  BudgetFigures Figures() {
    return BudgetDb::Open(dir_ + "/budget.db", std::nullopt, 0).value()->Figures().value();
  }
  static std::string HeaderOf(const HttpRequest& request, std::string_view name) {
    return std::string(request.Header(name).value_or(""));
  }

  std::string dir_;
  FakeClock clock_;
  CountingRandom random_;
  ClientWorld world_;
  std::vector<int64_t> sleeps_;
  std::vector<std::string> lines_;
  ScriptedSeller seller_;
};

// The vectors were computed apart from this code, with Python's hmac module:
//   hmac.new(b"ak_test", b"9:q3-report:2", hashlib.sha256).hexdigest()[:32]
// The names are what `agentpay pay --json` prints as "outcome" and docs/agent-client.md lists (the
// integration tests and scripts read them): each outcome has exactly the name it had as a string,
// and every name reads back as its outcome.
TEST(PayOutcomeTest, NamesRoundTrip) {
  const std::vector<std::pair<PayOutcome, std::string_view>> expected = {
      {PayOutcome::kPaid, "paid"},
      {PayOutcome::kFree, "free"},
      {PayOutcome::kRejected, "rejected"},
      {PayOutcome::kUnknown, "unknown"},
      {PayOutcome::kPaidNotDelivered, "paid_not_delivered"},
      {PayOutcome::kOverBudget, "over_budget"},
      {PayOutcome::kRefused, "refused"},
      {PayOutcome::kError, "error"}};
  ASSERT_EQ(kPayOutcomes.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(kPayOutcomes[i], expected[i].first);  // the list names every enumerator, in order
    EXPECT_EQ(PayOutcomeName(expected[i].first), expected[i].second);
    EXPECT_EQ(ParsePayOutcome(expected[i].second), expected[i].first);
  }
  for (std::string_view unknown : {"", "Paid", "paid ", "over-budget", "ok"}) {
    EXPECT_FALSE(ParsePayOutcome(unknown).has_value()) << unknown;
  }
}

TEST(KeysTest, DerivedKeyIsDocumentedAndStable) {
  EXPECT_EQ(DeriveKey("ak_test", "q3-report", 2), "task:cbb2914cc3c30480ae745e0a8f2b934e:step:2");
  EXPECT_EQ(DeriveKey("", "", 0), "task:8ce9999e00bc7da7ad24d71d24960d93:step:0");
  // Another payer's credential, another key: knowing the task text is not enough.
  EXPECT_EQ(DeriveKey("ak_other", "q3-report", 2),
            "task:3437338028b441c96b87690ef5a7ee06:step:2");
  EXPECT_NE(DeriveKey("k", "a", 1), DeriveKey("k", "a", 2));
  EXPECT_NE(DeriveKey("k", "a", 1), DeriveKey("k", "b", 1));
  EXPECT_NE(DeriveKey("k", "a:1", 2), DeriveKey("k", "a", 12)) << "the task's length is in it";
  EXPECT_TRUE(ValidIdempotencyKey(DeriveKey("k", std::string(10000, 'x'), UINT64_MAX)));
  // What earlier versions derived, still recognised in a budget file.
  EXPECT_EQ(LegacyTaskKey("q3-report", 2), "task:9105b6ce27e876f01fcf08451fc35987:step:2");
  EXPECT_FALSE(ValidIdempotencyKey(""));
  EXPECT_FALSE(ValidIdempotencyKey("has space"));
  EXPECT_FALSE(ValidIdempotencyKey(std::string(256, 'k')));
  EXPECT_NE(RequestFingerprint("GET", "u", "", "ab"), RequestFingerprint("GET", "u", "a", "b"));
}

TEST_F(PayTest, RetriesPresentTheSameKeyAndTheSameSignedPayment) {
  HttpResponse busy = Answer(503, ProblemCode::kLimitExceeded);
  busy.SetHeader("Retry-After", "2");
  seller_.Script({Dropped(), std::move(busy)});
  PayResult r = Run(Options());
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(r.outcome, PayOutcome::kPaid);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.reservation_state, "spent");
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 3u);
  for (const HttpRequest& request : paid) {
    EXPECT_EQ(HeaderOf(request, "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
    EXPECT_EQ(HeaderOf(request, "Idempotency-Key"), DeriveKey(kBuyerKey, "report", 1));
  }
  ASSERT_EQ(sleeps_.size(), 2u);
  EXPECT_GE(sleeps_[0], 100);
  EXPECT_LE(sleeps_[0], 200);
  EXPECT_GE(sleeps_[1], 2000) << "Retry-After is honored";
  // What a facilitator checks: the payload verifies against the route's requirements.
  auto payload =
      x402::DecodePaymentHeader(HeaderOf(paid[0], "PAYMENT-SIGNATURE"), x402::Version::kV2);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  EXPECT_EQ(x402::VerifyExact(*payload, TestRequirements(), kStartMs / 1000), x402::Failure::kNone);
  EXPECT_EQ(payload->authorization.valid_after, chain::U256(0));
  EXPECT_EQ(payload->authorization.valid_before, chain::U256(kStartMs / 1000 + 60));
  EXPECT_EQ(Figures().committed, kPrice);
  EXPECT_EQ(Figures().spent, kPrice);
}

TEST_F(PayTest, AttemptsRunOutWithTheStateKept) {
  seller_.Script({Answer(502, ProblemCode::kFulfillmentPending),
                  Answer(502, ProblemCode::kFulfillmentPending),
                  Answer(502, ProblemCode::kFulfillmentPending)});
  PayOptions options = Options();
  options.max_attempts = 3;
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kUnknown);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.reservation_state, "unknown");
  EXPECT_EQ(seller_.Paid().size(), 3u);
  EXPECT_EQ(sleeps_.size(), 2u) << "no wait after the last attempt";
  EXPECT_EQ(Figures().committed, kPrice);
  EXPECT_EQ(Figures().spent, 0);
}

TEST_F(PayTest, TheDeadlineBoundsTheRun) {
  for (int i = 0; i < 50; ++i) seller_.Script({Answer(503, ProblemCode::kLimitExceeded)});
  PayOptions options = Options();
  options.max_attempts = 50;
  options.timeout_ms = 3000;
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kUnknown);
  EXPECT_LT(r.attempts, 50);
  EXPECT_LE(clock_.now_ms - kStartMs, 3000);
}

TEST_F(PayTest, ARerunResumesWithTheStoredSignatureAndSignsNothingNew) {
  seller_.Script({Dropped(), Dropped()});
  PayOptions options = Options();
  options.max_attempts = 2;
  EXPECT_EQ(Run(options).exit_code, ExitCode::kUnknown);
  options.budget.reset();  // the file exists: its total stands
  PayResult again = Run(options);
  EXPECT_EQ(again.exit_code, ExitCode::kPaid) << again.message;
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 3u);
  EXPECT_EQ(HeaderOf(paid[2], "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
  EXPECT_EQ(Figures().committed, kPrice);
}

// The buyer key in any spelling is one credential: a key file rewritten in upper case must not
// turn a step already paid into a new action.
TEST_F(PayTest, TheTaskKeyIsTheSameForAnySpellingOfTheBuyerKey) {
  PayOptions options = Options();
  std::string upper = options.buyer_key;
  std::transform(upper.begin() + 2, upper.end(), upper.begin() + 2, ::toupper);
  ASSERT_NE(upper, options.buyer_key);
  EXPECT_EQ(Run(options).exit_code, ExitCode::kPaid);
  options.buyer_key = upper;
  options.budget.reset();
  PayResult again = Run(options);
  EXPECT_EQ(again.exit_code, ExitCode::kPaid) << again.message;
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 2u);
  EXPECT_EQ(HeaderOf(paid[1], "Idempotency-Key"), HeaderOf(paid[0], "Idempotency-Key"));
  EXPECT_EQ(HeaderOf(paid[1], "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
  EXPECT_EQ(Figures().committed, kPrice);
}

// A step an earlier version reserved under the key it derived from the task text alone is
// resumed under that key after an upgrade: the same signed payment, no second charge.
TEST_F(PayTest, AStepBegunUnderTheOlderTaskKeyKeepsIt) {
  seller_.Script({Dropped(), Dropped()});
  PayOptions older = Options();
  older.max_attempts = 2;
  older.idempotency_key = LegacyTaskKey("report", 1);  // what the earlier version sent
  ASSERT_EQ(Run(older).exit_code, ExitCode::kUnknown);
  PayOptions options = Options();
  options.budget.reset();
  PayResult again = Run(options);
  EXPECT_EQ(again.exit_code, ExitCode::kPaid) << again.message;
  EXPECT_EQ(again.key, LegacyTaskKey("report", 1));
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 3u);
  EXPECT_EQ(HeaderOf(paid[2], "Idempotency-Key"), LegacyTaskKey("report", 1));
  EXPECT_EQ(HeaderOf(paid[2], "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
  EXPECT_EQ(Figures().committed, kPrice);
  // A new step gets a key only its payer can compute.
  PayOptions next = Options();
  next.budget.reset();
  next.step = 2;
  EXPECT_EQ(Run(next).exit_code, ExitCode::kPaid);
  EXPECT_EQ(HeaderOf(seller_.Paid().back(), "Idempotency-Key"), DeriveKey(kBuyerKey, "report", 2));
}

TEST_F(PayTest, OverBudgetSendsNothing) {
  PayOptions options = Options();
  options.budget = kPrice - 1;
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kOverBudget);
  EXPECT_EQ(r.attempts, 0);
  EXPECT_TRUE(seller_.Paid().empty());
  EXPECT_EQ(Figures().committed, 0);
}

TEST_F(PayTest, ARefusalOnTheFirstSendIsRejectedButTheAuthorizationStaysReserved) {
  seller_.Script({Challenge("invalid_exact_evm_signature")});
  PayResult r = Run(Options());
  EXPECT_EQ(r.exit_code, ExitCode::kRejected);
  EXPECT_EQ(r.reason, "invalid_exact_evm_signature");
  EXPECT_EQ(r.reservation_state, "unknown") << "released only after expiry and a chain check";
  EXPECT_EQ(Figures().committed, kPrice);
}

TEST_F(PayTest, NonceUsedAfterALostAnswerIsPaidNotDelivered) {
  seller_.Script({Dropped(), Challenge("invalid_exact_evm_nonce_already_used")});
  PayResult r = Run(Options());
  EXPECT_EQ(r.exit_code, ExitCode::kUnknown);
  EXPECT_EQ(r.outcome, PayOutcome::kPaidNotDelivered);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_FALSE(r.evidence.payer.empty());
  EXPECT_EQ(r.evidence.nonce.size(), 66u);
  EXPECT_NE(r.message.find("paid, not delivered"), std::string::npos) << r.message;
  EXPECT_EQ(seller_.Paid().size(), 2u);
}

TEST_F(PayTest, A202IsPolledUntilFinalThenTheSameRequestIsSentAgain) {
  HttpResponse accepted = ProblemResponse(202, ProblemCode::kSettlementUnknown, "scripted", "op_1");
  accepted.SetHeader("Location", "/v1/operations/op_1");
  accepted.SetHeader("Retry-After", "1");
  seller_.Script({std::move(accepted)});
  seller_.ScriptOperations({"unknown", "unknown"});
  PayResult r = Run(Options());
  EXPECT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(seller_.Polls(), 3);
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 2u);
  EXPECT_EQ(HeaderOf(paid[1], "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
}

TEST_F(PayTest, V1WhenAsked) {
  PayOptions options = Options();
  options.x402_version = 1;
  PayResult r = Run(options);
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 1u);
  auto payload = x402::DecodePaymentHeader(HeaderOf(paid[0], "X-PAYMENT"), x402::Version::kV1);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  EXPECT_EQ(payload->network, "base-sepolia");
  EXPECT_EQ(payload->authorization.valid_after, chain::U256(kStartMs / 1000 - 600));
  EXPECT_EQ(x402::VerifyExact(*payload, TestRequirements(), kStartMs / 1000), x402::Failure::kNone);
}

TEST_F(PayTest, WalletRefusalReleasesTheReservation) {
  seller_.Script({Answer(402, ProblemCode::kInsufficientFunds)});
  PayOptions options = Options();
  options.buyer_key.clear();
  options.api_key = "ak_test";
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kRejected);
  EXPECT_EQ(r.reservation_state, "released");
  EXPECT_EQ(HeaderOf(seller_.Paid().at(0), "Authorization"), "Bearer ak_test");
  EXPECT_EQ(Figures().committed, 0);
}

TEST_F(PayTest, TheSameKeyForAnotherRequestIsRefused) {
  PayOptions options = Options();
  ASSERT_EQ(Run(options).exit_code, ExitCode::kPaid);
  options.body = "something else";
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kRejected);
  EXPECT_EQ(seller_.Paid().size(), 1u);
}

TEST_F(PayTest, AFreeAnswerReservesNothing) {
  seller_.challenge = Answer(200);
  PayResult r = Run(Options());
  EXPECT_EQ(r.exit_code, ExitCode::kPaid);
  EXPECT_EQ(r.outcome, PayOutcome::kFree);
  EXPECT_EQ(Figures().committed, 0);
}

// --- refusals before paying: nothing reserved, nothing signed, nothing sent after the 402 -------

constexpr uint64_t kDevnetChainId = 1337;  // a local chain: x402 v1 has no name for it

// The 402 a gateway on a local chain sends: v2 on eip155:1337, and a v1 body that can only spell
// the network the v2 way (as `agentpay serve --demo` did), or that lists nothing (`v1_entry`
// false, as x402::PaymentRequiredV1Body does for a chain without a v1 name).
HttpResponse DevnetChallenge(bool v1_entry) {
  x402::Requirements r = TestRequirements();
  r.chain_id = kDevnetChainId;
  r.network = "eip155:1337";
  nlohmann::json body = x402::PaymentRequiredV1Body({TestRequirements()}, "payment required");
  if (v1_entry) {
    body["accepts"][0]["network"] = "eip155:1337";
  } else {
    body["accepts"] = nlohmann::json::array();
  }
  HttpResponse response = JsonResponse(402, body.dump());
  response.SetHeader("PAYMENT-REQUIRED", x402::EncodePaymentRequiredHeader({r}, ""));
  return response;
}

class RefusalTest : public PayTest {
 protected:
  // The run was refused by the client itself: one unpaid request, no paid one, and the budget file
  // holds no reservation at all.
  void ExpectRefusedBeforePaying(const PayResult& r, std::string_view reason) {
    EXPECT_EQ(r.exit_code, ExitCode::kRejected) << r.message;
    EXPECT_EQ(r.outcome, PayOutcome::kRefused);
    EXPECT_EQ(r.reason, reason);
    EXPECT_EQ(r.evidence.nonce, "") << "nothing was signed";
    EXPECT_EQ(r.attempts, 0);
    EXPECT_EQ(r.amount, 0);
    EXPECT_EQ(r.reservation_state, "");
    EXPECT_EQ(r.message.find('\n'), std::string::npos) << "one line";
    EXPECT_NE(r.message.find("nothing was reserved, signed or sent"), std::string::npos)
        << r.message;
    EXPECT_EQ(seller_.Unpaid(), 1) << "only the request that learned the price";
    EXPECT_TRUE(seller_.Paid().empty()) << "no payment header was ever sent";
    BudgetReport report = ReadBudget(dir_ + "/budget.db");
    ASSERT_TRUE(report.error.empty()) << report.error;
    EXPECT_TRUE(report.reservations.empty());
    EXPECT_EQ(report.committed, 0);
  }
};

TEST_F(RefusalTest, V1OnAChainV1CannotNameIsRefusedBeforeSigning) {
  for (bool v1_entry : {true, false}) {
    SCOPED_TRACE(v1_entry ? "v1 body names eip155:1337" : "v1 body lists nothing");
    seller_.challenge = DevnetChallenge(v1_entry);
    PayOptions options = Options();
    options.x402_version = 1;
    const int unpaid_before = seller_.Unpaid();
    PayResult r = Run(options);
    EXPECT_EQ(seller_.Unpaid() - unpaid_before, 1);
    EXPECT_EQ(r.exit_code, ExitCode::kRejected) << r.message;
    EXPECT_EQ(r.outcome, PayOutcome::kRefused);
    EXPECT_EQ(r.reason, "x402_version_not_usable");
    EXPECT_TRUE(seller_.Paid().empty());
    EXPECT_EQ(Figures().committed, 0);
    EXPECT_TRUE(ReadBudget(options.budget_db).reservations.empty());
    // Names what was offered and what is allowed, and why v1 cannot work here.
    EXPECT_NE(r.message.find("x402 v2 on eip155:1337"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("allowed: x402 v1 (--x402-version)"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("x402 v1 has no network name for chain 1337"), std::string::npos)
        << r.message;
  }
}

TEST_F(RefusalTest, V1OnADevnetChallengeLeavesNoTrace) {
  seller_.challenge = DevnetChallenge(true);
  PayOptions options = Options();
  options.x402_version = 1;
  ExpectRefusedBeforePaying(Run(options), "x402_version_not_usable");
  EXPECT_FALSE(lines_.empty()) << "progress was reported";
  for (const std::string& line : lines_) {
    EXPECT_EQ(line.find("reserved"), std::string::npos) << line;
    EXPECT_EQ(line.find("price:"), std::string::npos) << line;
  }
}

TEST_F(PayTest, AutoSelectionPaysV2WhereV1CannotWork) {
  seller_.challenge = DevnetChallenge(true);  // the v1 entry is there, but unusable
  PayResult r = Run(Options());
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 1u);
  EXPECT_FALSE(HeaderOf(paid[0], "PAYMENT-SIGNATURE").empty());
  EXPECT_TRUE(HeaderOf(paid[0], "X-PAYMENT").empty());
  auto payload =
      x402::DecodePaymentHeader(HeaderOf(paid[0], "PAYMENT-SIGNATURE"), x402::Version::kV2);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  EXPECT_EQ(payload->chain_id, kDevnetChainId);
}

TEST_F(RefusalTest, AutoSelectionNeverPicksAnUnusableV1) {
  // A server that offers only v1, spelled in a way no v1 payload can carry.
  nlohmann::json body = x402::PaymentRequiredV1Body({TestRequirements()}, "payment required");
  body["accepts"][0]["network"] = "eip155:1337";
  seller_.challenge = JsonResponse(402, body.dump());
  ExpectRefusedBeforePaying(Run(Options()), "x402_version_not_usable");
}

TEST_F(RefusalTest, AV2OfferNamingItsNetworkTheV1WayIsNotSigned) {
  x402::Requirements r = TestRequirements();
  nlohmann::json header =
      nlohmann::json::parse(x402::Base64Decode(x402::EncodePaymentRequiredHeader({r}, "")).value());
  header["accepts"][0]["network"] = "base-sepolia";
  HttpResponse challenge = JsonResponse(402, R"({"error":"payment required"})");
  challenge.SetHeader("PAYMENT-REQUIRED", x402::Base64Encode(header.dump()));
  seller_.challenge = challenge;
  PayOptions options = Options();
  options.x402_version = 2;
  ExpectRefusedBeforePaying(Run(options), "x402_version_not_usable");
}

TEST_F(RefusalTest, ANetworkOutsideTheAllowanceIsRefused) {
  PayOptions options = Options();
  options.networks = {"eip155:8453", "eip155:1"};
  PayResult r = Run(options);
  ExpectRefusedBeforePaying(r, "network_not_allowed");
  EXPECT_NE(r.message.find("network eip155:8453 or eip155:1 (--network)"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("x402 v2 on eip155:84532"), std::string::npos) << r.message;
}

TEST_F(PayTest, ANetworkInsideTheAllowancePays) {
  PayOptions options = Options();
  options.networks = {"eip155:8453", "base-sepolia"};  // a v1 name stands for its chain
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(seller_.Paid().size(), 1u);
}

TEST_F(PayTest, TheFirstAllowedOfferIsTaken) {
  x402::Requirements elsewhere = TestRequirements();
  elsewhere.chain_id = 8453;
  elsewhere.amount = chain::U256(static_cast<uint64_t>(kPrice * 3));
  HttpResponse challenge = JsonResponse(
      402, x402::PaymentRequiredV1Body({elsewhere, TestRequirements()}, "payment required").dump());
  challenge.SetHeader("PAYMENT-REQUIRED",
                      x402::EncodePaymentRequiredHeader({elsewhere, TestRequirements()}, ""));
  seller_.challenge = challenge;
  PayOptions options = Options();
  options.networks = {"eip155:84532"};
  PayResult r = Run(options);
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(r.amount, kPrice);
  auto payload = x402::DecodePaymentHeader(HeaderOf(seller_.Paid().at(0), "PAYMENT-SIGNATURE"),
                                           x402::Version::kV2);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->chain_id, 84532u);
}

TEST_F(RefusalTest, AChallengeInAnotherAssetIsRefused) {
  PayOptions options = Options();
  options.assets = {"0x0000000000000000000000000000000000000001"};
  PayResult r = Run(options);
  ExpectRefusedBeforePaying(r, "asset_not_allowed");
  EXPECT_NE(r.message.find("asset 0x0000000000000000000000000000000000000001 (--asset)"),
            std::string::npos)
      << r.message;
}

TEST_F(RefusalTest, AWalletPaymentHonoursTheNetworkAllowanceToo) {
  PayOptions options = Options();
  options.buyer_key.clear();
  options.api_key = "ak_test";
  options.networks = {"eip155:8453"};
  ExpectRefusedBeforePaying(Run(options), "network_not_allowed");
}

TEST_F(PayTest, MalformedSpendControlsStopBeforeAnythingIsSent) {
  for (auto [asset, network] : {std::pair<std::string, std::string>{"0x12", ""},
                                std::pair<std::string, std::string>{"", "mainnet-ish"}}) {
    PayOptions options = Options();
    if (!asset.empty()) options.assets = {asset};
    if (!network.empty()) options.networks = {network};
    PayResult r = Run(options);
    EXPECT_EQ(r.exit_code, ExitCode::kError) << r.message;
    EXPECT_EQ(r.outcome, PayOutcome::kError);
  }
  EXPECT_EQ(seller_.Unpaid(), 0);
  EXPECT_TRUE(seller_.Paid().empty());
}

// --- payee, maximum amount, the budget's asset, --chain-rpc (issue 13)
// ----------------------------

// A 402 offering `r` in both forms (v2 header, v1 body), as a gateway configured with it sends.
HttpResponse ChallengeFor(const x402::Requirements& r) {
  HttpResponse response =
      JsonResponse(402, x402::PaymentRequiredV1Body({r}, "payment required").dump());
  response.SetHeader("PAYMENT-REQUIRED", x402::EncodePaymentRequiredHeader({r}, ""));
  return response;
}

constexpr char kOtherAddress[] = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class GuardTest : public RefusalTest {
 protected:
  // Pays once (binding the budget file to the test asset), so that a refusal after it can be
  // shown to leave the file exactly as it was.
  void PayOnceFirst() {
    PayOptions first = Options();
    first.step = 100;
    ASSERT_EQ(Run(first).exit_code, ExitCode::kPaid);
    seller_unpaid_before_ = seller_.Unpaid();
    paid_before_ = seller_.Paid().size();
    bytes_before_ = FileBytes(dir_ + "/budget.db");
    report_before_ = ReadBudget(dir_ + "/budget.db");
  }
  // The refusal after PayOnceFirst: one more unpaid request, no paid one, nothing signed, the
  // budget file byte for byte as it was.
  void ExpectRefusedAfterFirst(const PayResult& r, std::string_view reason) {
    EXPECT_EQ(r.exit_code, ExitCode::kRejected) << r.message;
    EXPECT_EQ(r.outcome, PayOutcome::kRefused);
    EXPECT_EQ(r.reason, reason) << r.message;
    EXPECT_EQ(r.attempts, 0);
    EXPECT_EQ(r.reservation_state, "");
    EXPECT_EQ(r.evidence.nonce, "") << "nothing was signed";
    EXPECT_EQ(r.message.find('\n'), std::string::npos) << "one line";
    EXPECT_NE(r.message.find("nothing was reserved, signed or sent"), std::string::npos)
        << r.message;
    EXPECT_EQ(seller_.Unpaid(), seller_unpaid_before_ + 1);
    EXPECT_EQ(seller_.Paid().size(), paid_before_) << "no payment header was sent";
    EXPECT_EQ(FileBytes(dir_ + "/budget.db"), bytes_before_) << "the budget file is unchanged";
    BudgetReport after = ReadBudget(dir_ + "/budget.db");
    EXPECT_EQ(after.reservations.size(), report_before_.reservations.size());
    EXPECT_EQ(after.committed, report_before_.committed);
  }
  int seller_unpaid_before_ = 0;
  size_t paid_before_ = 0;
  std::string bytes_before_;
  BudgetReport report_before_;
};

TEST_F(GuardTest, APayeeOutsideTheAllowanceIsRefused) {
  PayOnceFirst();
  PayOptions options = Options();
  options.payees = {kOtherAddress};
  PayResult r = Run(options);
  ExpectRefusedAfterFirst(r, "payee_not_allowed");
  EXPECT_NE(r.message.find("to 0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"), std::string::npos)
      << "names the payee offered: " << r.message;
  EXPECT_NE(r.message.find("payee 0x90f79bf6eb2c4f870365e785982e1f101e93b906 (--payee)"),
            std::string::npos)
      << r.message;
}

TEST_F(PayTest, AnAllowedPayeePaysWhateverItsCase) {
  PayOptions options = Options();
  options.payees = {kOtherAddress, "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"};
  PayResult r = Run(options);
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  auto payload = x402::DecodePaymentHeader(HeaderOf(seller_.Paid().at(0), "PAYMENT-SIGNATURE"),
                                           x402::Version::kV2);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->authorization.to, TestRequirements().pay_to);
}

TEST_F(GuardTest, APriceAboveTheMaximumIsRefused) {
  PayOnceFirst();
  PayOptions options = Options();
  options.max_amount = kPrice - 1;
  PayResult r = Run(options);
  ExpectRefusedAfterFirst(r, "amount_above_max");
  EXPECT_NE(r.message.find("for 1000"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("at most 999 (--max-amount)"), std::string::npos) << r.message;
}

TEST_F(RefusalTest, TheDefaultMaximumRefusesADearOfferEvenWithinTheBudget) {
  x402::Requirements dear = TestRequirements();
  dear.amount = chain::U256(static_cast<uint64_t>(kDefaultMaxAmount + 1));
  seller_.challenge = ChallengeFor(dear);
  PayOptions options = Options();
  options.budget = 10 * kDefaultMaxAmount;  // the budget alone would let it through
  ExpectRefusedBeforePaying(Run(options), "amount_above_max");
}

TEST_F(PayTest, APriceAtTheMaximumPays) {
  PayOptions options = Options();
  options.max_amount = kPrice;
  EXPECT_EQ(Run(options).exit_code, ExitCode::kPaid);
}

TEST_F(RefusalTest, OnlyAnOfferWithinEveryControlIsTaken) {
  // Three offers, each outside one control; the fourth, within all, is the one paid.
  x402::Requirements other_payee = TestRequirements(), dear = TestRequirements(),
                     other_asset = TestRequirements();
  other_payee.pay_to = *chain::ParseAddress(kOtherAddress);
  dear.amount = chain::U256(static_cast<uint64_t>(kPrice * 10));
  other_asset.asset = *chain::ParseAddress(kOtherAddress);
  HttpResponse challenge = JsonResponse(402, R"({"error":"payment required"})");
  challenge.SetHeader(
      "PAYMENT-REQUIRED",
      x402::EncodePaymentRequiredHeader({other_payee, dear, other_asset, TestRequirements()}, ""));
  seller_.challenge = challenge;
  PayOptions options = Options();
  options.payees = {"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"};
  options.assets = {"0x5FbDB2315678afecb367f032d93F642f64180aa3"};
  options.max_amount = kPrice;
  PayResult r = Run(options);
  ASSERT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(r.amount, kPrice);
  auto payload = x402::DecodePaymentHeader(HeaderOf(seller_.Paid().at(0), "PAYMENT-SIGNATURE"),
                                           x402::Version::kV2);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->authorization.to, TestRequirements().pay_to);
  EXPECT_EQ(payload->authorization.value, chain::U256(static_cast<uint64_t>(kPrice)));
}

TEST_F(GuardTest, TheBudgetFileCountsInTheAssetOfItsFirstPayment) {
  PayOnceFirst();
  BudgetReport bound = ReadBudget(dir_ + "/budget.db");
  EXPECT_EQ(bound.asset.state, "bound");
  EXPECT_EQ(bound.asset.chain_id, 84532u);
  EXPECT_EQ(bound.asset.address, "0x5fbdb2315678afecb367f032d93f642f64180aa3");
  EXPECT_EQ(bound.asset.name, "USDC");
  EXPECT_FALSE(bound.asset.decimals.has_value()) << "no --chain-rpc: unknown";

  // The same price in another token, then the same token on another chain: refused, whatever the
  // spend controls allow.
  x402::Requirements other_token = TestRequirements();
  other_token.asset = *chain::ParseAddress(kOtherAddress);
  x402::Requirements other_chain = TestRequirements();
  other_chain.chain_id = 8453;
  other_chain.network = "eip155:8453";
  for (const x402::Requirements& r : {other_token, other_chain}) {
    seller_.challenge = ChallengeFor(r);
    PayResult refused = Run(Options());
    ExpectRefusedAfterFirst(refused, "budget_asset_mismatch");
    EXPECT_NE(refused.message.find("the budget file's asset: "
                                   "0x5fbdb2315678afecb367f032d93f642f64180aa3 on eip155:84532"),
              std::string::npos)
        << refused.message;
    seller_unpaid_before_ = seller_.Unpaid();
  }
  // The wallet path counts in the same unit: refused too.
  PayOptions wallet = Options();
  wallet.buyer_key.clear();
  wallet.api_key = "ak_test";
  ExpectRefusedAfterFirst(Run(wallet), "budget_asset_mismatch");
  // And the budget's own asset still pays.
  seller_.challenge = Challenge();
  EXPECT_EQ(Run(Options()).exit_code, ExitCode::kPaid);
}

TEST_F(RefusalTest, AWalletPaymentIsHeldToTheMaximumButNotToThePayee) {
  PayOptions options = Options();
  options.buyer_key.clear();
  options.api_key = "ak_test";
  options.max_amount = kPrice - 1;
  ExpectRefusedBeforePaying(Run(options), "amount_above_max");
  options.max_amount = kPrice;
  options.payees = {kOtherAddress};  // the wallet pays the gateway's account, not payTo
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  EXPECT_EQ(ReadBudget(options.budget_db).asset.state, "bound") << "wallet payments bind it too";
}

TEST_F(RefusalTest, AResumedStepSignsNothingSoTheControlsDoNotApply) {
  seller_.Script({Dropped()});
  PayOptions options = Options();
  options.max_attempts = 1;
  ASSERT_EQ(Run(options).exit_code, ExitCode::kUnknown);
  options.max_amount = 1;  // would refuse a new payment
  options.payees = {kOtherAddress};
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kPaid) << r.message;
  auto paid = seller_.Paid();
  ASSERT_EQ(paid.size(), 2u);
  EXPECT_EQ(HeaderOf(paid[1], "PAYMENT-SIGNATURE"), HeaderOf(paid[0], "PAYMENT-SIGNATURE"));
}

TEST_F(RefusalTest, AnUnreachableChainRpcStopsBeforeAnythingIsReserved) {
  PayOptions options = Options();
  options.chain_rpc = "http://127.0.0.1:1/";  // nothing listens on port 1
  PayResult r = Run(options);
  EXPECT_EQ(r.exit_code, ExitCode::kError) << r.message;
  EXPECT_NE(r.message.find("nothing was reserved, signed or sent"), std::string::npos);
  EXPECT_TRUE(seller_.Paid().empty());
  EXPECT_TRUE(ReadBudget(options.budget_db).reservations.empty());
  EXPECT_EQ(ReadBudget(options.budget_db).asset.state, "unbound");
}

TEST_F(PayTest, BadPayeeOrMaximumStopsBeforeAnythingIsSent) {
  PayOptions bad_payee = Options();
  bad_payee.payees = {"0x12"};
  PayOptions bad_max = Options();
  bad_max.max_amount = 0;
  PayOptions bad_rpc = Options();
  bad_rpc.chain_rpc = "ftp://node";
  for (const PayOptions& options : {bad_payee, bad_max, bad_rpc}) {
    PayResult r = Run(options);
    EXPECT_EQ(r.exit_code, ExitCode::kError) << r.message;
    EXPECT_EQ(r.outcome, PayOutcome::kError);
  }
  EXPECT_EQ(seller_.Unpaid(), 0);
}

// ChooseOffer alone: the --chain-rpc stage, and the reason named when several stages exclude.
TEST(ChooseOfferTest, EachStageNamesItsReason) {
  Offer offer;
  offer.version = x402::Version::kV2;
  offer.network = "eip155:84532";
  offer.chain_id = 84532;
  offer.amount = 500;
  offer.asset = *chain::ParseAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3");
  offer.pay_to = *chain::ParseAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC");
  offer.max_timeout_seconds = 60;
  struct Challenge challenge{{offer}, ""};  // the type, not the test's Challenge() above
  const chain::Address other = *chain::ParseAddress(kOtherAddress);
  struct Row {
    const char* reason;
    std::function<void(Allowance&)> set;
  };
  const Row table[] = {
      {"", [](Allowance&) {}},
      {"x402_version_not_usable", [](Allowance& a) { a.x402_version = 1; }},
      {"network_not_allowed", [](Allowance& a) { a.chain_ids = {1}; }},
      {"chain_rpc_mismatch", [](Allowance& a) { a.rpc_chain_id = 1337; }},
      {"", [](Allowance& a) { a.rpc_chain_id = 84532; }},
      {"asset_not_allowed", [&](Allowance& a) { a.assets = {other}; }},
      {"budget_asset_mismatch",
       [](Allowance& a) {
         a.budget = {BudgetAssetState::kBound,
                     {1, "0x5fbdb2315678afecb367f032d93f642f64180aa3", "", {}}};
       }},
      {"budget_asset_mismatch", [](Allowance& a) { a.budget.state = BudgetAssetState::kMixed; }},
      {"",
       [](Allowance& a) {
         a.budget = {BudgetAssetState::kBound,
                     {84532, "0x5fbdb2315678afecb367f032d93f642f64180aa3", "", {}}};
       }},
      {"payee_not_allowed", [&](Allowance& a) { a.payees = {other}; }},
      {"amount_above_max", [](Allowance& a) { a.max_amount = 499; }},
      {"", [](Allowance& a) { a.max_amount = 500; }},
      // Several excluding stages: the first one in the order above is named.
      {"network_not_allowed",
       [&](Allowance& a) {
         a.chain_ids = {1};
         a.payees = {other};
         a.max_amount = 1;
       }},
      {"payee_not_allowed",
       [&](Allowance& a) {
         a.payees = {other};
         a.max_amount = 1;
       }},
  };
  for (const Row& row : table) {
    Allowance allowance;
    row.set(allowance);
    auto chosen = ChooseOffer(challenge, allowance, /*signing=*/true);
    EXPECT_EQ(chosen.ok() ? "" : std::string(chosen.status().code()), row.reason);
  }
  // A wallet payment is not held to the payee (nor to the x402 version).
  Allowance payee_only;
  payee_only.payees = {other};
  payee_only.x402_version = 1;
  EXPECT_TRUE(ChooseOffer(challenge, payee_only, /*signing=*/false).ok());
}

}  // namespace
}  // namespace agentpay::client
