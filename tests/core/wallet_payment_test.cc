// The wallet payment's state machine: every row of the table in core/wallet_payment.h (W1–W21),
// the events it refuses, and a walk over every course a payment can take.
#include "core/wallet_payment.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentpay {
namespace {

WalletPayment In(WalletPhase phase, bool presumed_new = false, bool after_conflict = false) {
  return {phase, presumed_new, after_conflict};
}

WalletEffect Effect(WalletEffectKind kind) { return {kind}; }
WalletEffect BeginEffect(bool presume_new) { return {WalletEffectKind::kBegin, presume_new}; }
WalletEffect ReplyEffect(WalletAnswer answer) {
  WalletEffect effect{WalletEffectKind::kReply};
  effect.answer = answer;
  return effect;
}
WalletEffect ReplyWhenDurable(WalletAnswer answer) {
  WalletEffect effect{WalletEffectKind::kReplyWhenDurable};
  effect.record_arrival = true;
  effect.answer = answer;
  return effect;
}

void ExpectStep(const WalletPayment& from, const WalletEvent& event, WalletPhase phase,
                const WalletEffect& effect) {
  WalletTransition t = Step(from, event);
  EXPECT_EQ(t.next.phase, phase) << WalletPhaseName(t.next.phase);
  EXPECT_EQ(t.effect, effect) << WalletEffectKindName(t.effect.kind) << " "
                              << WalletAnswerName(t.effect.answer);
}

TEST(WalletPayment, W1AStartThatLooksFirstLooks) {
  ExpectStep(In(WalletPhase::kStart), WalletStarted{false, std::nullopt}, WalletPhase::kLooking,
             Effect(WalletEffectKind::kLook));
  EXPECT_FALSE(
      Step(In(WalletPhase::kStart), WalletStarted{false, std::nullopt}).next.after_conflict);
}

TEST(WalletPayment, W2AStartThatPresumesTheKeyNewBeginsAtOnce) {
  WalletTransition t = Step(In(WalletPhase::kStart), WalletStarted{true, std::nullopt});
  EXPECT_EQ(t.next, In(WalletPhase::kBeginning, true));
  EXPECT_EQ(t.effect, BeginEffect(true));
}

TEST(WalletPayment, W20W21AKeyTheAnswerCacheHoldsIsAnsweredAtOnceWhereverReadsAre) {
  for (bool remote : {false, true}) {
    WalletEffect replay = ReplyEffect(WalletAnswer::kReplay);
    replay.record_arrival = true;
    ExpectStep(In(WalletPhase::kStart), WalletStarted{remote, ArrivalOutcome::kReplay},
               WalletPhase::kDone, replay);
    WalletEffect mismatch = ReplyEffect(WalletAnswer::kMismatch);
    mismatch.record_arrival = true;
    ExpectStep(In(WalletPhase::kStart), WalletStarted{remote, ArrivalOutcome::kMismatch},
               WalletPhase::kDone, mismatch);
  }
}

TEST(WalletPayment, W3AReadNoReaderTookIsDecidedByTheWriterAsTheKeyIs) {
  for (bool after_conflict : {false, true}) {
    ExpectStep(In(WalletPhase::kLooking, false, after_conflict),
               WalletLooked{ReadResult::kOverloaded, std::nullopt}, WalletPhase::kBeginning,
               BeginEffect(false));
  }
}

TEST(WalletPayment, W4AFailedReadIsAnsweredWithTheStoresProblem) {
  ExpectStep(In(WalletPhase::kLooking), WalletLooked{ReadResult::kFailed, std::nullopt},
             WalletPhase::kDone, ReplyEffect(WalletAnswer::kStoreProblem));
}

TEST(WalletPayment, W5AFinalOperationIsReplayedFromTheReadOnceDurable) {
  for (bool after_conflict : {false, true}) {
    ExpectStep(In(WalletPhase::kLooking, true, after_conflict),
               WalletLooked{ReadResult::kOk, ArrivalOutcome::kReplay}, WalletPhase::kDone,
               ReplyWhenDurable(WalletAnswer::kReplay));
  }
}

TEST(WalletPayment, W6AnotherRequestUnderTheKeyIsRefusedFromTheReadOnceDurable) {
  for (bool after_conflict : {false, true}) {
    ExpectStep(In(WalletPhase::kLooking, true, after_conflict),
               WalletLooked{ReadResult::kOk, ArrivalOutcome::kMismatch}, WalletPhase::kDone,
               ReplyWhenDurable(WalletAnswer::kMismatch));
  }
}

TEST(WalletPayment, W7AKeyNotFoundOnTheFirstLookIsReservedAsNew) {
  WalletTransition t = Step(In(WalletPhase::kLooking), WalletLooked{ReadResult::kOk, std::nullopt});
  EXPECT_EQ(t.next, In(WalletPhase::kBeginning, true));
  EXPECT_EQ(t.effect, BeginEffect(true));
}

TEST(WalletPayment, W8AKeyFoundInFlightOrKeptOrExpiredIsDecidedAsItIs) {
  for (ArrivalOutcome arrival :
       {ArrivalOutcome::kAttach, ArrivalOutcome::kResume, ArrivalOutcome::kNew}) {
    ExpectStep(In(WalletPhase::kLooking), WalletLooked{ReadResult::kOk, arrival},
               WalletPhase::kBeginning, BeginEffect(false));
  }
  // A key whose operation the read did not see (pruned between the two lookups) is not new.
  WalletLooked gone{ReadResult::kOk, std::nullopt};
  gone.operation_gone = true;
  ExpectStep(In(WalletPhase::kLooking), gone, WalletPhase::kBeginning, BeginEffect(false));
  // After a conflict even a key the second look does not find (deleted meanwhile) is decided as
  // it is: never a second presumption.
  ExpectStep(In(WalletPhase::kLooking, true, true), WalletLooked{ReadResult::kOk, std::nullopt},
             WalletPhase::kBeginning, BeginEffect(false));
}

TEST(WalletPayment, W9AKeyPresumedNewAndFoundTakenIsLookedAt) {
  WalletTransition t =
      Step(In(WalletPhase::kBeginning, true), WalletBegun{CommitResult::kKeyTaken, {}});
  EXPECT_EQ(t.next.phase, WalletPhase::kLooking);
  EXPECT_TRUE(t.next.after_conflict);
  EXPECT_EQ(t.effect, Effect(WalletEffectKind::kLook));
}

TEST(WalletPayment, W10AFailedBeginIsAnsweredWithTheStoresProblem) {
  for (bool presumed_new : {false, true}) {
    ExpectStep(In(WalletPhase::kBeginning, presumed_new), WalletBegun{CommitResult::kFailed, {}},
               WalletPhase::kDone, ReplyEffect(WalletAnswer::kStoreProblem));
  }
}

TEST(WalletPayment, W11ToW14WhatTheBeginDecisionFoundIsAnswered) {
  ExpectStep(In(WalletPhase::kBeginning), WalletBegun{CommitResult::kOk, BeginOutcome::kReplay},
             WalletPhase::kDone, ReplyEffect(WalletAnswer::kReplay));
  ExpectStep(In(WalletPhase::kBeginning), WalletBegun{CommitResult::kOk, BeginOutcome::kMismatch},
             WalletPhase::kDone, ReplyEffect(WalletAnswer::kMismatch));
  ExpectStep(In(WalletPhase::kBeginning), WalletBegun{CommitResult::kOk, BeginOutcome::kAttach},
             WalletPhase::kDone, Effect(WalletEffectKind::kAttach));
  for (bool presumed_new : {false, true}) {
    ExpectStep(In(WalletPhase::kBeginning, presumed_new),
               WalletBegun{CommitResult::kOk, BeginOutcome::kInsufficientFunds}, WalletPhase::kDone,
               ReplyEffect(WalletAnswer::kInsufficientFunds));
  }
}

TEST(WalletPayment, W15AReservedKeyWithItsPriceHeldCallsTheUpstream) {
  for (bool presumed_new : {false, true}) {
    ExpectStep(In(WalletPhase::kBeginning, presumed_new),
               WalletBegun{CommitResult::kOk, BeginOutcome::kProceed},
               WalletPhase::kCallingUpstream, Effect(WalletEffectKind::kCallUpstream));
  }
}

TEST(WalletPayment, W16AnyUpstreamAnswerGoesToTheFinishDecision) {
  ExpectStep(In(WalletPhase::kCallingUpstream), WalletUpstreamAnswered{}, WalletPhase::kFinishing,
             Effect(WalletEffectKind::kFinish));
}

TEST(WalletPayment, W17ToW19TheFinishDecisionsCommitPicksTheAnswer) {
  ExpectStep(In(WalletPhase::kFinishing), WalletFinished{CommitResult::kOk}, WalletPhase::kDone,
             ReplyEffect(WalletAnswer::kVerdict));
  ExpectStep(In(WalletPhase::kFinishing), WalletFinished{CommitResult::kClaimLost},
             WalletPhase::kDone, ReplyEffect(WalletAnswer::kTakenOver));
  ExpectStep(In(WalletPhase::kFinishing), WalletFinished{CommitResult::kFailed}, WalletPhase::kDone,
             ReplyEffect(WalletAnswer::kOutcomeUnrecorded));
}

// Events that no effect of the phase can produce are the shell's bug, and abort.
TEST(WalletPaymentDeathTest, AnEventOutOfItsPhaseAborts) {
  EXPECT_DEATH(Step(In(WalletPhase::kStart), WalletUpstreamAnswered{}), "holds_alternative");
  EXPECT_DEATH(Step(In(WalletPhase::kLooking), WalletFinished{}), "holds_alternative");
  EXPECT_DEATH(Step(In(WalletPhase::kDone), WalletStarted{}), "false");
  // The cache answers only a final operation's arrivals.
  EXPECT_DEATH(Step(In(WalletPhase::kStart), WalletStarted{false, ArrivalOutcome::kAttach}),
               "kReplay");
  // Only a key reserved as new can be found taken; a begin decision has no claim to lose.
  EXPECT_DEATH(Step(In(WalletPhase::kBeginning, false), WalletBegun{CommitResult::kKeyTaken, {}}),
               "presumed_new");
  EXPECT_DEATH(Step(In(WalletPhase::kBeginning, true), WalletBegun{CommitResult::kClaimLost, {}}),
               "kClaimLost");
  EXPECT_DEATH(Step(In(WalletPhase::kFinishing), WalletFinished{CommitResult::kKeyTaken}), "false");
}

// Every event each phase can get, in every order the shell can feed them: each course ends in
// kDone with exactly one answer (a reply or an attach), calls the upstream at most once, looks at
// the key at most twice and decides begin at most twice.
TEST(WalletPayment, EveryCourseEndsWithOneAnswerAndBoundedWork) {
  auto events_for = [](const WalletPayment& p) -> std::vector<WalletEvent> {
    switch (p.phase) {
      case WalletPhase::kStart:
        return {WalletStarted{false, std::nullopt}, WalletStarted{true, std::nullopt},
                WalletStarted{false, ArrivalOutcome::kReplay},
                WalletStarted{true, ArrivalOutcome::kMismatch}};
      case WalletPhase::kLooking: {
        std::vector<WalletEvent> all = {WalletLooked{ReadResult::kOverloaded, std::nullopt},
                                        WalletLooked{ReadResult::kFailed, std::nullopt},
                                        WalletLooked{ReadResult::kOk, std::nullopt}};
        for (ArrivalOutcome a :
             {ArrivalOutcome::kNew, ArrivalOutcome::kReplay, ArrivalOutcome::kMismatch,
              ArrivalOutcome::kAttach, ArrivalOutcome::kResume}) {
          all.push_back(WalletLooked{ReadResult::kOk, a});
        }
        all.push_back(WalletLooked{ReadResult::kOk, std::nullopt, /*operation_gone=*/true});
        return all;
      }
      case WalletPhase::kBeginning: {
        std::vector<WalletEvent> all = {WalletBegun{CommitResult::kFailed, {}}};
        if (p.presumed_new) all.push_back(WalletBegun{CommitResult::kKeyTaken, {}});
        for (BeginOutcome o :
             {BeginOutcome::kProceed, BeginOutcome::kReplay, BeginOutcome::kMismatch,
              BeginOutcome::kAttach, BeginOutcome::kInsufficientFunds}) {
          all.push_back(WalletBegun{CommitResult::kOk, o});
        }
        return all;
      }
      case WalletPhase::kCallingUpstream:
        return {WalletUpstreamAnswered{}};
      case WalletPhase::kFinishing:
        return {WalletFinished{CommitResult::kOk}, WalletFinished{CommitResult::kClaimLost},
                WalletFinished{CommitResult::kFailed}};
      case WalletPhase::kDone:
        return {};
    }
    return {};
  };
  struct Course {
    WalletPayment payment;
    int looks = 0, begins = 0, upstream_calls = 0, answers = 0, steps = 0;
  };
  std::vector<Course> open = {{}};
  int finished = 0;
  while (!open.empty()) {
    Course course = open.back();
    open.pop_back();
    if (course.payment.phase == WalletPhase::kDone) {
      EXPECT_EQ(course.answers, 1);
      EXPECT_LE(course.looks, 2);
      EXPECT_LE(course.begins, 2);
      EXPECT_LE(course.upstream_calls, 1);
      ++finished;
      continue;
    }
    ASSERT_LT(course.steps, 10) << "a course that does not end";
    for (const WalletEvent& event : events_for(course.payment)) {
      WalletTransition t = Step(course.payment, event);
      Course next = course;
      next.payment = t.next;
      ++next.steps;
      switch (t.effect.kind) {
        case WalletEffectKind::kLook:
          ++next.looks;
          break;
        case WalletEffectKind::kBegin:
          ++next.begins;
          break;
        case WalletEffectKind::kCallUpstream:
          ++next.upstream_calls;
          break;
        case WalletEffectKind::kFinish:
          break;
        case WalletEffectKind::kAttach:
        case WalletEffectKind::kReply:
        case WalletEffectKind::kReplyWhenDurable:
          ++next.answers;
          break;
      }
      // An answer is a reply and ends the course; anything else is not one.
      EXPECT_EQ(t.next.phase == WalletPhase::kDone, next.answers == 1);
      EXPECT_EQ(t.effect.answer != WalletAnswer::kNone,
                t.effect.kind == WalletEffectKind::kReply ||
                    t.effect.kind == WalletEffectKind::kReplyWhenDurable);
      open.push_back(next);
    }
  }
  EXPECT_GT(finished, 50);
}

}  // namespace
}  // namespace agentpay
