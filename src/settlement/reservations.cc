// See reservations.h.
#include "settlement/reservations.h"

namespace agentpay {

ReservationCheck Reservations::BeginCheck(const std::string& payer, int64_t now_s) {
  std::lock_guard lock(mutex_);
  return table_.BeginCheck(payer, now_s);
}

void Reservations::EndCheck(const std::string& payer) {
  std::lock_guard lock(mutex_);
  table_.EndCheck(payer);
}

ReserveOutcome Reservations::Reserve(const std::string& payer, const std::string& nonce,
                                     int64_t amount, int64_t valid_before_s, int64_t balance,
                                     uint64_t epoch, int64_t now_s) {
  std::lock_guard lock(mutex_);
  return table_.Reserve(payer, nonce, amount, valid_before_s, balance, epoch, now_s);
}

void Reservations::Keep(const std::string& payer, const std::string& nonce) {
  std::lock_guard lock(mutex_);
  table_.Keep(payer, nonce);
}

void Reservations::Unref(const std::string& payer, const std::string& nonce) {
  std::lock_guard lock(mutex_);
  table_.Unref(payer, nonce);
}

void Reservations::Release(const Authorization& authorization) {
  std::lock_guard lock(mutex_);
  table_.Release(authorization.from, authorization.nonce_hex);
}

void Reservations::Restore(const Authorization& authorization) {
  if (authorization.value <= 0) return;
  std::lock_guard lock(mutex_);
  table_.Restore(authorization.from, authorization.nonce_hex, authorization.value,
                 authorization.valid_before_s);
}

int64_t Reservations::Reserved(const std::string& payer) {
  std::lock_guard lock(mutex_);
  return table_.Reserved(payer);
}

void ReservationHold::KeepIfStored(const Authorization& stored) {
  if (stored.from == payer_ && stored.nonce_hex == nonce_) reservations_.Keep(payer_, nonce_);
}

Result<int64_t> RestoreReservations(Store& store, Reservations& reservations) {
  constexpr int kPage = 500;
  int64_t restored = 0;
  std::string cursor;
  for (;;) {
    std::vector<Authorization> page;
    std::string last;
    Status read = store.Read([&](Transaction& tx) -> Status {
      page.clear();
      auto ops = tx.ListSettlingOperations(cursor, kPage);
      if (!ops.ok()) return ops.status();
      if (!ops->empty()) last = ops->back().id;
      for (const Operation& op : *ops) {
        auto payment = tx.FindX402Payment(op.id);
        if (!payment.ok()) return payment.status();
        if (payment->has_value()) page.push_back((*payment)->authorization);
      }
      return Status::Ok();
    });
    if (!read.ok()) return read;
    if (last.empty()) return restored;
    for (const Authorization& authorization : page) {
      reservations.Restore(authorization);
      ++restored;
    }
    cursor = last;
  }
}

}  // namespace agentpay
