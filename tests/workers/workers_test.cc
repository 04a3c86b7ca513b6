// The background workers on a real SQLite store: retention pruning, and the hold sweeper and the
// pruner run by two gateway processes at once (two Store instances on one database file), where
// every hold must be released exactly once, every alert raised once and every result pruned once.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "core/settlement.h"
#include "core/world.h"
#include "store/store.h"
#include "workers/hold_sweeper.h"
#include "workers/pruner.h"

namespace agentpay {
namespace {

class FixedClock final : public Clock {
 public:
  explicit FixedClock(int64_t now_ms) : now_ms_(now_ms) {}
  int64_t NowMs() override { return now_ms_.load(); }
  void Set(int64_t now_ms) { now_ms_ = now_ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

// Seeded differently per gateway process, as two real processes' randomness would be.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  void Fill(unsigned char* out, size_t size) override {
    for (size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>(engine_());
  }

 private:
  std::mt19937_64 engine_;
};

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kPrice = 10;

class WorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("agentpay-workers-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    url_ = "sqlite:" + (dir_ / "shared.db").string();
    store_ = Open();
  }
  void TearDown() override {
    if (store_) ExpectConserved();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Store> Open() {
    auto store = OpenStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  static Operation WalletOp(int i) {
    return NewWalletOperation({"op_" + std::to_string(100000 + i), "account:acct",
                               "key-" + std::to_string(i), "fp", "/", kPrice, 1000, 500, ""},
                              kNow - 10000);
  }

  // `count` operations whose upstream call failed: holds kept, expired by kNow, no live lease.
  void AddExpiredHolds(int count) {
    ASSERT_TRUE(store_->Write([&](Transaction& tx) -> Status {
      auto inserted = tx.InsertAccount({"acct", "a", "hash", {}, 1});
      if (!inserted.ok()) return inserted.status();
      auto deposit = tx.Move("acct", MoveKind::kDeposit, kPrice * count, "", 1);
      if (!deposit.ok()) return deposit.status();
      for (int i = 0; i < count; ++i) {
        Operation op = WalletOp(i);
        op.fulfillment = Fulfillment::kPendingRetry;
        op.lease_expires_ms = 0;
        if (Status s = tx.InsertOperation(op); !s.ok()) return s;
        auto held = tx.Move("acct", MoveKind::kHold, kPrice, op.id, kNow - 10000);
        if (!held.ok()) return held.status();
      }
      return Status::Ok();
    }).ok());
  }

  // `count` final operations (with their keys) whose retention ended by kNow.
  void AddExpiredResults(int count, int first = 0) {
    ASSERT_TRUE(store_->Write([&](Transaction& tx) -> Status {
      for (int i = first; i < first + count; ++i) {
        Operation op = WalletOp(i);
        op.settlement = Settlement::kReleased;
        op.fulfillment = Fulfillment::kRejected;
        op.hold_expires_ms.reset();
        op.response = StoredResponse{400, "application/json", "{\"refused\":true}"};
        op.retained_until_ms = kNow - 1 - i;
        if (Status s = tx.InsertOperation(op); !s.ok()) return s;
        auto key = tx.InsertKey({op.principal, op.idempotency_key, op.id, "fp", 1});
        if (!key.ok()) return key.status();
      }
      return Status::Ok();
    }).ok());
  }

  template <typename Fn>
  void InRead(Fn fn) {
    ASSERT_TRUE(store_->Read([&](Transaction& tx) {
      fn(tx);
      return Status::Ok();
    }).ok());
  }

  void ExpectConserved() {
    InRead([&](Transaction& tx) {
      auto audit = tx.Audit();
      ASSERT_TRUE(audit.ok());
      int64_t balances = 0;
      for (const auto& account : audit->accounts) {
        EXPECT_EQ(account.stored, account.from_ledger) << account.account_id;
        EXPECT_EQ(account.wallet_net, account.stored.available()) << account.account_id;
        balances += account.stored.balance();
      }
      EXPECT_EQ(balances + audit->revenue_total, -audit->external_total);
    });
  }

  std::filesystem::path dir_;
  std::string url_;
  std::unique_ptr<Store> store_;
};

TEST_F(WorkersTest, PrunerForgetsExpiredResultsInBoundedBatches) {
  AddExpiredResults(5);
  ASSERT_TRUE(store_->Write([&](Transaction& tx) -> Status {
    Operation pending = WalletOp(50);  // not final: never pruned, whatever its fields say
    pending.fulfillment = Fulfillment::kPendingRetry;
    pending.retained_until_ms = kNow - 100000;
    pending.response = StoredResponse{502, "", "x"};
    if (Status s = tx.InsertOperation(pending); !s.ok()) return s;
    Operation recent = WalletOp(51);  // final, still within retention
    recent.settlement = Settlement::kSettled;
    recent.fulfillment = Fulfillment::kSucceeded;
    recent.response = StoredResponse{200, "", "ok"};
    recent.retained_until_ms = kNow + 1;
    if (Status s = tx.InsertOperation(recent); !s.ok()) return s;
    for (const Operation* op : {&pending, &recent}) {
      auto key = tx.InsertKey({op->principal, op->idempotency_key, op->id, "fp", 1});
      if (!key.ok()) return key.status();
    }
    return Status::Ok();
  }).ok());
  FixedClock clock(kNow);
  auto first = PruneExpiredResults(*store_, clock, 2, 1);  // one batch of two
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->pruned, 2);
  EXPECT_EQ(first->batches, 1);
  auto rest = PruneExpiredResults(*store_, clock, 2, 100);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->pruned, 3);
  EXPECT_EQ(rest->keys_deleted, 3);
  EXPECT_EQ(PruneExpiredResults(*store_, clock, 2, 100)->pruned, 0);
  InRead([&](Transaction& tx) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_FALSE(tx.FindKey("account:acct", "key-" + std::to_string(i))->has_value()) << i;
      auto op = tx.FindOperation(WalletOp(i).id);
      ASSERT_TRUE(op->has_value());  // the row stays, readable by id
      EXPECT_EQ((*op)->response->status, 400);
      EXPECT_EQ((*op)->response->body, "");
    }
    EXPECT_TRUE(tx.FindKey("account:acct", "key-50")->has_value());
    EXPECT_EQ((*tx.FindOperation(WalletOp(50).id))->response->body, "x");
    EXPECT_TRUE(tx.FindKey("account:acct", "key-51")->has_value());
  });
  clock.Set(kNow + 1);
  EXPECT_EQ(PruneExpiredResults(*store_, clock, 2, 100)->pruned, 1);  // now `recent` is due
}

// Two gateway processes share one database: each runs its own hold sweeper and pruner on its own
// Store. They list the same operations and race for them; the decisions re-read and compare, so
// each hold is released once, each alert raised once and each result pruned once.
TEST_F(WorkersTest, TwoProcessesSweepAndPruneEachOperationOnce) {
  constexpr int kHolds = 300, kResults = 300;
  AddExpiredHolds(kHolds);
  AddExpiredResults(kResults, kHolds);
  std::unique_ptr<Store> second = Open();
  ASSERT_TRUE(second);
  FixedClock clock(kNow);
  std::atomic<int> released{0}, alerts{0}, pruned{0}, keys{0}, errors{0};
  auto sweep = [&](Store& store, uint64_t seed) {
    SeededRandom random(seed);
    for (int pass = 0; pass < 1000; ++pass) {
      auto report = SweepExpiredHolds(store, clock, random, 7);
      if (!report.ok()) {
        ++errors;
        continue;
      }
      released += report->released;
      alerts += report->alerts;
      if (report->released == 0 && pass > 3) break;
    }
  };
  auto prune = [&](Store& store) {
    for (int pass = 0; pass < 1000; ++pass) {
      auto report = PruneExpiredResults(store, clock, 5, 1);
      if (!report.ok()) {
        ++errors;
        continue;
      }
      pruned += report->pruned;
      keys += report->keys_deleted;
      if (report->batches == 0) break;
    }
  };
  {
    std::vector<std::thread> threads;
    threads.emplace_back(sweep, std::ref(*store_), 1);
    threads.emplace_back(sweep, std::ref(*second), 2);
    threads.emplace_back(prune, std::ref(*store_));
    threads.emplace_back(prune, std::ref(*second));
    for (auto& thread : threads) thread.join();
  }
  second.reset();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(released.load(), kHolds);
  EXPECT_EQ(alerts.load(), kHolds);
  EXPECT_EQ(pruned.load(), kResults);
  EXPECT_EQ(keys.load(), kResults);
  InRead([&](Transaction& tx) {
    auto listed = tx.ListAlerts(10 * kHolds);
    ASSERT_TRUE(listed.ok());
    std::map<std::string, int> alerts_per_op;
    for (const Alert& alert : *listed) ++alerts_per_op[alert.operation_id];
    EXPECT_EQ(alerts_per_op.size(), static_cast<size_t>(kHolds));
    for (int i = 0; i < kHolds; ++i) {
      const std::string id = WalletOp(i).id;
      EXPECT_EQ(alerts_per_op[id], 1) << id;
      auto postings = tx.ListPostings(id);
      int releases = 0;
      for (const auto& posting : *postings) releases += posting.kind == MoveKind::kRelease;
      EXPECT_EQ(releases, 1) << id;
      EXPECT_EQ((*tx.FindOperation(id))->settlement, Settlement::kReleased);
    }
    EXPECT_EQ((*tx.FindAccount("acct"))->balances, (Balances{kPrice * kHolds, 0, 0}));
    EXPECT_TRUE(tx.ListExpiredResults(kNow, 10)->empty());
  });
}

}  // namespace
}  // namespace agentpay

namespace agentpay {
namespace {

// X19: the sweeper closes an unpaid settle=after operation whose upstream call failed and that no
// retry came back for, once its authorization can no longer settle, with an alert (the upstream
// may have done the work); one that can still settle, or that an attempt holds, stays.
TEST_F(WorkersTest, SweeperClosesUnpaidOperationsNoRetryCameForWithAnAlert) {
  const int64_t now_s = kNow / 1000;
  const auto add = [&](int i, int64_t valid_before_s, int64_t lease_expires_ms) {
    ASSERT_TRUE(
        store_
            ->Write([&](Transaction& tx) -> Status {
              X402OperationParams params{"op_x" + std::to_string(i),
                                         "payer:0xabc",
                                         "sha256:k" + std::to_string(i),
                                         "fp",
                                         "/",
                                         kPrice,
                                         SettleOrder::kAfterUpstream,
                                         1000,
                                         "gw"};
              Operation op = NewX402Operation(params, kNow - 60000);
              op.fulfillment = Fulfillment::kPendingRetry;  // X12: the upstream answered 502
              op.lease_expires_ms = lease_expires_ms;
              if (Status s = tx.InsertOperation(op); !s.ok()) return s;
              X402PaymentRecord payment;
              payment.operation_id = op.id;
              payment.authorization = {"0xabc", "0x" + std::string(63, '0') + std::to_string(i), 0,
                                       valid_before_s, kPrice};
              payment.pay_to = "0xdef";
              payment.signature_hex = "0x" + std::string(130, '1');
              auto inserted = tx.InsertX402Payment(payment);
              if (!inserted.ok()) return inserted.status();
              return Status::Ok();
            })
            .ok());
  };
  add(1, now_s - 100, 0);         // expired long ago: closed
  add(2, now_s + 3600, 0);        // can still settle: a retry may still pay for it
  add(3, now_s + 5, 0);           // within x402's validBefore margin: too late, closed
  add(4, now_s - 100, kNow + 1);  // an attempt holds it: left to that attempt
  FixedClock clock(kNow);
  SeededRandom random(1);
  std::string cursor;
  int closed = 0;
  for (int pass = 0; pass < 4; ++pass) {  // a page of one operation a pass: the cursor goes round
    auto report = SweepExpiredHolds(*store_, clock, random, 1, &cursor);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    closed += report->closed_unpaid;
    EXPECT_EQ(report->alerts, report->closed_unpaid);
    EXPECT_EQ(report->released, 0);
  }
  EXPECT_EQ(closed, 2);
  InRead([&](Transaction& tx) {
    for (int i = 1; i <= 4; ++i) {
      const std::string id = "op_x" + std::to_string(i);
      auto op = tx.FindOperation(id);
      ASSERT_TRUE(op.ok() && op->has_value());
      auto alerts = tx.ListAlertsOf(id);
      ASSERT_TRUE(alerts.ok());
      if (i == 1 || i == 3) {
        EXPECT_EQ((*op)->settlement, Settlement::kNone) << id;
        EXPECT_EQ((*op)->fulfillment, Fulfillment::kRejected) << id;
        EXPECT_EQ((*op)->response->status, 402) << id;
        EXPECT_EQ((*op)->retained_until_ms, kNow) << id;  // the key is released
        ASSERT_EQ(alerts->size(), 1u) << id;
        EXPECT_EQ(alerts->front().kind, "unpaid_after_possible_work");
        auto events = tx.ListEvents(id);
        ASSERT_TRUE(events.ok());
        ASSERT_FALSE(events->empty());
        EXPECT_EQ(events->back().kind, "closed_unpaid");
      } else {
        EXPECT_EQ((*op)->fulfillment, Fulfillment::kPendingRetry) << id;
        EXPECT_TRUE(alerts->empty()) << id;
      }
    }
  });
  // Nothing more to do: a second round closes nothing and raises nothing.
  auto again = SweepExpiredHolds(*store_, clock, random, 10, &cursor);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->closed_unpaid, 0);
  EXPECT_EQ(again->alerts, 0);
}

}  // namespace
}  // namespace agentpay
