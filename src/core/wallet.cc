// Pure wallet moves; see wallet.h.
#include "core/wallet.h"

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

}  // namespace agentpay
