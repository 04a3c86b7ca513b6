// The wallet payment's state machine; see wallet_payment.h for its table (rows W1–W21).
#include "core/wallet_payment.h"

#include "core/check.h"

namespace agentpay {

std::string_view WalletPhaseName(WalletPhase phase) {
  switch (phase) {
    case WalletPhase::kStart:
      return "start";
    case WalletPhase::kLooking:
      return "looking";
    case WalletPhase::kBeginning:
      return "beginning";
    case WalletPhase::kCallingUpstream:
      return "calling_upstream";
    case WalletPhase::kFinishing:
      return "finishing";
    case WalletPhase::kDone:
      return "done";
  }
  AGENTPAY_CHECK(false);
}

std::string_view WalletEffectKindName(WalletEffectKind kind) {
  switch (kind) {
    case WalletEffectKind::kLook:
      return "look";
    case WalletEffectKind::kBegin:
      return "begin";
    case WalletEffectKind::kCallUpstream:
      return "call_upstream";
    case WalletEffectKind::kFinish:
      return "finish";
    case WalletEffectKind::kAttach:
      return "attach";
    case WalletEffectKind::kReply:
      return "reply";
    case WalletEffectKind::kReplyWhenDurable:
      return "reply_when_durable";
  }
  AGENTPAY_CHECK(false);
}

std::string_view WalletAnswerName(WalletAnswer answer) {
  switch (answer) {
    case WalletAnswer::kNone:
      return "none";
    case WalletAnswer::kReplay:
      return "replay";
    case WalletAnswer::kMismatch:
      return "mismatch";
    case WalletAnswer::kInsufficientFunds:
      return "insufficient_funds";
    case WalletAnswer::kStoreProblem:
      return "store_problem";
    case WalletAnswer::kVerdict:
      return "verdict";
    case WalletAnswer::kTakenOver:
      return "taken_over";
    case WalletAnswer::kOutcomeUnrecorded:
      return "outcome_unrecorded";
  }
  AGENTPAY_CHECK(false);
}

namespace {

WalletTransition Look(WalletPayment payment, bool after_conflict) {
  payment.phase = WalletPhase::kLooking;
  payment.after_conflict = after_conflict;
  return {payment, {WalletEffectKind::kLook}};
}

WalletTransition Begin(WalletPayment payment, bool presume_new) {
  payment.phase = WalletPhase::kBeginning;
  payment.presumed_new = presume_new;
  return {payment, {WalletEffectKind::kBegin, presume_new}};
}

WalletTransition Reply(WalletPayment payment, WalletAnswer answer, bool when_durable = false,
                       bool record_arrival = false) {
  payment.phase = WalletPhase::kDone;
  WalletEffect effect{when_durable ? WalletEffectKind::kReplyWhenDurable
                                   : WalletEffectKind::kReply};
  effect.record_arrival = when_durable || record_arrival;
  effect.answer = answer;
  return {payment, effect};
}

WalletTransition Started(WalletPayment payment, const WalletStarted& started) {
  if (started.cached) {
    // Only a final operation's arrivals are answered from the cache.
    AGENTPAY_CHECK(*started.cached == ArrivalOutcome::kReplay ||
                   *started.cached == ArrivalOutcome::kMismatch);
    const bool replay = *started.cached == ArrivalOutcome::kReplay;
    return Reply(payment, replay ? WalletAnswer::kReplay : WalletAnswer::kMismatch, false,
                 true);  // W20, W21
  }
  if (started.presume_new) return Begin(payment, true);   // W2
  return Look(payment, false);                            // W1
}

WalletTransition Looked(WalletPayment payment, const WalletLooked& looked) {
  switch (looked.read) {
    case ReadResult::kOverloaded:
      return Begin(payment, false);  // W3
    case ReadResult::kFailed:
      return Reply(payment, WalletAnswer::kStoreProblem);  // W4
    case ReadResult::kOk:
      break;
  }
  if (looked.arrival == ArrivalOutcome::kReplay) {
    return Reply(payment, WalletAnswer::kReplay, true);  // W5
  }
  if (looked.arrival == ArrivalOutcome::kMismatch) {
    return Reply(payment, WalletAnswer::kMismatch, true);  // W6
  }
  return Begin(payment,
               !looked.arrival && !looked.operation_gone && !payment.after_conflict);  // W7, W8
}

WalletTransition Begun(WalletPayment payment, const WalletBegun& begun) {
  // A begin decision takes a claim; it has none to lose.
  AGENTPAY_CHECK(begun.commit != CommitResult::kClaimLost);
  switch (begun.commit) {
    case CommitResult::kKeyTaken:
      AGENTPAY_CHECK(payment.presumed_new);  // only a key reserved as new can be found taken
      return Look(payment, true);            // W9
    case CommitResult::kFailed:
      return Reply(payment, WalletAnswer::kStoreProblem);  // W10
    case CommitResult::kClaimLost:
    case CommitResult::kOk:
      break;
  }
  switch (begun.outcome) {
    case BeginOutcome::kReplay:
      return Reply(payment, WalletAnswer::kReplay);  // W11
    case BeginOutcome::kMismatch:
      return Reply(payment, WalletAnswer::kMismatch);  // W12
    case BeginOutcome::kAttach:                        // W13
      payment.phase = WalletPhase::kDone;
      return {payment, {WalletEffectKind::kAttach}};
    case BeginOutcome::kInsufficientFunds:  // W14
      return Reply(payment, WalletAnswer::kInsufficientFunds);
    case BeginOutcome::kProceed:  // W15
      payment.phase = WalletPhase::kCallingUpstream;
      return {payment, {WalletEffectKind::kCallUpstream}};
  }
  AGENTPAY_CHECK(false);
}

WalletTransition Finished(WalletPayment payment, const WalletFinished& finished) {
  switch (finished.commit) {
    case CommitResult::kOk:
      return Reply(payment, WalletAnswer::kVerdict);  // W17
    case CommitResult::kClaimLost:
      return Reply(payment, WalletAnswer::kTakenOver);  // W18
    case CommitResult::kFailed:                         // W19
      return Reply(payment, WalletAnswer::kOutcomeUnrecorded);
    case CommitResult::kKeyTaken:
      break;  // a finish decision reserves no key
  }
  AGENTPAY_CHECK(false);
}

}  // namespace

WalletTransition Step(const WalletPayment& payment, const WalletEvent& event) {
  switch (payment.phase) {
    case WalletPhase::kStart:
      AGENTPAY_CHECK(std::holds_alternative<WalletStarted>(event));
      return Started(payment, std::get<WalletStarted>(event));
    case WalletPhase::kLooking:
      AGENTPAY_CHECK(std::holds_alternative<WalletLooked>(event));
      return Looked(payment, std::get<WalletLooked>(event));
    case WalletPhase::kBeginning:
      AGENTPAY_CHECK(std::holds_alternative<WalletBegun>(event));
      return Begun(payment, std::get<WalletBegun>(event));
    case WalletPhase::kCallingUpstream: {  // W16
      AGENTPAY_CHECK(std::holds_alternative<WalletUpstreamAnswered>(event));
      WalletPayment next = payment;
      next.phase = WalletPhase::kFinishing;
      return {next, {WalletEffectKind::kFinish}};
    }
    case WalletPhase::kFinishing:
      AGENTPAY_CHECK(std::holds_alternative<WalletFinished>(event));
      return Finished(payment, std::get<WalletFinished>(event));
    case WalletPhase::kDone:
      AGENTPAY_CHECK(false);  // an answered payment takes no more events
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
