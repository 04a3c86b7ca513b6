// The agent client's budget decisions (core/budget.h): reservation, resumption, the never-downgrade
// transitions, and the CONTRACT §5 release rule for x402 authorizations.
#include "core/budget.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

TEST(BudgetTest, StateNamesRoundTrip) {
  for (ReservationState state : {ReservationState::kReserved, ReservationState::kSpent,
                                 ReservationState::kReleased, ReservationState::kUnknown}) {
    EXPECT_EQ(ParseReservationState(ReservationStateName(state)), state);
  }
  EXPECT_FALSE(ParseReservationState("held").has_value());
  EXPECT_FALSE(CountsAgainstBudget(ReservationState::kReleased));
  EXPECT_TRUE(CountsAgainstBudget(ReservationState::kUnknown));
  EXPECT_TRUE(CountsAgainstBudget(ReservationState::kReserved));
  EXPECT_TRUE(CountsAgainstBudget(ReservationState::kSpent));
}

TEST(BudgetTest, ReservesExactlyUpToTheTotal) {
  EXPECT_EQ(DecideReserve(std::nullopt, "f", 1000, 5000, 4000), ReserveVerdict::kReserve);
  EXPECT_EQ(DecideReserve(std::nullopt, "f", 1001, 5000, 4000), ReserveVerdict::kOverBudget);
  EXPECT_EQ(DecideReserve(std::nullopt, "f", 1, 0, 0), ReserveVerdict::kOverBudget);
  EXPECT_EQ(DecideReserve(std::nullopt, "f", INT64_MAX, INT64_MAX, 0), ReserveVerdict::kReserve);
  EXPECT_EQ(DecideReserve(std::nullopt, "f", INT64_MAX, INT64_MAX, 1), ReserveVerdict::kOverBudget);
}

TEST(BudgetTest, AnExistingReservationIsResumedNeverReplaced) {
  for (ReservationState state :
       {ReservationState::kReserved, ReservationState::kSpent, ReservationState::kUnknown}) {
    ReservationSnapshot existing{state, "f"};
    // Even with the budget exhausted: resuming reserves nothing new.
    EXPECT_EQ(DecideReserve(existing, "f", 1000, 1000, 1000), ReserveVerdict::kResume);
    EXPECT_EQ(DecideReserve(existing, "g", 1000, 9000, 1000), ReserveVerdict::kMismatch);
  }
  ReservationSnapshot released{ReservationState::kReleased, "f"};
  EXPECT_EQ(DecideReserve(released, "f", 1000, 2000, 1000), ReserveVerdict::kReserve);
  EXPECT_EQ(DecideReserve(released, "f", 1000, 2000, 1500), ReserveVerdict::kOverBudget);
  EXPECT_EQ(DecideReserve(released, "g", 1000, 2000, 0), ReserveVerdict::kMismatch);
}

TEST(BudgetTest, SpentAndReleasedNeverChangeThroughOutcomes) {
  using S = ReservationState;
  for (S learned : {S::kSpent, S::kReleased, S::kUnknown}) {
    EXPECT_EQ(AfterOutcome(S::kSpent, learned), S::kSpent);
    EXPECT_EQ(AfterOutcome(S::kReleased, learned), S::kReleased);
    EXPECT_EQ(AfterOutcome(S::kReserved, learned), learned);
    EXPECT_EQ(AfterOutcome(S::kUnknown, learned), learned);
  }
}

TEST(BudgetTest, AuthorizationReleasedOnlyAfterExpiryPlusBufferAndUnused) {
  const int64_t valid_before = 1'700'000'000;
  const int64_t buffer = 30;
  // Used: spent, whatever the time.
  EXPECT_EQ(ReconcileAuthorization(valid_before - 100, valid_before, buffer, true),
            ReconcileVerdict::kMarkSpent);
  EXPECT_EQ(ReconcileAuthorization(valid_before + 1000, valid_before, buffer, true),
            ReconcileVerdict::kMarkSpent);
  // Unused: kept before validBefore and inside the buffer, released from validBefore + buffer on.
  EXPECT_EQ(ReconcileAuthorization(valid_before - 1, valid_before, buffer, false),
            ReconcileVerdict::kKeep);
  EXPECT_EQ(ReconcileAuthorization(valid_before, valid_before, buffer, false),
            ReconcileVerdict::kKeep);
  EXPECT_EQ(ReconcileAuthorization(valid_before + buffer - 1, valid_before, buffer, false),
            ReconcileVerdict::kKeep);
  EXPECT_EQ(ReconcileAuthorization(valid_before + buffer, valid_before, buffer, false),
            ReconcileVerdict::kMarkReleased);
}

TEST(BudgetTest, WalletFollowsTheGatewaySettlement) {
  EXPECT_EQ(ReconcileWalletSettlement(Settlement::kSettled), ReconcileVerdict::kMarkSpent);
  EXPECT_EQ(ReconcileWalletSettlement(Settlement::kReleased), ReconcileVerdict::kMarkReleased);
  for (Settlement other : {Settlement::kHeld, Settlement::kUnknown, Settlement::kNone,
                           Settlement::kSubmitted, Settlement::kVoid, Settlement::kFailed}) {
    EXPECT_EQ(ReconcileWalletSettlement(other), ReconcileVerdict::kKeep) << SettlementName(other);
  }
  EXPECT_EQ(ReconcileWalletSettlement(std::nullopt), ReconcileVerdict::kKeep);
}

// A budget counts in one asset: the table of DecideBudgetAsset, and the migration of older files.
TEST(BudgetAssetTest, OnlyTheBoundAssetCounts) {
  const std::string token = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
  const BudgetAssetBinding unbound;
  const BudgetAssetBinding bound{BudgetAssetState::kBound, {84532, token, "USDC", 6}};
  const BudgetAssetBinding mixed{BudgetAssetState::kMixed, {}};
  struct Row {
    const BudgetAssetBinding* binding;
    uint64_t chain_id;
    std::string address;
    BudgetAssetVerdict verdict;
  };
  const Row table[] = {
      {&unbound, 84532, token, BudgetAssetVerdict::kBind},
      {&unbound, 1, "0x0000000000000000000000000000000000000001", BudgetAssetVerdict::kBind},
      {&bound, 84532, token, BudgetAssetVerdict::kSame},
      {&bound, 84532, "0x5FbDB2315678afecb367f032d93F642f64180aa3", BudgetAssetVerdict::kSame},
      {&bound, 8453, token, BudgetAssetVerdict::kOther},  // the same address on another chain
      {&bound, 84532, "0x0000000000000000000000000000000000000001", BudgetAssetVerdict::kOther},
      {&bound, 84532, token + "00", BudgetAssetVerdict::kOther},
      {&bound, 84532, "", BudgetAssetVerdict::kOther},
      {&mixed, 84532, token, BudgetAssetVerdict::kMixed},
  };
  for (const Row& row : table) {
    EXPECT_EQ(DecideBudgetAsset(*row.binding, row.chain_id, row.address), row.verdict)
        << row.chain_id << " " << row.address;
  }
}

TEST(BudgetAssetTest, AnOlderFileIsBoundToTheOneAssetItsReservationsUse) {
  const std::string a = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
  const std::string b = "0x0000000000000000000000000000000000000001";
  EXPECT_EQ(MigrateBudgetAsset({}).state, BudgetAssetState::kUnbound);
  BudgetAssetBinding one =
      MigrateBudgetAsset({{84532, a}, {84532, "0x5FbDB2315678afecb367f032d93F642f64180aa3"}});
  EXPECT_EQ(one.state, BudgetAssetState::kBound);
  EXPECT_EQ(one.asset.chain_id, 84532u);
  EXPECT_EQ(one.asset.address, a);
  EXPECT_EQ(one.asset.name, "");
  EXPECT_FALSE(one.asset.decimals.has_value());
  EXPECT_EQ(MigrateBudgetAsset({{84532, a}, {84532, b}}).state, BudgetAssetState::kMixed);
  EXPECT_EQ(MigrateBudgetAsset({{84532, a}, {8453, a}}).state, BudgetAssetState::kMixed);
}

}  // namespace
}  // namespace agentpay
