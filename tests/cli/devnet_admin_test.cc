// The devnet controls (/admin/v1/devnet): only the admin token may use them, a bad or unknown
// field is refused whole with 400 invalid_request naming it (nothing runs), and each field does
// what it says on a devnet driven by a hand-moved clock.
#include "cli/devnet_admin.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace agentpay {
namespace {

using nlohmann::json;

constexpr char kToken[] = "adm_test";

class ManualClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms_; }

 private:
  int64_t now_ms_ = 1'700'000'000'000;
};

class DevnetAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chain::DevnetConfig config;
    config.chain_id = 1337;
    config.token = *chain::ParseAddress("0x036cbd53842c5426634e7929541ec2318f3dcf7e");
    config.token_name = "USDC";
    config.token_version = "2";
    config.mine_delay_ms = 500;
    auto opened = chain::Devnet::Open(config, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
  }

  HttpResponse Send(const std::string& method, const std::string& body,
                    const std::string& token = kToken) {
    HttpRequest request;
    request.method = method;
    request.target = "/admin/v1/devnet";
    if (!token.empty()) request.headers.push_back({"Authorization", "Bearer " + token});
    request.body = body;
    std::optional<HttpResponse> response = HandleDevnetAdmin(request, *devnet_, kToken);
    EXPECT_TRUE(response.has_value());
    return response.value_or(HttpResponse{});
  }

  json State() {
    HttpResponse response = Send("GET", "");
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body);
  }

  void ExpectRefused(const std::string& body, std::string_view part) {
    const json before = State();
    HttpResponse response = Send("POST", body);
    EXPECT_EQ(response.status, 400) << body;
    const json problem = json::parse(response.body, nullptr, false);
    EXPECT_EQ(problem.value("code", ""), "invalid_request") << body;
    EXPECT_NE(problem.value("detail", "").find(part), std::string::npos) << response.body;
    EXPECT_EQ(State(), before) << body << ": a refused body must change nothing";
  }

  ManualClock clock_;
  std::unique_ptr<chain::Devnet> devnet_;
};

TEST_F(DevnetAdminTest, OnlyTheAdminTokenMayCallIt) {
  EXPECT_EQ(Send("GET", "", "").status, 401);
  EXPECT_EQ(Send("GET", "", "adm_wrong").status, 401);
  EXPECT_EQ(Send("POST", R"({"mine":true})", "adm_wrong").status, 401);
  EXPECT_EQ(*devnet_->BlockNumber(), 0u);
  HttpRequest request;
  request.method = "GET";
  request.target = "/admin/v1/devnet";
  request.headers.push_back({"Authorization", "Bearer anything"});
  EXPECT_EQ(HandleDevnetAdmin(request, *devnet_, "")->status, 401) << "no token configured";
  request.target = "/admin/v1/devnets";
  EXPECT_FALSE(HandleDevnetAdmin(request, *devnet_, kToken).has_value());
  EXPECT_EQ(Send("DELETE", "").status, 405);
}

TEST_F(DevnetAdminTest, ShowsTheChainAndItsControls) {
  const json state = State();
  EXPECT_EQ(state["block_number"], 0);
  EXPECT_EQ(state["automine"], true);
  EXPECT_EQ(state["mine_delay_ms"], 500);
  EXPECT_EQ(state["pending_transactions"], 0);
  EXPECT_TRUE(state["latest_block_timestamp"].is_number_integer());
  EXPECT_FALSE(state.contains("done"));
}

TEST_F(DevnetAdminTest, EachFieldDoesWhatItSays) {
  HttpResponse response = Send("POST", R"({"automine":false,"mine_delay_ms":0,"mine":true})");
  ASSERT_EQ(response.status, 200) << response.body;
  json answer = json::parse(response.body);
  EXPECT_EQ(answer["done"], json({"automine off", "mine delay 0 ms", "mined block 1"}));
  EXPECT_EQ(answer["automine"], false);
  EXPECT_EQ(answer["mine_delay_ms"], 0);
  EXPECT_EQ(answer["block_number"], 1);
  answer = json::parse(Send("POST", R"({"drop":"0x)" + std::string(64, 'a') + "\"}").body);
  EXPECT_EQ(answer["done"], json({"not pending: nothing dropped"}));
  answer = json::parse(Send("POST", R"({"mine":false,"automine":true})").body);
  EXPECT_EQ(answer["done"], json({"automine on"}));
  EXPECT_EQ(answer["block_number"], 1);
  EXPECT_EQ(json::parse(Send("POST", "{}").body)["done"], json::array());
}

TEST_F(DevnetAdminTest, BadOrUnknownFieldsAreRefusedWholeAndNamed) {
  ExpectRefused(R"({"mine":true,"automine":false,"mine_dealy_ms":5})",
                "unknown field \"mine_dealy_ms\"");
  ExpectRefused(R"({"mine":true,"automine":"off"})", "automine");
  ExpectRefused(R"({"automine":false,"mine_delay_ms":-1})", "mine_delay_ms");
  ExpectRefused(R"({"automine":false,"mine_delay_ms":3600001})", "mine_delay_ms");
  ExpectRefused(R"({"automine":false,"mine_delay_ms":1.5})", "mine_delay_ms");
  ExpectRefused(R"({"automine":false,"drop":"0x12"})", "drop");
  ExpectRefused(R"({"automine":false,"drop":7})", "drop");
  ExpectRefused(R"({"automine":false,"mine":"yes"})", "mine");
  // Not JSON, or not an object: the same code as the admin API uses for a bad body.
  ExpectRefused("{", "JSON object");
  ExpectRefused("", "JSON object");
  ExpectRefused("[true]", "JSON object");
  ExpectRefused(std::string(64, '[') + std::string(64, ']'), "nests too deep");
}

}  // namespace
}  // namespace agentpay
