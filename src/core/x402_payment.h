// The x402 payment's course (CONTRACT §3, §5; the X1–X16 table of core/settlement.h) as a pure
// state machine. The shell (gateway/x402_path.cc) feeds it what happened — a read's result, a
// decision's commit, the chain's answer to the preflight or to the payer proof, the upstream's
// answer, the end of the receipt wait — and carries out the one effect it returns. What each
// decision writes is decided by the core's functions inside its transaction (DecideArrival,
// DecidePayerProof, DecideX402Resume, DecideClusterReserve, CompleteX402Call, MarkSettled, …); the
// wait for the receipt is core/receipt_wait.h. This machine is the order they run in, the bounds on
// how often a payment goes round, and which answer ends each course.
#pragma once

#include <string_view>
#include <variant>

#include "core/payment_results.h"

namespace agentpay {

enum class X402Phase {
  kStart,            // the payment is decoded and verified, its key and fingerprint named
  kLooking,          // the unsynced first look: the key, and whether the authorization is taken
  kDeciding,         // the arrival decision, one transaction
  kPreflighting,     // the chain's preflight: the token's view of the payment, the payer's cover
  kProving,          // asking the chain whether the presented authorization was ever used
  kCallingUpstream,  // the upstream has the request
  kReadingInputs,    // settle=after, the upstream delivered: the chain's inputs for signing
  kSigning,          // settle=after: the decision that signs and stores the relayer transaction
  kFinishing,        // the finish decision of a call that needs no settlement now
  kSettling,         // broadcast, then the wait for the receipt (core/receipt_wait.h)
  kRecording,        // the decision that records what the wait found
  kDone,             // answered (or handed to the attempt in flight)
};
std::string_view X402PhaseName(X402Phase phase);

// What the shell does next.
enum class X402EffectKind {
  kLook,          // read the key and the authorization off the event thread, unsynced
  kDecide,        // the arrival decision (DecideX402Arrival), one transaction
  kPreflight,     // read the payer's reservations, then ask the chain (Settler::Check)
  kAskChain,      // is the presented authorization used on chain (the payer proof)?
  kCallUpstream,  // call the route's upstream with the operation's id as its key
  kReadInputs,    // the chain's inputs to sign the relayer transaction (Settler::ReadTxInputs)
  kSign,          // one decision: sign and store the transaction with the call's completion
  kFinish,        // one decision: the call's completion (delivered, refused, kept)
  kSettle,        // broadcast the stored transaction and wait for its receipt
  kRecord,        // one decision: what the receipt wait found (X402Record)
  kAttach,        // wait for the attempt in flight and answer with its outcome
  kReply,         // answer now
};
std::string_view X402EffectKindName(X402EffectKind kind);

// What a kRecord decision writes.
enum class X402Record {
  kNone,
  kSettledThenCall,     // X3: settled; the attempt goes on to the upstream
  kSettledThenDeliver,  // X3 then X10 (settle=after): settled; the upstream's 2xx is delivered
  kFailed,              // X5: the nonce is spent and the money did not move; an alert
  kUnknown,             // X4: no outcome in time; the reconciler decides it
};
std::string_view X402RecordName(X402Record record);

// Which answer a reply is. Every refusal before the decision changes nothing; the answers after it
// are what the store holds.
enum class X402Answer {
  kNone,                // not a reply
  kTooManyRounds,       // 503: the key changed hands too often
  kStoreProblem,        // the store's error (503 store_overloaded / store_unavailable, …)
  kStateReplayed,       // the operation's state, as a replay (final answer, or 202 / 502)
  kClosedUnpaid,        // X16 just now: the stored 402
  kMismatch,            // 422: the key names another request
  kAuthorizationTaken,  // 402: this authorization pays for another request
  kRefusePublic,        // 409: the request does not prove the payer; nothing said of the op
  kCoverKeptMoving,     // 503: the payer's reservations kept moving while its balance was read
  kUnderfunded,         // 402: the payer's reservations leave no room for this payment
  kDeferredFailure,     // 402: a new payment that does not match what the route asks
  kPreflightRefused,    // 402: the token refuses the authorization (Settler::Check)
  kFeesTooHigh,         // 503: the base fee is above --max-fee-per-gas; nothing submitted
  kPreflightChainUnavailable,  // 503: the chain could not be asked; nothing submitted
  kPayerLimited,           // 429 / 503: the payer's in-flight cap, or the reservation table busy
  kPayerRateLimited,       // 429: the payer's rate bucket
  kChainQueueFull,         // 503: too many payments wait on the chain
  kProofChainUnavailable,  // 503: the chain could not be asked about the authorization
  kTakenOver,              // the attempt lost its claim to a later one: nothing was written
  kVerdict,                // the finish decision's: the stored answer, or 502 / 504 kept
  kDelivered,              // X10 after X3: the upstream's 2xx, now that the money moved
  kSettledElsewhere,       // settled, but the claim passed on: the operation's state
  kSettlementFailed,       // X5: 409 settlement_failed
  kSettlementUnknown,      // X4: 202 with Location
};
std::string_view X402AnswerName(X402Answer answer);

struct X402Effect {
  X402EffectKind kind = X402EffectKind::kReply;
  // kPreflight: the request's first preflight, which takes a token of the payer's rate bucket
  // once the chain calls its authorization fresh (a preflight asked again takes none).
  bool take_payer_token = false;
  // kFinish: the settlement could not be signed (the chain unreachable, or its queue full): the
  // attempt ends as a failed call, and a retry settles.
  bool as_failed_call = false;
  X402Record record = X402Record::kNone;  // kRecord
  X402Answer answer = X402Answer::kNone;  // kReply
  bool operator==(const X402Effect&) const = default;
};

// What the arrival decision found (gateway/x402_path.cc DecideX402Arrival). Only kProceed commits
// a claim; the rolled-back ones wrote nothing.
enum class X402Arrival {
  kProceed,             // the attempt holds the operation's claim (new, or resumed)
  kReplay,              // final, or settlement submitted/unknown with nothing in flight (X8)
  kClosedUnpaid,        // X16 just now: the authorization expired unsubmitted
  kMismatch,            // the key names another request
  kAttach,              // an attempt is in flight
  kNeedsPreflight,      // a new key: the chain's preflight first (rolled back)
  kAuthorizationTaken,  // the authorization already pays for another operation (rolled back)
  kNeedsProof,          // the key's operation was paid with another authorization (rolled back)
  kRefusePublic,        // the request does not prove the payer (rolled back)
  kReadAgain,           // the payer's reservations in the store moved since the chain was read
  kUnderfunded,         // the payer's reservations leave no room for this payment
};

// What the preflight (X402EffectKind::kPreflight) found.
enum class X402Preflight {
  kCovered,           // the token takes it and the payer's balance covers it: decide again
  kRefused,           // the token refuses it (the failure kept for the answer): look again
  kStoreFailed,       // the payer's reservations could not be read
  kFeesTooHigh,       // the base fee is above the cap
  kChainUnavailable,  // the chain could not be asked
  kPayerLimited,      // the payer's in-flight cap, or the reservation table busy
  kPayerRateLimited,  // the payer's rate bucket is empty (the first preflight only)
  kQueueFull,         // no room to wait on the chain
};

// What the payer proof's question (X402EffectKind::kAskChain) found.
enum class X402ChainAsk { kAnswered, kFailed, kQueueFull };

// What reading the chain's inputs for the signature found (X402EffectKind::kReadInputs).
enum class X402Inputs {
  kRead,          // sign and store the transaction (kSign)
  kUnavailable,   // the chain could not be asked, or its queue is full: a failed call
  kStoredBroken,  // the stored authorization or signature does not decode: a store problem
};

// How the receipt wait ended (core/receipt_wait.h: ReceiptStep kSettled, kFailed or kUnknown).
enum class X402Receipt { kSettled, kFailed, kUnknown };

// The events, one per effect finished.
struct X402Started {};
struct X402Looked {
  ReadResult read = ReadResult::kOk;
  // With kOk: neither the key nor the authorization is stored (the preflight is needed).
  bool needs_preflight = false;
};
struct X402Decided {
  CommitResult commit = CommitResult::kOk;
  X402Arrival arrival = X402Arrival::kProceed;  // with kOk
  // With kProceed: the settlement is submitted (settle first, X1; or a resumed attempt's): the
  // transaction is broadcast before the upstream.
  bool settlement_submitted = false;
};
struct X402Preflighted {
  X402Preflight result = X402Preflight::kCovered;
};
struct X402ChainAnswered {
  X402ChainAsk result = X402ChainAsk::kAnswered;
};
struct X402UpstreamAnswered {
  // CompleteX402Call's submit_settlement: settle=after, and the upstream delivered (X13).
  bool submit_settlement = false;
};
struct X402InputsRead {
  X402Inputs result = X402Inputs::kRead;
};
struct X402Committed {  // a kSign, kFinish or kRecord decision
  CommitResult commit = CommitResult::kOk;
};
struct X402ReceiptDecided {
  X402Receipt receipt = X402Receipt::kUnknown;
};
using X402Event =
    std::variant<X402Started, X402Looked, X402Decided, X402Preflighted, X402ChainAnswered,
                 X402UpstreamAnswered, X402InputsRead, X402Committed, X402ReceiptDecided>;

// Each arrival (a look or a decision) is a round; a new key takes a look, a preflight and a
// decision, a key paid with another authorization a look, a proof and a decision. The spare rounds
// absorb a key changing hands; more is a client racing itself (X402Answer::kTooManyRounds).
inline constexpr int kMaxX402Rounds = 8;
// Preflights asked again because the payer's reservations moved in the store (kReadAgain).
inline constexpr int kMaxX402CoverReads = 3;

struct X402Payment {
  X402Phase phase = X402Phase::kStart;
  // A failed check of the payment that leaves the payer's identity proven (recipient, amount,
  // time window, asset): it refuses a new operation, but a retry of an existing key is answered.
  bool deferred_failure = false;
  int rounds = 0;                  // arrivals so far
  int cover_reads = 0;             // preflights so far
  bool covered = false;            // the last preflight found the payment covered (its inputs held)
  bool preflight_refused = false;  // the last preflight found the token refusing it
  bool holds_2xx = false;          // settle=after: the upstream's 2xx waits for the settlement
  X402Record recording = X402Record::kNone;  // the kRecord decision in hand
  bool operator==(const X402Payment&) const = default;
};

struct X402Transition {
  X402Payment next;
  X402Effect effect;
};

// The transitions, every row tested (tests/core/x402_payment_test.cc). "Arrive" is a round: past
// kMaxX402Rounds it replies kTooManyRounds (A0); else it looks (no inputs held) or decides (the
// last preflight covered the payment).
//
// clang-format off
//  row | phase      | event                                      | effect (phase after)
//  ----+------------+--------------------------------------------+--------------------------------
//  A0  | any arrive | the rounds are spent                       | reply too many rounds
//  A1  | start      | started                                    | arrive
//  A2  | looking    | read overloaded (no reader free)           | decide
//  A3  | looking    | read failed                                | reply store problem
//  A4  | looking    | key or authorization found                 | decide
//  A5  | looking    | neither found                              | as D11–D13, D15 (no decision)
//  D1  | deciding   | commit failed                              | reply store problem
//  D2  | deciding   | proceed, settlement submitted (X1, resume) | settle
//  D3  | deciding   | proceed, nothing submitted (X2, X9, X15)   | call upstream
//  D4  | deciding   | replay (final, or X8)                      | reply the state, replayed
//  D5  | deciding   | closed unpaid (X16)                        | reply closed unpaid
//  D6  | deciding   | mismatch                                   | reply 422
//  D7  | deciding   | attach                                     | attach (done)
//  D8  | deciding   | authorization taken                        | reply 402 nonce used
//  D9  | deciding   | refuse public (the payer unproven)         | reply 409
//  D10 | deciding   | underfunded                                | reply 402 insufficient balance
//  D11 | deciding   | needs preflight, a deferred failure        | reply 402 the failure
//  D12 | deciding   | needs preflight, the token refused it      | reply 402 the token's reason
//  D13 | deciding   | needs preflight, otherwise                 | preflight (a)
//  D14 | deciding   | read again                                 | preflight (a)
//  D15 | deciding   | needs preflight or read again, preflights  | reply cover kept moving
//      |            | spent                                      |
//  D16 | deciding   | needs proof                                | ask the chain
//  P1  | preflight  | covered                                    | arrive (decide)
//  P2  | preflight  | refused                                    | arrive (look) (b)
//  P3  | preflight  | store read failed                          | reply store problem
//  P4  | preflight  | fees too high                              | reply 503 fees
//  P5  | preflight  | chain unavailable                          | reply 503 chain
//  P6  | preflight  | payer limited                              | reply 429 / 503
//  P7  | preflight  | payer rate-limited                         | reply 429
//  P8  | preflight  | the chain's queue full                     | reply 503 queue full
//  Q1  | proving    | answered                                   | arrive (look)
//  Q2  | proving    | chain unavailable                          | reply 503 chain
//  Q3  | proving    | the chain's queue full                     | reply 503 queue full
//  U1  | calling    | answered, settlement due (X13)             | read inputs
//  U2  | calling    | answered, otherwise (X9–X12, X14)          | finish
//  I1  | inputs     | read                                       | sign
//  I2  | inputs     | chain unavailable or queue full            | finish as a failed call (c)
//  I3  | inputs     | the stored authorization broken            | reply store problem
//  S1  | signing    | committed                                  | settle, holding the 2xx
//  S2  | signing    | claim lost                                 | reply taken over
//  S3  | signing    | commit failed                              | reply store problem
//  F1  | finishing  | committed                                  | reply the verdict
//  F2  | finishing  | claim lost                                 | reply taken over
//  F3  | finishing  | commit failed                              | reply store problem
//  R1  | settling   | settled, no 2xx held                       | record settled, then call
//  R2  | settling   | settled, the 2xx held                      | record settled, then deliver
//  R3  | settling   | failed                                     | record failed
//  R4  | settling   | unknown (no outcome within the deadline)   | record unknown (d)
//  C1  | recording  | commit failed (any record)                 | reply store problem
//  C2  | recording  | settled then call: committed               | call upstream
//  C3  | recording  | settled then deliver: committed            | reply delivered
//  C4  | recording  | settled (either): claim lost               | reply the settled state
//  C5  | recording  | failed: committed or claim lost            | reply settlement failed
//  C6  | recording  | unknown: committed or claim lost           | reply 202 settlement unknown
// clang-format on
//
// Any other event in a phase is the shell's bug: Step aborts (AGENTPAY_CHECK).
// (a) Each preflight counts against kMaxX402CoverReads; the first takes the payer's rate token.
// (b) The refusal is the answer only if the key is still new when looked at again: a concurrent
//     request with the same key may have spent this very nonce, and this one then replays.
// (c) Not settled, so not delivered: a retry with the same key settles and calls again.
// (d) Never a failure, never a release: the reconciler decides it from the chain (receipt_wait.h).
// A client that goes away changes nothing: the payment runs to its end and its answer is kept for
// the retry (the reply goes nowhere).
X402Transition Step(const X402Payment& payment, const X402Event& event);

}  // namespace agentpay
