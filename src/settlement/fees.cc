// See fees.h.
#include "settlement/fees.h"

#include <algorithm>

namespace agentpay {

FeeDecision ApplyFeeCaps(const chain::FeeData& node, const FeeCaps& caps) {
  FeeDecision decision;
  decision.fees = node;
  if (!caps.any()) return decision;  // (1)
  const chain::U256& cap = caps.max_fee_per_gas;
  if (!cap.IsZero() && node.base_fee_per_gas > cap) {  // (2)
    decision.too_high = true;
    decision.reason = "the chain's base fee is " + node.base_fee_per_gas.ToDecimal() +
                      " wei per gas, above --max-fee-per-gas " + cap.ToDecimal();
    return decision;
  }
  chain::FeeData& fees = decision.fees;
  if (!caps.max_priority_fee_per_gas.IsZero()) {  // (3)
    fees.max_priority_fee_per_gas =
        std::min(fees.max_priority_fee_per_gas, caps.max_priority_fee_per_gas);
  }
  // (4) The node's max fee was MaxFeeFor(base, its tip); with a lower tip it is recomputed.
  auto max_fee = chain::MaxFeeFor(fees.base_fee_per_gas, fees.max_priority_fee_per_gas);
  fees.max_fee_per_gas = max_fee ? *max_fee : node.max_fee_per_gas;
  if (!cap.IsZero()) fees.max_fee_per_gas = std::min(fees.max_fee_per_gas, cap);
  fees.max_priority_fee_per_gas = std::min(fees.max_priority_fee_per_gas, fees.max_fee_per_gas);
  return decision;
}

}  // namespace agentpay
