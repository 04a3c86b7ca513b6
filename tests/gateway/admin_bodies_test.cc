// The admin API's body parsers (the code admin_api.cc and fuzz/admin_body_fuzzer.cc run).
#include "gateway/admin_bodies.h"

#include <gtest/gtest.h>

#include <string>

namespace agentpay {
namespace {

TEST(AdminBodies, ValidBodies) {
  auto account = ParseNewAccountBody(R"({"name":"acme","extra":1})");
  ASSERT_TRUE(account.ok()) << account.status().ToString();
  EXPECT_EQ(account->name, "acme");
  auto deposit = ParseDepositBody(R"({"amount":"9223372036854775807","reference":"wire-1"})");
  ASSERT_TRUE(deposit.ok()) << deposit.status().ToString();
  EXPECT_EQ(deposit->amount, INT64_MAX);
  EXPECT_EQ(deposit->reference, "wire-1");
  auto resolve = ParseResolveBody(R"({"outcome":"written_off","note":"n"})");
  ASSERT_TRUE(resolve.ok()) << resolve.status().ToString();
  EXPECT_EQ(resolve->outcome, ResolutionOutcome::kWrittenOff);
  EXPECT_EQ(resolve->note, "n");
}

TEST(AdminBodies, RefusalsNameTheField) {
  const std::pair<std::string, std::string> accounts[] = {
      {"[]", "JSON object"},
      {"{", "JSON object"},
      {R"({"name":""})", "\"name\""},
      {R"({"name":7})", "\"name\""},
      {"{\"name\":\"" + std::string(201, 'n') + "\"}", "\"name\""}};
  for (const auto& [body, says] : accounts) {
    auto parsed = ParseNewAccountBody(body);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().error(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(says), std::string::npos) << parsed.status().message();
  }
  for (const char* body : {R"({"amount":100,"reference":"r"})", R"({"amount":"0","reference":"r"})",
                           R"({"amount":"-1","reference":"r"})",
                           R"({"amount":"9223372036854775808","reference":"r"})"}) {
    auto parsed = ParseDepositBody(body);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_NE(parsed.status().message().find("\"amount\""), std::string::npos) << body;
  }
  EXPECT_FALSE(ParseDepositBody(R"({"amount":"1","reference":""})").ok());
  EXPECT_FALSE(ParseResolveBody(R"({"outcome":"paid","note":"n"})").ok());
  EXPECT_FALSE(ParseResolveBody(R"({"outcome":"delivered"})").ok());
  EXPECT_FALSE(
      ParseResolveBody("{\"outcome\":\"delivered\",\"note\":\"" + std::string(1001, 'x') + "\"}")
          .ok());
}

// Admin bodies are flat: a document nested past kMaxAdminJsonDepth is refused before a tree is
// built (a megabyte of '[' would otherwise be parsed into half a million nested arrays).
TEST(AdminBodies, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep =
      "{\"name\":\"a\",\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto parsed = ParseNewAccountBody(deep);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().error(), ErrorCode::kInvalidArgument);
  const std::string shallow = "{\"name\":\"a\",\"x\":" + std::string(kMaxAdminJsonDepth - 1, '[') +
                              std::string(kMaxAdminJsonDepth - 1, ']') + "}";
  EXPECT_TRUE(ParseNewAccountBody(shallow).ok());
}

}  // namespace
}  // namespace agentpay
