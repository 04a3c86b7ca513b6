// See fees.h.
#include "settlement/fees.h"

#include <algorithm>
#include <array>

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

chain::U256 Bump(const chain::U256& fee) {
  // ceil(fee / 8): the limbs shifted right by three, plus one if any of the three bits was set.
  std::array<uint64_t, 4> limbs{};
  for (size_t i = 0; i < 4; ++i) {
    limbs[i] = fee.Limb(i) >> 3 | (i + 1 < 4 ? fee.Limb(i + 1) << 61 : 0);
  }
  chain::U256 eighth = chain::U256::FromLimbs(limbs);
  if ((fee.Limb(0) & 7) != 0 || fee.IsZero()) eighth = *chain::U256::CheckedAdd(eighth, 1);
  auto bumped = chain::U256::CheckedAdd(fee, eighth);
  // Only a fee within 1/8 of 2^256 overflows; no node takes one, and saturating keeps the order.
  return bumped ? *bumped : chain::U256::FromLimbs({~0ull, ~0ull, ~0ull, ~0ull});
}

ReplacementDecision ReplacementFees(const chain::FeeData& old_fees, const FeeDecision& market,
                                    const FeeCaps& caps, Stuck stuck) {
  ReplacementDecision decision;
  const chain::U256& old_max = old_fees.max_fee_per_gas;
  const chain::U256& old_tip = old_fees.max_priority_fee_per_gas;
  if (market.too_high) {  // (1)
    decision.reason = "stuck, not replaced: " + market.reason;
    return decision;
  }
  const chain::FeeData& now = market.fees;
  const bool at_market = old_max >= now.max_fee_per_gas && old_tip >= now.max_priority_fee_per_gas;
  if (at_market && stuck == Stuck::kUnmined) {  // (2)
    decision.at_market = true;
    decision.reason = "pending at the market's fees (max fee " + old_max.ToDecimal() +
                      " wei, tip " + old_tip.ToDecimal() + "): not replaced";
    return decision;
  }
  const chain::U256 bumped_max = Bump(old_max);
  const chain::U256 bumped_tip = Bump(old_tip);
  const chain::U256& max_cap = caps.max_fee_per_gas;
  const chain::U256& tip_cap = caps.max_priority_fee_per_gas;
  if ((!max_cap.IsZero() && bumped_max > max_cap) || (!tip_cap.IsZero() && bumped_tip > tip_cap)) {
    decision.reason = "stuck at max fee " + old_max.ToDecimal() + " wei, tip " +
                      old_tip.ToDecimal() +
                      "; a replacement the node would take exceeds --max-fee-per-gas or "
                      "--max-priority-fee-per-gas: waiting for the base fee to fall";
    return decision;  // (3)
  }
  chain::FeeData& fees = decision.fees;  // (4)
  fees.base_fee_per_gas = now.base_fee_per_gas;
  fees.max_fee_per_gas = std::max(now.max_fee_per_gas, bumped_max);
  if (!max_cap.IsZero()) fees.max_fee_per_gas = std::min(fees.max_fee_per_gas, max_cap);
  fees.max_priority_fee_per_gas = std::max(now.max_priority_fee_per_gas, bumped_tip);
  if (!tip_cap.IsZero()) {
    fees.max_priority_fee_per_gas = std::min(fees.max_priority_fee_per_gas, tip_cap);
  }
  fees.max_priority_fee_per_gas = std::min(fees.max_priority_fee_per_gas, fees.max_fee_per_gas);
  decision.replace = true;
  decision.reason =
      (stuck == Stuck::kHeldAtNextNonce
           ? "held by the node at the relayer's next nonce without being mined"
           : "stuck") +
      std::string(" at max fee ") + old_max.ToDecimal() + " wei, tip " + old_tip.ToDecimal() +
      (at_market ? std::string(", at the market's ") : std::string(", under the market's ")) +
      now.max_fee_per_gas.ToDecimal() + " and " + now.max_priority_fee_per_gas.ToDecimal() +
      ": replaced at max fee " + fees.max_fee_per_gas.ToDecimal() + ", tip " +
      fees.max_priority_fee_per_gas.ToDecimal();
  return decision;
}

}  // namespace agentpay
