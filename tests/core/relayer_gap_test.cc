// The relayer-nonce gap walk's table (core/relayer_gap.h): one test per row, and walks over
// simulated relayer histories that check what the table makes the walk do.
#include "core/relayer_gap.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace agentpay {
namespace {

GapFacts Theirs(int64_t nonce, int64_t taken) {
  GapFacts f;
  f.nonce = nonce;
  f.taken = taken;
  return f;
}
GapFacts Ours(int64_t nonce, int64_t taken, bool stalled) {
  GapFacts f;
  f.nonce = nonce;
  f.ours = true;
  f.taken = taken;
  f.stalled = stalled;
  return f;
}

TEST(RelayerGap, G1PastEverythingWeSignedStops) {
  EXPECT_EQ(DecideGapStep(Theirs(5, 5)), GapStep::kStop);
  GapFacts read = Theirs(6, 5);
  read.pending = 0;  // even with the pending count low: no gap of ours
  EXPECT_EQ(DecideGapStep(read), GapStep::kStop);
}

TEST(RelayerGap, G2ANonceWithoutOursReadsThePendingCountFirst) {
  EXPECT_EQ(DecideGapStep(Theirs(3, 5)), GapStep::kReadPending);
}

TEST(RelayerGap, G3SomeoneElsesTransactionMayBeThereStops) {
  GapFacts f = Theirs(3, 5);
  f.pending = 4;
  EXPECT_EQ(DecideGapStep(f), GapStep::kStop);
}

TEST(RelayerGap, G4ANonceNobodyHoldsGetsANoop) {
  GapFacts f = Theirs(3, 5);
  f.pending = 3;
  EXPECT_EQ(DecideGapStep(f), GapStep::kSendNoop);
  f.pending = 1;
  EXPECT_EQ(DecideGapStep(f), GapStep::kSendNoop);
}

TEST(RelayerGap, G5OursAsksTheNodeFirst) {
  EXPECT_EQ(DecideGapStep(Ours(3, 5, true)), GapStep::kAskNode);
  EXPECT_EQ(DecideGapStep(Ours(3, 5, false)), GapStep::kAskNode);
}

TEST(RelayerGap, G6OursTheNodeLostIsSentAgain) {
  for (bool stalled : {false, true}) {
    GapFacts f = Ours(3, 5, stalled);
    f.node_knows = false;
    EXPECT_EQ(DecideGapStep(f), GapStep::kResend);
    f.pending = 9;  // whatever the pending count
    EXPECT_EQ(DecideGapStep(f), GapStep::kResend);
  }
}

TEST(RelayerGap, G7OursHeldWhileTheChainMinesStops) {
  GapFacts f = Ours(3, 5, false);
  f.node_knows = true;
  EXPECT_EQ(DecideGapStep(f), GapStep::kStop);
  f.first = true;
  f.pending = 0;
  EXPECT_EQ(DecideGapStep(f), GapStep::kStop);
}

TEST(RelayerGap, G8OursHeldWhileTheChainStallsReadsThePendingCount) {
  GapFacts f = Ours(3, 5, true);
  f.node_knows = true;
  EXPECT_EQ(DecideGapStep(f), GapStep::kReadPending);
}

TEST(RelayerGap, G9OursHeldAtTheFirstNonceButNotPendingIsHeld) {
  GapFacts f = Ours(3, 5, true);
  f.first = true;
  f.node_knows = true;
  f.pending = 3;
  EXPECT_EQ(DecideGapStep(f), GapStep::kHeldAtNextNonce);
  f.pending = 2;
  EXPECT_EQ(DecideGapStep(f), GapStep::kHeldAtNextNonce);
  f.first = false;  // the same count past the first nonce is G11
  EXPECT_EQ(DecideGapStep(f), GapStep::kNext);
}

TEST(RelayerGap, G10TheNodeCountsEverythingWeTookStops) {
  GapFacts f = Ours(3, 5, true);
  f.node_knows = true;
  f.pending = 5;
  EXPECT_EQ(DecideGapStep(f), GapStep::kStop);
  f.first = true;
  EXPECT_EQ(DecideGapStep(f), GapStep::kStop);
}

TEST(RelayerGap, G11ACountShortOfWhatWeTookWalksOn) {
  GapFacts f = Ours(3, 5, true);
  f.node_knows = true;
  f.pending = 4;
  EXPECT_EQ(DecideGapStep(f), GapStep::kNext);
  f.first = true;
  EXPECT_EQ(DecideGapStep(f), GapStep::kNext);
}

TEST(RelayerGap, EveryStepHasAName) {
  std::set<std::string_view> names;
  for (GapStep step :
       {GapStep::kReadPending, GapStep::kAskNode, GapStep::kSendNoop, GapStep::kResend,
        GapStep::kNext, GapStep::kStop, GapStep::kHeldAtNextNonce}) {
    names.insert(GapStepName(step));
  }
  EXPECT_EQ(names.size(), 7u);
  EXPECT_FALSE(names.contains("?"));
}

// A relayer's nonces as the walk can find them. Below `mined`: mined. From `mined` up to `taken`:
// each nonce has ours (sent) or not (a nonce we skipped, or someone else's); the node knows ours or
// lost it; the node's pool may hold someone else's. `pending` is the node's pending count.
struct Relayer {
  int64_t mined = 0;
  int64_t taken = 0;
  std::map<int64_t, bool> ours_known;  // nonce -> the node knows it
  uint64_t pending = 0;
};

struct Walk {
  std::vector<int64_t> noops;
  std::vector<int64_t> resent;
  bool held = false;
  int pending_reads = 0;
  int node_asks = 0;
};

// The walk as FillRelayerGap drives it, with no budget or bound.
Walk WalkGap(const Relayer& r, bool stalled) {
  Walk walk;
  std::optional<uint64_t> pending;
  for (int64_t nonce = r.mined; nonce < r.mined + 64; ++nonce) {
    auto it = r.ours_known.find(nonce);
    GapFacts facts{.nonce = nonce,
                   .first = nonce == r.mined,
                   .ours = it != r.ours_known.end(),
                   .taken = r.taken,
                   .stalled = stalled,
                   .node_knows = std::nullopt,
                   .pending = pending};
    for (int decisions = 0;; ++decisions) {
      EXPECT_LT(decisions, 3) << "at most three decisions a nonce";
      if (decisions >= 3) return walk;
      const GapStep step = DecideGapStep(facts);
      if (step == GapStep::kReadPending) {
        EXPECT_FALSE(facts.pending.has_value()) << "the pending count is read once";
        facts.pending = pending = r.pending;
        ++walk.pending_reads;
        continue;
      }
      if (step == GapStep::kAskNode) {
        EXPECT_FALSE(facts.node_knows.has_value());
        facts.node_knows = it->second;
        ++walk.node_asks;
        continue;
      }
      if (step == GapStep::kStop) return walk;
      if (step == GapStep::kHeldAtNextNonce) {
        walk.held = true;
        return walk;
      }
      if (step == GapStep::kSendNoop) walk.noops.push_back(nonce);
      if (step == GapStep::kResend) walk.resent.push_back(nonce);
      break;
    }
  }
  ADD_FAILURE() << "the walk ran past everything the store took";
  return walk;
}

// Every history of up to five unmined nonces (each ours-known, ours-lost or not ours) and every
// pending count the node can report.
TEST(RelayerGap, WalksOverEveryShortHistory) {
  int histories = 0;
  for (int n = 0; n <= 5; ++n) {
    int combos = 1;
    for (int i = 0; i < n; ++i) combos *= 3;
    for (int c = 0; c < combos; ++c) {
      Relayer r;
      r.mined = 10;
      r.taken = 10 + n;
      for (int i = 0, code = c; i < n; ++i, code /= 3) {
        if (code % 3 == 0) r.ours_known[10 + i] = true;
        if (code % 3 == 1) r.ours_known[10 + i] = false;
      }
      for (uint64_t pending = 10; pending <= static_cast<uint64_t>(r.taken) + 1; ++pending) {
        r.pending = pending;
        for (bool stalled : {false, true}) {
          ++histories;
          const Walk walk = WalkGap(r, stalled);
          SCOPED_TRACE(::testing::Message() << "n " << n << " combo " << c << " pending " << pending
                                            << " stalled " << stalled);
          EXPECT_LE(walk.pending_reads, 1);
          std::set<int64_t> touched;
          for (int64_t nonce : walk.noops) {
            // A no-op only where the store took nothing of ours, below what it took, and where
            // the node reports nothing pending.
            EXPECT_FALSE(r.ours_known.contains(nonce));
            EXPECT_LT(nonce, r.taken);
            EXPECT_LE(r.pending, static_cast<uint64_t>(nonce));
            EXPECT_TRUE(touched.insert(nonce).second);
          }
          for (int64_t nonce : walk.resent) {
            // Only ours the node lost is sent again; never one it holds.
            ASSERT_TRUE(r.ours_known.contains(nonce));
            EXPECT_FALSE(r.ours_known.at(nonce));
            EXPECT_TRUE(touched.insert(nonce).second);
          }
          // The first unmined nonce: ours lost is always sent again; a skipped one gets a no-op
          // when the node has nothing pending there.
          if (n > 0) {
            auto first = r.ours_known.find(10);
            if (first != r.ours_known.end() && !first->second) {
              EXPECT_TRUE(touched.contains(10));
            }
            if (first == r.ours_known.end() && r.pending <= 10) {
              EXPECT_TRUE(touched.contains(10));
            }
          }
          // The chain moving on: nothing past a nonce the node knows is touched.
          if (!stalled) {
            for (const auto& [nonce, known] : r.ours_known) {
              if (!known) continue;
              for (int64_t t : touched) EXPECT_LT(t, nonce);
            }
            EXPECT_FALSE(walk.held);
          }
          if (walk.held) {
            EXPECT_TRUE(r.ours_known.contains(10) && r.ours_known.at(10));
            EXPECT_LE(r.pending, 10u);
            EXPECT_TRUE(touched.empty());
          }
        }
      }
    }
  }
  EXPECT_GT(histories, 1000);
}

// The case the table's G11 exists for: a node that dropped everything sent past a gap. The gap is
// filled and every lost transaction after the one it still holds is sent again, in one walk.
TEST(RelayerGap, AStalledNodeThatLostWhatFollowedAGapGetsItAllAgain) {
  Relayer r;
  r.mined = 10;
  r.taken = 14;
  r.ours_known = {{10, false}, {11, true}, {12, false}, {13, false}};
  r.pending = 10;
  const Walk walk = WalkGap(r, true);
  EXPECT_EQ(walk.resent, (std::vector<int64_t>{10, 12, 13}));
  EXPECT_TRUE(walk.noops.empty());
  // The same node while the chain mines: only what comes before the first one it holds.
  EXPECT_EQ(WalkGap(r, false).resent, (std::vector<int64_t>{10}));
}

}  // namespace
}  // namespace agentpay
