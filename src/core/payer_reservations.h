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

}  // namespace agentpay
