// See settlement_config.h.
#include "gateway/settlement_config.h"

#include "core/check.h"

namespace agentpay {

SettlerConfig SettlerConfigOf(const GatewayConfig& config) {
  auto token = chain::ParseAddress(config.chain.asset);
  AGENTPAY_CHECK(token.ok());
  SettlerConfig settler;
  settler.chain_id = static_cast<uint64_t>(config.chain.chain_id);
  settler.token = *token;
  settler.asset_name = config.chain.asset_name;
  settler.asset_version = config.chain.asset_version;
  settler.fee_caps = {config.chain.max_fee_per_gas, config.chain.max_priority_fee_per_gas};
  settler.confirmations = config.chain.confirmations;
  return settler;
}

PayerReservationLimits ReservationLimitsOf(const GatewayConfig& config) {
  PayerReservationLimits limits;
  limits.max_in_flight_per_payer = config.max_in_flight_per_payer;
  limits.lapse_buffer_s = config.expiry_buffer_seconds;
  return limits;
}

ReconcilerConfig ReconcilerConfigOf(const GatewayConfig& config) {
  ReconcilerConfig reconciler;
  reconciler.receipt_timeout_ms = config.receipt_timeout_ms;
  reconciler.expiry_buffer_seconds = config.expiry_buffer_seconds;
  reconciler.retention_ms = config.retention_ms;
  reconciler.rpc_per_second = config.reconcile_rpc_per_second;
  reconciler.replace_after_ms = config.replace_after_ms;
  reconciler.reorg_watch_ms = config.reorg_watch_ms;
  return reconciler;
}

}  // namespace agentpay
