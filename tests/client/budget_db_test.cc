// The budget file (src/client/budget_db.h): creation and the fixed total, reservations, resumption,
// outcomes, reconciliation around a live lease, and the sum never exceeding the total when many
// threads and many processes reserve at once on one file.
#include "client/budget_db.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace agentpay::client {
namespace {

class BudgetDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/agentpay-budget-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/budget.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static StoredReservation Wanted(const std::string& key, int64_t amount) {
    StoredReservation r;
    r.key = key;
    r.fingerprint = "fp-" + key;
    r.method = "GET";
    r.url = "http://127.0.0.1:1/x";
    r.amount = amount;
    r.scheme = "wallet";
    return r;
  }
  static Status NoSign(StoredReservation&) { return Status::Ok(); }

  std::string dir_, path_;
};

TEST_F(BudgetDbTest, TheTotalIsFixedWhenTheFileIsCreated) {
  auto missing = BudgetDb::Open(path_, std::nullopt, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), "budget_required");
  ASSERT_TRUE(BudgetDb::Open(path_, 5000, 1).ok());
  EXPECT_TRUE(BudgetDb::Open(path_, 5000, 2).ok());
  EXPECT_TRUE(BudgetDb::Open(path_, std::nullopt, 2).ok());
  auto other = BudgetDb::Open(path_, 6000, 2);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), "budget_mismatch");
  struct stat info {};
  ASSERT_EQ(stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "signed authorizations are readable by the owner only";
  EXPECT_EQ(BudgetDb::OpenExisting(dir_ + "/none.db").status().code(), "budget_missing");
}

TEST_F(BudgetDbTest, ReservesUntilTheTotalThenRefuses) {
  auto db = BudgetDb::Open(path_, 2500, 1);
  ASSERT_TRUE(db.ok());
  int signed_count = 0;
  auto sign = [&](StoredReservation& r) {
    ++signed_count;
    r.payment_header = "header-" + r.key;
    return Status::Ok();
  };
  for (const char* key : {"a", "b"}) {
    auto claim = (*db)->Reserve(Wanted(key, 1000), sign, 10, 100);
    ASSERT_TRUE(claim.ok());
    EXPECT_EQ(claim->kind, ClaimKind::kReserved);
    EXPECT_EQ(claim->reservation.payment_header, std::string("header-") + key);
  }
  auto over = (*db)->Reserve(Wanted("c", 1000), sign, 10, 100);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->kind, ClaimKind::kOverBudget);
  EXPECT_EQ(signed_count, 2) << "nothing is signed for a reservation that is refused";
  EXPECT_FALSE((*db)->Find("c")->has_value());
  auto fits = (*db)->Reserve(Wanted("d", 500), sign, 10, 100);
  EXPECT_EQ(fits->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Figures()->committed, 2500);
}

TEST_F(BudgetDbTest, AnExistingKeyResumesWithItsPaymentAndNeverSignsAgain) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  int signed_count = 0;
  auto sign = [&](StoredReservation& r) {
    r.payment_header = "first-signature-" + std::to_string(++signed_count);
    return Status::Ok();
  };
  ASSERT_EQ((*db)->Reserve(Wanted("k", 1000), sign, 10, 100)->kind, ClaimKind::kReserved);
  auto again = (*db)->Reserve(Wanted("k", 1000), sign, 20, 200);
  ASSERT_EQ(again->kind, ClaimKind::kResume);
  EXPECT_EQ(again->reservation.payment_header, "first-signature-1");
  EXPECT_EQ(signed_count, 1);
  auto claim = (*db)->ClaimExisting("k", "fp-k", 30, 300);
  EXPECT_EQ(claim->kind, ClaimKind::kResume);
  EXPECT_EQ(claim->reservation.lease_until_ms, 300);
  EXPECT_EQ((*db)->ClaimExisting("k", "other", 30, 300)->kind, ClaimKind::kMismatch);
  EXPECT_EQ((*db)->ClaimExisting("new", "fp-new", 30, 300)->kind, ClaimKind::kNeedsPrice);
}

TEST_F(BudgetDbTest, AFailedSignatureLeavesNoReservation) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  auto failing = [](StoredReservation&) { return Status::Error(ErrorCode::kSigningFailed, "no"); };
  EXPECT_FALSE((*db)->Reserve(Wanted("k", 10), failing, 1, 2).ok());
  EXPECT_FALSE((*db)->Find("k")->has_value());
  EXPECT_EQ((*db)->Figures()->committed, 0);
}

TEST_F(BudgetDbTest, OutcomesNeverDowngradeAndReleaseFreesTheBudget) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  ASSERT_EQ((*db)->Reserve(Wanted("a", 600), NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kSpent, "", 3)->state, ReservationState::kSpent);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kUnknown, "", 4)->state, ReservationState::kSpent);
  EXPECT_EQ((*db)->Finish("a", ReservationState::kReleased, "", 4)->state,
            ReservationState::kSpent);
  ASSERT_EQ((*db)->Reserve(Wanted("b", 400), NoSign, 1, 2)->kind, ClaimKind::kReserved);
  EXPECT_EQ((*db)->Reserve(Wanted("c", 1), NoSign, 1, 2)->kind, ClaimKind::kOverBudget);
  EXPECT_EQ((*db)->Finish("b", ReservationState::kReleased, "refused", 5)->state,
            ReservationState::kReleased);
  EXPECT_EQ((*db)->Figures()->committed, 600);
  EXPECT_EQ((*db)->Figures()->spent, 600);
  // A released key may be reserved again (a new payment: the old one can never land).
  auto renewed = (*db)->Reserve(Wanted("b", 300), NoSign, 6, 7);
  EXPECT_EQ(renewed->kind, ClaimKind::kReserved);
  EXPECT_EQ(renewed->reservation.sends, 0);
  EXPECT_EQ((*db)->Figures()->committed, 900);
}

TEST_F(BudgetDbTest, ReconcileLeavesALeasedReservationAlone) {
  auto db = BudgetDb::Open(path_, 1000, 1);
  ASSERT_EQ((*db)->Reserve(Wanted("a", 100), NoSign, 1, /*lease_until_ms=*/1000)->kind,
            ClaimKind::kReserved);
  auto during = (*db)->ApplyReconcile("a", ReservationState::kReserved,
                                      ReconcileVerdict::kMarkReleased, "x", /*now_ms=*/500);
  EXPECT_EQ(during->state, ReservationState::kReserved) << "a running pay holds the lease";
  auto moved = (*db)->ApplyReconcile("a", ReservationState::kUnknown,
                                     ReconcileVerdict::kMarkReleased, "x", 2000);
  EXPECT_EQ(moved->state, ReservationState::kReserved) << "the state moved since it was read";
  auto after = (*db)->ApplyReconcile("a", ReservationState::kReserved,
                                     ReconcileVerdict::kMarkReleased, "expired", 2000);
  EXPECT_EQ(after->state, ReservationState::kReleased);
  EXPECT_EQ(after->note, "expired");
}

// Each worker reserves `keys` distinct keys of `amount`, on its own connection; returns the count.
int ReserveMany(const std::string& path, const std::string& prefix, int keys, int64_t amount) {
  auto db = BudgetDb::Open(path, std::nullopt, 1);
  if (!db.ok()) return -1;
  int reserved = 0;
  for (int i = 0; i < keys; ++i) {
    StoredReservation r;
    r.key = prefix + "-" + std::to_string(i);
    r.fingerprint = "fp";
    r.method = "GET";
    r.url = "http://x/";
    r.amount = amount;
    r.scheme = "x402";
    auto claim = (*db)->Reserve(
        r, [](StoredReservation&) { return Status::Ok(); }, 1, 2);
    if (!claim.ok()) return -1;
    if (claim->kind == ClaimKind::kReserved) ++reserved;
  }
  return reserved;
}

TEST_F(BudgetDbTest, ThreadsNeverExceedTheTotal) {
  constexpr int64_t kTotal = 500, kAmount = 7;
  ASSERT_TRUE(BudgetDb::Open(path_, kTotal, 1).ok());
  std::vector<std::thread> threads;
  std::atomic<int> reserved{0}, failures{0};
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      int got = ReserveMany(path_, "thread" + std::to_string(t), 10, kAmount);
      if (got < 0) {
        ++failures;
      } else
        reserved += got;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(reserved.load(), kTotal / kAmount);  // 71 of the 120 asked
  auto figures = BudgetDb::Open(path_, kTotal, 1).value()->Figures();
  EXPECT_EQ(figures->committed, (kTotal / kAmount) * kAmount);
}

TEST_F(BudgetDbTest, ProcessesNeverExceedTheTotal) {
  constexpr int64_t kTotal = 555, kAmount = 10;
  constexpr int kProcesses = 6, kKeys = 20;
  ASSERT_TRUE(BudgetDb::Open(path_, kTotal, 1).ok());
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int got = ReserveMany(path_, "process" + std::to_string(p), kKeys, kAmount);
      _exit(got < 0 ? 255 : got);
    }
    children.push_back(pid);
  }
  int reserved = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 255) << "a child could not use the budget file";
    reserved += WEXITSTATUS(status);
  }
  EXPECT_EQ(reserved, kTotal / kAmount);  // 55 of the 120 asked
  auto db = BudgetDb::Open(path_, kTotal, 1);
  EXPECT_EQ((*db)->Figures()->committed, (kTotal / kAmount) * kAmount);
  EXPECT_EQ((*db)->List()->size(), static_cast<size_t>(kTotal / kAmount));
}

}  // namespace
}  // namespace agentpay::client
