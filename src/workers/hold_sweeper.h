// The hold sweeper (CONTRACT §4): releases wallet holds past their TTL whose operation has no live
// attempt, and raises an alert for each, since the upstream may have done the work. Decided by
// core (ExpireHold); each release is its own decision in the store.
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
  std::vector<WorkerDecision> decisions;  // one per released hold
  int released = 0;
  int alerts = 0;
};

// One pass over at most `batch` expired holds.
Result<SweepReport> SweepExpiredHolds(Store& store, Clock& clock, Random& random, int batch);

}  // namespace agentpay
