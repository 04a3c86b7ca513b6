// Budget reservation decisions; see budget.h.
#include "core/budget.h"

#include <cctype>

#include "core/check.h"
#include "core/mutants.h"

namespace agentpay {

std::string_view ReservationStateName(ReservationState state) {
  switch (state) {
    case ReservationState::kReserved:
      return "reserved";
    case ReservationState::kSpent:
      return "spent";
    case ReservationState::kReleased:
      return "released";
    case ReservationState::kUnknown:
      return "unknown";
  }
  AGENTPAY_CHECK(false);
}

std::optional<ReservationState> ParseReservationState(std::string_view name) {
  for (ReservationState state : {ReservationState::kReserved, ReservationState::kSpent,
                                 ReservationState::kReleased, ReservationState::kUnknown}) {
    if (ReservationStateName(state) == name) return state;
  }
  return std::nullopt;
}

bool CountsAgainstBudget(ReservationState state) { return state != ReservationState::kReleased; }

namespace {

bool SameAddress(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

BudgetAssetVerdict DecideBudgetAsset(const BudgetAssetBinding& binding, uint64_t chain_id,
                                     std::string_view address) {
  switch (binding.state) {
    case BudgetAssetState::kUnbound:
      return BudgetAssetVerdict::kBind;
    case BudgetAssetState::kMixed:
      return BudgetAssetVerdict::kMixed;
    case BudgetAssetState::kBound:
      return binding.asset.chain_id == chain_id && SameAddress(binding.asset.address, address)
                 ? BudgetAssetVerdict::kSame
                 : BudgetAssetVerdict::kOther;
  }
  AGENTPAY_CHECK(false);
}

BudgetAssetBinding MigrateBudgetAsset(
    const std::vector<std::pair<uint64_t, std::string>>& reservation_assets) {
  BudgetAssetBinding binding;
  for (const auto& [chain_id, address] : reservation_assets) {
    switch (DecideBudgetAsset(binding, chain_id, address)) {
      case BudgetAssetVerdict::kBind:
        binding.state = BudgetAssetState::kBound;
        binding.asset.chain_id = chain_id;
        binding.asset.address = address;
        for (char& c : binding.asset.address) c = static_cast<char>(std::tolower(c));
        break;
      case BudgetAssetVerdict::kSame:
        break;
      case BudgetAssetVerdict::kOther:
      case BudgetAssetVerdict::kMixed:
        return BudgetAssetBinding{BudgetAssetState::kMixed, {}};
    }
  }
  return binding;
}

ReserveVerdict DecideReserve(const std::optional<ReservationSnapshot>& existing,
                             std::string_view fingerprint, int64_t amount, int64_t total,
                             int64_t committed) {
  AGENTPAY_CHECK(amount > 0 && committed >= 0 && committed <= total);
  if (existing) {
    if (existing->fingerprint != fingerprint) return ReserveVerdict::kMismatch;
    // A payment that may still land is re-presented, never replaced by a second one.
    if (existing->state != ReservationState::kReleased) return ReserveVerdict::kResume;
  }
  // total - committed cannot overflow (both in [0, total]); amount > left is the exact test.
  return amount > total - committed ? ReserveVerdict::kOverBudget : ReserveVerdict::kReserve;
}

ReservationState AfterOutcome(ReservationState current, ReservationState learned) {
  AGENTPAY_CHECK(learned != ReservationState::kReserved);
  switch (current) {
    case ReservationState::kSpent:
    case ReservationState::kReleased:
      return current;
    case ReservationState::kReserved:
    case ReservationState::kUnknown:
      return learned;
  }
  AGENTPAY_CHECK(false);
}

ReconcileVerdict ReconcileAuthorization(int64_t chain_time_s, int64_t valid_before_s,
                                        int64_t buffer_s, bool authorization_used) {
  if (authorization_used) return ReconcileVerdict::kMarkSpent;
  if (MutantActive(Mutant::kBudgetReleasedBeforeExpiry)) return ReconcileVerdict::kMarkReleased;
  // valid_before_s and buffer_s are small non-negative numbers of seconds (checked by the shell);
  // compare without adding to stay clear of overflow.
  if (chain_time_s - buffer_s >= valid_before_s) return ReconcileVerdict::kMarkReleased;
  return ReconcileVerdict::kKeep;
}

ReconcileVerdict ReconcileWalletSettlement(std::optional<Settlement> settlement) {
  if (settlement == Settlement::kSettled) return ReconcileVerdict::kMarkSpent;
  if (settlement == Settlement::kReleased) return ReconcileVerdict::kMarkReleased;
  return ReconcileVerdict::kKeep;
}

}  // namespace agentpay
