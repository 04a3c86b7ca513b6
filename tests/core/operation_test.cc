// The wallet operation's transitions: capture on 2xx, release on 4xx, keep on 5xx/timeout/failure,
// resume of a kept operation, and crash recovery.
#include "core/operation.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

Operation Fresh(int64_t now = 1000) {
  return NewWalletOperation({"op_1", "account:a", "k", "fp", "/", 250, 60000, 15000}, now);
}

UpstreamOutcome Answered(int status) {
  UpstreamOutcome outcome;
  outcome.kind = UpstreamKind::kResponded;
  outcome.status = status;
  outcome.content_type = "application/json";
  outcome.body = "{\"status\":" + std::to_string(status) + "}";
  return outcome;
}

TEST(Operation, NewWalletOperationHoldsAndStartsTheFirstAttempt) {
  Operation op = Fresh();
  EXPECT_EQ(op.intent, Intent::kAccepted);
  EXPECT_EQ(op.settlement, Settlement::kHeld);
  EXPECT_EQ(op.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(op.hold_expires_ms, 61000);
  EXPECT_EQ(op.lease_expires_ms, 16000);
  EXPECT_EQ(op.attempts, 1);
  EXPECT_FALSE(IsFinal(op));
}

TEST(Operation, ClassifiesUpstreamAnswers) {
  EXPECT_EQ(ClassifyUpstream(Answered(200)), Verdict::kCapture);
  EXPECT_EQ(ClassifyUpstream(Answered(204)), Verdict::kCapture);
  EXPECT_EQ(ClassifyUpstream(Answered(302)), Verdict::kCapture);
  EXPECT_EQ(ClassifyUpstream(Answered(400)), Verdict::kRelease);
  EXPECT_EQ(ClassifyUpstream(Answered(499)), Verdict::kRelease);
  EXPECT_EQ(ClassifyUpstream(Answered(500)), Verdict::kKeep);
  EXPECT_EQ(ClassifyUpstream(Answered(503)), Verdict::kKeep);
  UpstreamOutcome timeout;
  timeout.kind = UpstreamKind::kTimeout;
  EXPECT_EQ(ClassifyUpstream(timeout), Verdict::kKeep);
  UpstreamOutcome failed;
  failed.kind = UpstreamKind::kFailed;
  EXPECT_EQ(ClassifyUpstream(failed), Verdict::kKeep);
}

TEST(Operation, CaptureStoresTheAnswer) {
  Completion c = CompleteWalletOperation(Fresh(), Answered(200), 2000);
  EXPECT_EQ(c.verdict, Verdict::kCapture);
  EXPECT_EQ(c.move, MoveKind::kCapture);
  EXPECT_EQ(c.next.settlement, Settlement::kSettled);
  EXPECT_EQ(c.next.fulfillment, Fulfillment::kSucceeded);
  ASSERT_TRUE(c.next.response.has_value());
  EXPECT_EQ(c.next.response->status, 200);
  EXPECT_EQ(c.next.response->body, "{\"status\":200}");
  EXPECT_FALSE(c.next.hold_expires_ms.has_value());
  EXPECT_TRUE(IsFinal(c.next));
  EXPECT_EQ(c.next.updated_ms, 2000);
}

TEST(Operation, ReleaseOnRefusal) {
  Completion c = CompleteWalletOperation(Fresh(), Answered(404), 2000);
  EXPECT_EQ(c.move, MoveKind::kRelease);
  EXPECT_EQ(c.next.settlement, Settlement::kReleased);
  EXPECT_EQ(c.next.fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(c.next.response->status, 404);
  EXPECT_TRUE(IsFinal(c.next));
}

TEST(Operation, KeepOnServerErrorThenResumeReusesTheHold) {
  Completion kept = CompleteWalletOperation(Fresh(), Answered(502), 2000);
  EXPECT_EQ(kept.verdict, Verdict::kKeep);
  EXPECT_FALSE(kept.move.has_value());
  EXPECT_EQ(kept.next.settlement, Settlement::kHeld);
  EXPECT_EQ(kept.next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_FALSE(kept.next.response.has_value());
  EXPECT_FALSE(IsFinal(kept.next));

  Resumption resumed = ResumeWalletOperation(kept.next, 3000, 60000, 15000);
  EXPECT_FALSE(resumed.needs_hold);
  EXPECT_EQ(resumed.next.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(resumed.next.attempts, 2);
  EXPECT_EQ(resumed.next.hold_expires_ms, kept.next.hold_expires_ms);  // the same hold
  EXPECT_EQ(resumed.next.lease_expires_ms, 18000);

  Completion done = CompleteWalletOperation(resumed.next, Answered(200), 4000);
  EXPECT_EQ(done.move, MoveKind::kCapture);
}

TEST(Operation, ResumeAfterTheHoldWasReleasedNeedsANewHold) {
  Operation swept = CompleteWalletOperation(Fresh(), Answered(500), 2000).next;
  swept.settlement = Settlement::kReleased;  // as the hold sweeper leaves it
  swept.hold_expires_ms.reset();
  Resumption resumed = ResumeWalletOperation(swept, 5000, 60000, 15000);
  EXPECT_TRUE(resumed.needs_hold);
  EXPECT_EQ(resumed.next.settlement, Settlement::kHeld);
  EXPECT_EQ(resumed.next.hold_expires_ms, 65000);
}

TEST(Operation, CrashRecoveryKeepsTheHold) {
  Operation recovered = RecoverInterrupted(Fresh(), 9000);
  EXPECT_EQ(recovered.settlement, Settlement::kHeld);
  EXPECT_EQ(recovered.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_EQ(recovered.lease_expires_ms, 0);
  EXPECT_EQ(recovered.updated_ms, 9000);
}

TEST(Operation, StateNamesRoundTrip) {
  for (Settlement s : {Settlement::kNone, Settlement::kHeld, Settlement::kSubmitted,
                       Settlement::kUnknown, Settlement::kSettled, Settlement::kReleased,
                       Settlement::kVoid, Settlement::kFailed}) {
    EXPECT_EQ(ParseSettlement(SettlementName(s)), s);
  }
  for (Fulfillment f : {Fulfillment::kNotStarted, Fulfillment::kInProgress, Fulfillment::kSucceeded,
                        Fulfillment::kPendingRetry, Fulfillment::kRejected}) {
    EXPECT_EQ(ParseFulfillment(FulfillmentName(f)), f);
  }
  EXPECT_EQ(ParseIntent("accepted"), Intent::kAccepted);
  EXPECT_FALSE(ParseSettlement("Held").has_value());
  EXPECT_FALSE(ParseFulfillment("").has_value());
}

}  // namespace
}  // namespace agentpay
