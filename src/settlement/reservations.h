// The gateway's payer reservations (core/payer_reservations.h) shared by the payment path, which
// reserves before it stores and broadcasts, and the reconciler, which releases what it decides:
// the table behind a mutex, a per-request handle, and the rebuild after a restart.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/payer_reservations.h"
#include "core/result.h"
#include "core/settlement.h"
#include "store/store.h"

namespace agentpay {

class Reservations {
 public:
  explicit Reservations(PayerReservationLimits limits) : table_(limits) {}

  ReservationCheck BeginCheck(const std::string& payer, int64_t now_s);
  void EndCheck(const std::string& payer);
  ReserveOutcome Reserve(const std::string& payer, const std::string& nonce, int64_t amount,
                         int64_t valid_before_s, int64_t balance, uint64_t epoch, int64_t now_s);
  void Keep(const std::string& payer, const std::string& nonce);
  void Unref(const std::string& payer, const std::string& nonce);
  // The settlement of this authorization is decided (settled, void, failed, or never to be
  // submitted): the payer's balance no longer needs to cover it.
  void Release(const Authorization& authorization);
  void Restore(const Authorization& authorization);
  int64_t Reserved(const std::string& payer);

 private:
  std::mutex mutex_;
  PayerReservations table_;
};

// One request's hold on the reservation it took; dropped with the request unless an operation
// kept it (KeepIfStored), in which case the settlement's decision releases it.
class ReservationHold {
 public:
  ReservationHold(Reservations& reservations, std::string payer, std::string nonce)
      : reservations_(reservations), payer_(std::move(payer)), nonce_(std::move(nonce)) {}
  ~ReservationHold() { reservations_.Unref(payer_, nonce_); }
  ReservationHold(const ReservationHold&) = delete;
  ReservationHold& operator=(const ReservationHold&) = delete;

  // The reservation now belongs to the stored operation paid by `stored`, if it is this one's
  // authorization (a request may end up resuming another operation of the same key).
  void KeepIfStored(const Authorization& stored);

 private:
  Reservations& reservations_;
  std::string payer_, nonce_;
};

// After a restart: every submitted or unknown x402 operation's authorization is reserved again
// (its transaction may still move the payer's money). Returns how many.
Result<int64_t> RestoreReservations(Store& store, Reservations& reservations);

}  // namespace agentpay
