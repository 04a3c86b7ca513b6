// Pure wallet moves; see wallet.h.
#include "core/wallet.h"

#include <limits>

#include "core/check.h"
#include "core/money.h"

namespace agentpay {

std::string_view MoveKindName(MoveKind kind) {
  switch (kind) {
    case MoveKind::kDeposit: return "deposit";
    case MoveKind::kHold: return "hold";
    case MoveKind::kCapture: return "capture";
    case MoveKind::kRelease: return "release";
    case MoveKind::kRefund: return "refund";
  }
  AGENTPAY_CHECK(false);
}

std::optional<MoveKind> ParseMoveKind(std::string_view text) {
  for (MoveKind kind : kMoveKinds) {
    if (MoveKindName(kind) == text) return kind;
  }
  return std::nullopt;
}

Posting PostingFor(MoveKind kind) {
  switch (kind) {
    case MoveKind::kDeposit: return {"external", "wallet"};
    case MoveKind::kHold: return {"wallet", "hold"};
    case MoveKind::kCapture: return {"hold", "revenue"};
    case MoveKind::kRelease: return {"hold", "wallet"};
    case MoveKind::kRefund: return {"revenue", "wallet"};
  }
  AGENTPAY_CHECK(false);
}

MoveOutcome ApplyMove(Balances* balances, MoveKind kind, int64_t amount) {
  AGENTPAY_CHECK(balances->Valid());
  if (amount <= 0) return MoveOutcome::kInvalidAmount;
  Balances next = *balances;
  switch (kind) {
    case MoveKind::kDeposit: {
      auto deposited = AddAmounts(next.deposited, amount);
      if (!deposited) return MoveOutcome::kOverflow;
      next.deposited = *deposited;
      break;
    }
    case MoveKind::kHold:
      if (amount > next.available()) return MoveOutcome::kInsufficientFunds;
      next.held += amount;
      break;
    case MoveKind::kCapture:
      if (amount > next.held) return MoveOutcome::kNotHeld;
      next.held -= amount;
      next.captured += amount;
      break;
    case MoveKind::kRelease:
      if (amount > next.held) return MoveOutcome::kNotHeld;
      next.held -= amount;
      break;
    case MoveKind::kRefund:
      if (amount > next.captured) return MoveOutcome::kNotCaptured;
      next.captured -= amount;
      break;
  }
  AGENTPAY_CHECK(next.Valid());
  *balances = next;
  return MoveOutcome::kOk;
}

namespace {

// a + max(b, 0), saturating: a gain too large to count makes every move wait, never pass.
int64_t AddGain(int64_t a, int64_t b) {
  if (b <= 0) return a;
  auto sum = AddAmounts(a, b);
  return sum ? *sum : std::numeric_limits<int64_t>::max();
}

}  // namespace

void UnconfirmedGains::Add(const Balances& change) {
  int64_t available_change = 0;
  if (__builtin_sub_overflow(change.deposited, change.captured, &available_change) ||
      __builtin_sub_overflow(available_change, change.held, &available_change)) {
    available_change = std::numeric_limits<int64_t>::max();  // too large to count: assume the worst
  }
  available = AddGain(available, available_change);
  held = AddGain(held, change.held);
  captured = AddGain(captured, change.captured);
}

bool MoveSucceedsWhateverIsUndone(const Balances& balances, const UnconfirmedGains& gains,
                                  MoveKind kind, int64_t amount) {
  if (amount <= 0) return false;
  switch (kind) {
    case MoveKind::kDeposit: {
      Balances after = balances;
      return ApplyMove(&after, kind, amount) == MoveOutcome::kOk;
    }
    case MoveKind::kHold:
      return amount <= balances.available() - gains.available;
    case MoveKind::kCapture:
    case MoveKind::kRelease:
      return amount <= balances.held - gains.held;
    case MoveKind::kRefund:
      return amount <= balances.captured - gains.captured;
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
