// How the agent client reads one answer (src/client/attempt.h): what is retried, what is final, and
// that hostile bodies and headers are read without throwing.
#include "client/attempt.h"

#include <gtest/gtest.h>

namespace agentpay::client {
namespace {

ClientResponse Answer(int status, std::string body = "", std::vector<HttpHeader> headers = {}) {
  ClientResponse response;
  response.status = status;
  response.body = std::move(body);
  response.headers = std::move(headers);
  return response;
}

TEST(AttemptTest, ClassifiesEveryKindOfAnswer) {
  ClientResponse lost;
  lost.error = ClientError::kClosed;
  EXPECT_EQ(ClassifyAttempt(lost), AttemptVerdict::kRetry);
  lost.error = ClientError::kTimeout;
  EXPECT_EQ(ClassifyAttempt(lost), AttemptVerdict::kRetry);
  EXPECT_EQ(ClassifyAttempt(Answer(200)), AttemptVerdict::kServed);
  EXPECT_EQ(ClassifyAttempt(Answer(201)), AttemptVerdict::kServed);
  EXPECT_EQ(ClassifyAttempt(Answer(202, "", {{"Location", "/v1/operations/op_1"}})),
            AttemptVerdict::kPoll);
  EXPECT_EQ(ClassifyAttempt(Answer(202)), AttemptVerdict::kRetry) << "nothing to follow";
  EXPECT_EQ(ClassifyAttempt(Answer(402)), AttemptVerdict::kPaymentRefused);
  for (int status : {408, 425, 429, 500, 502, 503, 504}) {
    EXPECT_EQ(ClassifyAttempt(Answer(status)), AttemptVerdict::kRetry) << status;
  }
  for (int status : {301, 400, 401, 403, 404, 413, 422}) {
    EXPECT_EQ(ClassifyAttempt(Answer(status)), AttemptVerdict::kRejected) << status;
  }
  EXPECT_EQ(ClassifyAttempt(Answer(409, R"({"code":"settlement_failed"})")),
            AttemptVerdict::kUnknownFinal);
  EXPECT_EQ(ClassifyAttempt(Answer(409, R"({"code":"idempotency_key_in_use"})")),
            AttemptVerdict::kRetry);
}

TEST(AttemptTest, RetryAfterInSecondsOnly) {
  EXPECT_EQ(RetryAfterMs(Answer(503, "", {{"Retry-After", "2"}})), 2000);
  EXPECT_EQ(RetryAfterMs(Answer(503, "", {{"Retry-After", "999999"}})), 3600 * 1000);
  EXPECT_FALSE(RetryAfterMs(Answer(503, "", {{"Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT"}})));
  EXPECT_FALSE(RetryAfterMs(Answer(503, "", {{"Retry-After", "-1"}})));
  EXPECT_FALSE(RetryAfterMs(Answer(503)));
}

TEST(AttemptTest, OperationViewsAreReadDefensively) {
  auto op = ReadOperation(Answer(
      200, R"({"settlement":"settled","fulfillment":"succeeded",)"
           R"("tx_hash":"0xAB00000000000000000000000000000000000000000000000000000000000001"})"));
  ASSERT_TRUE(op.has_value());
  EXPECT_EQ(op->settlement, Settlement::kSettled);
  EXPECT_EQ(op->fulfillment, Fulfillment::kSucceeded);
  EXPECT_EQ(op->tx_hash, "0xab00000000000000000000000000000000000000000000000000000000000001");
  auto odd = ReadOperation(Answer(200, R"({"settlement":7,"tx_hash":"not a hash"})"));
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->settlement, std::nullopt);
  EXPECT_EQ(odd->fulfillment, std::nullopt);
  // A state this client does not know: read as none, not as one it does.
  auto newer = ReadOperation(Answer(200, R"({"settlement":"escrowed","fulfillment":"queued"})"));
  ASSERT_TRUE(newer.has_value());
  EXPECT_EQ(newer->settlement, std::nullopt);
  EXPECT_EQ(newer->fulfillment, std::nullopt);
  EXPECT_EQ(odd->tx_hash, "");
  EXPECT_FALSE(ReadOperation(Answer(200, "[1,2]")).has_value());
  EXPECT_FALSE(ReadOperation(Answer(200, std::string(100, '[') + std::string(100, ']'))));
  EXPECT_FALSE(ReadOperation(Answer(404, R"({"settlement":"settled"})")).has_value());
  EXPECT_EQ(ProblemCode(Answer(400, R"({"code":["x"]})")), "");
}

TEST(AttemptTest, ReasonFamilies) {
  EXPECT_TRUE(IsNonceUsedReason("invalid_exact_evm_nonce_already_used"));
  EXPECT_FALSE(IsNonceUsedReason("invalid_exact_evm_signature"));
  EXPECT_TRUE(IsVerificationReason("invalid_exact_evm_signature"));
  EXPECT_TRUE(IsVerificationReason("insufficient_funds"));
  EXPECT_FALSE(IsVerificationReason("settlement_pending"));
  EXPECT_FALSE(IsVerificationReason("unexpected_settle_error"));
}

}  // namespace
}  // namespace agentpay::client
