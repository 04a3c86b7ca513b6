// Each x402 payer's authorizations in flight, reserved against its on-chain balance before the
// relayer broadcasts (issue 13 item 4): a payer funded for k prices gets at most k broadcasts at
// once, so the relayer never pays gas for a transfer the payer's balance cannot cover. Pure
// bookkeeping, no locking: the settlement layer (settlement/reservations.h) serializes the calls.
//
// A reservation is keyed by the authorization (payer, nonce): one authorization moves money at most
// once, so it is counted once however many requests carry it. Its life:
//   BeginCheck            before the balance is read; returns the payer's epoch
//   Reserve(epoch, ...)   with the balance read since: refused if the reservations, this one
//                         included, exceed it, or if a reservation was released since the read
//                         (the balance read may predate that settlement: kStale, read again)
//   Keep                  the authorization now belongs to a stored operation
//   Unref                 a request that reserved it is done; an unkept reservation with no
//                         request left is dropped (the payment was refused or lost a race)
//   Release               the settlement is decided: settled (the chain balance now shows it),
//                         void or failed (the money never moved through us)
//   Restore               after a restart, from the store's unresolved operations
// Entries also lapse once the authorization cannot move money any more (validBefore + buffer
// passed by the caller's clock): a backstop for operations that end outside the settlement code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/operation.h"

namespace agentpay {

struct PayerReservationLimits {
  int64_t max_in_flight_per_payer = 128;  // reservations plus balance checks under way
  size_t max_payers = 100000;             // payers with anything reserved or being checked
  int64_t lapse_buffer_s = 30;            // an entry lapses at validBefore + this
};

enum class ReserveOutcome {
  kReserved,             // counted (or already counted for this authorization)
  kInsufficientBalance,  // the payer's reservations would exceed its balance
  kTooManyInFlight,      // max_in_flight_per_payer reached
  kTableFull,            // max_payers reached
  kStale,                // a reservation of this payer was released after the balance was read
};
std::string_view ReserveOutcomeName(ReserveOutcome outcome);

struct ReservationCheck {
  ReserveOutcome outcome;  // kReserved (go on and read the balance), kTooManyInFlight, kTableFull
  uint64_t epoch = 0;
};

class PayerReservations {
 public:
  explicit PayerReservations(PayerReservationLimits limits);

  // Before reading the payer's balance; every kReserved check must end in Reserve or EndCheck.
  ReservationCheck BeginCheck(const std::string& payer, int64_t now_s);
  // Ends a check that will not reserve (the balance read failed).
  void EndCheck(const std::string& payer);
  // Ends the check begun at `epoch`. Preconditions: amount > 0, balance >= 0. kReserved counts
  // one more request holding the authorization (Unref when it is done).
  ReserveOutcome Reserve(const std::string& payer, const std::string& nonce, int64_t amount,
                         int64_t valid_before_s, int64_t balance, uint64_t epoch, int64_t now_s);
  void Keep(const std::string& payer, const std::string& nonce);
  void Unref(const std::string& payer, const std::string& nonce);
  // Returns whether there was such a reservation.
  bool Release(const std::string& payer, const std::string& nonce);
  // A kept reservation, without a balance check (it was checked before the restart).
  void Restore(const std::string& payer, const std::string& nonce, int64_t amount,
               int64_t valid_before_s);

  int64_t Reserved(const std::string& payer) const;  // 0 for an unknown payer
  int64_t InFlight(const std::string& payer) const;  // reservations plus checks
  size_t Payers() const { return payers_.size(); }

 private:
  struct Held {
    int64_t amount = 0;
    int64_t valid_before_s = 0;
    int64_t refs = 0;  // requests holding it
    bool kept = false;
  };
  struct Payer {
    std::map<std::string, Held, std::less<>> held;  // by nonce
    int64_t reserved = 0;
    int64_t checks = 0;
    uint64_t epoch = 0;  // bumped by every release
  };
  void Lapse(Payer& payer, int64_t now_s);
  void DropIfIdle(std::map<std::string, Payer, std::less<>>::iterator it);

  PayerReservationLimits limits_;
  // A payer's entry lives while it holds a reservation or a check, so a check's epoch is always
  // compared with the entry it was taken from.
  std::map<std::string, Payer, std::less<>> payers_;
};

// ---- The cluster's reservations (issue 36 item 8) ----------------------------------------------
// The table above is one process's. Several gateways on one database (each with its own table)
// would each let a payer funded for one price broadcast once. The reservation that counts across
// the cluster is a row of the store (payer_reservations), written in the decision that stores the
// operation and signs its transaction, and dropped in the decision that makes its payment final;
// every drop moves the payer's epoch (payer_epochs) on by the amount dropped. The shell reads the
// epoch and the payer's reservations before it reads the chain; the decision reads both again.
// What was dropped between (`released_since`, the epoch's move) may have left the chain after the
// balance was read and no longer be reserved, so the balance read counts for that much less:
//
//   reserved + amount <= covered - released_since | covered is the balance | released_since | →
//   ----------------------------------------------+------------------------+----------------+-----------------------
//   yes                                           | any                    | any            | kReserve
//   no                                            | yes                    | 0              | kInsufficientBalance
//   no                                            | yes                    | > 0            | kReadAgain
//   no                                            | no                     | any            | kReadAgain
//
// "Covered" is what the chain showed the payer holds at least: its balance (balanceOf), or only
// this payment's value when the simulation of the transfer was all that was asked (the payer had
// nothing reserved in the store when the shell looked). kReadAgain: read the epoch and the chain
// once more (a bounded number of times), never a refusal on stale facts.
enum class ClusterReserve { kReserve, kReadAgain, kInsufficientBalance };
std::string_view ClusterReserveName(ClusterReserve decision);

struct ClusterReserveFacts {
  int64_t amount = 0;          // this payment's value (> 0)
  int64_t reserved = 0;        // the payer's other reservations in force in the store (>= 0)
  int64_t covered = 0;         // what the chain showed the payer holds at least (>= 0)
  bool covered_is_balance = false;
  int64_t released_since = 0;  // the epoch's move since it was read before the chain (>= 0)
};
ClusterReserve DecideClusterReserve(const ClusterReserveFacts& facts);

// Whether an x402 operation's payment may still move the payer's money, so that its reservation
// stays: submitted or unknown, or not settled yet and not final (settle=after waiting for its
// upstream or a retry). Settled, void, failed or final unpaid: released.
bool PaymentMayStillMove(const Operation& op);

}  // namespace agentpay
