// The platform wallet of one account: deposits, holds, captures and releases as pure moves on balances.
// Invariants (CONTRACT §4): balance = deposited − captured, 0 ≤ held ≤ balance, available = balance − held.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentpay {

struct Balances {
  int64_t deposited = 0;
  int64_t captured = 0;
  int64_t held = 0;

  int64_t balance() const { return deposited - captured; }
  int64_t available() const { return balance() - held; }
  bool Valid() const {
    return deposited >= 0 && captured >= 0 && held >= 0 && captured <= deposited &&
           held <= balance();
  }
  bool operator==(const Balances&) const = default;
};

// kRefund returns captured money to the wallet (an admin resolution, docs/wallet-ledger.md §6).
enum class MoveKind { kDeposit, kHold, kCapture, kRelease, kRefund };

enum class MoveOutcome {
  kOk,
  kInvalidAmount,      // zero or negative
  kInsufficientFunds,  // a hold larger than the available balance
  kNotHeld,            // capture or release of more than is held
  kOverflow,           // a deposit that would overflow int64
  kNotCaptured,        // a refund of more than is captured
};

inline constexpr std::array<MoveKind, 5> kMoveKinds{
    MoveKind::kDeposit, MoveKind::kHold, MoveKind::kCapture, MoveKind::kRelease, MoveKind::kRefund};

// "deposit", "hold", "capture", "release", "refund": the kind a ledger posting is stored, shown
// (postings JSON, the trace's ledger events) and summed by (the books' SQL) under.
std::string_view MoveKindName(MoveKind kind);
// The kind of a stored name; nullopt for any other text (a store reports it as corrupt).
std::optional<MoveKind> ParseMoveKind(std::string_view text);

// The ledger accounts a move debits and credits (double entry). Wallet money sits in
// "wallet:<account>" while available and in "hold:<account>" while held; captured money is the gateway's
// "revenue" (a refund moves it back to the wallet); deposits come from "external". Every move's
// postings sum to zero.
struct Posting {
  std::string_view debit_kind;   // "external", "wallet", "hold", "revenue"
  std::string_view credit_kind;
};
Posting PostingFor(MoveKind kind);

// One stored posting, as the ledger keeps it.
struct PostingRecord {
  std::string operation_id;
  MoveKind kind = MoveKind::kDeposit;
  std::string debit;
  std::string credit;
  int64_t amount = 0;
  int64_t at_ms = 0;
};

// Applies a move to balances. On success *balances is updated and stays Valid(); otherwise it is
// unchanged. Precondition: balances->Valid().
MoveOutcome ApplyMove(Balances* balances, MoveKind kind, int64_t amount);

// Moves a store has made but the database has not confirmed yet (PostgreSQL's writer sends a
// decision's writes without waiting for them) may each still be undone, and a move decided on
// balances that include them must hold whichever of them are. What undoing some of them can take
// away from each quantity a move checks: the sum of what they added to it.
struct UnconfirmedGains {
  int64_t available = 0;
  int64_t held = 0;
  int64_t captured = 0;
  // Counts one unconfirmed decision's change to an account's balances (after minus before).
  void Add(const Balances& change);
};

// Whether ApplyMove(kind, amount) succeeds on `balances` and on every balance left by undoing any
// set of the unconfirmed moves behind `gains` (false: the move must wait for the database's
// answer before it is decided). Precondition: balances.Valid(), and every such balance Valid().
//
//   kind      succeeds whatever is undone when
//   deposit   it succeeds on `balances` (undoing only lowers what is deposited)
//   hold      0 < amount <= available - gains.available
//   capture,  0 < amount <= held - gains.held
//   release
//   refund    0 < amount <= captured - gains.captured
bool MoveSucceedsWhateverIsUndone(const Balances& balances, const UnconfirmedGains& gains,
                                  MoveKind kind, int64_t amount);

}  // namespace agentpay
