// The request/effect model against ../shared/MODEL.md: its two worked cases event by event, a table
// of hand-checked cases (expected values reasoned from the rules, in the comments), and properties.
#include "sim/model.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/model_format.h"
#include "sim/sweep.h"

namespace agentpay::sim {
namespace {

using A = Actor;
using K = EventKind;
using O = ClientOutcome;

constexpr int64_t kDay = kMaxTimeMs;

SimRun RunModel(const SimParams& params) {
  auto run = Simulate(params);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? *run : SimRun{};
}

std::vector<int64_t> TimesOf(const SimRun& run, EventKind kind) {
  std::vector<int64_t> times;
  for (const SimEvent& e : run.events) {
    if (e.kind == kind) times.push_back(e.at_ms);
  }
  return times;
}

int CountOf(const SimRun& run, EventKind kind) {
  return static_cast<int>(std::count_if(run.events.begin(), run.events.end(),
                                        [kind](const SimEvent& e) { return e.kind == kind; }));
}

// ---- The two worked cases of MODEL.md ----

TEST(WorkedCase, ServiceLongerThanEveryAttemptExhaustsWithOneEffect) {
  SimParams p{.fault = Fault::kNone,
              .service_ms = 8000,
              .timeout_ms = 1000,
              .max_attempts = 3,
              .initial_delay_ms = 1000,
              .jitter = false,
              .dedup = true,
              .retry_key = RetryKey::kStable};
  SimRun run = RunModel(p);
  EXPECT_EQ(TimesOf(run, K::kSend), (std::vector<int64_t>{0, 2000, 5000}));
  EXPECT_EQ(TimesOf(run, K::kTimeout), (std::vector<int64_t>{1000, 3000, 6000}));
  EXPECT_EQ(TimesOf(run, K::kExhausted), (std::vector<int64_t>{6000}));
  EXPECT_EQ(TimesOf(run, K::kCommit), (std::vector<int64_t>{8000}));
  EXPECT_EQ(TimesOf(run, K::kLateAck), (std::vector<int64_t>{8050, 8050, 8050}));
  std::vector<SimEvent> expected = {
      {0, A::kClient, K::kSend, 1, 0, 1},
      {0, A::kServer, K::kServerStart, 1, 1, 1},
      {1000, A::kClient, K::kTimeout, 1, 0, 1},
      {1000, A::kClient, K::kRetryScheduled, 2, 0, 1},
      {2000, A::kClient, K::kSend, 2, 0, 1},
      {2000, A::kServer, K::kAttach, 2, 1, 1},
      {3000, A::kClient, K::kTimeout, 2, 0, 1},
      {3000, A::kClient, K::kRetryScheduled, 3, 0, 1},
      {5000, A::kClient, K::kSend, 3, 0, 1},
      {5000, A::kServer, K::kAttach, 3, 1, 1},
      {6000, A::kClient, K::kTimeout, 3, 0, 1},
      {6000, A::kClient, K::kExhausted, 3, 0, 0},
      {8000, A::kServer, K::kCommit, 0, 1, 1},
      {8000, A::kServer, K::kRespondSuccess, 1, 1, 1},
      {8000, A::kServer, K::kRespondSuccess, 2, 1, 1},
      {8000, A::kServer, K::kRespondSuccess, 3, 1, 1},
      {8050, A::kClient, K::kLateAck, 1, 1, 1},
      {8050, A::kClient, K::kLateAck, 2, 1, 1},
      {8050, A::kClient, K::kLateAck, 3, 1, 1},
  };
  EXPECT_EQ(run.events, expected);
  EXPECT_EQ(run.result, (SimResult{O::kExhausted, 3, 1, 1, 1, 3, true}));
  EXPECT_EQ(run.client_done_ms, 6000);
  EXPECT_EQ(run.end_ms, 8050);
}

TEST(WorkedCase, RetentionZeroWithALostResponseChargesTwice) {
  SimParams p{.fault = Fault::kLostResponse,
              .service_ms = 500,
              .timeout_ms = 1000,
              .max_attempts = 3,
              .initial_delay_ms = 1000,
              .jitter = false,
              .dedup = true,
              .retry_key = RetryKey::kStable,
              .retention_ms = 0};
  SimRun run = RunModel(p);
  std::vector<SimEvent> expected = {
      {0, A::kClient, K::kSend, 1, 0, 1},
      {0, A::kServer, K::kServerStart, 1, 1, 1},
      {500, A::kServer, K::kCommit, 0, 1, 1},  // the first commit at 500 is unheard
      {500, A::kServer, K::kRespondSuccess, 1, 1, 1},
      {500, A::kNetwork, K::kResponseLost, 1, 1, 1},
      {1000, A::kClient, K::kTimeout, 1, 0, 1},
      {1000, A::kClient, K::kRetryScheduled, 2, 0, 1},
      {2000, A::kClient, K::kSend, 2, 0, 1},
      {2000, A::kServer, K::kForget, 2, 1, 1},  // 2000 ≥ 500 + 0: forgotten
      {2000, A::kServer, K::kServerStart, 2, 2, 1},
      {2500, A::kServer, K::kCommit, 0, 2, 1},
      {2500, A::kServer, K::kRespondSuccess, 2, 2, 1},
      {2550, A::kClient, K::kAck, 2, 2, 1},
      {2550, A::kClient, K::kSuccess, 2, 0, 0},
  };
  EXPECT_EQ(run.events, expected);
  EXPECT_EQ(run.result, (SimResult{O::kSuccess, 2, 2, 2, 1, 0, false}));
}

// ---- Hand-checked cases: S service, T timeout, N max attempts, D initial delay, R retention ----

struct Case {
  const char* name;
  SimParams params;
  ClientOutcome outcome;
  int attempts, operations, effects, late_acks;
  int64_t done_ms, end_ms;
};

// P(fault, S, T, N, D, dedup, retry key, R, jitter = off).
SimParams P(Fault fault, int64_t service, int64_t timeout, int attempts, int64_t delay, bool dedup,
            RetryKey key, int64_t retention, bool jitter = false) {
  return SimParams{fault, service, timeout, attempts, delay, jitter, dedup, key, retention};
}

constexpr Fault kNone = Fault::kNone;
constexpr Fault kLost = Fault::kLostResponse;
constexpr Fault k503 = Fault::kTransient503;
constexpr Fault k400 = Fault::kRejected400;
constexpr RetryKey kStable = RetryKey::kStable;
constexpr RetryKey kNewKey = RetryKey::kNew;

// One case per two lines: params, then outcome, attempts, operations, effects, late acks, client
// done at, run ends at.
// clang-format off
const Case kCases[] = {
    // Op 1 commits at 200, its success arrives at 250 ≤ deadline 1000.
    {"healthy", P(kNone, 200, 1000, 3, 1000, true, kStable, kDay),
     O::kSuccess, 1, 1, 1, 0, 250, 250},
    // Tie: commit 950, arrival 1000 = deadline 0 + 1000: handled before the timeout.
    {"tie_at_deadline_succeeds", P(kNone, 950, 1000, 1, 0, true, kStable, kDay),
     O::kSuccess, 1, 1, 1, 0, 1000, 1000},
    // One more ms: timeout at 1000 exhausts N=1; the success arrives at 1001, a late ack.
    {"one_past_deadline_is_late", P(kNone, 951, 1000, 1, 0, true, kStable, kDay),
     O::kExhausted, 1, 1, 1, 1, 1000, 1001},
    // Timeout 1000, delay 0: attempt 2 at 1000 finds k1 committed at 951 (kept a day): replay,
    // arriving 1050 ≤ 2000. Op 1's own success reaches attempt 1 at 1001: late.
    {"timeout_then_immediate_replay", P(kNone, 951, 1000, 2, 0, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 1, 1050, 1050},
    // Worked case 1 again as a row.
    {"worked_case_1", P(kNone, 8000, 1000, 3, 1000, true, kStable, kDay),
     O::kExhausted, 3, 1, 1, 3, 6000, 8050},
    // Worked case 2 again as a row.
    {"worked_case_2", P(kLost, 500, 1000, 3, 1000, true, kStable, 0),
     O::kSuccess, 2, 2, 2, 0, 2550, 2550},
    // Commit 500 lost; timeout 1000 + delay 1000: attempt 2 at 2000 < 500 + day: replay, ack 2050.
    {"lost_then_replay", P(kLost, 500, 1000, 3, 1000, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 0, 2050, 2050},
    // Retention boundary: attempt 2 at 2000 = c + R − 1 with c = 500, R = 1501: replayed.
    {"retention_minus_one_replays", P(kLost, 500, 1000, 2, 1000, true, kStable, 1501),
     O::kSuccess, 2, 1, 1, 0, 2050, 2050},
    // 2000 = c + R with R = 1500: forgotten; op 2 starts at 2000, commits 2500, ack at 2550.
    {"retention_exactly_forgets", P(kLost, 500, 1000, 2, 1000, true, kStable, 1500),
     O::kSuccess, 2, 2, 2, 0, 2550, 2550},
    // Dedup off: attempt 2 at 2000 starts op 2 whatever the key; only op 1's response was lost.
    {"lost_dedup_off", P(kLost, 500, 1000, 3, 1000, false, kStable, kDay),
     O::kSuccess, 2, 2, 2, 0, 2550, 2550},
    // Op 1 commits 3000. Attempt 1 times out 1000, attempt 2 at 1500 attaches, times out 2500,
    // attempt 3 at 2500 + 1000 = 3500. Both responses of the first commit are lost (not late acks);
    // attempt 3 replays and is acked at 3550 ≤ 4500.
    {"lost_hits_every_attached_attempt", P(kLost, 3000, 1000, 3, 500, true, kStable, kDay),
     O::kSuccess, 3, 1, 1, 0, 3550, 3550},
    // The same without the fault: the two responses arrive at 3050 while the client waits out the
    // delay before attempt 3: both late. Attempt 3 at 3500 replays, ack 3550.
    {"responses_during_the_delay_are_late", P(kNone, 3000, 1000, 3, 500, true, kStable, kDay),
     O::kSuccess, 3, 1, 1, 2, 3550, 3550},
    // Attempt 2 sent at 1000 (delay 0) attaches to op 1 (commit 1500). At 1550 both responses
    // arrive, lower attempt first: attempt 1's is late, attempt 2's (deadline 2000) is the ack.
    {"attach_then_ack", P(kNone, 1500, 1000, 3, 0, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 1, 1550, 1550},
    // Dedup off, same timeline: sends at 0, 1000, 2000 each start an op (commits 1500, 2500, 3500;
    // arrivals 1550, 2550, 3550, each after its attempt's deadline). Exhausted at 3000.
    {"dedup_off_duplicates", P(kNone, 1500, 1000, 3, 0, false, kStable, kDay),
     O::kExhausted, 3, 3, 3, 3, 3000, 3550},
    // A new key per attempt defeats dedup in the same way: k1, k2, k3 never match.
    {"new_key_duplicates", P(kNone, 1500, 1000, 3, 0, true, kNewKey, kDay),
     O::kExhausted, 3, 3, 3, 3, 3000, 3550},
    // 503 to attempt 1 at 0 arrives 50: retryable; delay 100: attempt 2 at 150 starts op 1
    // (commit 350), ack 400.
    {"transient_503_only_first", P(k503, 200, 1000, 3, 100, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 0, 400, 400},
    // N = 1: the 503 at 50 exhausts; nothing ever started.
    {"transient_503_single_attempt", P(k503, 200, 1000, 1, 100, true, kStable, kDay),
     O::kExhausted, 1, 0, 0, 0, 50, 50},
    // T = 30 < 50: attempt 1 times out at 30, attempt 2 at 30 starts op 1 (commit 230); the 503
    // arrives at 50 (late); attempt 2 times out at 60: exhausted; its success at 280 is late.
    {"transient_503_slower_than_timeout", P(k503, 200, 30, 2, 0, true, kStable, kDay),
     O::kExhausted, 2, 1, 1, 2, 60, 280},
    // 400 at 0 arrives 50 ≤ 1000: rejected, no operation.
    {"rejected_400", P(k400, 200, 1000, 3, 0, true, kStable, kDay),
     O::kRejected, 1, 0, 0, 0, 50, 50},
    // T = 40: each 400 arrives 50 after its send, after the deadline. Sends 0, 40, 80 (delay 0);
    // timeouts 40, 80, 120 (exhausted); 400s at 50, 90, 130, all late.
    {"rejected_400_every_attempt_late", P(k400, 200, 40, 3, 0, true, kStable, kDay),
     O::kExhausted, 3, 0, 0, 3, 120, 130},
    // T = 50: the 400 arrives exactly at the deadline: handled, rejected.
    {"rejected_400_at_deadline", P(k400, 200, 50, 3, 0, true, kStable, kDay),
     O::kRejected, 1, 0, 0, 0, 50, 50},
    // Delays 3000, 6000, then the cap 8000 ×3: sends 0, 4000, 11000, 20000, 29000, 38000; the
    // last timeout at 39000; op 1 commits 100000: six late acks at 100050.
    {"delay_cap_8000", P(kNone, 100000, 1000, 6, 3000, true, kStable, kDay),
     O::kExhausted, 6, 1, 1, 6, 39000, 100050},
    // D = 20000 > cap: delay_1 = 8000: attempt 2 at 1000 + 8000, times out 10000.
    {"initial_delay_above_cap", P(kNone, 100000, 1000, 2, 20000, true, kStable, kDay),
     O::kExhausted, 2, 1, 1, 2, 10000, 100050},
    // Jitter, D = 1000: delays 500, 2000, 1000, 6000, 800, 7200, 3200, 4800, 4000. Sends 0, 1500,
    // 4500, 6500, 13500, 15300, 23500, 27700, 33500, 38500; the last timeout at 39500.
    {"jitter_sequence", P(kNone, 200000, 1000, 10, 1000, true, kStable, kDay, true),
     O::kExhausted, 10, 1, 1, 10, 39500, 200050},
    // Jitter floors, D = 3, T = 1: delays 1, 6, 3, 18, 4, 86, 76, 230, 384. Sends 0, 2, 9, 13, 32,
    // 37, 124, 201, 432, 817; the last timeout at 818.
    {"jitter_floor", P(kNone, 100000, 1, 10, 3, true, kStable, kDay, true),
     O::kExhausted, 10, 1, 1, 10, 818, 100050},
    // D = 1 with jitter 50%: floor(0.5) = 0: attempt 2 at 10, its timeout at 20.
    {"jitter_floor_to_zero", P(kNone, 100000, 10, 2, 1, true, kStable, kDay, true),
     O::kExhausted, 2, 1, 1, 2, 20, 100050},
    // S = 0: the operation commits at the instant it starts, right after the send; ack at 50.
    {"service_zero", P(kNone, 0, 1000, 1, 0, true, kStable, kDay),
     O::kSuccess, 1, 1, 1, 0, 50, 50},
    // S = 0, R = 0, lost: op 1 commits at 0 (lost). Attempt 2 at 100 forgets k1 and starts op 2,
    // committing at 100; ack at 150 ≤ 200.
    {"service_zero_retention_zero", P(kLost, 0, 100, 3, 0, true, kStable, 0),
     O::kSuccess, 2, 2, 2, 0, 150, 150},
    // Attempt 2 is sent at 1000 + 500 = 1500, the instant op 1 commits. Commits come first: the key
    // is committed at 1500 and 1500 < 1500 + 1, so attempt 2 replays (had the send come first it
    // would have attached and its response would have been lost). Ack 1550.
    {"commit_before_send_same_instant", P(kLost, 1500, 1000, 2, 500, true, kStable, 1),
     O::kSuccess, 2, 1, 1, 0, 1550, 1550},
    // The same with R = 0: at 1500 the key, just committed, is forgotten: op 2 commits 3000, after
    // attempt 2's deadline 2500 (exhausted); its success at 3050 is late.
    {"commit_then_forget_same_instant", P(kLost, 1500, 1000, 2, 500, true, kStable, 0),
     O::kExhausted, 2, 2, 2, 1, 2500, 3050},
    // 503 at 0 arrives at 50 = deadline: handled; delay 0: attempt 2 at 50 starts op 1 (S = 0,
    // commit 50); ack at 100 = its deadline.
    {"503_at_deadline_then_tie", P(k503, 0, 50, 2, 0, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 0, 100, 100},
    // Dedup off: attempt 2 at 1500 starts op 2 (commit 2700, arrival 2750 > deadline 2500);
    // op 1's success at 1250 and op 2's at 2750 are late. Exhausted at 2500.
    {"dedup_off_no_replay", P(kNone, 1200, 1000, 2, 500, false, kStable, kDay),
     O::kExhausted, 2, 2, 2, 2, 2500, 2750},
    // Dedup on: attempt 2 at 1500 replays op 1 (committed 1200): ack 1550; op 1's 1250 is late.
    {"dedup_on_replays", P(kNone, 1200, 1000, 2, 500, true, kStable, kDay),
     O::kSuccess, 2, 1, 1, 1, 1550, 1550},
    // New key per attempt with a long retention: k2 was never seen, so op 2 starts: two effects.
    {"new_key_lost_response", P(kLost, 500, 1000, 3, 1000, true, kNewKey, kDay),
     O::kSuccess, 2, 2, 2, 0, 2550, 2550},
    // N = 1, lost: the effect commits at 100 unheard; the client is exhausted at 1000.
    {"lost_single_attempt", P(kLost, 100, 1000, 1, 0, true, kStable, kDay),
     O::kExhausted, 1, 1, 1, 0, 1000, 1000},
    // Op 1 commits 2000; attempt 2 at 1500 attached; both responses lost. Attempt 3 at
    // 2500 + 1000 = 3500 forgets (R = 0), op 2 commits 5500 after the deadline 4500: late at 5550.
    {"attach_lost_then_forget", P(kLost, 2000, 1000, 3, 500, true, kStable, 0),
     O::kExhausted, 3, 2, 2, 1, 4500, 5550},
    // Op 1 (commit 1500) with attempt 2 attached at 1000: both lost. Attempt 3 at 2000 forgets and
    // starts op 2 (commit 3500); attempt 4 at 3000 attaches to op 2; at 3550 attempt 3's response
    // is late and attempt 4's (deadline 4000) is the ack.
    {"forget_then_attach", P(kLost, 1500, 1000, 4, 0, true, kStable, 0),
     O::kSuccess, 4, 2, 2, 1, 3550, 3550},
    // 100 attempts, T = 1, S = 0, dedup off: sends at 0..99, each starts and commits an op; every
    // success arrives 50 later, after its deadline: 100 late acks, the last at 149.
    {"hundred_attempts_dedup_off", P(kNone, 0, 1, 100, 0, false, kStable, kDay),
     O::kExhausted, 100, 100, 100, 100, 100, 149},
    // Dedup on: attempts 2..100 replay op 1 (committed at 0); still all late.
    {"hundred_attempts_replayed", P(kNone, 0, 1, 100, 0, true, kStable, kDay),
     O::kExhausted, 100, 1, 1, 100, 100, 149},
};
// clang-format on

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class HandChecked : public testing::TestWithParam<Case> {};

TEST_P(HandChecked, Outcome) {
  const Case& c = GetParam();
  SimRun run = RunModel(c.params);
  EXPECT_EQ(run.result.client_outcome, c.outcome);
  EXPECT_EQ(run.result.attempts, c.attempts);
  EXPECT_EQ(run.result.server_operations, c.operations);
  EXPECT_EQ(run.result.effects, c.effects);
  EXPECT_EQ(run.result.late_acks, c.late_acks);
  EXPECT_EQ(run.result.intended, 1);
  EXPECT_EQ(run.result.reconciliation_flag, c.outcome == O::kExhausted);
  EXPECT_EQ(run.client_done_ms, c.done_ms);
  EXPECT_EQ(run.end_ms, c.end_ms);
}

INSTANTIATE_TEST_SUITE_P(Model, HandChecked, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(HandCheckedTable, HasAtLeastThirtyCases) { EXPECT_GE(std::size(kCases), 30u); }

// ---- Rule details the table's totals do not show ----

TEST(Rules, JitterSendTimes) {
  SimRun run = RunModel(P(kNone, 200000, 1000, 10, 1000, true, kStable, kDay, true));
  EXPECT_EQ(TimesOf(run, K::kSend),
            (std::vector<int64_t>{0, 1500, 4500, 6500, 13500, 15300, 23500, 27700, 33500, 38500}));
}

TEST(Rules, RetryDelaysFollowRuleSix) {
  SimParams p = P(kNone, 0, 1, 1, 1000, true, kStable, 0);
  std::vector<int64_t> plain, jittered, floored;
  for (int i = 1; i <= 9; ++i) {
    p.jitter = false;
    plain.push_back(RetryDelayMs(p, i));
    p.jitter = true;
    jittered.push_back(RetryDelayMs(p, i));
  }
  p.initial_delay_ms = 3;
  for (int i = 1; i <= 9; ++i) floored.push_back(RetryDelayMs(p, i));
  // 1000 × 2^(i−1) capped at 8000, then × J[(i−1) mod 8] / 100, J = 50 100 25 75 10 90 40 60.
  EXPECT_EQ(plain, (std::vector<int64_t>{1000, 2000, 4000, 8000, 8000, 8000, 8000, 8000, 8000}));
  EXPECT_EQ(jittered, (std::vector<int64_t>{500, 2000, 1000, 6000, 800, 7200, 3200, 4800, 4000}));
  // 3 × 2^(i−1) = 3 6 12 24 48 96 192 384 768, each × J / 100, floored.
  EXPECT_EQ(floored, (std::vector<int64_t>{1, 6, 3, 18, 4, 86, 76, 230, 384}));
  p.jitter = false;
  p.initial_delay_ms = kMaxTimeMs;
  EXPECT_EQ(RetryDelayMs(p, 1), 8000);
  EXPECT_EQ(RetryDelayMs(p, 99), 8000);  // no overflow on the way
  p.initial_delay_ms = 1;
  EXPECT_EQ(RetryDelayMs(p, 99), 8000);
  p.initial_delay_ms = 0;
  EXPECT_EQ(RetryDelayMs(p, 99), 0);
}

TEST(Rules, Transient503OnlyOnAttemptOneRejected400OnEvery) {
  SimRun transient = RunModel(P(k503, 0, 10, 5, 0, false, kStable, kDay));
  EXPECT_EQ(CountOf(transient, K::kRespond503), 1);
  SimRun rejected = RunModel(P(k400, 200, 40, 3, 0, true, kStable, kDay));
  EXPECT_EQ(CountOf(rejected, K::kRespond400), 3);
  EXPECT_EQ(CountOf(rejected, K::kReceive400), 0);  // every 400 came after its deadline
}

TEST(Rules, LostResponseOnlyAtTheFirstCommit) {
  SimRun run = RunModel(P(kLost, 500, 1000, 3, 1000, false, kStable, kDay));
  EXPECT_EQ(CountOf(run, K::kResponseLost), 1);
  EXPECT_EQ(CountOf(run, K::kCommit), 2);
  EXPECT_EQ(CountOf(run, K::kAck), 1);
}

TEST(Rules, NewKeysAreNumberedPerAttempt) {
  SimRun run = RunModel(P(kNone, 1500, 1000, 3, 0, true, kNewKey, kDay));
  std::vector<int> keys;
  for (const SimEvent& e : run.events) {
    if (e.kind == K::kSend) keys.push_back(e.key);
  }
  EXPECT_EQ(keys, (std::vector<int>{1, 2, 3}));
}

TEST(Rules, RecordingOrNotGivesTheSameResult) {
  SimParams p = P(kNone, 8000, 1000, 3, 1000, true, kStable, kDay);
  auto skipped = Simulate(p, EventRecording::kSkip);
  ASSERT_TRUE(skipped.ok());
  EXPECT_TRUE(skipped->events.empty());
  SimRun recorded = RunModel(p);
  EXPECT_EQ(skipped->result, recorded.result);
  EXPECT_EQ(skipped->end_ms, recorded.end_ms);
}

// ---- Validation and text ----

TEST(Validation, RejectsEveryOutOfRangeParameter) {
  auto bad = [](SimParams p) { return !Simulate(p).ok(); };
  SimParams p;
  EXPECT_TRUE(Simulate(p).ok());
  EXPECT_TRUE(bad({.service_ms = -1}));
  EXPECT_TRUE(bad({.service_ms = kMaxTimeMs + 1}));
  EXPECT_TRUE(bad({.timeout_ms = 0}));
  EXPECT_TRUE(bad({.max_attempts = 0}));
  EXPECT_TRUE(bad({.max_attempts = kMaxAttempts + 1}));
  EXPECT_TRUE(bad({.initial_delay_ms = -1}));
  EXPECT_TRUE(bad({.retention_ms = -1}));
  EXPECT_TRUE(bad({.retention_ms = kMaxTimeMs + 1}));
  auto error = Simulate({.timeout_ms = 0});
  EXPECT_EQ(error.status().code(), "invalid_argument");
  EXPECT_EQ(error.status().message(), "timeout_ms must be between 1 and 86400000, got 0");
  // The largest values are valid and run.
  EXPECT_TRUE(Simulate(P(kNone, kMaxTimeMs, kMaxTimeMs, kMaxAttempts, kMaxTimeMs, true, kStable,
                         kMaxTimeMs))
                  .ok());
}

TEST(Format, ParsesParametersByName) {
  std::map<std::string, std::string, std::less<>> given = {
      {"fault", "lost_response"}, {"service_ms", "500"}, {"dedup", "on"},
      {"retry_key", "stable"},    {"retention_ms", "0"}, {"jitter", "off"}};
  auto lookup = [&given](std::string_view name) -> std::optional<std::string> {
    auto found = given.find(name);
    return found == given.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
  auto parsed = ParseSimParams(lookup);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->fault, Fault::kLostResponse);
  EXPECT_EQ(parsed->service_ms, 500);
  EXPECT_EQ(parsed->retention_ms, 0);
  EXPECT_EQ(parsed->timeout_ms, SimParams{}.timeout_ms);  // absent: the default
  for (auto [name, value] :
       {std::pair{"fault", "lost"}, std::pair{"service_ms", "12x"}, std::pair{"service_ms", "-1"},
        std::pair{"max_attempts", "101"}, std::pair{"max_attempts", "99999999999999"},
        std::pair{"dedup", "yes"}, std::pair{"retry_key", "fresh"}, std::pair{"timeout_ms", ""},
        std::pair{"timeout_ms", "+5"}}) {
    given = {{name, value}};
    auto bad = ParseSimParams(lookup);
    ASSERT_FALSE(bad.ok()) << name << "=" << value;
    EXPECT_EQ(bad.status().message().rfind(name, 0), 0u) << bad.status().message();
  }
}

TEST(Format, JsonHasTheContractShape) {
  SimRun run = RunModel(P(kLost, 500, 1000, 3, 1000, true, kStable, 0));
  // Compared as unordered objects; the order of the fields is checked apart.
  nlohmann::ordered_json ordered = SimRunToJson(run);
  nlohmann::json json = nlohmann::json::parse(ordered.dump());
  EXPECT_EQ(ordered.dump().substr(0, 30), R"({"params":{"fault":"lost_respo)");
  EXPECT_EQ(
      ordered["events"][1].dump(),
      R"({"at_ms":0,"actor":"server","kind":"server_start","attempt":1,"operation":1,"key":"k1"})");
  EXPECT_EQ(json["params"],
            nlohmann::json::parse(R"({"fault":"lost_response","service_ms":500,"timeout_ms":1000,
              "max_attempts":3,"initial_delay_ms":1000,"jitter":false,"dedup":"on",
              "retry_key":"stable","retention_ms":0})"));
  EXPECT_EQ(json["result"], nlohmann::json::parse(R"({"client_outcome":"success","attempts":2,
              "server_operations":2,"effects":2,"intended":1,"late_acks":0,
              "reconciliation_flag":false})"));
  ASSERT_EQ(json["events"].size(), run.events.size());
  EXPECT_EQ(json["events"][0], nlohmann::json::parse(
                                   R"({"at_ms":0,"actor":"client","kind":"send","attempt":1,
                                       "key":"k1"})"));
  EXPECT_EQ(json["events"][2], nlohmann::json::parse(
                                   R"({"at_ms":500,"actor":"server","kind":"commit",
                                       "operation":1,"key":"k1"})"));
  EXPECT_EQ(json["events"][4]["actor"], "network");
  EXPECT_EQ(json["events"].back(), nlohmann::json::parse(
                                       R"({"at_ms":2550,"actor":"client","kind":"success",
                                           "attempt":2})"));
}

TEST(Format, TextHasOneLinePerEventAndTheResult) {
  SimRun run = RunModel(P(kNone, 8000, 1000, 3, 1000, true, kStable, kDay));
  std::string text = SimRunToText(run);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
            static_cast<long>(run.events.size()) + 6);  // params, blank, header, blank, 2 result
  EXPECT_NE(text.find(" 8050  client   late_ack "), std::string::npos) << text;
  EXPECT_NE(text.find("result: exhausted after 3 attempt(s), at 6000 ms"), std::string::npos);
}

// ---- Sweeps ----

TEST(Sweep, SameSeedSameTableAndRowsAddUp) {
  SweepTable a = RunSweep(5000, 42, nullptr, 0);
  SweepTable b = RunSweep(5000, 42, nullptr, 0);
  EXPECT_EQ(SweepTableToJson(a), SweepTableToJson(b));
  EXPECT_NE(SweepTableToJson(a)["rows"], SweepTableToJson(RunSweep(5000, 43, nullptr, 0))["rows"]);
  uint64_t total = 0;
  for (const SweepRow& row : a.rows) {
    total += row.runs;
    EXPECT_LE(row.success + row.rejected + row.exhausted_with_effect + row.exhausted_without_effect,
              row.runs);
    EXPECT_EQ(row.success + row.rejected + row.exhausted_with_effect + row.exhausted_without_effect,
              row.runs);
    // Dedup on, one stable key, nothing forgotten within the run: never a duplicate effect.
    if (row.dedup && row.retry_key == RetryKey::kStable &&
        row.band == RetentionBand::kLongerThanRun) {
      EXPECT_EQ(row.duplicate_effects, 0u);
    }
  }
  EXPECT_EQ(total, 5000u);
}

TEST(Sweep, DrawsOnlyValidParameters) {
  SplitMix64 random(7);
  for (int i = 0; i < 100000; ++i) {
    SimParams p = DrawSimParams(random);
    ASSERT_TRUE(ValidateSimParams(p).ok());
  }
}

// The properties below over the sweep's wider ranges, as a seeded loop: 100000 runs.
TEST(Sweep, InvariantsHoldOverManyDraws) {
  SplitMix64 random(2024);
  SimRun run;
  for (int i = 0; i < 100000; ++i) {
    SimulateInto(DrawSimParams(random), EventRecording::kSkip, &run);
    const SimResult& r = run.result;
    ASSERT_EQ(r.effects, r.server_operations);
    ASSERT_EQ(r.reconciliation_flag, r.client_outcome == ClientOutcome::kExhausted);
    ASSERT_LE(r.late_acks, r.attempts);
    ASSERT_LE(run.client_done_ms, run.end_ms);
    if (run.params.dedup && run.params.retry_key == RetryKey::kStable &&
        RetentionBandOf(run) == RetentionBand::kLongerThanRun) {
      ASSERT_LE(r.effects, 1);
    }
  }
}

TEST(Sweep, ProgressIsReported) {
  std::vector<uint64_t> seen;
  RunSweep(
      1000, 1, [&seen](uint64_t done) { seen.push_back(done); }, 250);
  EXPECT_EQ(seen, (std::vector<uint64_t>{250, 500, 750, 1000, 1000}));
}

// ---- Properties ----

SimParams ArbitraryParams() {
  SimParams p;
  p.fault = *rc::gen::element(Fault::kNone, Fault::kLostResponse, Fault::kTransient503,
                              Fault::kRejected400);
  p.service_ms = *rc::gen::inRange<int64_t>(0, 5001);
  p.timeout_ms = *rc::gen::inRange<int64_t>(1, 3001);
  p.max_attempts = *rc::gen::inRange(1, 11);
  p.initial_delay_ms = *rc::gen::inRange<int64_t>(0, 3001);
  p.jitter = *rc::gen::arbitrary<bool>();
  p.dedup = *rc::gen::arbitrary<bool>();
  p.retry_key = *rc::gen::element(RetryKey::kStable, RetryKey::kNew);
  p.retention_ms = *rc::gen::inRange<int64_t>(0, 20001);
  return p;
}

RC_GTEST_PROP(ModelProperty, DedupStableLongRetentionMeansOneEffect, ()) {
  SimParams p = ArbitraryParams();
  p.dedup = true;
  p.retry_key = RetryKey::kStable;
  p.retention_ms = kMaxTimeMs;
  auto run = Simulate(p);
  RC_ASSERT(run.ok());
  RC_ASSERT(run->end_ms < p.retention_ms);  // retention longer than the run
  if (run->result.server_operations >= 1) {
    RC_ASSERT(run->result.effects == 1);
    RC_ASSERT(run->result.server_operations == 1);
  }
}

RC_GTEST_PROP(ModelProperty, DedupOffEffectsEqualOperations, ()) {
  SimParams p = ArbitraryParams();
  p.dedup = false;
  auto run = Simulate(p);
  RC_ASSERT(run.ok());
  RC_ASSERT(run->result.effects == run->result.server_operations);
}

RC_GTEST_PROP(ModelProperty, SameParametersSameEvents, ()) {
  SimParams p = ArbitraryParams();
  auto first = Simulate(p);
  auto second = Simulate(p);
  RC_ASSERT(first.ok() && second.ok());
  RC_ASSERT(first->events == second->events);
  RC_ASSERT(first->result == second->result);
}

RC_GTEST_PROP(ModelProperty, InvariantsOfEveryRun, ()) {
  SimParams p = ArbitraryParams();
  auto run = Simulate(p);
  RC_ASSERT(run.ok());
  const SimResult& r = run->result;
  for (size_t i = 1; i < run->events.size(); ++i) {
    RC_ASSERT(run->events[i - 1].at_ms <= run->events[i].at_ms);  // time-ordered
  }
  RC_ASSERT(r.reconciliation_flag == (r.client_outcome == ClientOutcome::kExhausted));
  RC_ASSERT(r.late_acks <= r.attempts);
  RC_ASSERT(r.attempts >= 1 && r.attempts <= p.max_attempts);
  RC_ASSERT(r.effects == r.server_operations);  // every operation commits before the run ends
  RC_ASSERT(r.intended == 1);
  RC_ASSERT(r.attempts == CountOf(*run, K::kSend));
  RC_ASSERT(r.effects == CountOf(*run, K::kCommit));
  RC_ASSERT(r.late_acks == CountOf(*run, K::kLateAck));
  RC_ASSERT(run->events.back().at_ms == run->end_ms);
  auto skipped = Simulate(p, EventRecording::kSkip);
  RC_ASSERT(skipped->result == r);
}

}  // namespace
}  // namespace agentpay::sim
