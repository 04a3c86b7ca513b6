// The books audit over a store (core/audit.h's rules): one read transaction, so that every figure
// comes from the same snapshot, paging through the operations in id order.
#pragma once

#include "core/audit.h"
#include "core/result.h"
#include "store/store.h"

namespace agentpay {

// Operations read per page (one statement each).
inline constexpr int kAuditPageSize = 1000;

// Every rule but chain_transfers (the caller's, with a chain). Store errors are returned as they
// are (store_unavailable: try again).
Result<AuditReport> AuditStore(Store& store, const AuditOptions& options);

}  // namespace agentpay
