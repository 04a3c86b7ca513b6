// `agentpay pay` as a function of its options and the world: learn the price, reserve it in the
// budget file, sign at most one authorization per key, and send with the same key and the same
// payment until served, refused, or out of attempts or time (CONTRACT §6).
#pragma once

#include "agentpay/client.h"
#include "client/world.h"

namespace agentpay::client {

PayResult RunPay(const PayOptions& options, ClientWorld& world, const Progress& progress);

// The reconciliation of every reservation in the file whose outcome is open; see Reconcile().
ReconcileReport RunReconcile(const ReconcileOptions& options, ClientWorld& world,
                             const Progress& progress);

}  // namespace agentpay::client
