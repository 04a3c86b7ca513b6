// The gateway simulator (src/sim/swarm.h, swarm_world.h): its world is deterministic, a crash
// drops exactly the dead process's work, and seeds of the real gateway hold every invariant.
#include "sim/swarm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <vector>

#include "sim/swarm_world.h"

namespace agentpay::sim {
namespace {

TEST(SeededRandom, TheSameSeedGivesTheSameNumbers) {
  SeededRandom a(42), b(42), c(43);
  std::vector<uint64_t> from_a, from_b, from_c;
  for (int i = 0; i < 16; ++i) {
    from_a.push_back(a.Next());
    from_b.push_back(b.Next());
    from_c.push_back(c.Next());
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_NE(from_a, from_c);
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = a.Between(-3, 3);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
  }
}

TEST(Scheduler, RunsInTimeThenSchedulingOrderAndDropsDeadEpochs) {
  Scheduler s;
  std::vector<int> ran;
  const uint64_t process = s.NewEpoch();
  s.After(10, Scheduler::kWorld, [&] { ran.push_back(2); });
  s.After(5, Scheduler::kWorld, [&] { ran.push_back(1); });
  s.After(10, process, [&] { ran.push_back(3); });
  s.After(10, Scheduler::kWorld, [&] { ran.push_back(4); });
  s.After(20, process, [&] { ran.push_back(5); });
  EXPECT_TRUE(s.RunNext(100));  // 1 at 5 ms
  EXPECT_EQ(s.now_ms(), 5);
  s.Kill(process);  // the process dies: 3 and 5 never run
  while (s.RunNext(100)) {
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(s.now_ms(), 10);
  EXPECT_EQ(s.steps(), 3u);
}

// The accounts the store holds, read as a gateway's views read (without waiting for a sync).
std::set<std::string> AccountIds(SimStore& store) {
  std::set<std::string> ids;
  EXPECT_TRUE(store
                  .ReadUnsynced([&](Transaction& tx) -> Status {
                    auto accounts = tx.ListAccounts();
                    if (!accounts.ok()) return accounts.status();
                    for (const auto& a : *accounts) ids.insert(a.id);
                    return Status::Ok();
                  })
                  .ok());
  return ids;
}

TransactionFn InsertAccount(std::string id) {
  return [id](Transaction& tx) -> Status {
    AccountRecord account;
    account.id = id;
    account.name = id;
    account.api_key_hash = std::string(64, id.back());
    auto inserted = tx.InsertAccount(account);
    return inserted.ok() ? Status::Ok() : inserted.status();
  };
}

TEST(SimStore, ACrashKeepsWhatWasSyncedAndLosesTheRestEvenWhatAReadSaw) {
  Scheduler s;
  SeededRandom r(7);
  auto opened = SimStore::Open(s, r, /*max_commit_delay_ms=*/5);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  SimStore& store = **opened;
  s.set_gateway_epoch(s.NewEpoch());
  std::vector<Status> acknowledged;
  const auto ack = [&](Status st) { acknowledged.push_back(st); };
  store.WriteAsync(InsertAccount("acct_a"), ack);
  while (acknowledged.empty() && s.RunNext(1000)) {
  }
  ASSERT_EQ(acknowledged.size(), 1u);
  EXPECT_TRUE(acknowledged[0].ok()) << acknowledged[0].ToString();
  // acct_b committed (its event ran) and seen by a read, but its sync was still to come;
  // acct_c only queued.
  store.WriteAsync(InsertAccount("acct_b"), ack);
  ASSERT_TRUE(s.RunNext(1000));  // the commit
  store.WriteAsync(InsertAccount("acct_c"), ack);
  EXPECT_EQ(AccountIds(store), (std::set<std::string>{"acct_a", "acct_b"}));
  ASSERT_TRUE(store.Crash("gw_dead").ok());
  s.Kill(s.gateway_epoch());
  while (s.RunNext(1000)) {
  }
  EXPECT_EQ(acknowledged.size(), 1u);  // neither was acknowledged
  EXPECT_EQ(AccountIds(store), (std::set<std::string>{"acct_a"}));
  // A blocking Write (workers, admin calls) completes and is durable inside the call.
  s.set_gateway_epoch(s.NewEpoch());
  {
    SimStore::Inline blocking(store);
    EXPECT_TRUE(store.Write(InsertAccount("acct_d")).ok());
  }
  ASSERT_TRUE(store.Crash("gw_dead_too").ok());
  EXPECT_EQ(AccountIds(store), (std::set<std::string>{"acct_a", "acct_d"}));
}

TEST(Swarm, TheSameSeedGivesTheSameRun) {
  for (uint64_t seed : {1, 2, 3, 77, 1234}) {
    SeedOutcome a = RunSeed(seed), b = RunSeed(seed);
    EXPECT_EQ(a.event_hash, b.event_hash) << "seed " << seed;
    EXPECT_EQ(a.steps, b.steps) << "seed " << seed;
    EXPECT_EQ(a.mix, b.mix) << "seed " << seed;
  }
  EXPECT_NE(RunSeed(1).event_hash, RunSeed(2).event_hash);
}

TEST(Swarm, ATracedSeedIsTheSameRunAndTellsItInOrder) {
  TracedSeed traced = RunSeedTraced(10);
  SeedOutcome plain = RunSeed(10);
  EXPECT_EQ(traced.outcome.event_hash, plain.event_hash);
  EXPECT_EQ(traced.outcome.steps, plain.steps);
  const nlohmann::json& events = traced.trace["events"];
  ASSERT_TRUE(events.is_array());
  ASSERT_GT(events.size(), 20u);
  EXPECT_LE(events.size(), kMaxTraceEvents);
  EXPECT_EQ(traced.trace["seed"], "10");
  std::set<std::string> actors;
  int64_t last = 0;
  for (const auto& event : events) {
    EXPECT_GE(event["at_ms"].get<int64_t>(), last);
    last = event["at_ms"].get<int64_t>();
    actors.insert(event["actor"].get<std::string>());
    EXPECT_TRUE(event["detail"].is_string());
  }
  // The clients' own events beside the operations' traces (their ledger and seller rows).
  EXPECT_TRUE(actors.count("client 0"));
  EXPECT_TRUE(actors.count("ledger"));
  EXPECT_TRUE(actors.count("upstream"));
  EXPECT_TRUE(actors.count("gateway"));
}

// The real gateway over many seeds: no invariant breaks, and the seeds between them exercise what
// the swarm is for (crashes, charges, answers lost and retried).
// The seeds hold, and they exercise what they are for: crashes, charges, lost messages, and on the
// x402 side payments on chain, reorganisations, dropped transactions and budgets released.
TEST(Swarm, SeedsHoldEveryInvariant) {
  int crashes = 0, charges = 0, lost = 0, x402 = 0, reorgs = 0, dropped = 0, released = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    SeedOutcome outcome = RunSeed(seed);
    ASSERT_FALSE(outcome.violation.has_value())
        << "seed " << seed << " step " << outcome.violation->step << ": "
        << outcome.violation->invariant << ": " << outcome.violation->detail << "\n  mix "
        << outcome.mix;
    crashes += outcome.crashes;
    charges += outcome.charges;
    lost += outcome.requests - outcome.answers;
    x402 += outcome.x402_payments;
    reorgs += outcome.reorgs;
    dropped += outcome.dropped;
    released += outcome.released;
  }
  EXPECT_GT(crashes, 10);
  EXPECT_GT(charges, 300);
  EXPECT_GT(lost, 50);
  EXPECT_GT(x402, 100);
  EXPECT_GT(reorgs, 5);
  EXPECT_GT(dropped, 5);
  EXPECT_GT(released, 2);
  std::printf(
      "150 seeds: %d crashes, %d charges, %d lost, x402: %d paid on chain, %d reorgs, %d "
      "dropped, %d released\n",
      crashes, charges, lost, x402, reorgs, dropped, released);
}

// Each part draws only its own clients (the mix says whether a seed pays on chain, and how many
// copies of a client share a budget), holds every invariant, and draws the faults of its world:
// no chain faults for wallet clients; fee spikes and the other chain faults for x402 ones.
TEST(Swarm, EachPartDrawsItsOwnClientsAndFaults) {
  for (Part part : {Part::kWallet, Part::kX402, Part::kBudget}) {
    FaultCounts faults;
    int x402_payments = 0;
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      SeedOutcome outcome = RunSeed(seed, part);
      ASSERT_FALSE(outcome.violation.has_value())
          << PartName(part) << " seed " << seed << ": " << outcome.violation->invariant << ": "
          << outcome.violation->detail << "\n  mix " << outcome.mix;
      const bool pays_on_chain = outcome.mix.find("x402(") != std::string::npos;
      EXPECT_EQ(pays_on_chain, part != Part::kWallet) << outcome.mix;
      const bool one_per_budget = outcome.mix.find(" crowd=1 ") != std::string::npos;
      if (part == Part::kX402) {
        EXPECT_TRUE(one_per_budget) << outcome.mix;
      }
      if (part == Part::kBudget) {
        EXPECT_FALSE(one_per_budget) << outcome.mix;
      }
      faults.Add(outcome.faults);
      x402_payments += outcome.x402_payments;
      if (seed <= 3) {  // a part is deterministic too
        EXPECT_EQ(RunSeed(seed, part).event_hash, outcome.event_hash) << PartName(part) << seed;
      }
    }
    EXPECT_GT(faults[FaultKind::kLostRequest], 0) << PartName(part);
    EXPECT_GT(faults[FaultKind::kCrash], 0) << PartName(part);
    if (part == Part::kWallet) {
      EXPECT_EQ(x402_payments, 0);
      EXPECT_EQ(faults[FaultKind::kRpcUnreachable] + faults[FaultKind::kFeeSpike], 0);
    } else {
      EXPECT_GT(x402_payments, 20) << PartName(part);
      EXPECT_GT(faults[FaultKind::kRpcTimeout], 0) << PartName(part);
      EXPECT_GT(faults[FaultKind::kFeeSpike], 0) << PartName(part);
    }
  }
  EXPECT_EQ(ParsePart("budget"), Part::kBudget);
  EXPECT_EQ(ParsePart("all"), Part::kAll);
  EXPECT_EQ(ParsePart("x402s"), std::nullopt);
}

}  // namespace
}  // namespace agentpay::sim
