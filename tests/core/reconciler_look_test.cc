// The reconciler's look (core/reconciler_look.h): when it asks for a replacement (RQ1–RQ3), and
// what its decision does with each of Reconcile's actions (RL1–RL9), every row and every
// combination.
#include "core/reconciler_look.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

ChainObservation Seen(ReceiptView receipt, bool tx_known, bool nonce_used) {
  ChainObservation seen;
  seen.receipt = receipt;
  seen.tx_known = tx_known;
  seen.nonce_used = nonce_used;
  return seen;
}

Operation Op(Settlement settlement, Fulfillment fulfillment) {
  Operation op;
  op.id = "op_1";
  op.settlement = settlement;
  op.fulfillment = fulfillment;
  op.attempts = 1;
  return op;
}

const ChainObservation kPending = Seen(ReceiptView::kNone, true, false);
const ChainObservation kGone = Seen(ReceiptView::kNone, false, false);

TEST(ReconcilerLook, RQ1ATransactionHeldAtTheNextNonceAsksAtOnce) {
  EXPECT_TRUE(AsksForReplacement(kPending, true, 0, 60'000, 100, 200));
}

TEST(ReconcilerLook, RQ2AnUnminedTransactionAsksOnceOldEnough) {
  EXPECT_TRUE(AsksForReplacement(kPending, false, 60'000, 60'000, 100, 200));
  EXPECT_TRUE(AsksForReplacement(kGone, false, 90'000, 60'000, 100, 200));
  EXPECT_FALSE(AsksForReplacement(kPending, false, 59'999, 60'000, 100, 200));
}

TEST(ReconcilerLook, RQ3AReceiptAUsedNonceOrAnExpiredAuthorizationNeverAsks) {
  EXPECT_FALSE(AsksForReplacement(Seen(ReceiptView::kReverted, true, false), true, 0, 0, 100, 200));
  EXPECT_FALSE(AsksForReplacement(Seen(ReceiptView::kSuccessWithTransfer, true, true), true, 0, 0,
                                  100, 200));
  EXPECT_FALSE(AsksForReplacement(Seen(ReceiptView::kNone, false, true), true, 0, 0, 100, 200));
  // At validBefore a transaction mined would only revert.
  EXPECT_FALSE(AsksForReplacement(kPending, true, 0, 0, 200, 200));
  EXPECT_TRUE(AsksForReplacement(kPending, true, 0, 0, 199, 200));
}

TEST(ReconcilerLook, RL1ASubmittedOperationIsMarkedUnknownFirst) {
  for (Settlement s : {Settlement::kSubmitted, Settlement::kUnknown}) {
    ReconcilerLook look = DecideReconcilerLook(Op(s, Fulfillment::kNotStarted),
                                               ReconcileAction::kWait, kPending, false);
    EXPECT_EQ(look.mark_unknown, s == Settlement::kSubmitted);
  }
}

TEST(ReconcilerLook, RL2RL3AStuckTransactionIsReplacedWhereItWaitsOrWouldBeSentAgain) {
  const Operation op = Op(Settlement::kUnknown, Fulfillment::kNotStarted);
  ReconcilerLook pending = DecideReconcilerLook(op, ReconcileAction::kWait, kPending, true);
  EXPECT_EQ(pending.outcome, ReconcilerOutcome::kReplace);
  EXPECT_EQ(pending.action, ReconcileAction::kWait);
  EXPECT_TRUE(pending.broadcast);
  EXPECT_FALSE(pending.resolved);
  ReconcilerLook gone = DecideReconcilerLook(op, ReconcileAction::kRebroadcast, kGone, true);
  EXPECT_EQ(gone.outcome, ReconcilerOutcome::kReplace);
  EXPECT_EQ(gone.action, ReconcileAction::kWait);  // the replacement is the broadcast
  EXPECT_TRUE(gone.broadcast);
  // Waiting without being pending (the node does not know it, not yet expired): no replacement.
  EXPECT_EQ(DecideReconcilerLook(op, ReconcileAction::kWait, kGone, true).outcome,
            ReconcilerOutcome::kWait);
}

TEST(ReconcilerLook, RL4SettledIsResolvedAndSendsNothing) {
  ReconcilerLook look = DecideReconcilerLook(
      Op(Settlement::kUnknown, Fulfillment::kNotStarted), ReconcileAction::kMarkSettled,
      Seen(ReceiptView::kSuccessWithTransfer, true, true), true);
  EXPECT_EQ(look, (ReconcilerLook{false, ReconcilerOutcome::kSettle, ReconcileAction::kMarkSettled,
                                  Settlement::kNone, false, true}));
}

TEST(ReconcilerLook, RL5WithoutAReplacementTheSameBytesGoAgain) {
  ReconcilerLook look = DecideReconcilerLook(Op(Settlement::kUnknown, Fulfillment::kNotStarted),
                                             ReconcileAction::kRebroadcast, kGone, false);
  EXPECT_EQ(look, (ReconcilerLook{false, ReconcilerOutcome::kRebroadcast,
                                  ReconcileAction::kRebroadcast, Settlement::kNone, true, false}));
}

TEST(ReconcilerLook, RL6AnAnswerAlreadyGivenStaysAndIsReportedLost) {
  const Operation delivered = Op(Settlement::kUnknown, Fulfillment::kSucceeded);
  ReconcilerLook void_ = DecideReconcilerLook(delivered, ReconcileAction::kMarkVoid, kGone, false);
  EXPECT_EQ(void_.outcome, ReconcilerOutcome::kLostAfterDelivery);
  EXPECT_EQ(void_.lost_as, Settlement::kVoid);
  EXPECT_TRUE(void_.broadcast);  // the node lost it: sent once more to use up its nonce
  EXPECT_TRUE(void_.resolved);
  ReconcilerLook failed = DecideReconcilerLook(delivered, ReconcileAction::kMarkFailed,
                                               Seen(ReceiptView::kNone, false, true), false);
  EXPECT_EQ(failed.outcome, ReconcilerOutcome::kLostAfterDelivery);
  EXPECT_EQ(failed.lost_as, Settlement::kFailed);
  EXPECT_FALSE(failed.broadcast);
  EXPECT_TRUE(failed.resolved);
}

TEST(ReconcilerLook, RL7RL8VoidAndFailed) {
  const Operation op = Op(Settlement::kUnknown, Fulfillment::kPendingRetry);
  ReconcilerLook lost = DecideReconcilerLook(op, ReconcileAction::kMarkVoid, kGone, false);
  EXPECT_EQ(lost, (ReconcilerLook{false, ReconcilerOutcome::kVoid, ReconcileAction::kMarkVoid,
                                  Settlement::kNone, true, true}));
  ReconcilerLook known = DecideReconcilerLook(op, ReconcileAction::kMarkVoid, kPending, false);
  EXPECT_FALSE(known.broadcast);  // the node holds it: nothing to send
  ReconcilerLook failed = DecideReconcilerLook(op, ReconcileAction::kMarkFailed, kGone, false);
  EXPECT_EQ(failed, (ReconcilerLook{false, ReconcilerOutcome::kFail, ReconcileAction::kMarkFailed,
                                    Settlement::kNone, false, true}));
}

TEST(ReconcilerLook, RL9WaitDoesNothing) {
  ReconcilerLook look = DecideReconcilerLook(Op(Settlement::kUnknown, Fulfillment::kNotStarted),
                                             ReconcileAction::kWait, kPending, false);
  EXPECT_EQ(look, ReconcilerLook{});
}

// Every combination: resolved exactly when the money is decided; a replacement only where it is
// sent instead of the same bytes or of nothing; nothing sent for a settled operation; a
// replacement never on a decided one.
TEST(ReconcilerLook, EveryCombinationKeepsTheRules) {
  for (Settlement s : {Settlement::kSubmitted, Settlement::kUnknown, Settlement::kSettled}) {
    for (Fulfillment f : {Fulfillment::kNotStarted, Fulfillment::kPendingRetry,
                          Fulfillment::kSucceeded, Fulfillment::kRejected}) {
      if (s == Settlement::kSubmitted &&
          (f == Fulfillment::kSucceeded || f == Fulfillment::kRejected)) {
        continue;  // a submitted operation has no answer yet
      }
      for (ReconcileAction a :
           {ReconcileAction::kMarkSettled, ReconcileAction::kRebroadcast,
            ReconcileAction::kMarkVoid, ReconcileAction::kMarkFailed, ReconcileAction::kWait}) {
        for (ReceiptView r :
             {ReceiptView::kNone, ReceiptView::kSuccessWithTransfer,
              ReceiptView::kSuccessWithoutMatchingTransfer, ReceiptView::kReverted}) {
          for (bool known : {false, true}) {
            for (bool replacement : {false, true}) {
              const ReconcilerLook look =
                  DecideReconcilerLook(Op(s, f), a, Seen(r, known, false), replacement);
              const bool decided = a == ReconcileAction::kMarkSettled ||
                                   a == ReconcileAction::kMarkVoid ||
                                   a == ReconcileAction::kMarkFailed;
              EXPECT_EQ(look.resolved, decided);
              if (look.outcome == ReconcilerOutcome::kReplace) {
                EXPECT_TRUE(replacement);
                EXPECT_FALSE(decided);
                EXPECT_TRUE(look.broadcast);
              }
              if (a == ReconcileAction::kMarkSettled || a == ReconcileAction::kMarkFailed) {
                EXPECT_FALSE(look.broadcast);
              }
              EXPECT_EQ(look.mark_unknown, s == Settlement::kSubmitted);
              EXPECT_EQ(look.outcome == ReconcilerOutcome::kLostAfterDelivery,
                        decided && a != ReconcileAction::kMarkSettled && IsFinal(Op(s, f)));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace agentpay
