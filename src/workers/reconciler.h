// The x402 reconciler (CONTRACT §5, issue 3 item 4): resolves settlements the gateway could not
// see through, from the chain's own account of them. Each pass looks at `submitted` operations no
// attempt is waiting on and past the receipt deadline, and at `unknown` ones; core's Reconcile
// decides (settled, re-broadcast the same bytes, void, failed, wait), and each decision commits on
// its own, re-checking that the operation did not move meanwhile (several gateways may share one
// database: a second reconciler acting on the same operation finds it changed and skips it).
#pragma once

#include <cstdint>

#include "core/result.h"
#include "core/world.h"
#include "settlement/events.h"
#include "settlement/settler.h"
#include "store/store.h"
#include "workers/hold_sweeper.h"

namespace agentpay {

struct ReconcilerConfig {
  int64_t receipt_timeout_ms = 5000;
  int64_t expiry_buffer_seconds = 30;
  int64_t retention_ms = 86400000;
  int batch = 200;  // operations looked at per state per pass
};

struct ReconcileReport {
  // What the pass did to each operation it changed or could not judge (bounded by the batch).
  std::vector<WorkerDecision> decisions;
  int examined = 0;
  int settled = 0;
  int rebroadcast = 0;
  int voided = 0;
  int failed = 0;
  int marked_unknown = 0;
  int gaps_filled =
      0;           // stored transactions re-sent because the relayer's chain nonce stopped there
  int errors = 0;  // chain or store errors on single operations (they are retried next pass)
  bool changed() const {
    return settled + rebroadcast + voided + failed + marked_unknown + gaps_filled > 0;
  }
};

// One pass. Errors: only a failure to list the operations; per-operation errors are counted.
// Each pass also keeps the relayer's account nonces filled: every transaction the relayer signed
// has a nonce taken once, and a later one is mined only after it. If the node's next nonce for the
// relayer is one we signed a transaction for (dropped by the node, never sent before a crash, or
// the expired filler of a void settlement), the stored bytes are sent again. That is always safe:
// they are the same signed transaction, which either settles its still-valid authorization
// exactly once or reverts as expired.
Result<ReconcileReport> ReconcileSettlements(Store& store, Settler& settler, Clock& clock,
                                             Random& random, const ReconcilerConfig& config,
                                             SettlementCounter* metrics = nullptr);

}  // namespace agentpay
