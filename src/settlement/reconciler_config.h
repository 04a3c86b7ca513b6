// What the x402 reconciler (workers/reconciler.h) is built with. It lives below the gateway and the
// workers, as settlement does, because the gateway's configuration (gateway/settlement_config.h)
// fills it in and the gateway may not include workers/ (DESIGN.md: who may include whom).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/reconcile_schedule.h"

namespace agentpay {

struct ReconcilerConfig {
  int64_t receipt_timeout_ms = 5000;
  int64_t expiry_buffer_seconds = 30;
  int64_t retention_ms = 86400000;
  int batch = 200;  // operations read from the store per page
  // Paced passes only (Reconciler): 0 = no bound on chain calls.
  int64_t rpc_per_second = 0;
  ReconcileBackoff backoff;
  size_t max_scheduled = 100000;  // operations whose backoff is remembered
  int max_pages_per_pass = 50;     // store pages one pass reads at most (the cursor goes on)
  // A transaction the node has held unmined this long since it was signed is considered for
  // replacement at its relayer nonce with a higher fee (settlement/fees.h, --replace-after-ms).
  int64_t replace_after_ms = 30000;
  // Settlements are watched this long after they were seen settled: one whose block a
  // reorganisation removes goes back to unknown and settles again (--reorg-watch-ms; 0: off).
  int64_t reorg_watch_ms = 900000;
};

}  // namespace agentpay
