// The reconciler's walk over the relayer's nonces (settlement.md §6, workers/reconciler.cc
// FillRelayerGap): at each nonce from the first unmined one up, what it learns next and what it
// does. Pure: the shell reads the store and asks the chain, feeds each answer in as a fact, and
// carries out the step this table returns, until a step ends the walk.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace agentpay {

// What the walk knows at one nonce. Facts it has not asked for yet are nullopt; the table asks
// for each one at most once per nonce, and for the pending count at most once per walk.
struct GapFacts {
  int64_t nonce = 0;
  bool first = false;  // the relayer's first unmined nonce (where the walk starts)
  // The store holds a transaction of ours, signed and sent, at this nonce.
  bool ours = false;
  // The store's next relayer nonce: every nonce below it was taken for a transaction.
  int64_t taken = 0;
  // The relayer's mined nonce has not moved since the previous walk (or there was none).
  bool stalled = true;
  // Whether the node knows our transaction at this nonce (asked only when `ours`).
  std::optional<bool> node_knows;
  // The node's pending count of the relayer (its next nonce, counting its pool).
  std::optional<uint64_t> pending;
  bool operator==(const GapFacts&) const = default;
};

enum class GapStep {
  kReadPending,      // ask the chain for the relayer's pending count, then decide again
  kAskNode,          // ask the node whether it knows our transaction, then decide again
  kSendNoop,         // fill the nonce with a no-op transaction to the relayer itself; next nonce
  kResend,           // send our stored transaction's bytes again; next nonce
  kNext,             // nothing to do here; next nonce
  kStop,             // the walk ends: no gap of ours from here on
  kHeldAtNextNonce,  // the walk ends: our transaction there is held and never mined (replace it)
};
std::string_view GapStepName(GapStep step);

// One step of the walk:
//
//  row | ours | node knows | stalled | pending (vs this nonce, vs taken)   | step
//  ----+------+------------+---------+-------------------------------------+------------------
//  G1  | no   |            |         | (nonce >= taken: past all we signed)| stop
//  G2  | no   |            |         | not read                            | read pending
//  G3  | no   |            |         | > nonce (someone's may be there)    | stop
//  G4  | no   |            |         | <= nonce                            | send no-op
//  G5  | yes  | not asked  |         |                                     | ask node
//  G6  | yes  | no         |         |                                     | resend
//  G7  | yes  | yes        | no      | (the node is mining what it holds)  | stop
//  G8  | yes  | yes        | yes     | not read                            | read pending
//  G9  | yes  | yes        | yes     | <= nonce, at the first nonce        | held at next nonce
//  G10 | yes  | yes        | yes     | >= taken (it holds ours after it)   | stop
//  G11 | yes  | yes        | yes     | otherwise (a lost one may follow)   | next
//
// G7 and G10: a node that knows our transaction mines it and, with it, what it holds after it.
// G11 is for a node that refuses transactions past a gap ("nonce too high"): those sent while the
// gap was open are lost, so the walk goes on to send them again. G9: a node (Anvil) that queued
// our transaction behind a nonce since mined keeps it aside and never promotes it; sending the
// same bytes changes nothing, so the caller replaces it.
GapStep DecideGapStep(const GapFacts& facts);

}  // namespace agentpay
