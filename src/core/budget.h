// The agent client's budget reservations (CONTRACT §5, §6): the pure decisions behind the budget
// file of `agentpay pay`. A reservation is made before any payment is signed or sent and moves
// reserved → spent | released | unknown; the shell (src/client) reads and writes the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

enum class ReconcileVerdict { kKeep, kMarkSpent, kMarkReleased };

// An x402 authorization (CONTRACT §5): spent once the chain says its nonce is used; released only
// when chain time has passed validBefore plus the buffer AND the nonce is unused. The shell must
// read chain_time_s before authorization_used: a block after that time can no longer use it, so
// an unused nonce read afterwards stays unused for good.
ReconcileVerdict ReconcileAuthorization(int64_t chain_time_s, int64_t valid_before_s,
                                        int64_t buffer_s, bool authorization_used);

// A wallet payment, from the gateway operation's `settlement` (CONTRACT §3): settled → spent,
// released → released, anything else (held, unknown, a name not known here) → kept.
ReconcileVerdict ReconcileWalletSettlement(std::string_view settlement);

}  // namespace agentpay
