// The MCP server's messages (client/mcp.h) with the library's calls replaced by recorders: the
// JSON-RPC rules, the version negotiation, the tools, and what a tool call may and may not change
// of the server's payment settings.
#include "client/mcp.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentpay::client {
namespace {

using Json = nlohmann::json;

class McpTest : public ::testing::Test {
 protected:
  McpTest() {
    config_.payment.buyer_key = "0x" + std::string(64, '1');
    config_.payment.budget_db = "server-budget.db";
    config_.payment.budget = 50'000;
    config_.payment.max_amount = 20'000;
    config_.payment.networks = {"eip155:1337"};
    config_.reconcile.budget_db = "server-budget.db";
    config_.version = "9.9.9";
    effects_.pay = [this](const PayOptions& o) {
      paid_.push_back(o);
      PayResult r;
      r.exit_code = ExitCode::kPaid;
      r.outcome = PayOutcome::kPaid;
      r.message = "paid";
      r.amount = 10'000;
      r.http_status = 200;
      r.body = body_;
      return r;
    };
    effects_.budget = [this](const std::string& db) {
      budget_dbs_.push_back(db);
      BudgetReport report;
      report.total = 50'000;
      for (int i = 0; i < 60; ++i) {
        Reservation r;
        r.key = "k" + std::to_string(i);
        report.reservations.push_back(r);
      }
      return report;
    };
    effects_.reconcile = [](const ReconcileOptions&) {
      ReconcileReport report;
      report.error = "--chain-rpc is needed for x402 reservations";
      return report;
    };
  }

  std::optional<Json> Send(const Json& message) {
    return HandleMcpMessage(message, config_, effects_);
  }
  Json Call(const std::string& tool, const Json& arguments, int id = 7) {
    auto answer = Send({{"jsonrpc", "2.0"},
                        {"id", id},
                        {"method", "tools/call"},
                        {"params", {{"name", tool}, {"arguments", arguments}}}});
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(Json());
  }

  McpServerConfig config_;
  McpEffects effects_;
  std::vector<PayOptions> paid_;
  std::vector<std::string> budget_dbs_;
  std::string body_ = "{\"ok\":true}";
};

TEST_F(McpTest, JsonRpcRulesAnswerEveryRequestAndNoNotification) {
  EXPECT_EQ(McpParseError()["error"]["code"], -32700);
  EXPECT_EQ(McpParseError()["id"], nullptr);
  EXPECT_EQ((*Send(Json::array()))["error"]["code"], -32600);
  EXPECT_EQ((*Send({{"jsonrpc", "1.0"}, {"id", 1}, {"method", "ping"}}))["error"]["code"], -32600);
  EXPECT_EQ((*Send({{"jsonrpc", "2.0"}, {"id", true}, {"method", "ping"}}))["error"]["code"],
            -32600);
  EXPECT_EQ((*Send({{"jsonrpc", "2.0"}, {"id", 1}}))["error"]["code"], -32600);
  EXPECT_EQ(
      (*Send({{"jsonrpc", "2.0"}, {"id", "a"}, {"method", "resources/list"}}))["error"]["code"],
      -32601);
  // Notifications and responses get nothing back.
  EXPECT_FALSE(Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).has_value());
  EXPECT_FALSE(Send({{"jsonrpc", "2.0"}, {"id", 3}, {"result", Json::object()}}).has_value());
  Json pong = *Send({{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}});
  EXPECT_EQ(pong["id"], "p");
  EXPECT_EQ(pong["result"], Json::object());
  EXPECT_TRUE(paid_.empty());
}

TEST_F(McpTest, InitializeAnswersTheClientsVersionWhenKnownElseTheNewest) {
  auto init = [&](Json version) {
    return (*Send({{"jsonrpc", "2.0"},
                   {"id", 1},
                   {"method", "initialize"},
                   {"params", {{"protocolVersion", version}}}}))["result"];
  };
  EXPECT_EQ(init("2025-03-26")["protocolVersion"], "2025-03-26");
  EXPECT_EQ(init("2024-11-05")["protocolVersion"], "2024-11-05");
  EXPECT_EQ(init("2031-01-01")["protocolVersion"], "2025-06-18");
  EXPECT_EQ(init(5)["protocolVersion"], "2025-06-18");
  Json result = init("2025-06-18");
  EXPECT_EQ(result["serverInfo"]["name"], "agentpay");
  EXPECT_EQ(result["serverInfo"]["version"], "9.9.9");
  EXPECT_TRUE(result["capabilities"].contains("tools"));
  EXPECT_FALSE(result["instructions"].get<std::string>().empty());
}

TEST_F(McpTest, TheThreeToolsAreListedWithClosedSchemas) {
  Json tools =
      (*Send({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}}))["result"]["tools"];
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0]["name"], "pay_request");
  EXPECT_EQ(tools[1]["name"], "budget");
  EXPECT_EQ(tools[2]["name"], "reconcile");
  for (const Json& tool : tools) {
    EXPECT_GT(tool["description"].get<std::string>().size(), 80u) << tool["name"];
    EXPECT_EQ(tool["inputSchema"]["type"], "object");
    EXPECT_EQ(tool["inputSchema"]["additionalProperties"], false);
  }
  EXPECT_EQ(tools[0]["inputSchema"]["required"], Json::array({"url"}));
}

TEST_F(McpTest, APaidCallUsesTheServersSettingsAndTheCallsRequest) {
  Json result = Call("pay_request", {{"url", "http://127.0.0.1:8402/summarize"},
                                     {"body", "{\"doc\":1}"},
                                     {"headers", {{"Content-Type", "application/json"}}},
                                     {"task", "q3"},
                                     {"step", 4},
                                     {"max_amount", 15'000}})["result"];
  ASSERT_EQ(paid_.size(), 1u);
  const PayOptions& o = paid_[0];
  EXPECT_EQ(o.url, "http://127.0.0.1:8402/summarize");
  EXPECT_EQ(o.method, "POST");  // a body without a method
  EXPECT_EQ(o.body, "{\"doc\":1}");
  EXPECT_EQ(o.task, "q3");
  EXPECT_EQ(o.step, 4u);
  EXPECT_EQ(o.max_amount, 15'000);
  EXPECT_EQ(o.buyer_key, config_.payment.buyer_key);
  EXPECT_EQ(o.budget_db, "server-budget.db");
  EXPECT_EQ(o.networks, config_.payment.networks);
  EXPECT_EQ(result["isError"], false);
  EXPECT_EQ(result["structuredContent"]["outcome"], "paid");
  EXPECT_EQ(result["structuredContent"]["amount"], "10000");
  EXPECT_EQ(result["structuredContent"]["body"], "{\"ok\":true}");
  EXPECT_EQ(result["content"][0]["type"], "text");
}

TEST_F(McpTest, ACallCanLowerTheCapNeverRaiseItNorChangeWhoPays) {
  Call("pay_request", {{"url", "http://x/a"}, {"max_amount", 999'999'999}});
  ASSERT_EQ(paid_.size(), 1u);
  EXPECT_EQ(paid_[0].max_amount, 20'000);
  for (const Json& refused :
       {Json{{"url", "http://x/a"}, {"budget_db", "other.db"}},
        Json{{"url", "http://x/a"}, {"buyer_key", "0x" + std::string(64, '2')}},
        Json{{"url", "http://x/a"}, {"headers", {{"Authorization", "Bearer stolen"}}}},
        Json{{"url", "http://x/a"}, {"headers", {{"payment-signature", "x"}}}},
        Json{{"url", "http://x/a"}, {"headers", {{"Idempotency-Key", "k"}}}},
        Json{{"url", "http://x/a"}, {"task", "t"}}, Json{{"url", "http://x/a"}, {"step", 1}},
        Json{{"url", "http://x/a"}, {"task", "t"}, {"step", -1}},
        Json{{"url", "http://x/a"}, {"max_amount", 0}},
        Json{{"url", "http://x/a"}, {"method", "CONNECT"}}, Json{{"url", ""}},
        Json{{"method", "GET"}}, Json::array()}) {
    Json result = Call("pay_request", refused)["result"];
    EXPECT_EQ(result["isError"], true) << refused;
    EXPECT_EQ(result["structuredContent"]["outcome"], "error") << refused;
  }
  EXPECT_EQ(paid_.size(), 1u) << "a refused call pays nothing";
}

TEST_F(McpTest, ALongBodyIsCutAndSaysSo) {
  body_ = std::string(kMcpMaxBodyBytes + 10, 'b');
  Json content = Call("pay_request", {{"url", "http://x/a"}})["result"]["structuredContent"];
  EXPECT_EQ(content["body"].get<std::string>().size(), kMcpMaxBodyBytes);
  EXPECT_EQ(content["body_truncated"], true);
}

TEST_F(McpTest, BudgetShowsTheNewestReservationsAndReconcileItsError) {
  Json budget = Call("budget", Json::object())["result"];
  EXPECT_EQ(budget_dbs_, std::vector<std::string>{"server-budget.db"});
  EXPECT_EQ(budget["isError"], false);
  EXPECT_EQ(budget["structuredContent"]["reservations_total"], 60);
  EXPECT_EQ(budget["structuredContent"]["reservations_shown"], 50);
  EXPECT_EQ(budget["structuredContent"]["reservations"][0]["key"], "k10");
  Json reconcile = Call("reconcile", Json::object())["result"];
  EXPECT_EQ(reconcile["isError"], true);
  EXPECT_NE(reconcile["content"][0]["text"].get<std::string>().find("--chain-rpc"),
            std::string::npos);
  EXPECT_EQ(Call("budget", {{"budget_db", "x"}})["error"]["code"], -32602);
  EXPECT_EQ(Call("transfer_all", Json::object())["error"]["code"], -32602);
}

}  // namespace
}  // namespace agentpay::client
