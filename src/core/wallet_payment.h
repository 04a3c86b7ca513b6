// The wallet payment's course (CONTRACT §3–4) as a pure state machine. The shell (WalletPath) feeds
// it what happened — a read's result, a decision's commit, the upstream's answer — and carries out
// the one effect it returns: read the key, decide in one transaction, call the upstream, attach to
// the attempt in flight, or reply. What each decision writes is decided by the core's functions run
// inside its transaction (DecideArrival, NewWalletOperation, ResumeWalletOperation,
// CompleteWalletOperation); this machine is the order they run in and what answers each outcome.
#pragma once

#include <optional>
#include <string_view>
#include <variant>

#include "core/idempotency.h"
#include "core/payment_results.h"

namespace agentpay {

enum class WalletPhase {
  kStart,            // the request is authenticated, its key and fingerprint known
  kLooking,          // reading the key and its operation
  kBeginning,        // the begin decision: reserve the key and hold the price
  kCallingUpstream,  // the upstream has the request
  kFinishing,        // the finish decision: capture, release or keep
  kDone,             // answered (or handed to the attempt in flight)
};
std::string_view WalletPhaseName(WalletPhase phase);

// What the shell does next.
enum class WalletEffectKind {
  kLook,              // read the key and its operation off the event thread, unsynced
  kBegin,             // the begin decision, one transaction
  kCallUpstream,      // call the route's upstream with the operation's id as its key
  kFinish,            // the finish decision, one transaction
  kAttach,            // wait for the attempt in flight and answer with its outcome
  kReply,             // answer now
  kReplyWhenDurable,  // answer once what the read saw is durable (it was read unsynced)
};
std::string_view WalletEffectKindName(WalletEffectKind kind);

// Which answer a reply is.
enum class WalletAnswer {
  kNone,               // not a reply
  kReplay,             // the final operation's stored answer
  kMismatch,           // 422: the key names another request
  kInsufficientFunds,  // 402: the available balance is below the price; nothing written
  kStoreProblem,       // the store's error (503 store_overloaded / store_unavailable, …)
  kVerdict,            // the finish decision's: capture or release the stored answer, keep 502/504
  kTakenOver,          // the attempt lost its claim to a later one: nothing was written
  kOutcomeUnrecorded,  // 503: the upstream was called, its outcome not recorded; the hold stays
};
std::string_view WalletAnswerName(WalletAnswer answer);

struct WalletEffect {
  WalletEffectKind kind = WalletEffectKind::kReply;
  // kBegin: reserve the key as new (a key found taken fails the decision with kKeyTaken).
  bool presume_new = false;
  // kReply, kReplyWhenDurable: write the trace's record of this repeated arrival (best effort).
  bool record_arrival = false;
  WalletAnswer answer = WalletAnswer::kNone;  // kReply, kReplyWhenDurable
  bool operator==(const WalletEffect&) const = default;
};

// What a begin decision decided (committed, or rolled back for kInsufficientFunds).
enum class BeginOutcome { kProceed, kReplay, kMismatch, kAttach, kInsufficientFunds };

// The events, one per effect finished.
struct WalletStarted {
  // Begin at once, presuming the key new, rather than look first: where a read is a round trip to
  // a database server (Store::ReadsAreRemote), or where the answer cache answers the keys that
  // come again, most keys that reach the store are new.
  bool presume_new = false;
  // DecideArrival on the key's final operation as the answer cache holds it (AnswerCache): only
  // kReplay or kMismatch; nullopt: the cache does not hold the key.
  std::optional<ArrivalOutcome> cached;
};
struct WalletLooked {
  ReadResult read = ReadResult::kOk;
  // DecideArrival on what the read found; nullopt: no such key, or see operation_gone.
  std::optional<ArrivalOutcome> arrival;
  // The key was there without its operation (pruned between the two lookups): nothing to decide
  // an arrival on, and not a new key either.
  bool operation_gone = false;
};
struct WalletBegun {
  CommitResult commit = CommitResult::kOk;
  BeginOutcome outcome = BeginOutcome::kProceed;  // with kOk
};
struct WalletUpstreamAnswered {};
struct WalletFinished {
  CommitResult commit = CommitResult::kOk;
};
using WalletEvent =
    std::variant<WalletStarted, WalletLooked, WalletBegun, WalletUpstreamAnswered, WalletFinished>;

struct WalletPayment {
  WalletPhase phase = WalletPhase::kStart;
  bool presumed_new = false;    // the begin decision in hand reserves the key as new
  bool after_conflict = false;  // a begin decision that presumed the key new found it taken
  bool operator==(const WalletPayment&) const = default;
};

struct WalletTransition {
  WalletPayment next;
  WalletEffect effect;
};

// The transitions, every row tested (tests/core/wallet_payment_test.cc):
//
// clang-format off
//  row | phase     | event                                         | effect (phase after)
//  ----+-----------+-----------------------------------------------+------------------------------
//  W1  | start     | started, look first                           | look (looking)
//  W2  | start     | started, presume new                          | begin, presume new (a)
//  W20 | start     | started, the cache holds it, arrival replay   | reply replay now (f)
//  W21 | start     | started, the cache holds it, arrival mismatch | reply 422 now (f)
//  W3  | looking   | read overloaded (no reader free)              | begin, as it is (b)
//  W4  | looking   | read failed                                   | reply store problem
//  W5  | looking   | found, arrival replay                         | reply replay when durable (c)
//  W6  | looking   | found, arrival mismatch                       | reply 422 when durable (c)
//  W7  | looking   | not found, first look                         | begin, presume new
//  W8  | looking   | found otherwise (attach, resume, expired), or | begin, as it is
//      |           | the key without its operation, or any look    |
//      |           | after a conflict                              |
//  W9  | beginning | key taken (only when presumed new)            | look, after conflict (d)
//  W10 | beginning | commit failed                                 | reply store problem
//  W11 | beginning | replay                                        | reply replay
//  W12 | beginning | mismatch                                      | reply 422
//  W13 | beginning | attach                                        | attach (done)
//  W14 | beginning | insufficient funds (rolled back)              | reply 402
//  W15 | beginning | proceed (key reserved, price held)            | call upstream
//  W16 | calling   | upstream answered (any outcome)               | finish
//  W17 | finishing | committed                                     | reply the verdict's answer
//  W18 | finishing | claim lost                                    | reply taken over
//  W19 | finishing | commit failed                                 | reply outcome unrecorded (e)
// clang-format on
//
// Any other event in a phase is the shell's bug: Step aborts (AGENTPAY_CHECK).
// (a) Where a read is a round trip to the database server, or where the answer cache answers the
//     replays, a look costs more than it spares the writer: most keys are new, and only a key
//     found taken is looked at (W9). Looking first is for a local store without the cache.
// (b) The writer decides against the key as it is, reading it itself: the money path needs no look.
// (c) A final operation never changes, so a replay or a mismatch needs no decision; the answer
//     waits until what the unsynced read saw is durable (a crash cannot take back an answer given).
// (d) After a conflict the key is decided as it is, whatever the second look sees (W8): never a
//     second presumption, so a key is looked at no more than twice.
// (e) The hold stays until a retry with the same key completes it, without a second charge.
// (f) The answer cache holds only final operations that a durable decision wrote or a durable
//     read found, and a final operation never changes: nothing to read, nothing to wait for. The
//     arrival is recorded as W5/W6 record it. A cache that does not hold the key is W1 or W2.
// A client that goes away changes nothing: the payment runs to its end and its answer is kept for
// the retry (the reply goes nowhere).
WalletTransition Step(const WalletPayment& payment, const WalletEvent& event);

}  // namespace agentpay
