// x402 settlement: every row of Reconcile's table with its time boundaries, the release rule of
// CONTRACT §5, and the x402 operation transitions (X1-X16 in settlement.h) with their invariants.
#include "core/settlement.h"

#include <gtest/gtest.h>

#include <limits>

namespace agentpay {
namespace {

constexpr int64_t kValidBefore = 1'700'000'600;
constexpr int64_t kBuffer = 60;
const std::string kRawTx = "0x02f87082053980843b9aca00";

Authorization Auth() {
  return {"0x857b06519e91e3a54538791bdbb0e22373e36b66", "0x" + std::string(64, 'a'), 1'700'000'000,
          kValidBefore, 250};
}

SettlementRecord Record() {
  return NewSettlementRecord("op_1", Auth(), "0x" + std::string(64, 'b'), kRawTx, 5000);
}

// A receipt is seen in the latest block (one confirmation).
ChainObservation Seen(ReceiptView receipt, bool tx_known, bool nonce_used, int64_t chain_time_s) {
  return {receipt, tx_known, nonce_used, chain_time_s, receipt == ReceiptView::kNone ? 0 : 1,
          "",      -1,       ""};
}

Reconciliation ReconcileNow(Settlement current, const ChainObservation& seen,
                            int64_t confirmations = 1) {
  return Reconcile(current, Record(), seen, kBuffer, confirmations);
}

// ---- Reconcile ----------------------------------------------------------------------------------

TEST(SettlementReconcile, SuccessWithMatchingTransferSettlesFromSubmittedAndUnknown) {
  for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
    for (int64_t t : {kValidBefore - 1, kValidBefore + kBuffer}) {
      Reconciliation r =
          ReconcileNow(current, Seen(ReceiptView::kSuccessWithTransfer, true, true, t));
      EXPECT_EQ(r.action, ReconcileAction::kMarkSettled);
      EXPECT_EQ(r.next_settlement, Settlement::kSettled);
      EXPECT_TRUE(r.rebroadcast_raw_tx_hex.empty());
    }
  }
}

// Row (6): settled only once the receipt is N blocks deep; until then the operation waits as it is.
TEST(SettlementReconcile, ATransferFewerThanNBlocksDeepWaits) {
  for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
    for (int64_t depth : {-2, 0, 1, 2}) {
      ChainObservation seen = Seen(ReceiptView::kSuccessWithTransfer, true, true, kValidBefore);
      seen.confirmations = depth;
      Reconciliation r = ReconcileNow(current, seen, 3);
      EXPECT_EQ(r.action, ReconcileAction::kWait) << depth;
      EXPECT_EQ(r.next_settlement, current);
      EXPECT_NE(r.reason.find(" of 3 confirmations"), std::string::npos) << r.reason;
      EXPECT_TRUE(r.rebroadcast_raw_tx_hex.empty());
    }
    for (int64_t depth : {3, 4, 100}) {
      ChainObservation seen = Seen(ReceiptView::kSuccessWithTransfer, true, true, kValidBefore);
      seen.confirmations = depth;
      EXPECT_EQ(ReconcileNow(current, seen, 3).action, ReconcileAction::kMarkSettled) << depth;
    }
  }
}

TEST(SettlementReconcile, SettledOnlyWithTheMatchingTransfer) {
  for (ReceiptView receipt :
       {ReceiptView::kSuccessWithoutMatchingTransfer, ReceiptView::kReverted, ReceiptView::kNone}) {
    for (bool nonce_used : {false, true}) {
      Reconciliation r =
          ReconcileNow(Settlement::kUnknown, Seen(receipt, true, nonce_used, kValidBefore));
      EXPECT_NE(r.action, ReconcileAction::kMarkSettled);
      EXPECT_NE(r.next_settlement, Settlement::kSettled);
    }
  }
}

TEST(SettlementReconcile, MinedWithoutOurTransferAndNonceUsedIsFailed) {
  for (ReceiptView receipt :
       {ReceiptView::kReverted, ReceiptView::kSuccessWithoutMatchingTransfer}) {
    for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
      Reconciliation r = ReconcileNow(current, Seen(receipt, true, true, kValidBefore - 100));
      EXPECT_EQ(r.action, ReconcileAction::kMarkFailed);
      EXPECT_EQ(r.next_settlement, Settlement::kFailed);
      EXPECT_NE(r.reason.find("another transaction"), std::string::npos);
    }
  }
}

TEST(SettlementReconcile, MinedWithoutTransferAndNonceUnusedWaitsForExpiryThenVoids) {
  for (ReceiptView receipt :
       {ReceiptView::kReverted, ReceiptView::kSuccessWithoutMatchingTransfer}) {
    for (int64_t t : {kValidBefore - 1, kValidBefore, kValidBefore + kBuffer - 1}) {
      Reconciliation r = ReconcileNow(Settlement::kUnknown, Seen(receipt, true, false, t));
      EXPECT_EQ(r.action, ReconcileAction::kWait) << t;
      EXPECT_EQ(r.next_settlement, Settlement::kUnknown);
    }
    Reconciliation r =
        ReconcileNow(Settlement::kUnknown, Seen(receipt, true, false, kValidBefore + kBuffer));
    EXPECT_EQ(r.action, ReconcileAction::kMarkVoid);
    EXPECT_EQ(r.next_settlement, Settlement::kVoid);
  }
}

// A pending transaction waits, whatever the time when its nonce is used (it reverts, then the
// receipt decides) and until the expiry when it is unused.
TEST(SettlementReconcile, PendingTransactionWaits) {
  for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
    for (bool nonce_used : {false, true}) {
      for (int64_t t : {kValidBefore - 1, kValidBefore, kValidBefore + kBuffer - 1,
                        kValidBefore + kBuffer, kValidBefore + kBuffer + 1000}) {
        if (!nonce_used && t >= kValidBefore + kBuffer) continue;  // row (7), below
        Reconciliation r = ReconcileNow(current, Seen(ReceiptView::kNone, true, nonce_used, t));
        EXPECT_EQ(r.action, ReconcileAction::kWait);
        EXPECT_EQ(r.next_settlement, current);
        EXPECT_EQ(r.reason, "our transaction is pending");
      }
    }
  }
}

// Row (7): still pending once expired, the nonce unused: no block can execute it any more, so it
// is void (from unknown; submitted waits for the receipt deadline first), with nothing re-sent.
TEST(SettlementReconcile, PendingPastExpiryWithTheNonceUnusedIsVoid) {
  for (int64_t t : {kValidBefore + kBuffer, kValidBefore + kBuffer + 1000}) {
    Reconciliation r = ReconcileNow(Settlement::kUnknown, Seen(ReceiptView::kNone, true, false, t));
    EXPECT_EQ(r.action, ReconcileAction::kMarkVoid) << t;
    EXPECT_EQ(r.next_settlement, Settlement::kVoid);
    EXPECT_NE(r.reason.find("pending but the authorization expired unused"), std::string::npos);
    EXPECT_TRUE(r.rebroadcast_raw_tx_hex.empty());
    Reconciliation s =
        ReconcileNow(Settlement::kSubmitted, Seen(ReceiptView::kNone, true, false, t));
    EXPECT_EQ(s.action, ReconcileAction::kWait) << t;
    EXPECT_EQ(s.next_settlement, Settlement::kSubmitted);
  }
}

TEST(SettlementReconcile, GoneWithNonceUsedByAnotherTransactionIsFailed) {
  for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
    for (int64_t t : {kValidBefore - 1, kValidBefore, kValidBefore + kBuffer}) {
      Reconciliation r = ReconcileNow(current, Seen(ReceiptView::kNone, false, true, t));
      EXPECT_EQ(r.action, ReconcileAction::kMarkFailed);
      EXPECT_EQ(r.next_settlement, Settlement::kFailed);
    }
  }
}

TEST(SettlementReconcile, GoneBeforeValidBeforeRebroadcastsTheSameBytes) {
  for (Settlement current : {Settlement::kSubmitted, Settlement::kUnknown}) {
    for (int64_t t : {int64_t{0}, kValidBefore - 600, kValidBefore - 1}) {
      Reconciliation r = ReconcileNow(current, Seen(ReceiptView::kNone, false, false, t));
      EXPECT_EQ(r.action, ReconcileAction::kRebroadcast);
      EXPECT_EQ(r.next_settlement, current);
      EXPECT_EQ(r.rebroadcast_raw_tx_hex, kRawTx);
    }
  }
}

TEST(SettlementReconcile, GoneAtOrAfterValidBeforeWaitsThroughTheBuffer) {
  for (int64_t t : {kValidBefore, kValidBefore + 1, kValidBefore + kBuffer - 1}) {
    Reconciliation r =
        ReconcileNow(Settlement::kUnknown, Seen(ReceiptView::kNone, false, false, t));
    EXPECT_EQ(r.action, ReconcileAction::kWait) << t;
    EXPECT_EQ(r.next_settlement, Settlement::kUnknown);
    EXPECT_TRUE(r.rebroadcast_raw_tx_hex.empty());
  }
}

TEST(SettlementReconcile, GoneAfterTheBufferWithNonceUnusedIsVoid) {
  for (int64_t t : {kValidBefore + kBuffer, kValidBefore + kBuffer + 86400}) {
    Reconciliation r =
        ReconcileNow(Settlement::kUnknown, Seen(ReceiptView::kNone, false, false, t));
    EXPECT_EQ(r.action, ReconcileAction::kMarkVoid);
    EXPECT_EQ(r.next_settlement, Settlement::kVoid);
  }
}

TEST(SettlementReconcile, VoidOnlyWithTheNonceUnused) {
  for (ReceiptView receipt :
       {ReceiptView::kNone, ReceiptView::kReverted, ReceiptView::kSuccessWithoutMatchingTransfer}) {
    Reconciliation r = ReconcileNow(Settlement::kUnknown,
                                    Seen(receipt, false, true, kValidBefore + kBuffer + 1000));
    EXPECT_EQ(r.action, ReconcileAction::kMarkFailed);
  }
}

TEST(SettlementReconcile, NeverVoidStraightFromSubmitted) {
  for (ReceiptView receipt : {ReceiptView::kNone, ReceiptView::kReverted}) {
    Reconciliation r =
        ReconcileNow(Settlement::kSubmitted, Seen(receipt, false, false, kValidBefore + kBuffer));
    EXPECT_EQ(r.action, ReconcileAction::kWait);
    EXPECT_EQ(r.next_settlement, Settlement::kSubmitted);
    Reconciliation later = ReconcileNow(AfterReceiptTimeout(Settlement::kSubmitted),
                                        Seen(receipt, false, false, kValidBefore + kBuffer));
    EXPECT_EQ(later.action, ReconcileAction::kMarkVoid);
  }
}

TEST(SettlementReconcile, HugeValidBeforeNeverExpires) {
  SettlementRecord record = Record();
  record.authorization.valid_before_s = std::numeric_limits<int64_t>::max() - 10;
  ChainObservation seen =
      Seen(ReceiptView::kNone, false, false, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Reconcile(Settlement::kUnknown, record, seen, kBuffer, 1).action,
            ReconcileAction::kWait);
}

TEST(SettlementReconcile, RebroadcastRecordKeepsTheSameTransaction) {
  SettlementRecord first = Record();
  EXPECT_EQ(first.broadcasts, 1);
  SettlementRecord again = RecordRebroadcast(first);
  EXPECT_EQ(again.broadcasts, 2);
  EXPECT_EQ(again.raw_tx_hex, first.raw_tx_hex);
  EXPECT_EQ(again.tx_hash, first.tx_hash);
  EXPECT_EQ(again.authorization, first.authorization);
  EXPECT_EQ(again.submitted_ms, first.submitted_ms);
}

TEST(SettlementReconcile, ActionNames) {
  EXPECT_EQ(ReconcileActionName(ReconcileAction::kMarkSettled), "mark_settled");
  EXPECT_EQ(ReconcileActionName(ReconcileAction::kRebroadcast), "rebroadcast");
  EXPECT_EQ(ReconcileActionName(ReconcileAction::kMarkVoid), "mark_void");
  EXPECT_EQ(ReconcileActionName(ReconcileAction::kMarkFailed), "mark_failed");
  EXPECT_EQ(ReconcileActionName(ReconcileAction::kWait), "wait");
}

TEST(SettlementReconcileDeathTest, RejectsSettledCurrentAndMalformedRecords) {
  EXPECT_DEATH(ReconcileNow(Settlement::kSettled, Seen(ReceiptView::kNone, false, false, 0)),
               "invariant failed");
  Authorization upper = Auth();
  upper.from = "0x857B06519E91E3A54538791BDBB0E22373E36B66";
  EXPECT_DEATH(NewSettlementRecord("op", upper, "0x" + std::string(64, 'b'), kRawTx, 0),
               "invariant failed");
  EXPECT_DEATH(AfterReceiptTimeout(Settlement::kUnknown), "invariant failed");
}

// ---- MayReleaseReservation
// ------------------------------------------------------------------------

TEST(SettlementRelease, OnlyAfterExpiryPlusBufferAndWithTheNonceUnused) {
  EXPECT_FALSE(MayReleaseReservation(Auth(), false, kValidBefore - 1, kBuffer));
  EXPECT_FALSE(MayReleaseReservation(Auth(), false, kValidBefore, kBuffer));
  EXPECT_FALSE(MayReleaseReservation(Auth(), false, kValidBefore + kBuffer - 1, kBuffer));
  EXPECT_TRUE(MayReleaseReservation(Auth(), false, kValidBefore + kBuffer, kBuffer));
  EXPECT_TRUE(MayReleaseReservation(Auth(), false, kValidBefore + kBuffer + 1, kBuffer));
  EXPECT_FALSE(MayReleaseReservation(Auth(), true, kValidBefore + kBuffer, kBuffer));
  EXPECT_FALSE(MayReleaseReservation(Auth(), true, kValidBefore + kBuffer + 86400, kBuffer));
  EXPECT_TRUE(MayReleaseReservation(Auth(), false, kValidBefore, 0));
}

TEST(SettlementRelease, AgreesWithReconcileVoid) {
  for (int64_t t = kValidBefore - 2; t <= kValidBefore + kBuffer + 2; ++t) {
    Reconciliation r =
        ReconcileNow(Settlement::kUnknown, Seen(ReceiptView::kNone, false, false, t));
    EXPECT_EQ(r.action == ReconcileAction::kMarkVoid,
              MayReleaseReservation(Auth(), false, t, kBuffer))
        << t;
  }
}

// ---- The x402 operation -------------------------------------------------------------------------

constexpr int64_t kLease = 30000;
constexpr int64_t kRetention = 86400000;

Operation NewOp(SettleOrder order, int64_t now = 1000) {
  return NewX402Operation({"op_1", "payer:0x857b", "k", "fp", "/api", 250, order, kLease, "gw_a"},
                          now);
}

UpstreamOutcome Answered(int status) {
  UpstreamOutcome outcome;
  outcome.kind = UpstreamKind::kResponded;
  outcome.status = status;
  outcome.content_type = "application/json";
  outcome.body = "{\"status\":" + std::to_string(status) + "}";
  return outcome;
}

StoredResponse Problem(int status) { return {status, "application/problem+json", "{}"}; }

TEST(SettlementOperation, SettleBeforeStartsSubmittedAndClaimed) {
  Operation op = NewOp(SettleOrder::kBeforeUpstream);
  EXPECT_EQ(op.intent, Intent::kAccepted);
  EXPECT_EQ(op.settlement, Settlement::kSubmitted);
  EXPECT_EQ(op.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(op.lease_expires_ms, 1000 + kLease);
  EXPECT_EQ(op.attempts, 0);
  EXPECT_FALSE(op.hold_expires_ms.has_value());
  EXPECT_FALSE(IsFinal(op));
}

TEST(SettlementOperation, SettleAfterStartsUnsubmittedAndCalling) {
  Operation op = NewOp(SettleOrder::kAfterUpstream);
  EXPECT_EQ(op.settlement, Settlement::kNone);
  EXPECT_EQ(op.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(op.attempts, 1);
}

TEST(SettlementOperation, SettleBeforeHappyPath) {
  Operation settled = MarkSettled(NewOp(SettleOrder::kBeforeUpstream), 2000);
  EXPECT_EQ(settled.settlement, Settlement::kSettled);
  EXPECT_EQ(settled.fulfillment, Fulfillment::kInProgress);  // the attempt goes on
  Operation calling = BeginX402Call(settled, 2100, kLease, "gw_b");
  EXPECT_EQ(calling.attempts, 1);
  EXPECT_EQ(calling.lease_expires_ms, 2100 + kLease);
  EXPECT_EQ(NewOp(SettleOrder::kBeforeUpstream).claimed_by, "gw_a");
  EXPECT_EQ(calling.claimed_by, "gw_b");  // the claim names the process making the call
  X402Completion done = CompleteX402Call(calling, Answered(200), 3000, kRetention);
  EXPECT_EQ(done.verdict, Verdict::kCapture);
  EXPECT_FALSE(done.submit_settlement);
  EXPECT_EQ(done.next.settlement, Settlement::kSettled);
  EXPECT_EQ(done.next.fulfillment, Fulfillment::kSucceeded);
  ASSERT_TRUE(done.next.response.has_value());
  EXPECT_EQ(done.next.response->status, 200);
  EXPECT_EQ(done.next.retained_until_ms, 3000 + kRetention);
  EXPECT_EQ(done.next.lease_expires_ms, 0);
}

TEST(SettlementOperation, SettledThen4xxIsRejectedButStaysSettled) {
  Operation calling =
      BeginX402Call(MarkSettled(NewOp(SettleOrder::kBeforeUpstream), 2000), 2000, kLease, "gw_b");
  X402Completion done = CompleteX402Call(calling, Answered(422), 3000, kRetention);
  EXPECT_EQ(done.verdict, Verdict::kRelease);
  EXPECT_EQ(done.next.settlement, Settlement::kSettled);
  EXPECT_EQ(done.next.fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(done.next.response->status, 422);
}

TEST(SettlementOperation, SettledThen5xxKeepsAndTheRetryIsFree) {
  Operation calling =
      BeginX402Call(MarkSettled(NewOp(SettleOrder::kBeforeUpstream), 2000), 2000, kLease, "gw_b");
  X402Completion kept = CompleteX402Call(calling, Answered(503), 3000, kRetention);
  EXPECT_EQ(kept.verdict, Verdict::kKeep);
  EXPECT_EQ(kept.next.settlement, Settlement::kSettled);
  EXPECT_EQ(kept.next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_EQ(kept.next.lease_expires_ms, 0);
  EXPECT_FALSE(kept.next.response.has_value());
  EXPECT_EQ(DecideX402Resume(kept.next, false), X402Resume::kCallUpstream);
  Operation retry = BeginX402Call(kept.next, 4000, kLease, "gw_b");
  EXPECT_EQ(retry.attempts, 2);
  EXPECT_EQ(retry.settlement, Settlement::kSettled);  // no new charge
  EXPECT_EQ(CompleteX402Call(retry, Answered(200), 5000, kRetention).next.fulfillment,
            Fulfillment::kSucceeded);
}

TEST(SettlementOperation, ReceiptTimeoutMakesItUnknownAndRetriesAnswerUnknown) {
  Operation unknown = MarkUnknown(NewOp(SettleOrder::kBeforeUpstream), 9000);
  EXPECT_EQ(unknown.settlement, Settlement::kUnknown);
  EXPECT_EQ(unknown.fulfillment, Fulfillment::kNotStarted);  // the upstream was never called
  EXPECT_EQ(unknown.lease_expires_ms, 0);
  EXPECT_FALSE(IsFinal(unknown));
  EXPECT_EQ(DecideX402Resume(unknown, true), X402Resume::kAnswerUnknown);
  EXPECT_EQ(DecideX402Resume(NewOp(SettleOrder::kBeforeUpstream), true),
            X402Resume::kAnswerUnknown);
  // Reconciled as settled: the retry calls the upstream, once, without a new authorization.
  Operation settled = MarkSettled(unknown, 20000);
  EXPECT_EQ(settled.fulfillment, Fulfillment::kNotStarted);
  EXPECT_EQ(DecideX402Resume(settled, false), X402Resume::kCallUpstream);
  EXPECT_EQ(BeginX402Call(settled, 21000, kLease, "gw_b").attempts, 1);
}

TEST(SettlementOperation, UnknownVoidIsFinalNothingChargedAndTheKeyIsReleased) {
  Operation unknown = MarkUnknown(NewOp(SettleOrder::kBeforeUpstream), 9000);
  Operation voided = MarkVoid(unknown, 700000, Problem(402));
  EXPECT_EQ(voided.settlement, Settlement::kVoid);
  EXPECT_EQ(voided.fulfillment, Fulfillment::kRejected);
  EXPECT_TRUE(IsFinal(voided));
  EXPECT_EQ(voided.retained_until_ms, 700000);
}

TEST(SettlementOperation, FailedIsFinalAndKeptForRetention) {
  for (Operation from : {NewOp(SettleOrder::kBeforeUpstream),
                         MarkUnknown(NewOp(SettleOrder::kBeforeUpstream), 9000)}) {
    Operation failed = MarkFailed(from, 10000, Problem(409), kRetention);
    EXPECT_EQ(failed.settlement, Settlement::kFailed);
    EXPECT_EQ(failed.fulfillment, Fulfillment::kRejected);
    EXPECT_EQ(failed.lease_expires_ms, 0);
    EXPECT_EQ(failed.retained_until_ms, 10000 + kRetention);
    EXPECT_TRUE(IsFinal(failed));
  }
}

TEST(SettlementOperation, SettleAfter2xxSubmitsThenFinishesWithTheSameAnswer) {
  Operation op = NewOp(SettleOrder::kAfterUpstream);
  X402Completion answered = CompleteX402Call(op, Answered(200), 2000, kRetention);
  EXPECT_EQ(answered.verdict, Verdict::kCapture);
  EXPECT_TRUE(answered.submit_settlement);
  EXPECT_EQ(answered.next.settlement, Settlement::kSubmitted);
  EXPECT_EQ(answered.next.fulfillment, Fulfillment::kInProgress);
  EXPECT_EQ(answered.next.lease_expires_ms, op.lease_expires_ms);
  EXPECT_FALSE(answered.next.response.has_value());
  Operation settled = MarkSettled(answered.next, 3000);
  X402Completion done = CompleteX402Call(settled, Answered(200), 3000, kRetention);
  EXPECT_FALSE(done.submit_settlement);
  EXPECT_EQ(done.next.fulfillment, Fulfillment::kSucceeded);
  EXPECT_EQ(done.next.response->status, 200);
}

TEST(SettlementOperation, SettleAfter4xxSettlesNothing) {
  X402Completion done =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(400), 2000, kRetention);
  EXPECT_EQ(done.verdict, Verdict::kRelease);
  EXPECT_FALSE(done.submit_settlement);
  EXPECT_EQ(done.next.settlement, Settlement::kNone);
  EXPECT_EQ(done.next.fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(done.next.response->status, 400);
  EXPECT_TRUE(IsFinal(done.next));
}

TEST(SettlementOperation, SettleAfterUnknownKeepsNoAnswerAndRecallsOnceSettled) {
  X402Completion answered =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(200), 2000, kRetention);
  Operation unknown = MarkUnknown(answered.next, 9000);
  EXPECT_EQ(unknown.fulfillment, Fulfillment::kPendingRetry);  // the upstream did the work
  EXPECT_FALSE(unknown.response.has_value());
  Operation settled = MarkSettled(unknown, 20000);
  EXPECT_EQ(DecideX402Resume(settled, false), X402Resume::kCallUpstream);
  EXPECT_EQ(BeginX402Call(settled, 21000, kLease, "gw_b").attempts, 2);
}

TEST(SettlementOperation, SettleAfter5xxRetriesWhileTheAuthorizationCanSettle) {
  X402Completion kept =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(502), 2000, kRetention);
  EXPECT_EQ(kept.next.settlement, Settlement::kNone);
  EXPECT_EQ(kept.next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_FALSE(kept.submit_settlement);
  EXPECT_EQ(DecideX402Resume(kept.next, true), X402Resume::kCallUpstream);
  EXPECT_EQ(DecideX402Resume(kept.next, false), X402Resume::kCloseUnpaid);
  Operation closed = CloseUnpaidX402Operation(kept.next, 5000, Problem(402));
  EXPECT_EQ(closed.settlement, Settlement::kNone);
  EXPECT_EQ(closed.fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(closed.retained_until_ms, 5000);
  EXPECT_TRUE(IsFinal(closed));
}

TEST(SettlementOperation, ResumeNames) {
  EXPECT_EQ(X402ResumeName(X402Resume::kAnswerUnknown), "answer_unknown");
  EXPECT_EQ(X402ResumeName(X402Resume::kCallUpstream), "call_upstream");
  EXPECT_EQ(X402ResumeName(X402Resume::kCloseUnpaid), "close_unpaid");
}

// X17 then X7: a reorganisation takes a delivered settlement back to unknown, fulfillment and
// the stored answer untouched; the chain mines it again and it is settled again.
TEST(SettlementOperation, AReorganisedSettlementGoesBackToUnknownAndSettlesAgain) {
  Operation settled = MarkSettled(NewOp(SettleOrder::kBeforeUpstream), 2000);
  Operation delivered = CompleteX402Call(BeginX402Call(settled, 2100, kLease, "gw_a"),
                                         Answered(200), 3000, kRetention)
                            .next;
  Operation back = MarkReorganised(delivered, 4000);
  EXPECT_EQ(back.settlement, Settlement::kUnknown);
  EXPECT_EQ(back.fulfillment, Fulfillment::kSucceeded);
  EXPECT_EQ(back.response, delivered.response);
  EXPECT_EQ(back.updated_ms, 4000);
  Operation again = MarkSettled(back, 5000);
  EXPECT_EQ(again.settlement, Settlement::kSettled);
  EXPECT_EQ(again.response, delivered.response);
  // X18: it never comes back (expired first): void, the answer given stays on record.
  for (Settlement lost : {Settlement::kVoid, Settlement::kFailed}) {
    Operation gone = MarkLostAfterDelivery(back, lost, 6000);
    EXPECT_EQ(gone.settlement, lost);
    EXPECT_EQ(gone.fulfillment, Fulfillment::kSucceeded);
    EXPECT_EQ(gone.response, delivered.response);
  }
}

// Settled changes only by X17 (a reorganisation): the other transitions refuse it.
TEST(SettlementOperationDeathTest, NothingElseLeavesSettled) {
  Operation settled = MarkSettled(NewOp(SettleOrder::kBeforeUpstream), 2000);
  EXPECT_DEATH(MarkVoid(settled, 3000, Problem(402)), "invariant failed");
  EXPECT_DEATH(MarkFailed(settled, 3000, Problem(409), kRetention), "invariant failed");
  EXPECT_DEATH(MarkUnknown(settled, 3000), "invariant failed");
  EXPECT_DEATH(MarkSettled(settled, 3000), "invariant failed");
  EXPECT_DEATH(CloseUnpaidX402Operation(settled, 3000, Problem(402)), "invariant failed");
  EXPECT_DEATH(MarkLostAfterDelivery(settled, Settlement::kVoid, 3000), "invariant failed");
  EXPECT_DEATH(MarkReorganised(MarkReorganised(settled, 3000), 3100), "invariant failed");
}

TEST(SettlementOperationDeathTest, TransitionPreconditions) {
  Operation submitted = NewOp(SettleOrder::kBeforeUpstream);
  // void only from unknown, with no attempt in progress
  EXPECT_DEATH(MarkVoid(submitted, 3000, Problem(402)), "invariant failed");
  // a failed settlement may have moved the payer's money: never answered 402
  EXPECT_DEATH(MarkFailed(submitted, 3000, Problem(402), kRetention), "invariant failed");
  // no upstream call while the settlement is in flight
  EXPECT_DEATH(BeginX402Call(submitted, 3000, kLease, "gw_b"), "invariant failed");
  EXPECT_DEATH(CompleteX402Call(submitted, Answered(200), 3000, kRetention), "invariant failed");
  Operation final_op =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(404), 2000, kRetention).next;
  EXPECT_DEATH(DecideX402Resume(final_op, true), "invariant failed");
  EXPECT_DEATH(BeginX402Call(final_op, 3000, kLease, "gw_b"), "invariant failed");
  EXPECT_DEATH(
      NewX402Operation(
          {"op", "account:a", "k", "fp", "/", 250, SettleOrder::kBeforeUpstream, kLease, ""}, 0),
      "invariant failed");
}

// X19 and (g): an unpaid settle=after operation no retry came for is closed once its authorization
// can no longer settle and no attempt holds it; closing it after an upstream call raises an alert.
TEST(SettlementOperation, X19ClosesAnUnpaidOperationNoRetryCameForOnceItsAuthorizationIsTooLate) {
  X402Completion kept =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(502), 2000, kRetention);
  ASSERT_EQ(kept.next.fulfillment, Fulfillment::kPendingRetry);
  EXPECT_TRUE(UnpaidAfterPossibleWork(kept.next));
  // Still able to settle, or an attempt's lease still live: left alone.
  EXPECT_FALSE(ExpireUnpaidX402Operation(kept.next, 3000, true, Problem(402)).has_value());
  Operation leased = kept.next;
  leased.lease_expires_ms = 9000;
  EXPECT_FALSE(ExpireUnpaidX402Operation(leased, 8999, false, Problem(402)).has_value());
  std::optional<Operation> closed = ExpireUnpaidX402Operation(leased, 9000, false, Problem(402));
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->settlement, Settlement::kNone);
  EXPECT_EQ(closed->fulfillment, Fulfillment::kRejected);
  EXPECT_EQ(closed->response->status, 402);
  EXPECT_EQ(closed->retained_until_ms, 9000);  // (b): the key is released
  EXPECT_TRUE(IsFinal(*closed));
  // Only none / pending_retry: settled, final or in progress operations are not X19's.
  EXPECT_FALSE(ExpireUnpaidX402Operation(*closed, 10000, false, Problem(402)).has_value());
  Operation settled = MarkSettled(MarkUnknown(CompleteX402Call(NewOp(SettleOrder::kAfterUpstream),
                                                               Answered(200), 2000, kRetention)
                                                  .next,
                                              3000),
                                  4000);
  EXPECT_FALSE(ExpireUnpaidX402Operation(settled, 5000, false, Problem(402)).has_value());
  EXPECT_FALSE(UnpaidAfterPossibleWork(settled));
  Operation in_progress = NewOp(SettleOrder::kAfterUpstream);
  EXPECT_FALSE(
      ExpireUnpaidX402Operation(in_progress, 1'000'000'000, false, Problem(402)).has_value());
}

// (g) is about an upstream call that was made: a settle=before attempt that crash recovery made
// pending_retry before it ever called the upstream (a = 0) leaves no work unpaid.
TEST(SettlementOperation, UnpaidAfterPossibleWorkNeedsAnUpstreamCall) {
  Operation before = NewOp(SettleOrder::kBeforeUpstream);
  before.fulfillment = Fulfillment::kPendingRetry;  // as RecoverInterrupted leaves it
  before.settlement = Settlement::kUnknown;
  EXPECT_EQ(before.attempts, 0);
  EXPECT_FALSE(UnpaidAfterPossibleWork(before));
  X402Completion answered =
      CompleteX402Call(NewOp(SettleOrder::kAfterUpstream), Answered(200), 2000, kRetention);
  EXPECT_TRUE(UnpaidAfterPossibleWork(MarkUnknown(answered.next, 3000)));  // X6 would void it
}

TEST(SettlementOperation, AuthorizationCanSettleOnlyBeforeTheMargin) {
  EXPECT_TRUE(AuthorizationCanSettle(107, 100'000, 6));
  EXPECT_FALSE(AuthorizationCanSettle(106, 100'000, 6));
  EXPECT_FALSE(AuthorizationCanSettle(50, 100'000, 6));
  EXPECT_FALSE(AuthorizationCanSettle(INT64_MIN, 100'000, 6));
  EXPECT_TRUE(AuthorizationCanSettle(INT64_MAX, 100'000, 6));
}
}  // namespace
}  // namespace agentpay
