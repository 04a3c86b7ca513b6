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
// are (store_unavailable: try again). `wait`: kDurable for a report anyone is shown (it waits until
// what it read is durable); kUnsynced for a checker that must not change what a crash loses (the
// simulator's, after every step).
Result<AuditReport> AuditStore(Store& store, const AuditOptions& options,
                               ReadWait wait = ReadWait::kDurable);

}  // namespace agentpay
