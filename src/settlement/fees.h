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

// A transaction left in the mempool is replaced (issue 14 item 4) by one with the same relayer
// nonce and calldata at a higher fee, never by a second authorization. Nodes take a replacement
// only when its max fee and its tip are both well above those it replaces (geth: 10%, others
// 12.5%): each is raised to at least Bump(old) = old + ceil(old / 8), and at least 1 wei more.
// `market` is what ApplyFeeCaps makes of the node's fees now. `stuck` is why it is up for
// replacement: unmined for --replace-after-ms, or held by the node at the relayer's next nonce
// without being counted pending (Stuck::kHeldAtNextNonce: the reconciler's gap check saw the
// relayer's mined nonce stop there; such a node never mines it as it is, whatever its fees, but
// takes a replacement as it takes any new transaction).
//
//   market               | the old transaction's fees         | decision
//   ---------------------|------------------------------------|----------------------------------
//   too high (cap)       | -                                  | (1) wait: nothing under the cap
//                        |                                    |     could be mined either
//   under the cap        | max fee and tip >= the market's,   | (2) wait: it is not stuck on price
//                        | stuck kUnmined                     |
//   under the cap        | Bump(max fee) > --max-fee-per-gas, | (3) wait: the cap forbids a
//                        | or Bump(tip) > the tip cap         |     replacement the node would take
//   under the cap        | otherwise (kHeldAtNextNonce at the | (4) replace: max fee = max(market,
//                        | market's fees included)            |     Bump(old)), tip likewise, each
//                        |                                    |     within its cap, tip <= max fee
//
// (2) A transaction priced at the market and still unmined waits on something else (the nonce
// before it: the reconciler's gap check). (3) The operator's cap is never exceeded; the
// transaction waits for the base fee to come down to it, and the reason says so.
enum class Stuck { kUnmined, kHeldAtNextNonce };
struct ReplacementDecision {
  bool replace = false;
  bool at_market = false;  // (2): not stuck on price (nothing for an operator to see)
  chain::FeeData fees;     // (4): the replacement's max fee and tip
  std::string reason;      // every row: for the trace
};
chain::U256 Bump(const chain::U256& fee);
ReplacementDecision ReplacementFees(const chain::FeeData& old_fees, const FeeDecision& market,
                                    const FeeCaps& caps, Stuck stuck = Stuck::kUnmined);

}  // namespace agentpay
