// The hold sweeper (CONTRACT §4): releases wallet holds past their TTL whose operation has no live
// attempt, and raises an alert for each, since the upstream may have done the work. Decided by
// core (ExpireHold); each release is its own decision in the store.
#pragma once

#include <cstddef>

#include "core/result.h"
#include "core/world.h"
#include "store/store.h"

namespace agentpay {

struct SweepReport {
  int released = 0;
  int alerts = 0;
};

// One pass over at most `batch` expired holds.
Result<SweepReport> SweepExpiredHolds(Store& store, Clock& clock, Random& random, int batch);

}  // namespace agentpay
