// The wallet operation's transitions: capture on 2xx, release on 4xx, keep on 5xx/timeout/failure,
// resume of a kept operation, and crash recovery.
#include "core/operation.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

Operation Fresh(int64_t now = 1000) {
  return NewWalletOperation({"op_1", "account:a", "k", "fp", "/", 250, 60000, 15000, "gw_a"}, now);
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
  EXPECT_EQ(op.claimed_by, "gw_a");
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
  Completion c = CompleteWalletOperation(Fresh(), Answered(200), 2000, 86400000);
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
  EXPECT_EQ(c.next.retained_until_ms, 2000 + 86400000);
}

TEST(Operation, ReleaseOnRefusal) {
  Completion c = CompleteWalletOperation(Fresh(), Answered(404), 2000, 86400000);
  EXPECT_EQ(c.move, MoveKind::kRelease);
  EXPECT_EQ(c.next.settlement, Settlement::kReleased);
  EXPECT_EQ(c.next.fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(c.next.response->status, 404);
  EXPECT_TRUE(IsFinal(c.next));
}

TEST(Operation, KeepOnServerErrorThenResumeReusesTheHold) {
  Completion kept = CompleteWalletOperation(Fresh(), Answered(502), 2000, 86400000);
  EXPECT_EQ(kept.verdict, Verdict::kKeep);
  EXPECT_FALSE(kept.move.has_value());
  EXPECT_EQ(kept.next.settlement, Settlement::kHeld);
  EXPECT_EQ(kept.next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_FALSE(kept.next.response.has_value());
  EXPECT_FALSE(kept.next.retained_until_ms.has_value());
  EXPECT_FALSE(IsFinal(kept.next));

  Resumption resumed = ResumeWalletOperation(kept.next, 3000, 60000, 15000, "gw_b");
  EXPECT_FALSE(resumed.needs_hold);
  EXPECT_EQ(resumed.next.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(resumed.next.attempts, 2);
  EXPECT_EQ(resumed.next.hold_expires_ms, kept.next.hold_expires_ms);  // the same hold
  EXPECT_EQ(resumed.next.lease_expires_ms, 18000);
  EXPECT_EQ(resumed.next.claimed_by, "gw_b");  // the retry's process holds the claim now

  Completion done = CompleteWalletOperation(resumed.next, Answered(200), 4000, 86400000);
  EXPECT_EQ(done.move, MoveKind::kCapture);
}

TEST(Operation, ResumeAfterTheHoldWasReleasedNeedsANewHold) {
  Operation swept = CompleteWalletOperation(Fresh(), Answered(500), 2000, 86400000).next;
  swept.settlement = Settlement::kReleased;  // as the hold sweeper leaves it
  swept.hold_expires_ms.reset();
  Resumption resumed = ResumeWalletOperation(swept, 5000, 60000, 15000, "gw_b");
  EXPECT_TRUE(resumed.needs_hold);
  EXPECT_EQ(resumed.next.settlement, Settlement::kHeld);
  EXPECT_EQ(resumed.next.hold_expires_ms, 65000);
}

TEST(Operation, CrashRecoveryKeepsTheHold) {
  auto recovered = RecoverInterrupted(Fresh(), 9000, /*claimant_alive=*/false);
  ASSERT_TRUE(recovered.has_value());
  EXPECT_EQ(recovered->settlement, Settlement::kHeld);
  EXPECT_EQ(recovered->fulfillment, Fulfillment::kPendingRetry);
  EXPECT_EQ(recovered->lease_expires_ms, 0);
  EXPECT_EQ(recovered->updated_ms, 9000);
}

// Issue 4: several gateway processes share one store; a starting process must not take over the
// calls another live process is making.
TEST(Operation, CrashRecoveryLeavesALiveProcessClaimAlone) {
  Operation live = Fresh(1000);  // lease until 16000, claimed by gw_a
  EXPECT_FALSE(RecoverInterrupted(live, 9000, /*claimant_alive=*/true).has_value());
  // Its process died: taken over although the lease still runs.
  EXPECT_TRUE(RecoverInterrupted(live, 9000, /*claimant_alive=*/false).has_value());
  // Its lease expired: taken over although the process lives (a retry would resume it anyway).
  EXPECT_TRUE(RecoverInterrupted(live, 16000, /*claimant_alive=*/true).has_value());
  // A row from before claims were recorded names nobody: recovered as before.
  Operation unnamed = live;
  unnamed.claimed_by.clear();
  EXPECT_TRUE(RecoverInterrupted(unnamed, 9000, /*claimant_alive=*/true).has_value());
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

// The names are what the store keeps and the trace JSON, the console and the inspector show: each
// enumerator has exactly the name it had as a string, and every name reads back as its actor.
TEST(Operation, TraceActorNamesRoundTrip) {
  const std::vector<std::pair<TraceActor, std::string_view>> expected = {
      {TraceActor::kClient, "client"},     {TraceActor::kGateway, "gateway"},
      {TraceActor::kUpstream, "upstream"}, {TraceActor::kLedger, "ledger"},
      {TraceActor::kChain, "chain"},       {TraceActor::kWorker, "worker"},
      {TraceActor::kAdmin, "admin"}};
  ASSERT_EQ(kTraceActors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(kTraceActors[i], expected[i].first);  // the list names every enumerator, in order
    EXPECT_EQ(TraceActorName(expected[i].first), expected[i].second);
    EXPECT_EQ(ParseTraceActor(expected[i].second), expected[i].first);
  }
  for (std::string_view unknown : {"", "Client", "client ", "robot", "t"}) {
    EXPECT_FALSE(ParseTraceActor(unknown).has_value()) << unknown;
  }
}

}  // namespace
}  // namespace agentpay

namespace agentpay {
namespace {

TEST(HoldExpiry, ReleasesOnlyUnfinishedHoldsWithoutALiveAttempt) {
  Operation kept = CompleteWalletOperation(Fresh(1000), Answered(500), 2000, 86400000).next;
  ASSERT_EQ(kept.hold_expires_ms, 61000);
  EXPECT_FALSE(ExpireHold(kept, 60999).has_value());
  auto expired = ExpireHold(kept, 61000);
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->next.settlement, Settlement::kReleased);
  EXPECT_EQ(expired->next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_FALSE(expired->next.hold_expires_ms.has_value());
  EXPECT_NE(expired->reason.find("may have done the work"), std::string::npos);

  // A live attempt keeps its hold past the expiry; a dead one (lease lapsed) does not.
  Operation in_flight = Fresh(1000);  // lease until 16000, hold until 61000
  in_flight.lease_expires_ms = 70000;
  EXPECT_FALSE(ExpireHold(in_flight, 61000).has_value());
  in_flight.lease_expires_ms = 16000;
  EXPECT_TRUE(ExpireHold(in_flight, 61000).has_value());

  Operation captured = CompleteWalletOperation(Fresh(1000), Answered(200), 2000, 86400000).next;
  EXPECT_FALSE(ExpireHold(captured, 99999999).has_value());
}

TEST(Principal, WalletAccountOf) {
  EXPECT_EQ(WalletAccountOf("account:acct_1"), "acct_1");
  EXPECT_FALSE(WalletAccountOf("account:").has_value());
  EXPECT_FALSE(WalletAccountOf("payer:0xabc").has_value());
}

TEST(Trace, MergesArrivalPostingsEventsAndAnswerInTimeOrder) {
  Operation op = CompleteWalletOperation(Fresh(1000), Answered(200), 3000, 86400000).next;
  std::vector<PostingRecord> postings = {
      {"op_1", MoveKind::kHold, "wallet:a", "hold:a", 250, 1000},
      {"op_1", MoveKind::kCapture, "hold:a", "revenue", 250, 3000}};
  std::vector<TraceEvent> events = {
      {"op_1", 2000, TraceActor::kUpstream, "hold_kept", "upstream answered 503"}};
  auto trace = BuildTrace(op, postings, events);
  std::vector<std::string> kinds;
  for (const auto& event : trace) kinds.push_back(event.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"request", "hold", "hold_kept", "capture", "response"}));
  for (size_t i = 1; i < trace.size(); ++i) EXPECT_LE(trace[i - 1].at_ms, trace[i].at_ms);
  // The structured facts beside the text: the arrival's attempt and price, each posting's
  // amount, the recorded event's own facts, the answer's status.
  EXPECT_EQ(trace[0].facts, TraceFacts().Attempt(1).Amount(op.amount));
  EXPECT_EQ(trace[1].facts, TraceFacts().Amount(250));
  EXPECT_EQ(trace[3].facts, TraceFacts().Amount(250));
  EXPECT_EQ(trace[4].facts, TraceFacts().Attempt(op.attempts).HttpStatus(200));
}

TEST(Trace, WithinOneMillisecondTheOrderIsCausal) {
  // A retry resumed, captured, answered and replayed, all at 2000: the resumption before the
  // capture it led to, the answer after it, the replay of the answer last.
  Operation op = CompleteWalletOperation(Fresh(1000), Answered(200), 2000, 86400000).next;
  std::vector<PostingRecord> postings = {
      {"op_1", MoveKind::kHold, "wallet:a", "hold:a", 250, 1000},
      {"op_1", MoveKind::kCapture, "hold:a", "revenue", 250, 2000}};
  std::vector<TraceEvent> events = {
      {"op_1", 2000, TraceActor::kClient, "replayed", "again"},
      {"op_1", 1000, TraceActor::kUpstream, "hold_kept", "503"},
      {"op_1", 2000, TraceActor::kGateway, "retry_resumed", "attempt 2"}};
  std::vector<std::string> kinds;
  for (const auto& event : BuildTrace(op, postings, events)) kinds.push_back(event.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"request", "hold", "hold_kept", "retry_resumed",
                                             "capture", "response", "replayed"}));
}

TEST(Trace, TheAnswerComesBeforeItsFirstReplay) {
  // The operation changed at 9000 (say, an admin's resolution) after a replay at 4000: the answer,
  // whose time is not stored, is shown no later than the replay that repeated it.
  Operation op = CompleteWalletOperation(Fresh(1000), Answered(200), 3000, 86400000).next;
  op.updated_ms = 9000;
  std::vector<TraceEvent> events = {{"op_1", 4000, TraceActor::kClient, "replayed", "again"}};
  auto trace = BuildTrace(op, {}, events);
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace[1].kind, "response");
  EXPECT_EQ(trace[1].at_ms, 4000);
  EXPECT_EQ(trace[2].kind, "replayed");
}

TEST(Trace, UpstreamReasonCodesAreStable) {
  EXPECT_EQ(UpstreamReasonCode(Answered(200)), "upstream_2xx");
  EXPECT_EQ(UpstreamReasonCode(Answered(404)), "upstream_4xx");
  EXPECT_EQ(UpstreamReasonCode(Answered(503)), "upstream_5xx");
  EXPECT_EQ(UpstreamReasonCode(Answered(99)), "upstream_1xx");
  EXPECT_EQ(UpstreamReasonCode(Answered(700)), "upstream_5xx");
  EXPECT_EQ(UpstreamReasonCode({UpstreamKind::kTimeout, 0, "", "", "timed out"}),
            "upstream_timeout");
  EXPECT_EQ(UpstreamReasonCode({UpstreamKind::kFailed, 0, "", "", "refused"}),
            "upstream_unreachable");
}

}  // namespace
}  // namespace agentpay
