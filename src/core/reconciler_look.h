// The reconciler's look at one settling operation (settlement.md §6; workers/reconciler.cc): what
// it asks of the chain beyond the observation, and what its one decision writes. Reconcile (in
// core/settlement.h) says what the chain shows; these two functions say what the reconciler does
// about it — replace a stuck transaction, mark the operation, send bytes after the commit, release
// the payer's reservation. Pure: the shell makes the chain calls and writes what is decided.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/operation.h"
#include "core/settlement.h"

namespace agentpay {

// Whether the look asks the settler for a replacement of the transaction (Settler::Replace, which
// decides from the fees whether one is due):
//
//  row | receipt | nonce used | stuck                                       | before vb | ask
//  ----+---------+------------+---------------------------------------------+-----------+----
//  RQ1 | none    | no         | held at the relayer's next nonce (gap check)| yes       | yes
//  RQ2 | none    | no         | unmined for --replace-after-ms since signed | yes       | yes
//  RQ3 | any other case (a receipt, the nonce used, too young, or past validBefore: a transaction
//      | mined after it only reverts)                                                    | no
bool AsksForReplacement(const ChainObservation& seen, bool held_at_next_nonce, int64_t age_ms,
                        int64_t replace_after_ms, int64_t now_s, int64_t valid_before_s);

// What one reconciler decision does with an operation it found unchanged.
enum class ReconcilerOutcome {
  kWait,               // nothing decided: looked at again later
  kReplace,            // the replacement is stored in place of the transaction and sent
  kSettle,             // X7: settled; the receipt's block recorded for the reorganisation watch
  kRebroadcast,        // the same bytes sent again (the record counts one more broadcast)
  kVoid,               // X6: void (an alert when the upstream may have done the work, (g))
  kFail,               // X5: failed, with an alert
  kLostAfterDelivery,  // X18: void or failed after the paid answer went out; the answer stays
};
std::string_view ReconcilerOutcomeName(ReconcilerOutcome outcome);

struct ReconcilerLook {
  // X4 for an attempt that is gone (a crash, a lost claim): a `submitted` operation past its
  // receipt deadline becomes `unknown` first, in the same decision.
  bool mark_unknown = false;
  ReconcilerOutcome outcome = ReconcilerOutcome::kWait;
  // The action the trace and the report name: Reconcile's, or kWait once a replacement is this
  // decision's broadcast.
  ReconcileAction action = ReconcileAction::kWait;
  Settlement lost_as = Settlement::kNone;  // kLostAfterDelivery: kVoid or kFailed
  bool broadcast = false;  // send after the commit: the replacement, the rebroadcast, void's filler
  bool resolved = false;   // settled, void or failed: nothing left to reconcile, reservation goes
  bool operator==(const ReconcilerLook&) const = default;
};

// The decision on `op` (as listed, and found unchanged inside the decision), given Reconcile's
// `action` on the same observation `seen` (Reconcile run from `unknown`), and whether the settler
// offered a replacement:
//
//  row  | Reconcile says | also                                 | outcome              | broadcast
//  -----+----------------+--------------------------------------+----------------------+----------
//  RL1  | (any)          | settlement submitted                 | mark unknown first, then the row
//  below RL2  | wait           | pending (known, no receipt) + repl.  | replace (action wait)| yes
//  RL3  | rebroadcast    | a replacement                        | replace (action wait)| yes
//  RL4  | settled        |                                      | settle               | no
//  RL5  | rebroadcast    | no replacement                       | rebroadcast          | yes
//  RL6  | void or failed | the operation final (answer given)   | lost after delivery  | void and
//       |                |                                      |                      | unknown tx
//  RL7  | void           | not final                            | void                 | tx unknown
//  RL8  | failed         | not final                            | fail                 | no
//  RL9  | wait           | otherwise                            | wait                 | no
// `resolved` exactly for settle, void, fail and lost after delivery. A void transaction the node
// lost is sent once more (RL6, RL7): expired, it cannot pay, and it uses up its relayer nonce, so
// the nonces after it are not held back.
ReconcilerLook DecideReconcilerLook(const Operation& op, ReconcileAction action,
                                    const ChainObservation& seen, bool has_replacement);

}  // namespace agentpay
