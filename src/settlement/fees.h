// The relayer's fee caps (--max-fee-per-gas, --max-priority-fee-per-gas): what the gateway signs
// with, given what the node says fees are, and when it signs nothing at all. Pure.
//
//   the node's base fee | the node's tip     | decision
//   --------------------|--------------------|-------------------------------------------------
//   (no caps)           | -                  | (1) sign with the node's fees
//   above max_fee       | -                  | (2) too high: nothing is signed or broadcast
//   max_fee or below    | above max_priority | (3) tip = max_priority, then (4)
//   max_fee or below    | -                  | (4) max fee = min(2 * base + tip, max_fee),
//                       |                    |     tip = min(tip, max fee)
//
// (2) leaves the payer's authorization unused: the client's retry with the same signature settles
// once fees are back under the cap. (4) a transaction signed just under the cap can still wait in
// the mempool if the base fee rises past it; it keeps its relayer nonce until then.
#pragma once

#include <string>

#include "chain/chain.h"

namespace agentpay {

struct FeeCaps {
  chain::U256 max_fee_per_gas;           // zero: no cap
  chain::U256 max_priority_fee_per_gas;  // zero: no cap
  bool any() const { return !max_fee_per_gas.IsZero() || !max_priority_fee_per_gas.IsZero(); }
};

struct FeeDecision {
  bool too_high = false;  // (2): sign nothing now
  chain::FeeData fees;    // to sign with, unless too_high
  std::string reason;     // for too_high: the base fee and the cap, in wei
};

FeeDecision ApplyFeeCaps(const chain::FeeData& node, const FeeCaps& caps);

}  // namespace agentpay
