// See payer_reservations.h.
#include "core/payer_reservations.h"

#include "core/check.h"

namespace agentpay {

std::string_view ReserveOutcomeName(ReserveOutcome outcome) {
  switch (outcome) {
    case ReserveOutcome::kReserved:
      return "reserved";
    case ReserveOutcome::kInsufficientBalance:
      return "insufficient_balance";
    case ReserveOutcome::kTooManyInFlight:
      return "too_many_in_flight";
    case ReserveOutcome::kTableFull:
      return "table_full";
    case ReserveOutcome::kStale:
      return "stale";
  }
  AGENTPAY_CHECK(false);
}

PayerReservations::PayerReservations(PayerReservationLimits limits) : limits_(limits) {
  AGENTPAY_CHECK(limits_.max_in_flight_per_payer > 0 && limits_.max_payers > 0);
  AGENTPAY_CHECK(limits_.lapse_buffer_s >= 0);
}

void PayerReservations::Lapse(Payer& payer, int64_t now_s) {
  for (auto it = payer.held.begin(); it != payer.held.end();) {
    const Held& held = it->second;
    // Past validBefore + buffer the authorization can no longer move money (settlement.h).
    if (held.valid_before_s <= now_s - limits_.lapse_buffer_s) {
      payer.reserved -= held.amount;
      ++payer.epoch;
      it = payer.held.erase(it);
    } else {
      ++it;
    }
  }
}

void PayerReservations::DropIfIdle(std::map<std::string, Payer, std::less<>>::iterator it) {
  if (it->second.held.empty() && it->second.checks == 0) payers_.erase(it);
}

ReservationCheck PayerReservations::BeginCheck(const std::string& payer, int64_t now_s) {
  auto it = payers_.find(payer);
  if (it == payers_.end()) {
    if (payers_.size() >= limits_.max_payers) return {ReserveOutcome::kTableFull, 0};
    it = payers_.emplace(payer, Payer{}).first;
  }
  Payer& entry = it->second;
  Lapse(entry, now_s);
  if (static_cast<int64_t>(entry.held.size()) + entry.checks >= limits_.max_in_flight_per_payer) {
    DropIfIdle(it);
    return {ReserveOutcome::kTooManyInFlight, 0};
  }
  ++entry.checks;
  return {ReserveOutcome::kReserved, entry.epoch};
}

void PayerReservations::EndCheck(const std::string& payer) {
  auto it = payers_.find(payer);
  AGENTPAY_CHECK(it != payers_.end() && it->second.checks > 0);
  --it->second.checks;
  DropIfIdle(it);
}

ReserveOutcome PayerReservations::Reserve(const std::string& payer, const std::string& nonce,
                                          int64_t amount, int64_t valid_before_s, int64_t balance,
                                          uint64_t epoch, int64_t now_s) {
  AGENTPAY_CHECK(amount > 0 && balance >= 0);
  auto it = payers_.find(payer);
  AGENTPAY_CHECK(it != payers_.end() && it->second.checks > 0);
  Payer& entry = it->second;
  --entry.checks;
  Lapse(entry, now_s);
  ReserveOutcome outcome = ReserveOutcome::kReserved;
  if (auto held = entry.held.find(nonce); held != entry.held.end()) {
    ++held->second.refs;  // the same authorization: counted once
  } else if (entry.epoch != epoch) {
    outcome = ReserveOutcome::kStale;
  } else if (entry.reserved > balance - amount) {  // reserved + amount > balance, without overflow
    outcome = ReserveOutcome::kInsufficientBalance;
  } else {
    entry.held.emplace(nonce, Held{amount, valid_before_s, 1, false});
    entry.reserved += amount;
  }
  if (outcome != ReserveOutcome::kReserved) DropIfIdle(it);
  return outcome;
}

void PayerReservations::Keep(const std::string& payer, const std::string& nonce) {
  auto it = payers_.find(payer);
  if (it == payers_.end()) return;
  if (auto held = it->second.held.find(nonce); held != it->second.held.end()) {
    held->second.kept = true;
  }
}

void PayerReservations::Unref(const std::string& payer, const std::string& nonce) {
  auto it = payers_.find(payer);
  if (it == payers_.end()) return;  // released (or lapsed) meanwhile
  Payer& entry = it->second;
  auto held = entry.held.find(nonce);
  if (held == entry.held.end()) return;
  if (held->second.refs > 0) --held->second.refs;
  if (held->second.refs == 0 && !held->second.kept) {
    entry.reserved -= held->second.amount;
    entry.held.erase(held);  // never broadcast: no settlement to wait for, no epoch bump needed
    DropIfIdle(it);
  }
}

bool PayerReservations::Release(const std::string& payer, const std::string& nonce) {
  auto it = payers_.find(payer);
  if (it == payers_.end()) return false;
  Payer& entry = it->second;
  auto held = entry.held.find(nonce);
  if (held == entry.held.end()) return false;
  entry.reserved -= held->second.amount;
  entry.held.erase(held);
  ++entry.epoch;  // a balance read before now may not show this settlement
  DropIfIdle(it);
  return true;
}

void PayerReservations::Restore(const std::string& payer, const std::string& nonce,
                                int64_t amount, int64_t valid_before_s) {
  AGENTPAY_CHECK(amount > 0);
  Payer& entry = payers_[payer];  // past max_payers too: these are already on chain
  if (entry.held.contains(nonce)) return;
  entry.held.emplace(nonce, Held{amount, valid_before_s, 0, true});
  entry.reserved += amount;
}

int64_t PayerReservations::Reserved(const std::string& payer) const {
  auto it = payers_.find(payer);
  return it == payers_.end() ? 0 : it->second.reserved;
}

int64_t PayerReservations::InFlight(const std::string& payer) const {
  auto it = payers_.find(payer);
  return it == payers_.end() ? 0
                             : static_cast<int64_t>(it->second.held.size()) + it->second.checks;
}

std::string_view ClusterReserveName(ClusterReserve decision) {
  switch (decision) {
    case ClusterReserve::kReserve:
      return "reserve";
    case ClusterReserve::kReadAgain:
      return "read_again";
    case ClusterReserve::kInsufficientBalance:
      return "insufficient_balance";
  }
  AGENTPAY_CHECK(false);
}

ClusterReserve DecideClusterReserve(const ClusterReserveFacts& facts) {
  AGENTPAY_CHECK(facts.amount > 0 && facts.reserved >= 0 && facts.covered >= 0 &&
                 facts.released_since >= 0);
  // reserved + amount + released_since <= covered, without overflow.
  const bool fits = facts.reserved <= facts.covered - facts.amount &&
                    facts.released_since <= facts.covered - facts.amount - facts.reserved;
  if (fits) return ClusterReserve::kReserve;
  return facts.covered_is_balance && facts.released_since == 0
             ? ClusterReserve::kInsufficientBalance
             : ClusterReserve::kReadAgain;
}

bool PaymentMayStillMove(const Operation& op) {
  switch (op.settlement) {
    case Settlement::kSubmitted:
    case Settlement::kUnknown:
      return true;
    case Settlement::kNone:
      return !IsFinal(op);
    case Settlement::kHeld:
    case Settlement::kSettled:
    case Settlement::kReleased:
    case Settlement::kVoid:
    case Settlement::kFailed:
      return false;
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
