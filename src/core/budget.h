// The agent client's budget reservations (CONTRACT §5, §6): the pure decisions behind the budget
// file of `agentpay pay`. A reservation is made before any payment is signed or sent and moves
// reserved → spent | released | unknown; the shell (src/client) reads and writes the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/operation.h"

namespace agentpay {

enum class ReservationState {
  kReserved,  // budget set aside; the payment may be in flight
  kSpent,     // the money moved (served, or the chain/gateway says so)
  kReleased,  // proven never to move: the budget is available again
  kUnknown,   // the outcome is not known: kept against the budget until reconciled
};
std::string_view ReservationStateName(ReservationState state);
std::optional<ReservationState> ParseReservationState(std::string_view name);

// Every state but kReleased holds its amount against the budget.
bool CountsAgainstBudget(ReservationState state);

// The existing reservation for a key, as far as a new claim on that key needs it.
struct ReservationSnapshot {
  ReservationState state = ReservationState::kReserved;
  std::string fingerprint;  // of the request the key was first used for
};

enum class ReserveVerdict {
  kReserve,     // set `amount` aside now (a new key, or one whose payment was released)
  kResume,      // the key already has a live reservation: re-present its payment, reserve nothing
  kMismatch,    // the key was used for another request
  kOverBudget,  // committed + amount would exceed the total: send nothing
};

// Decides a claim on a key for a request with `fingerprint` costing `amount`, given the budget's
// total and what is committed (the sum over reservations that count, the existing one included).
// Preconditions: 0 <= committed <= total, amount > 0.
ReserveVerdict DecideReserve(const std::optional<ReservationSnapshot>& existing,
                             std::string_view fingerprint, int64_t amount, int64_t total,
                             int64_t committed);

// The state after an attempt or a reconciliation learned `learned` for a reservation in `current`.
// Spent never changes (the money moved), released changes only through a new reservation, and an
// unknown or reserved reservation takes what was learned. Precondition: learned != kReserved.
ReservationState AfterOutcome(ReservationState current, ReservationState learned);

// The asset a budget counts in: its total and every reservation are atomic units of one token on
// one chain. A budget file is bound to its asset by its first reservation (or by the migration of
// an older file, see MigrateBudgetAsset) and never changes it.
struct BudgetAsset {
  uint64_t chain_id = 0;
  std::string address;          // the token, lower-case 0x hex
  std::string name;             // its EIP-712 domain name as the offer gave it ("USDC"), or ""
  std::optional<int> decimals;  // when the chain was asked (--chain-rpc), else unknown
};

enum class BudgetAssetState {
  kUnbound,  // no reservation yet: the next one binds the file to its asset
  kBound,    // counts in `asset`
  kMixed,    // an older file whose reservations are in several assets: no unit, no new payment
};
struct BudgetAssetBinding {
  BudgetAssetState state = BudgetAssetState::kUnbound;
  BudgetAsset asset;  // kBound only
};

enum class BudgetAssetVerdict {
  kSame,   // the offer is in the budget's asset
  kBind,   // the budget has no asset yet: this reservation binds it
  kOther,  // another asset (chain or token): refuse, nothing reserved or signed
  kMixed,  // the budget has no single asset (an older, mixed file): refuse
};

// Whether a reservation in (chain_id, address) may count against a budget bound as `binding`.
// Addresses compare case-insensitively.
BudgetAssetVerdict DecideBudgetAsset(const BudgetAssetBinding& binding, uint64_t chain_id,
                                     std::string_view address);

// The binding of a budget file written before budgets named their asset (schema 1), from the
// (chain id, token) of each of its x402 reservations (wallet ones name none): no reservation →
// kUnbound; all in one asset → kBound to it (name and decimals unknown); several → kMixed.
BudgetAssetBinding MigrateBudgetAsset(
    const std::vector<std::pair<uint64_t, std::string>>& reservation_assets);

enum class ReconcileVerdict { kKeep, kMarkSpent, kMarkReleased };

// An x402 authorization (CONTRACT §5): spent once the chain says its nonce is used; released only
// when chain time has passed validBefore plus the buffer AND the nonce is unused. The shell must
// read chain_time_s before authorization_used: a block after that time can no longer use it, so
// an unused nonce read afterwards stays unused for good.
ReconcileVerdict ReconcileAuthorization(int64_t chain_time_s, int64_t valid_before_s,
                                        int64_t buffer_s, bool authorization_used);

// A wallet payment, from the gateway operation's `settlement` (CONTRACT §3): settled → spent,
// released → released, anything else (held, unknown; nullopt: none shown, or a name not known
// here) → kept.
ReconcileVerdict ReconcileWalletSettlement(std::optional<Settlement> settlement);

}  // namespace agentpay
