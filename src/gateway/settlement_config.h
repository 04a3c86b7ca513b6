// The x402 settlement side of a gateway's configuration: what its settler, its payers'
// reservations and its reconciler are built with, from the one GatewayConfig, for `serve` and the
// simulator alike.
#pragma once

#include "gateway/config.h"
#include "settlement/reconciler_config.h"
#include "settlement/reservations.h"
#include "settlement/settler.h"

namespace agentpay {

// Precondition: config.chain's asset parses (a validated configuration).
SettlerConfig SettlerConfigOf(const GatewayConfig& config);
PayerReservationLimits ReservationLimitsOf(const GatewayConfig& config);
ReconcilerConfig ReconcilerConfigOf(const GatewayConfig& config);

}  // namespace agentpay
