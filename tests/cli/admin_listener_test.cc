// The admin listener's handler as `serve` builds it (cli/admin_listener.h), on a real gateway
// (SQLite store) and a real built-in devnet: every write on it, the devnet controls included,
// passes the browser checks, and a refused one changes nothing anywhere.
#include "cli/admin_listener.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>

#include "../gateway/gateway_test_support.h"
#include "http/timers.h"
#include "store/store.h"

namespace agentpay {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kToken[] = "adm_listener_test";
constexpr uint16_t kPort = 8404;  // the port the guard is told the listener is bound to

class AdminListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("AGENTPAY_WEB_DIR", AGENTPAY_SOURCE_DIR "/web", 1);  // the console's pages
    dir_ = fs::temp_directory_path() /
           ("agentpay-admin-listener-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = OpenStore("sqlite:" + (dir_ / "gw.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    chain::DevnetConfig devnet;
    devnet.chain_id = 1337;
    devnet.token = *chain::ParseAddress("0x036cbd53842c5426634e7929541ec2318f3dcf7e");
    devnet.token_name = "USDC";
    devnet.token_version = "2";
    devnet.mine_delay_ms = 500;
    auto opened = chain::Devnet::Open(devnet, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    devnet_ = std::move(*opened);
    GatewayConfig config;
    RouteConfig route;
    route.upstream_url = "http://127.0.0.1:9";
    route.upstream = *ParseHttpUrl(route.upstream_url);
    route.price = 100;
    config.routes = {route};
    config.admin_token = kToken;
    gateway_ = std::make_unique<Gateway>(config, *store_, clock_, random_, timers_, upstream_);
    auto guard = std::make_shared<BrowserGuard>("127.0.0.1", false, std::vector<WebOrigin>{});
    guard->SetPort(kPort);
    handler_ = AdminListenerHandler(*gateway_, devnet_.get(), kToken, guard);
  }

  void TearDown() override {
    gateway_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // One request through the listener's handler, with the admin token; waits for its answer.
  HttpResponse Send(const std::string& method, const std::string& target, const std::string& body,
                    std::vector<HttpHeader> headers) {
    auto request = std::make_shared<HttpRequest>();
    request->method = method;
    request->target = target;
    request->body = body;
    request->headers = std::move(headers);
    request->headers.push_back({"Authorization", std::string("Bearer ") + kToken});
    std::promise<HttpResponse> answer;
    auto future = answer.get_future();
    handler_(request, [&answer](HttpResponse response) { answer.set_value(std::move(response)); });
    return future.get();
  }

  json Devnet() {
    HttpResponse state = Send("GET", "/admin/v1/devnet", "", {{"Host", "127.0.0.1:8404"}});
    EXPECT_EQ(state.status, 200) << state.body;
    return json::parse(state.body, nullptr, false);
  }

  json Accounts() {
    HttpResponse listed = Send("GET", "/admin/v1/accounts", "", {{"Host", "127.0.0.1:8404"}});
    EXPECT_EQ(listed.status, 200) << listed.body;
    return json::parse(listed.body, nullptr, false)["accounts"];
  }

  static std::string CodeOf(const HttpResponse& response) {
    return json::parse(response.body, nullptr, false).value("code", "");
  }

  fs::path dir_;
  testing_support::ManualClock clock_;
  testing_support::CountingRandom random_;
  AsioTimers timers_;
  testing_support::ScriptedUpstream upstream_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<chain::Devnet> devnet_;
  std::unique_ptr<Gateway> gateway_;
  AsyncHandler handler_;
};

TEST_F(AdminListenerTest, DevnetControlsRefuseACrossOriginWriteAndChangeNothing) {
  const json before = Devnet();
  ASSERT_EQ(before["automine"], true);
  const std::string command = R"({"automine":false,"mine_delay_ms":0,"mine":true})";
  const std::vector<std::vector<HttpHeader>> foreign = {
      {{"Host", "127.0.0.1:8404"}, {"Origin", "https://evil.example"}},
      {{"Host", "127.0.0.1:8404"}, {"Origin", "http://127.0.0.1:8402"}},
      {{"Host", "127.0.0.1:8404"}, {"Sec-Fetch-Site", "cross-site"}},
      {{"Host", "127.0.0.1:8404"}, {"Origin", "null"}}};
  for (const auto& headers : foreign) {
    HttpResponse refused = Send("POST", "/admin/v1/devnet", command, headers);
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_EQ(CodeOf(refused), "cross_origin_refused") << refused.body;
  }
  // DNS rebinding: the page's Host and Origin agree, and name the listener by the attacker's name.
  HttpResponse rebound =
      Send("POST", "/admin/v1/devnet", command,
           {{"Host", "evil.example:8404"}, {"Origin", "http://evil.example:8404"}});
  EXPECT_EQ(rebound.status, 421) << rebound.body;
  EXPECT_EQ(CodeOf(rebound), "host_not_allowed");
  EXPECT_EQ(Devnet(), before) << "a refused write changed the devnet";
  EXPECT_EQ(*devnet_->BlockNumber(), before["block_number"].get<uint64_t>());
  // The console's own origin (and the CLI, which sends none) may drive it.
  HttpResponse done = Send("POST", "/admin/v1/devnet", command,
                           {{"Host", "localhost:8404"}, {"Origin", "http://localhost:8404"}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(Devnet()["automine"], false);
  EXPECT_EQ(Send("POST", "/admin/v1/devnet", R"({"automine":true})", {}).status, 200);
}

TEST_F(AdminListenerTest, CrossOriginAdminWritesChangeNothing) {
  const json before = Accounts();
  const std::string body = R"({"name":"forged"})";
  EXPECT_EQ(CodeOf(Send("POST", "/admin/v1/accounts", body,
                        {{"Host", "127.0.0.1:8404"}, {"Origin", "https://evil.example"}})),
            "cross_origin_refused");
  EXPECT_EQ(CodeOf(Send("POST", "/admin/v1/accounts", body,
                        {{"Host", "evil.example:8404"}, {"Origin", "http://evil.example:8404"}})),
            "host_not_allowed");
  EXPECT_EQ(Accounts(), before);
  HttpResponse created = Send("POST", "/admin/v1/accounts", body,
                              {{"Host", "127.0.0.1:8404"}, {"Origin", "http://127.0.0.1:8404"}});
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Accounts().size(), before.size() + 1);
}

TEST_F(AdminListenerTest, ARebindingPageReadsNothingOnAnyPath) {
  for (const char* target : {"/metrics", "/healthz", "/console/", "/inspector/",
                             "/v1/sim?fault=none", "/admin/v1/overview", "/admin/v1/devnet"}) {
    HttpResponse refused = Send("GET", target, "", {{"Host", "evil.example:8404"}});
    EXPECT_EQ(refused.status, 421) << target << ": " << refused.body;
    EXPECT_EQ(CodeOf(refused), "host_not_allowed") << target;
    HttpResponse served = Send("GET", target, "", {{"Host", "127.0.0.1:8404"}});
    EXPECT_EQ(served.status, 200) << target << ": " << served.body;
  }
}

}  // namespace
}  // namespace agentpay
