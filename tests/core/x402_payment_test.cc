// The x402 payment's state machine: every row of the table in core/x402_payment.h (A0–C6), the
// events it refuses, and a walk over every course a payment can take.
#include "core/x402_payment.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

namespace agentpay {
namespace {

X402Payment In(X402Phase phase) {
  X402Payment payment;
  payment.phase = phase;
  return payment;
}

X402Effect Effect(X402EffectKind kind) { return {kind}; }
X402Effect ReplyEffect(X402Answer answer) {
  X402Effect effect{X402EffectKind::kReply};
  effect.answer = answer;
  return effect;
}
X402Effect RecordEffect(X402Record record) {
  X402Effect effect{X402EffectKind::kRecord};
  effect.record = record;
  return effect;
}
X402Effect PreflightEffect(bool first) {
  X402Effect effect{X402EffectKind::kPreflight};
  effect.take_payer_token = first;
  return effect;
}

X402Transition ExpectStep(const X402Payment& from, const X402Event& event, X402Phase phase,
                          const X402Effect& effect) {
  X402Transition t = Step(from, event);
  EXPECT_EQ(t.next.phase, phase) << X402PhaseName(t.next.phase);
  EXPECT_EQ(t.effect, effect) << X402EffectKindName(t.effect.kind) << " "
                              << X402AnswerName(t.effect.answer) << " "
                              << X402RecordName(t.effect.record);
  return t;
}

X402Decided Arrival(X402Arrival arrival, bool submitted = false) {
  return {CommitResult::kOk, arrival, submitted};
}

TEST(X402Payment, A0TheRoundsSpentEndThePaymentWithoutAnotherLook) {
  X402Payment spent = In(X402Phase::kProving);
  spent.rounds = kMaxX402Rounds;
  ExpectStep(spent, X402ChainAnswered{X402ChainAsk::kAnswered}, X402Phase::kDone,
             ReplyEffect(X402Answer::kTooManyRounds));
  X402Payment covered = In(X402Phase::kPreflighting);
  covered.rounds = kMaxX402Rounds;
  ExpectStep(covered, X402Preflighted{X402Preflight::kCovered}, X402Phase::kDone,
             ReplyEffect(X402Answer::kTooManyRounds));
  // One short of the bound: one more round.
  spent.rounds = kMaxX402Rounds - 1;
  X402Transition t = ExpectStep(spent, X402ChainAnswered{X402ChainAsk::kAnswered},
                                X402Phase::kLooking, Effect(X402EffectKind::kLook));
  EXPECT_EQ(t.next.rounds, kMaxX402Rounds);
}

TEST(X402Payment, A1AStartLooksFirstAndCountsARound) {
  for (bool deferred : {false, true}) {
    X402Payment start;
    start.deferred_failure = deferred;
    X402Transition t =
        ExpectStep(start, X402Started{}, X402Phase::kLooking, Effect(X402EffectKind::kLook));
    EXPECT_EQ(t.next.rounds, 1);
    EXPECT_EQ(t.next.deferred_failure, deferred);
  }
}

TEST(X402Payment, A2AReadNoReaderTookIsDecidedByTheWriter) {
  ExpectStep(In(X402Phase::kLooking), X402Looked{ReadResult::kOverloaded, false},
             X402Phase::kDeciding, Effect(X402EffectKind::kDecide));
}

TEST(X402Payment, A3AFailedReadIsAnsweredWithTheStoresProblem) {
  ExpectStep(In(X402Phase::kLooking), X402Looked{ReadResult::kFailed, false}, X402Phase::kDone,
             ReplyEffect(X402Answer::kStoreProblem));
}

TEST(X402Payment, A4AKeyOrAuthorizationFoundIsDecided) {
  ExpectStep(In(X402Phase::kLooking), X402Looked{ReadResult::kOk, false}, X402Phase::kDeciding,
             Effect(X402EffectKind::kDecide));
}

TEST(X402Payment, A5NothingFoundGoesToTheChainWithoutADecision) {
  X402Transition t = ExpectStep(In(X402Phase::kLooking), X402Looked{ReadResult::kOk, true},
                                X402Phase::kPreflighting, PreflightEffect(true));
  EXPECT_EQ(t.next.cover_reads, 1);
  X402Payment deferred = In(X402Phase::kLooking);
  deferred.deferred_failure = true;
  ExpectStep(deferred, X402Looked{ReadResult::kOk, true}, X402Phase::kDone,
             ReplyEffect(X402Answer::kDeferredFailure));
  X402Payment refused = In(X402Phase::kLooking);
  refused.preflight_refused = true;
  ExpectStep(refused, X402Looked{ReadResult::kOk, true}, X402Phase::kDone,
             ReplyEffect(X402Answer::kPreflightRefused));
}

TEST(X402Payment, D1AFailedArrivalDecisionIsAnsweredWithTheStoresProblem) {
  ExpectStep(In(X402Phase::kDeciding), X402Decided{CommitResult::kFailed}, X402Phase::kDone,
             ReplyEffect(X402Answer::kStoreProblem));
}

TEST(X402Payment, D2AnAttemptWithItsSettlementSubmittedSettlesFirst) {
  ExpectStep(In(X402Phase::kDeciding), Arrival(X402Arrival::kProceed, true), X402Phase::kSettling,
             Effect(X402EffectKind::kSettle));
}

TEST(X402Payment, D3AnAttemptWithNothingSubmittedCallsTheUpstream) {
  ExpectStep(In(X402Phase::kDeciding), Arrival(X402Arrival::kProceed, false),
             X402Phase::kCallingUpstream, Effect(X402EffectKind::kCallUpstream));
}

TEST(X402Payment, D4ToD10EachArrivalOutcomeHasItsAnswer) {
  struct Row {
    X402Arrival arrival;
    X402Answer answer;
  };
  for (Row row : {Row{X402Arrival::kReplay, X402Answer::kStateReplayed},                   // D4
                  Row{X402Arrival::kClosedUnpaid, X402Answer::kClosedUnpaid},              // D5
                  Row{X402Arrival::kMismatch, X402Answer::kMismatch},                      // D6
                  Row{X402Arrival::kAuthorizationTaken, X402Answer::kAuthorizationTaken},  // D8
                  Row{X402Arrival::kRefusePublic, X402Answer::kRefusePublic},              // D9
                  Row{X402Arrival::kUnderfunded, X402Answer::kUnderfunded}}) {             // D10
    ExpectStep(In(X402Phase::kDeciding), Arrival(row.arrival), X402Phase::kDone,
               ReplyEffect(row.answer));
  }
  ExpectStep(In(X402Phase::kDeciding), Arrival(X402Arrival::kAttach), X402Phase::kDone,
             Effect(X402EffectKind::kAttach));  // D7
}

TEST(X402Payment, D11ANewKeyWithADeferredFailureIsRefusedBeforeTheChain) {
  X402Payment deferred = In(X402Phase::kDeciding);
  deferred.deferred_failure = true;
  ExpectStep(deferred, Arrival(X402Arrival::kNeedsPreflight), X402Phase::kDone,
             ReplyEffect(X402Answer::kDeferredFailure));
}

TEST(X402Payment, D12ANewKeyTheTokenRefusedIsRefusedWithItsReason) {
  X402Payment refused = In(X402Phase::kDeciding);
  refused.preflight_refused = true;
  ExpectStep(refused, Arrival(X402Arrival::kNeedsPreflight), X402Phase::kDone,
             ReplyEffect(X402Answer::kPreflightRefused));
}

TEST(X402Payment, D13ANewKeyAsksTheChainFirst) {
  X402Transition t = ExpectStep(In(X402Phase::kDeciding), Arrival(X402Arrival::kNeedsPreflight),
                                X402Phase::kPreflighting, PreflightEffect(true));
  EXPECT_EQ(t.next.cover_reads, 1);
}

TEST(X402Payment, D14ReservationsThatMovedAreReadAgainWithoutASecondRateToken) {
  X402Payment covered = In(X402Phase::kDeciding);
  covered.covered = true;
  covered.cover_reads = 1;
  X402Transition t = ExpectStep(covered, Arrival(X402Arrival::kReadAgain), X402Phase::kPreflighting,
                                PreflightEffect(false));
  EXPECT_FALSE(t.next.covered);  // the inputs read before are dropped
  EXPECT_EQ(t.next.cover_reads, 2);
}

TEST(X402Payment, D15ReservationsThatKeepMovingEndThePayment) {
  X402Payment covered = In(X402Phase::kDeciding);
  covered.covered = true;
  covered.cover_reads = kMaxX402CoverReads;
  ExpectStep(covered, Arrival(X402Arrival::kReadAgain), X402Phase::kDone,
             ReplyEffect(X402Answer::kCoverKeptMoving));
  // Whatever asks for the preflight: the bound holds.
  X402Payment spent = In(X402Phase::kDeciding);
  spent.cover_reads = kMaxX402CoverReads;
  ExpectStep(spent, Arrival(X402Arrival::kNeedsPreflight), X402Phase::kDone,
             ReplyEffect(X402Answer::kCoverKeptMoving));
}

TEST(X402Payment, D16AKeyPaidWithAnotherAuthorizationAsksTheChainAboutThisOne) {
  ExpectStep(In(X402Phase::kDeciding), Arrival(X402Arrival::kNeedsProof), X402Phase::kProving,
             Effect(X402EffectKind::kAskChain));
}

TEST(X402Payment, P1ACoveredPaymentIsDecidedWithoutAnotherLook) {
  X402Transition t =
      ExpectStep(In(X402Phase::kPreflighting), X402Preflighted{X402Preflight::kCovered},
                 X402Phase::kDeciding, Effect(X402EffectKind::kDecide));
  EXPECT_TRUE(t.next.covered);
  EXPECT_EQ(t.next.rounds, 1);
}

TEST(X402Payment, P2ARefusedPaymentIsLookedAtAgainBeforeItIsRefused) {
  X402Transition t =
      ExpectStep(In(X402Phase::kPreflighting), X402Preflighted{X402Preflight::kRefused},
                 X402Phase::kLooking, Effect(X402EffectKind::kLook));
  EXPECT_TRUE(t.next.preflight_refused);
  EXPECT_FALSE(t.next.covered);
}

TEST(X402Payment, P3ToP8APreflightThatCannotGoOnIsAnswered) {
  struct Row {
    X402Preflight result;
    X402Answer answer;
  };
  for (Row row : {Row{X402Preflight::kStoreFailed, X402Answer::kStoreProblem},  // P3
                  Row{X402Preflight::kFeesTooHigh, X402Answer::kFeesTooHigh},   // P4
                  Row{X402Preflight::kChainUnavailable, X402Answer::kPreflightChainUnavailable},
                  Row{X402Preflight::kPayerLimited, X402Answer::kPayerLimited},          // P6
                  Row{X402Preflight::kPayerRateLimited, X402Answer::kPayerRateLimited},  // P7
                  Row{X402Preflight::kQueueFull, X402Answer::kChainQueueFull}}) {        // P8
    ExpectStep(In(X402Phase::kPreflighting), X402Preflighted{row.result}, X402Phase::kDone,
               ReplyEffect(row.answer));
  }
}

TEST(X402Payment, Q1TheChainsAnswerIsTakenToAnotherLook) {
  ExpectStep(In(X402Phase::kProving), X402ChainAnswered{X402ChainAsk::kAnswered},
             X402Phase::kLooking, Effect(X402EffectKind::kLook));
}

TEST(X402Payment, Q2Q3AProofTheChainCannotGiveIsAnswered) {
  ExpectStep(In(X402Phase::kProving), X402ChainAnswered{X402ChainAsk::kFailed}, X402Phase::kDone,
             ReplyEffect(X402Answer::kProofChainUnavailable));
  ExpectStep(In(X402Phase::kProving), X402ChainAnswered{X402ChainAsk::kQueueFull}, X402Phase::kDone,
             ReplyEffect(X402Answer::kChainQueueFull));
}

TEST(X402Payment, U1AnUpstreamThatDeliveredBeforeTheSettlementReadsTheChainsInputs) {
  ExpectStep(In(X402Phase::kCallingUpstream), X402UpstreamAnswered{true}, X402Phase::kReadingInputs,
             Effect(X402EffectKind::kReadInputs));
}

TEST(X402Payment, U2AnyOtherUpstreamAnswerIsFinished) {
  ExpectStep(In(X402Phase::kCallingUpstream), X402UpstreamAnswered{false}, X402Phase::kFinishing,
             Effect(X402EffectKind::kFinish));
}

TEST(X402Payment, I1ToI3TheInputsForTheSignature) {
  ExpectStep(In(X402Phase::kReadingInputs), X402InputsRead{X402Inputs::kRead}, X402Phase::kSigning,
             Effect(X402EffectKind::kSign));
  X402Effect failed_call{X402EffectKind::kFinish};
  failed_call.as_failed_call = true;
  ExpectStep(In(X402Phase::kReadingInputs), X402InputsRead{X402Inputs::kUnavailable},
             X402Phase::kFinishing, failed_call);
  ExpectStep(In(X402Phase::kReadingInputs), X402InputsRead{X402Inputs::kStoredBroken},
             X402Phase::kDone, ReplyEffect(X402Answer::kStoreProblem));
}

TEST(X402Payment, S1ToS3TheSignatureDecision) {
  X402Transition t = ExpectStep(In(X402Phase::kSigning), X402Committed{CommitResult::kOk},
                                X402Phase::kSettling, Effect(X402EffectKind::kSettle));
  EXPECT_TRUE(t.next.holds_2xx);
  ExpectStep(In(X402Phase::kSigning), X402Committed{CommitResult::kClaimLost}, X402Phase::kDone,
             ReplyEffect(X402Answer::kTakenOver));
  ExpectStep(In(X402Phase::kSigning), X402Committed{CommitResult::kFailed}, X402Phase::kDone,
             ReplyEffect(X402Answer::kStoreProblem));
}

TEST(X402Payment, F1ToF3TheFinishDecision) {
  ExpectStep(In(X402Phase::kFinishing), X402Committed{CommitResult::kOk}, X402Phase::kDone,
             ReplyEffect(X402Answer::kVerdict));
  ExpectStep(In(X402Phase::kFinishing), X402Committed{CommitResult::kClaimLost}, X402Phase::kDone,
             ReplyEffect(X402Answer::kTakenOver));
  ExpectStep(In(X402Phase::kFinishing), X402Committed{CommitResult::kFailed}, X402Phase::kDone,
             ReplyEffect(X402Answer::kStoreProblem));
}

TEST(X402Payment, R1ToR4WhatTheReceiptWaitFoundIsRecorded) {
  ExpectStep(In(X402Phase::kSettling), X402ReceiptDecided{X402Receipt::kSettled},
             X402Phase::kRecording, RecordEffect(X402Record::kSettledThenCall));
  X402Payment holding = In(X402Phase::kSettling);
  holding.holds_2xx = true;
  ExpectStep(holding, X402ReceiptDecided{X402Receipt::kSettled}, X402Phase::kRecording,
             RecordEffect(X402Record::kSettledThenDeliver));
  for (bool holds : {false, true}) {
    X402Payment p = In(X402Phase::kSettling);
    p.holds_2xx = holds;
    ExpectStep(p, X402ReceiptDecided{X402Receipt::kFailed}, X402Phase::kRecording,
               RecordEffect(X402Record::kFailed));
    ExpectStep(p, X402ReceiptDecided{X402Receipt::kUnknown}, X402Phase::kRecording,
               RecordEffect(X402Record::kUnknown));
  }
}

X402Payment Recording(X402Record record) {
  X402Payment p = In(X402Phase::kRecording);
  p.recording = record;
  p.holds_2xx = record == X402Record::kSettledThenDeliver;
  return p;
}

TEST(X402Payment, C1AFailedRecordIsAnsweredWithTheStoresProblem) {
  for (X402Record record : {X402Record::kSettledThenCall, X402Record::kSettledThenDeliver,
                            X402Record::kFailed, X402Record::kUnknown}) {
    ExpectStep(Recording(record), X402Committed{CommitResult::kFailed}, X402Phase::kDone,
               ReplyEffect(X402Answer::kStoreProblem));
  }
}

TEST(X402Payment, C2C3ASettledAttemptCallsOrDelivers) {
  ExpectStep(Recording(X402Record::kSettledThenCall), X402Committed{CommitResult::kOk},
             X402Phase::kCallingUpstream, Effect(X402EffectKind::kCallUpstream));
  ExpectStep(Recording(X402Record::kSettledThenDeliver), X402Committed{CommitResult::kOk},
             X402Phase::kDone, ReplyEffect(X402Answer::kDelivered));
}

TEST(X402Payment, C4ASettledAttemptThatLostItsClaimAnswersTheSettledState) {
  for (X402Record record : {X402Record::kSettledThenCall, X402Record::kSettledThenDeliver}) {
    ExpectStep(Recording(record), X402Committed{CommitResult::kClaimLost}, X402Phase::kDone,
               ReplyEffect(X402Answer::kSettledElsewhere));
  }
}

TEST(X402Payment, C5C6FailedAndUnknownAreAnsweredWhoeverHoldsTheClaim) {
  for (CommitResult commit : {CommitResult::kOk, CommitResult::kClaimLost}) {
    ExpectStep(Recording(X402Record::kFailed), X402Committed{commit}, X402Phase::kDone,
               ReplyEffect(X402Answer::kSettlementFailed));
    ExpectStep(Recording(X402Record::kUnknown), X402Committed{commit}, X402Phase::kDone,
               ReplyEffect(X402Answer::kSettlementUnknown));
  }
}

TEST(X402PaymentDeathTest, EventsOutOfPhaseAbort) {
  EXPECT_DEATH(Step(In(X402Phase::kStart), X402Looked{}), "");
  EXPECT_DEATH(Step(In(X402Phase::kDeciding), X402Decided{CommitResult::kClaimLost}), "");
  EXPECT_DEATH(Step(In(X402Phase::kSigning), X402Committed{CommitResult::kKeyTaken}), "");
  EXPECT_DEATH(Step(In(X402Phase::kRecording), X402Committed{CommitResult::kOk}), "");  // no record
  EXPECT_DEATH(Step(In(X402Phase::kDone), X402Started{}), "");
  EXPECT_DEATH(Step(In(X402Phase::kSettling), X402UpstreamAnswered{}), "");
}

// Every event each phase can take, as the shell may report it.
std::vector<X402Event> EventsFor(X402Phase phase) {
  std::vector<X402Event> events;
  switch (phase) {
    case X402Phase::kStart:
      events.push_back(X402Started{});
      break;
    case X402Phase::kLooking:
      for (ReadResult read : {ReadResult::kOk, ReadResult::kOverloaded, ReadResult::kFailed}) {
        for (bool needs : {false, true}) events.push_back(X402Looked{read, needs});
      }
      break;
    case X402Phase::kDeciding:
      events.push_back(X402Decided{CommitResult::kFailed});
      for (X402Arrival a :
           {X402Arrival::kProceed, X402Arrival::kReplay, X402Arrival::kClosedUnpaid,
            X402Arrival::kMismatch, X402Arrival::kAttach, X402Arrival::kNeedsPreflight,
            X402Arrival::kAuthorizationTaken, X402Arrival::kNeedsProof, X402Arrival::kRefusePublic,
            X402Arrival::kReadAgain, X402Arrival::kUnderfunded}) {
        events.push_back(Arrival(a));
      }
      events.push_back(Arrival(X402Arrival::kProceed, true));
      break;
    case X402Phase::kPreflighting:
      for (X402Preflight r : {X402Preflight::kCovered, X402Preflight::kRefused,
                              X402Preflight::kStoreFailed, X402Preflight::kFeesTooHigh,
                              X402Preflight::kChainUnavailable, X402Preflight::kPayerLimited,
                              X402Preflight::kPayerRateLimited, X402Preflight::kQueueFull}) {
        events.push_back(X402Preflighted{r});
      }
      break;
    case X402Phase::kProving:
      for (X402ChainAsk r :
           {X402ChainAsk::kAnswered, X402ChainAsk::kFailed, X402ChainAsk::kQueueFull}) {
        events.push_back(X402ChainAnswered{r});
      }
      break;
    case X402Phase::kCallingUpstream:
      events.push_back(X402UpstreamAnswered{false});
      events.push_back(X402UpstreamAnswered{true});
      break;
    case X402Phase::kReadingInputs:
      for (X402Inputs r :
           {X402Inputs::kRead, X402Inputs::kUnavailable, X402Inputs::kStoredBroken}) {
        events.push_back(X402InputsRead{r});
      }
      break;
    case X402Phase::kSigning:
    case X402Phase::kFinishing:
    case X402Phase::kRecording:
      for (CommitResult c : {CommitResult::kOk, CommitResult::kClaimLost, CommitResult::kFailed}) {
        events.push_back(X402Committed{c});
      }
      break;
    case X402Phase::kSettling:
      for (X402Receipt r : {X402Receipt::kSettled, X402Receipt::kFailed, X402Receipt::kUnknown}) {
        events.push_back(X402ReceiptDecided{r});
      }
      break;
    case X402Phase::kDone:
      break;
  }
  return events;
}

// A payment's state with what its course did so far.
struct Course {
  X402Payment payment;
  int upstream_calls = 0, settles = 0, signs = 0;
  bool settled = false;
  auto Key() const {
    const X402Payment& p = payment;
    return std::tuple(static_cast<int>(p.phase), p.deferred_failure, p.rounds, p.cover_reads,
                      p.covered, p.preflight_refused, p.holds_2xx, static_cast<int>(p.recording),
                      upstream_calls, settles, signs, settled);
  }
};

// Every state the machine reaches from a start, breadth first, through every event each phase
// may get (a second settlement's upstream call is never due, so U1 is skipped once the payment
// settled). Every course ends in exactly one reply or attach, within the bounds on rounds and
// preflights, with at most one settlement and one signature, never a second upstream call before
// a settlement, and never back to the chain's preflight once an attempt holds the claim. The
// layers are finite: no course goes round for ever.
TEST(X402Payment, EveryCourseEndsInOneAnswerWithinItsBounds) {
  for (bool deferred : {false, true}) {
    Course start;
    start.payment.deferred_failure = deferred;
    std::set<decltype(start.Key())> seen{start.Key()};
    std::vector<Course> layer{start};
    std::vector<int> answers(static_cast<int>(X402Answer::kSettlementUnknown) + 1, 0);
    int layers = 0;
    while (!layer.empty()) {
      ASSERT_LE(++layers, 4 * kMaxX402Rounds + 12) << "a course that does not end";
      std::vector<Course> next_layer;
      for (const Course& course : layer) {
        for (const X402Event& event : EventsFor(course.payment.phase)) {
          if (course.settled && std::holds_alternative<X402UpstreamAnswered>(event) &&
              std::get<X402UpstreamAnswered>(event).submit_settlement) {
            continue;
          }
          X402Transition t = Step(course.payment, event);
          Course next = course;
          next.payment = t.next;
          next.upstream_calls += t.effect.kind == X402EffectKind::kCallUpstream;
          next.settles += t.effect.kind == X402EffectKind::kSettle;
          next.signs += t.effect.kind == X402EffectKind::kSign;
          next.settled |= t.effect.kind == X402EffectKind::kRecord &&
                          t.effect.record == X402Record::kSettledThenCall;
          EXPECT_LE(next.payment.rounds, kMaxX402Rounds + 1);
          EXPECT_LE(next.payment.cover_reads, kMaxX402CoverReads);
          EXPECT_LE(next.settles, 1);
          EXPECT_LE(next.signs, 1);
          EXPECT_LE(next.upstream_calls, 2);
          if (next.upstream_calls == 2) {
            EXPECT_TRUE(course.settled);
          }
          if (course.upstream_calls > 0 || course.settles > 0) {
            EXPECT_NE(t.effect.kind, X402EffectKind::kPreflight);
            EXPECT_NE(t.effect.kind, X402EffectKind::kAskChain);
            EXPECT_NE(t.effect.kind, X402EffectKind::kDecide);
          }
          if (t.next.phase == X402Phase::kDone) {
            EXPECT_TRUE(t.effect.kind == X402EffectKind::kReply ||
                        t.effect.kind == X402EffectKind::kAttach);
            EXPECT_EQ(t.effect.kind == X402EffectKind::kReply,
                      t.effect.answer != X402Answer::kNone);
            ++answers[static_cast<int>(t.effect.answer)];
            continue;
          }
          EXPECT_NE(t.effect.kind, X402EffectKind::kReply);
          EXPECT_NE(t.effect.kind, X402EffectKind::kAttach);
          if (seen.insert(next.Key()).second) next_layer.push_back(next);
        }
      }
      layer = std::move(next_layer);
    }
    EXPECT_GT(seen.size(), 50u);
    // Every answer but kNone ends some course; a deferred failure is refused before the token's
    // refusal could be, and only a deferred failure is refused as one.
    for (int a = 1; a < static_cast<int>(answers.size()); ++a) {
      const bool reachable = deferred ? a != static_cast<int>(X402Answer::kPreflightRefused)
                                      : a != static_cast<int>(X402Answer::kDeferredFailure);
      EXPECT_EQ(answers[a] > 0, reachable) << X402AnswerName(static_cast<X402Answer>(a));
    }
  }
}

}  // namespace
}  // namespace agentpay
