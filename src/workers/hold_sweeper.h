// The hold sweeper (CONTRACT §4): releases wallet holds past their TTL whose operation has no live
// attempt, and raises an alert for each, since the upstream may have done the work. Decided by
// core (ExpireHold); each release is its own decision in the store. Its x402 counterpart closes
// unpaid settle=after operations that no retry came for once their authorization can no longer
// settle (core X19), with the same alert.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/world.h"
#include "store/store.h"

namespace agentpay {

// One operation a worker pass changed, for the process log (bounded by the pass's batch).
struct WorkerDecision {
  std::string operation_id;
  std::string action;
  std::string reason;
};

struct SweepReport {
  std::vector<WorkerDecision> decisions;  // one per released hold or closed operation
  int released = 0;
  int closed_unpaid = 0;
  int alerts = 0;
};

// One pass over at most `batch` expired holds, then over at most `batch` unpaid x402 operations
// waiting for a retry (Store::ListUnpaidRetries, a page a pass, a cursor carried in `cursor` from
// pass to pass when given): those whose authorization can no longer settle are closed (X19).
Result<SweepReport> SweepExpiredHolds(Store& store, Clock& clock, Random& random, int batch,
                                      std::string* cursor = nullptr);

}  // namespace agentpay
