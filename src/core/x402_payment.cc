// The x402 payment's state machine; see x402_payment.h for its table (rows A0–C6).
#include "core/x402_payment.h"

#include "core/check.h"

namespace agentpay {

std::string_view X402PhaseName(X402Phase value) {
  switch (value) {
    case X402Phase::kStart:
      return "start";
    case X402Phase::kLooking:
      return "looking";
    case X402Phase::kDeciding:
      return "deciding";
    case X402Phase::kPreflighting:
      return "preflighting";
    case X402Phase::kProving:
      return "proving";
    case X402Phase::kCallingUpstream:
      return "calling_upstream";
    case X402Phase::kReadingInputs:
      return "reading_inputs";
    case X402Phase::kSigning:
      return "signing";
    case X402Phase::kFinishing:
      return "finishing";
    case X402Phase::kSettling:
      return "settling";
    case X402Phase::kRecording:
      return "recording";
    case X402Phase::kDone:
      return "done";
  }
  AGENTPAY_CHECK(false);
}

std::string_view X402EffectKindName(X402EffectKind value) {
  switch (value) {
    case X402EffectKind::kLook:
      return "look";
    case X402EffectKind::kDecide:
      return "decide";
    case X402EffectKind::kPreflight:
      return "preflight";
    case X402EffectKind::kAskChain:
      return "ask_chain";
    case X402EffectKind::kCallUpstream:
      return "call_upstream";
    case X402EffectKind::kReadInputs:
      return "read_inputs";
    case X402EffectKind::kSign:
      return "sign";
    case X402EffectKind::kFinish:
      return "finish";
    case X402EffectKind::kSettle:
      return "settle";
    case X402EffectKind::kRecord:
      return "record";
    case X402EffectKind::kAttach:
      return "attach";
    case X402EffectKind::kReply:
      return "reply";
  }
  AGENTPAY_CHECK(false);
}

std::string_view X402RecordName(X402Record value) {
  switch (value) {
    case X402Record::kNone:
      return "none";
    case X402Record::kSettledThenCall:
      return "settled_then_call";
    case X402Record::kSettledThenDeliver:
      return "settled_then_deliver";
    case X402Record::kFailed:
      return "failed";
    case X402Record::kUnknown:
      return "unknown";
  }
  AGENTPAY_CHECK(false);
}

std::string_view X402AnswerName(X402Answer value) {
  switch (value) {
    case X402Answer::kNone:
      return "none";
    case X402Answer::kTooManyRounds:
      return "too_many_rounds";
    case X402Answer::kStoreProblem:
      return "store_problem";
    case X402Answer::kStateReplayed:
      return "state_replayed";
    case X402Answer::kClosedUnpaid:
      return "closed_unpaid";
    case X402Answer::kMismatch:
      return "mismatch";
    case X402Answer::kAuthorizationTaken:
      return "authorization_taken";
    case X402Answer::kRefusePublic:
      return "refuse_public";
    case X402Answer::kCoverKeptMoving:
      return "cover_kept_moving";
    case X402Answer::kUnderfunded:
      return "underfunded";
    case X402Answer::kDeferredFailure:
      return "deferred_failure";
    case X402Answer::kPreflightRefused:
      return "preflight_refused";
    case X402Answer::kFeesTooHigh:
      return "fees_too_high";
    case X402Answer::kPreflightChainUnavailable:
      return "preflight_chain_unavailable";
    case X402Answer::kPayerLimited:
      return "payer_limited";
    case X402Answer::kPayerRateLimited:
      return "payer_rate_limited";
    case X402Answer::kChainQueueFull:
      return "chain_queue_full";
    case X402Answer::kProofChainUnavailable:
      return "proof_chain_unavailable";
    case X402Answer::kTakenOver:
      return "taken_over";
    case X402Answer::kVerdict:
      return "verdict";
    case X402Answer::kDelivered:
      return "delivered";
    case X402Answer::kSettledElsewhere:
      return "settled_elsewhere";
    case X402Answer::kSettlementFailed:
      return "settlement_failed";
    case X402Answer::kSettlementUnknown:
      return "settlement_unknown";
  }
  AGENTPAY_CHECK(false);
}
namespace {

X402Transition To(X402Payment payment, X402Phase phase, X402EffectKind kind) {
  payment.phase = phase;
  return {payment, {kind}};
}

X402Transition Reply(X402Payment payment, X402Answer answer) {
  payment.phase = X402Phase::kDone;
  X402Effect effect{X402EffectKind::kReply};
  effect.answer = answer;
  return {payment, effect};
}

// A round: a look, or (the payment covered) a decision.
X402Transition Arrive(X402Payment payment) {
  if (payment.rounds++ >= kMaxX402Rounds) return Reply(payment, X402Answer::kTooManyRounds);  // A0
  if (payment.covered) return To(payment, X402Phase::kDeciding, X402EffectKind::kDecide);
  return To(payment, X402Phase::kLooking, X402EffectKind::kLook);
}

// Every preflight counts against kMaxX402CoverReads, whatever asked for it (D13, D14).
X402Transition Preflight(X402Payment payment) {
  if (payment.cover_reads >= kMaxX402CoverReads) {
    return Reply(payment, X402Answer::kCoverKeptMoving);  // D15
  }
  payment.phase = X402Phase::kPreflighting;
  payment.covered = false;
  payment.preflight_refused = false;
  X402Effect effect{X402EffectKind::kPreflight};
  effect.take_payer_token = payment.cover_reads++ == 0;
  return {payment, effect};
}

// A new key (D11–D13, A5): refused by what the request showed, or by the token; else the chain.
X402Transition NeedsPreflight(X402Payment payment) {
  if (payment.deferred_failure) return Reply(payment, X402Answer::kDeferredFailure);    // D11
  if (payment.preflight_refused) return Reply(payment, X402Answer::kPreflightRefused);  // D12
  return Preflight(payment);                                                            // D13
}

X402Transition Looked(X402Payment payment, const X402Looked& looked) {
  switch (looked.read) {
    case ReadResult::kOverloaded:  // A2
      return To(payment, X402Phase::kDeciding, X402EffectKind::kDecide);
    case ReadResult::kFailed:
      return Reply(payment, X402Answer::kStoreProblem);  // A3
    case ReadResult::kOk:
      break;
  }
  if (looked.needs_preflight) return NeedsPreflight(payment);         // A5
  return To(payment, X402Phase::kDeciding, X402EffectKind::kDecide);  // A4
}

X402Transition Decided(X402Payment payment, const X402Decided& decided) {
  switch (decided.commit) {
    case CommitResult::kOk:
      break;
    case CommitResult::kFailed:
      return Reply(payment, X402Answer::kStoreProblem);  // D1
    case CommitResult::kKeyTaken:
    case CommitResult::kClaimLost:
      AGENTPAY_CHECK(false);  // the arrival decision reserves no key as new and holds no claim
  }
  switch (decided.arrival) {
    case X402Arrival::kProceed:
      if (decided.settlement_submitted) {  // D2
        return To(payment, X402Phase::kSettling, X402EffectKind::kSettle);
      }
      return To(payment, X402Phase::kCallingUpstream, X402EffectKind::kCallUpstream);  // D3
    case X402Arrival::kReplay:
      return Reply(payment, X402Answer::kStateReplayed);  // D4
    case X402Arrival::kClosedUnpaid:
      return Reply(payment, X402Answer::kClosedUnpaid);  // D5
    case X402Arrival::kMismatch:
      return Reply(payment, X402Answer::kMismatch);  // D6
    case X402Arrival::kAttach:
      return To(payment, X402Phase::kDone, X402EffectKind::kAttach);  // D7
    case X402Arrival::kAuthorizationTaken:
      return Reply(payment, X402Answer::kAuthorizationTaken);  // D8
    case X402Arrival::kRefusePublic:
      return Reply(payment, X402Answer::kRefusePublic);  // D9
    case X402Arrival::kUnderfunded:
      return Reply(payment, X402Answer::kUnderfunded);  // D10
    case X402Arrival::kNeedsPreflight:
      return NeedsPreflight(payment);  // D11–D13
    case X402Arrival::kReadAgain:
      return Preflight(payment);  // D14, D15
    case X402Arrival::kNeedsProof:
      return To(payment, X402Phase::kProving, X402EffectKind::kAskChain);  // D16
  }
  AGENTPAY_CHECK(false);
}

X402Transition Preflighted(X402Payment payment, const X402Preflighted& preflighted) {
  switch (preflighted.result) {
    case X402Preflight::kCovered:  // P1
      payment.covered = true;
      return Arrive(payment);
    case X402Preflight::kRefused:  // P2
      payment.preflight_refused = true;
      return Arrive(payment);
    case X402Preflight::kStoreFailed:
      return Reply(payment, X402Answer::kStoreProblem);  // P3
    case X402Preflight::kFeesTooHigh:
      return Reply(payment, X402Answer::kFeesTooHigh);  // P4
    case X402Preflight::kChainUnavailable:
      return Reply(payment, X402Answer::kPreflightChainUnavailable);  // P5
    case X402Preflight::kPayerLimited:
      return Reply(payment, X402Answer::kPayerLimited);  // P6
    case X402Preflight::kPayerRateLimited:
      return Reply(payment, X402Answer::kPayerRateLimited);  // P7
    case X402Preflight::kQueueFull:
      return Reply(payment, X402Answer::kChainQueueFull);  // P8
  }
  AGENTPAY_CHECK(false);
}

X402Transition ChainAnswered(X402Payment payment, const X402ChainAnswered& answered) {
  switch (answered.result) {
    case X402ChainAsk::kAnswered:
      return Arrive(payment);  // Q1
    case X402ChainAsk::kFailed:
      return Reply(payment, X402Answer::kProofChainUnavailable);  // Q2
    case X402ChainAsk::kQueueFull:
      return Reply(payment, X402Answer::kChainQueueFull);  // Q3
  }
  AGENTPAY_CHECK(false);
}

X402Transition InputsRead(X402Payment payment, const X402InputsRead& read) {
  switch (read.result) {
    case X402Inputs::kRead:
      return To(payment, X402Phase::kSigning, X402EffectKind::kSign);  // I1
    case X402Inputs::kUnavailable: {                                   // I2
      X402Transition t = To(payment, X402Phase::kFinishing, X402EffectKind::kFinish);
      t.effect.as_failed_call = true;
      return t;
    }
    case X402Inputs::kStoredBroken:
      return Reply(payment, X402Answer::kStoreProblem);  // I3
  }
  AGENTPAY_CHECK(false);
}

X402Transition Signed(X402Payment payment, const X402Committed& committed) {
  switch (committed.commit) {
    case CommitResult::kOk:  // S1
      payment.holds_2xx = true;
      return To(payment, X402Phase::kSettling, X402EffectKind::kSettle);
    case CommitResult::kClaimLost:
      return Reply(payment, X402Answer::kTakenOver);  // S2
    case CommitResult::kFailed:
      return Reply(payment, X402Answer::kStoreProblem);  // S3
    case CommitResult::kKeyTaken:
      break;  // a claimed decision reserves no key
  }
  AGENTPAY_CHECK(false);
}

X402Transition Finished(X402Payment payment, const X402Committed& committed) {
  switch (committed.commit) {
    case CommitResult::kOk:
      return Reply(payment, X402Answer::kVerdict);  // F1
    case CommitResult::kClaimLost:
      return Reply(payment, X402Answer::kTakenOver);  // F2
    case CommitResult::kFailed:
      return Reply(payment, X402Answer::kStoreProblem);  // F3
    case CommitResult::kKeyTaken:
      break;  // a claimed decision reserves no key
  }
  AGENTPAY_CHECK(false);
}

X402Transition ReceiptDecided(X402Payment payment, const X402ReceiptDecided& decided) {
  switch (decided.receipt) {
    case X402Receipt::kSettled:  // R1, R2
      payment.recording =
          payment.holds_2xx ? X402Record::kSettledThenDeliver : X402Record::kSettledThenCall;
      break;
    case X402Receipt::kFailed:  // R3
      payment.recording = X402Record::kFailed;
      break;
    case X402Receipt::kUnknown:  // R4
      payment.recording = X402Record::kUnknown;
      break;
  }
  X402Transition t = To(payment, X402Phase::kRecording, X402EffectKind::kRecord);
  t.effect.record = payment.recording;
  return t;
}

X402Transition Recorded(X402Payment payment, const X402Committed& committed) {
  AGENTPAY_CHECK(committed.commit != CommitResult::kKeyTaken);  // a claimed decision
  if (committed.commit == CommitResult::kFailed) {
    return Reply(payment, X402Answer::kStoreProblem);  // C1
  }
  const bool claimed = committed.commit == CommitResult::kOk;
  switch (payment.recording) {
    case X402Record::kSettledThenCall:
      if (!claimed) return Reply(payment, X402Answer::kSettledElsewhere);              // C4
      return To(payment, X402Phase::kCallingUpstream, X402EffectKind::kCallUpstream);  // C2
    case X402Record::kSettledThenDeliver:
      if (!claimed) return Reply(payment, X402Answer::kSettledElsewhere);  // C4
      return Reply(payment, X402Answer::kDelivered);                       // C3
    case X402Record::kFailed:
      return Reply(payment, X402Answer::kSettlementFailed);  // C5
    case X402Record::kUnknown:
      return Reply(payment, X402Answer::kSettlementUnknown);  // C6
    case X402Record::kNone:
      break;
  }
  AGENTPAY_CHECK(false);
}

template <typename E>
const E& Expect(const X402Event& event) {
  AGENTPAY_CHECK(std::holds_alternative<E>(event));
  return std::get<E>(event);
}

}  // namespace

X402Transition Step(const X402Payment& payment, const X402Event& event) {
  switch (payment.phase) {
    case X402Phase::kStart:
      Expect<X402Started>(event);
      return Arrive(payment);  // A1
    case X402Phase::kLooking:
      return Looked(payment, Expect<X402Looked>(event));
    case X402Phase::kDeciding:
      return Decided(payment, Expect<X402Decided>(event));
    case X402Phase::kPreflighting:
      return Preflighted(payment, Expect<X402Preflighted>(event));
    case X402Phase::kProving:
      return ChainAnswered(payment, Expect<X402ChainAnswered>(event));
    case X402Phase::kCallingUpstream:
      if (Expect<X402UpstreamAnswered>(event).submit_settlement) {  // U1
        return To(payment, X402Phase::kReadingInputs, X402EffectKind::kReadInputs);
      }
      return To(payment, X402Phase::kFinishing, X402EffectKind::kFinish);  // U2
    case X402Phase::kReadingInputs:
      return InputsRead(payment, Expect<X402InputsRead>(event));
    case X402Phase::kSigning:
      return Signed(payment, Expect<X402Committed>(event));
    case X402Phase::kFinishing:
      return Finished(payment, Expect<X402Committed>(event));
    case X402Phase::kSettling:
      return ReceiptDecided(payment, Expect<X402ReceiptDecided>(event));
    case X402Phase::kRecording:
      return Recorded(payment, Expect<X402Committed>(event));
    case X402Phase::kDone:
      AGENTPAY_CHECK(false);  // an answered payment takes no more events
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
