// The x402 request's wait for its receipt: every row of core/receipt_wait.h (RW1–RW10), and over
// every combination, that only the chain's own verdict ends the wait settled or failed.
#include "core/receipt_wait.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentpay {
namespace {

constexpr ReceiptSeen kAllSeen[] = {ReceiptSeen::kLookFailed, ReceiptSeen::kNone,
                                    ReceiptSeen::kPaidUs, ReceiptSeen::kMinedOtherwise};
constexpr ReconcileAction kAllActions[] = {
    ReconcileAction::kMarkSettled, ReconcileAction::kRebroadcast, ReconcileAction::kMarkVoid,
    ReconcileAction::kMarkFailed, ReconcileAction::kWait};

std::vector<std::optional<ReconcileAction>> AllReconciled() {
  std::vector<std::optional<ReconcileAction>> all = {std::nullopt};
  for (ReconcileAction action : kAllActions) all.push_back(action);
  return all;
}

TEST(ReceiptWait, RW1RW2AFailedLookIsRetriedUntilTheDeadlineThenUnknown) {
  EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kLookFailed, false), ReceiptStep::kLookAgain);
  EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kLookFailed, true), ReceiptStep::kUnknown);
}

TEST(ReceiptWait, RW3RW4NoReceiptLooksAgainThenTakesAFullLookAtTheDeadline) {
  EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kNone, false), ReceiptStep::kLookAgain);
  EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kNone, true), ReceiptStep::kObserve);
}

TEST(ReceiptWait, RW5AReceiptIsAlwaysFollowedByAFullLook) {
  for (bool deadline : {false, true}) {
    EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kPaidUs, deadline), ReceiptStep::kObserve);
    EXPECT_EQ(AfterReceiptLook(ReceiptSeen::kMinedOtherwise, deadline), ReceiptStep::kObserve);
  }
}

TEST(ReceiptWait, RW6RW7TheChainsVerdictEndsTheWait) {
  for (ReceiptSeen seen :
       {ReceiptSeen::kNone, ReceiptSeen::kPaidUs, ReceiptSeen::kMinedOtherwise}) {
    for (bool deadline : {false, true}) {
      EXPECT_EQ(AfterReceiptObservation(seen, ReconcileAction::kMarkSettled, deadline),
                ReceiptStep::kSettled);
      EXPECT_EQ(AfterReceiptObservation(seen, ReconcileAction::kMarkFailed, deadline),
                ReceiptStep::kFailed);
    }
  }
}

TEST(ReceiptWait, RW8MinedWithoutPayingUsIsLeftToTheReconciler) {
  for (std::optional<ReconcileAction> reconciled :
       {std::optional<ReconcileAction>(), std::optional(ReconcileAction::kWait),
        std::optional(ReconcileAction::kMarkVoid), std::optional(ReconcileAction::kRebroadcast)}) {
    for (bool deadline : {false, true}) {
      EXPECT_EQ(AfterReceiptObservation(ReceiptSeen::kMinedOtherwise, reconciled, deadline),
                ReceiptStep::kUnknown);
    }
  }
}

TEST(ReceiptWait, RW9RW10ShortOfConfirmationsOrPendingWaitsUntilTheDeadlineThenUnknown) {
  // Paid us, fewer blocks deep than --confirmations (Reconcile: kWait), or the full look failed.
  for (std::optional<ReconcileAction> reconciled :
       {std::optional<ReconcileAction>(), std::optional(ReconcileAction::kWait)}) {
    EXPECT_EQ(AfterReceiptObservation(ReceiptSeen::kPaidUs, reconciled, false),
              ReceiptStep::kLookAgain);
    EXPECT_EQ(AfterReceiptObservation(ReceiptSeen::kPaidUs, reconciled, true),
              ReceiptStep::kUnknown);
    // Still pending at the deadline (the last look's full look): unknown, never failed.
    EXPECT_EQ(AfterReceiptObservation(ReceiptSeen::kNone, reconciled, true), ReceiptStep::kUnknown);
  }
}

// A receipt timeout is not a failure: over every combination, the wait ends settled only on
// Reconcile's kMarkSettled and failed only on its kMarkFailed, and a full look never asks for
// another one.
TEST(ReceiptWait, OnlyTheChainsVerdictSettlesOrFailsAPayment) {
  for (ReceiptSeen seen : kAllSeen) {
    for (bool deadline : {false, true}) {
      ReceiptStep look = AfterReceiptLook(seen, deadline);
      EXPECT_NE(look, ReceiptStep::kSettled);
      EXPECT_NE(look, ReceiptStep::kFailed);
      if (look != ReceiptStep::kObserve) continue;
      for (std::optional<ReconcileAction> reconciled : AllReconciled()) {
        ReceiptStep step = AfterReceiptObservation(seen, reconciled, deadline);
        EXPECT_NE(step, ReceiptStep::kObserve);
        EXPECT_EQ(step == ReceiptStep::kSettled, reconciled == ReconcileAction::kMarkSettled)
            << ReceiptStepName(step);
        EXPECT_EQ(step == ReceiptStep::kFailed, reconciled == ReconcileAction::kMarkFailed)
            << ReceiptStepName(step);
        // Once the deadline has passed the wait ends, one way or another.
        if (deadline) {
          EXPECT_NE(step, ReceiptStep::kLookAgain);
        }
      }
    }
  }
}

TEST(ReceiptWaitDeathTest, AFailedLookIsNeverFollowedByAFullLook) {
  EXPECT_DEATH(AfterReceiptObservation(ReceiptSeen::kLookFailed, std::nullopt, true),
               "kLookFailed");
}

}  // namespace
}  // namespace agentpay
