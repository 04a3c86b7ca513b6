// The C ABI of the client (include/agentpay/client_c.h), through the shared library the Python
// package loads: JSON in and out, bad input answered (never a crash), only the agentpay_* symbols.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agentpay/client_c.h"

namespace {

using Json = nlohmann::json;

Json Take(char* text) {
  EXPECT_NE(text, nullptr);
  if (text == nullptr) return Json();
  std::unique_ptr<char, void (*)(char*)> owned(text, agentpay_free);
  return Json::parse(owned.get());
}

Json Pay(const char* options) { return Take(agentpay_pay(options, nullptr, nullptr)); }

TEST(ClientCApi, OptionsThatAreNotRightAreAnErrorNamingTheField) {
  for (const auto& [options, field] : std::vector<std::pair<const char*, std::string>>{
           {nullptr, "not JSON"},
           {"{", "not JSON"},
           {"[]", "expected a JSON object"},
           {R"({"url": 1})", "\"url\""},
           {R"({"url": "http://x", "surprise": true})", "\"surprise\""},
           {R"({"max_attempts": 0})", "\"max_attempts\""},
           {R"({"step": -1})", "\"step\""},
           {R"({"step": 18446744073709551615})", "\"step\""},
           {R"({"headers": [["only-a-name"]]})", "\"headers\""},
           {R"({"body": "a", "body_base64": "YQ=="})", "\"body_base64\""},
           {R"({"body_base64": "not base64!"})", "\"body_base64\""},
           {R"({"x402_version": 3})", "\"x402_version\""}}) {
    Json result = Pay(options);
    EXPECT_EQ(result["exit_code"], 1) << (options ? options : "NULL");
    EXPECT_EQ(result["outcome"], "error");
    EXPECT_NE(result["message"].get<std::string>().find(field), std::string::npos)
        << result["message"] << " for " << (options ? options : "NULL");
    EXPECT_EQ(result["attempts"], 0);
  }
}

TEST(ClientCApi, APayThatCannotRunSaysWhyAndCarriesTheBinaryFields) {
  const std::string dir = (std::filesystem::temp_directory_path() / "agentpay-c-api").string();
  std::filesystem::create_directories(dir);
  const Json options = {{"url", "http://127.0.0.1:9/nothing-listens"},
                        {"api_key", "k"},
                        {"budget_db", dir + "/budget.db"},
                        {"budget", 100},
                        {"timeout_ms", 2000},
                        {"headers", Json::array({Json::array({"X-A", "b"})})},
                        {"body_base64", "AAEC"}};
  std::vector<std::string> progress;
  char* text = agentpay_pay(
      options.dump().c_str(),
      [](const char* line, uint64_t size, void* context) {
        static_cast<std::vector<std::string>*>(context)->emplace_back(line, size);
      },
      &progress);
  Json result = Take(text);
  EXPECT_EQ(result["exit_code"], 1);
  EXPECT_EQ(result["outcome"], "error");
  EXPECT_EQ(result["body_base64"], "");
  EXPECT_TRUE(result["response_headers"].is_array());
  EXPECT_EQ(result["reservation_state"], "");  // nothing reserved
  std::filesystem::remove_all(dir);
}

TEST(ClientCApi, TheBudgetAndReconcileAnswerErrorsAsJson) {
  Json missing = Take(agentpay_budget("/nonexistent/agentpay-budget.db"));
  EXPECT_TRUE(missing.contains("error"));
  Json none = Take(agentpay_budget(nullptr));
  EXPECT_TRUE(none.contains("error"));
  Json bad = Take(agentpay_reconcile(R"({"budget_db": 5})", nullptr, nullptr));
  EXPECT_NE(bad["error"].get<std::string>().find("\"budget_db\""), std::string::npos) << bad;
  Json unknown_field = Take(agentpay_reconcile(R"({"chain": "x"})", nullptr, nullptr));
  EXPECT_NE(unknown_field["error"].get<std::string>().find("\"chain\""), std::string::npos);
}

TEST(ClientCApi, DeriveKeyIsTheLibrarysAndTheVersionIsSet) {
  std::unique_ptr<char, void (*)(char*)> key(agentpay_derive_key("secret", "q3-report", 2),
                                             agentpay_free);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(std::string(key.get()).rfind("task:", 0), 0u);
  EXPECT_EQ(std::string(key.get()).find(":step:2"), 37u);
  EXPECT_EQ(agentpay_derive_key(nullptr, "t", 1), nullptr);
  EXPECT_FALSE(std::string(agentpay_version()).empty());
  agentpay_free(nullptr);  // allowed
}

}  // namespace
