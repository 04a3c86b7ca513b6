// Retention pruning (issue 4): forgets the stored results (response body and key record) of final
// operations past retained_until_ms, in bounded batches, one store decision per batch that re-reads
// each operation and asks core (ShouldPruneResult). A pruned key's late retry: docs/protocol.md §10.
#pragma once

#include "core/result.h"
#include "core/world.h"
#include "store/store.h"

namespace agentpay {

struct PruneReport {
  int pruned = 0;        // stored results dropped
  int keys_deleted = 0;  // key records deleted with them (a key reused since is left alone)
  int batches = 0;
};

// Up to `max_batches` decisions of at most `batch` operations each, until none is left.
// Preconditions: batch > 0, max_batches > 0.
Result<PruneReport> PruneExpiredResults(Store& store, Clock& clock, int batch, int max_batches);

}  // namespace agentpay
