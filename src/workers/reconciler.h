// The x402 reconciler (CONTRACT §5, issue 3 item 4, issue 13 item 4): resolves settlements the
// gateway could not see through, from the chain's own account of them. It pages through every
// `submitted` (no attempt waiting on it, past the receipt deadline) and `unknown` operation oldest
// first, a cursor carried from pass to pass; core's Reconcile decides (settled, re-broadcast the
// same bytes, void, failed, wait), and each decision commits on its own, re-checking that the
// operation did not move meanwhile (several gateways may share one database: a second reconciler
// acting on the same operation finds it changed and skips it). Paced (class Reconciler): an
// operation still unresolved is looked at again only after a per-operation backoff
// (core/reconcile_schedule.h), and all chain calls stay under --reconcile-rpc-per-second; a pass
// that runs out of calls stops where it is and the next one goes on from there. A decided
// settlement releases the payer's reservation (settlement/reservations.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/reconcile_schedule.h"
#include "core/reorg_watch.h"
#include "core/result.h"
#include "core/world.h"
#include "settlement/events.h"
#include "settlement/reconciler_config.h"
#include "settlement/settler.h"
#include "store/store.h"
#include "workers/hold_sweeper.h"

namespace agentpay {

// The watch covers at most this many settlements, the most recent blocks first.
inline constexpr int kMaxWatchedSettlements = 1000;

// Chain calls counted against the RPC budget, at most: one look (Settler::Observe: four at most,
// of the receipt, authorizationState, the receipt again, the transaction and the latest block;
// a transaction that replaced others adds two per replaced one, and one stuck past
// replace_after_ms one for the fees its replacement reads), one broadcast, and the relayer-nonce
// gap check (the mined nonce, the transaction at it and its broadcast; a no-op also reads the
// pending nonce and the fees).
inline constexpr int64_t kRpcCallsPerLook = 4;
inline constexpr int64_t kRpcCallsPerReplaced = 2;
inline constexpr int64_t kRpcCallsPerBroadcast = 1;
inline constexpr int64_t kRpcCallsPerGapCheck = 3;
// Each further stored transaction re-sent by the same gap check (the transaction, its broadcast),
// at most kMaxGapFillsPerPass in all: several dropped transactions come back in one pass.
inline constexpr int64_t kRpcCallsPerGapStep = 2;
inline constexpr int kMaxGapFillsPerPass = 16;
// Nonces one gap check walks at most, the ones the node holds included.
inline constexpr int kMaxGapStepsPerPass = 64;
// The paced reconciler checks the relayer's nonce gap at most this often.
inline constexpr int64_t kGapCheckIntervalMs = 1000;
// A transaction the node holds at the relayer's next nonce without counting it pending is replaced
// once it was sent at least this long ago (and again no sooner after its replacement): a node whose
// pending count leaves out its pool (some hosted ones answer `pending` as `latest`) then costs at
// most one fee bump per this interval while the transaction waits for its block.
inline constexpr int64_t kHeldReplaceAfterMs = 5000;

struct ReconcileReport {
  // What the pass did to each operation it changed or could not judge (bounded by the batch).
  std::vector<WorkerDecision> decisions;
  int examined = 0;
  int settled = 0;
  int rebroadcast = 0;
  int voided = 0;
  int failed = 0;
  int marked_unknown = 0;
  int replaced = 0;     // stuck transactions replaced with a higher fee at the same relayer nonce
  int reorganised = 0;  // settled operations sent back to unknown: their block was reorganised away
  // Stored transactions re-sent because the relayer's chain nonce stopped at them.
  int gaps_filled = 0;
  // No-op transactions sent at a relayer nonce the node lacks and the store has nothing for.
  int gap_noops = 0;
  int errors = 0;   // chain or store errors on single operations (they are retried next pass)
  int not_due = 0;  // passed over: looked at recently (backoff)
  bool out_of_rpc = false;  // the pass stopped for the RPC budget
  bool changed() const {
    return settled + rebroadcast + voided + failed + marked_unknown + replaced + reorganised +
               gaps_filled + gap_noops >
           0;
  }
};

// One unpaced pass over every settling operation (startup, tests): each is looked at once, no
// backoff, no RPC bound. Errors: only a failure to list the operations; per-operation errors are
// counted. Each pass also keeps the relayer's account nonces filled: every transaction the relayer
// signed has a nonce taken once, and a later one is mined only after it. If the relayer's first
// unmined nonce is one we signed a transaction for (dropped by the node, never sent before a
// crash, or the expired filler of a void settlement), the stored bytes are sent again, and so are
// those of the next nonces the node lost too, in nonce order (kMaxGapFillsPerPass). That is
// always safe: they are the same signed transaction, which either settles its still-valid
// authorization exactly once or reverts as expired. A nonce below the store's next one that the
// store has no transaction for (another sender of the relayer's key, whose transaction the node
// dropped) gets a no-op transaction, so that ours behind it can be mined. A transaction the node
// has held unmined for replace_after_ms is replaced when settlement/fees.h says so, and one the
// node holds at the relayer's first unmined nonce without counting it pending (while that nonce
// stays unmined from one gap check to the next) is replaced at once (Stuck::kHeldAtNextNonce):
// re-signed at the same relayer nonce with the same calldata and a higher fee, stored (with the old
// hash kept) before it is sent. Only one transaction at that nonce can be mined, so the
// authorization still settles once. With the gap check, the watch for reorganisations: the
// settlements of the last reorg_watch_ms whose block is no longer canonical (one BlockHash call for
// the newest block when nothing changed, core/reorg_watch.h) and whose receipt is gone go back to
// unknown (core/settlement.h X17), and the same bytes settle them again; if they never can, the
// paid answer having gone out, X18 and an alert.
Result<ReconcileReport> ReconcileSettlements(Store& store, Settler& settler, Clock& clock,
                                             Random& random, const ReconcilerConfig& config,
                                             SettlementCounter* metrics = nullptr);

// The paced reconciler the gateway runs every --sweep-interval-ms: the same decisions, with a
// cursor, per-operation backoff and the RPC budget kept from pass to pass. Not thread-safe: one
// pass at a time (the shell's PeriodicWorker).
class Reconciler {
 public:
  // Precondition: config.rpc_per_second >= kRpcCallsPerLook + kRpcCallsPerBroadcast, or 0.
  Reconciler(Store& store, Settler& settler, Clock& clock, Random& random,
             ReconcilerConfig config, SettlementCounter* metrics = nullptr);
  Result<ReconcileReport> RunPass();

 private:
  Store& store_;
  Settler& settler_;
  Clock& clock_;
  Random& random_;
  ReconcilerConfig config_;
  SettlementCounter* metrics_;
  ReconcileSchedule schedule_;
  std::optional<RpcBudget> budget_;
  std::string cursor_;  // the last operation id the previous pass got to
  int64_t last_gap_check_ms_ = INT64_MIN / 2;
  std::optional<uint64_t> last_mined_nonce_;  // the relayer's, at the last gap check
  CanonicalBlocks canonical_blocks_;          // the watch for reorganisations' memory
};

}  // namespace agentpay
