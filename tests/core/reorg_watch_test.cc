// The watch for reorganisations: which blocks a canonical block vouches for (core/reorg_watch.h).
#include "core/reorg_watch.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

// The failure that made the rule: a settlement recorded in block 67 (hash a) before a
// reorganisation removed it, and one recorded after it in block 70 of the new branch. Block 70
// being canonical says nothing of block 67: it must be asked about.
TEST(CanonicalBlocks, ABlockListedAfterAReorganisationDoesNotVouchForOneBeforeIt) {
  CanonicalBlocks blocks(100);
  blocks.BeginPass();  // t=1000: block 67 listed and found canonical
  EXPECT_FALSE(blocks.Vouched(67, "a", 1000));
  blocks.FoundCanonical(67, "a", 1000);
  // the reorganisation at t=1500; block 70 (of the new branch) recorded at t=1800
  blocks.BeginPass();  // t=2000
  EXPECT_FALSE(blocks.Vouched(70, "b", 2000));
  blocks.FoundCanonical(70, "b", 2000);
  EXPECT_FALSE(blocks.Vouched(67, "a", 2000)) << "block 67 was last seen before 70 was listed";
}

// The quiet chain: once a block was found canonical after the newest was first listed, the newest
// vouches for it in every later pass, so a pass costs one call.
TEST(CanonicalBlocks, AQuietChainCostsOneCallAPass) {
  CanonicalBlocks blocks(100);
  blocks.BeginPass();  // t=1000: 67 and 68 listed; both asked
  EXPECT_FALSE(blocks.Vouched(68, "b", 1000));
  blocks.FoundCanonical(68, "b", 1000);
  EXPECT_FALSE(blocks.Vouched(67, "a", 1000));  // never found canonical before
  blocks.FoundCanonical(67, "a", 1000);
  for (int64_t t : {2000, 3000, 4000}) {
    blocks.BeginPass();
    EXPECT_FALSE(blocks.Vouched(68, "b", t));  // the newest is always asked
    blocks.FoundCanonical(68, "b", t);
    EXPECT_TRUE(blocks.Vouched(67, "a", t)) << t;
  }
}

// A new settlement in a new block costs one call more: the new block and the previous newest are
// asked; every block below is vouched for through the previous newest.
TEST(CanonicalBlocks, ANewBlockCostsOneCallMore) {
  CanonicalBlocks blocks(100);
  blocks.BeginPass();
  for (int64_t n : {12, 11, 10}) {
    EXPECT_FALSE(blocks.Vouched(n, std::to_string(n), 1000));
    blocks.FoundCanonical(n, std::to_string(n), 1000);
  }
  blocks.BeginPass();  // t=2000: block 13 is new
  EXPECT_FALSE(blocks.Vouched(13, "13", 2000));
  blocks.FoundCanonical(13, "13", 2000);
  EXPECT_FALSE(blocks.Vouched(12, "12", 2000));  // found canonical before 13 was listed
  blocks.FoundCanonical(12, "12", 2000);
  EXPECT_TRUE(blocks.Vouched(11, "11", 2000));  // found canonical after 12 was listed
  EXPECT_TRUE(blocks.Vouched(10, "10", 2000));
}

// Nothing is vouched for before a block of the pass was found canonical, nor a block never found
// canonical, nor one at the same height with another hash (a payment settled there again).
TEST(CanonicalBlocks, OnlyABlockFoundCanonicalVouches) {
  CanonicalBlocks blocks(100);
  blocks.BeginPass();
  blocks.FoundCanonical(5, "x", 1000);
  blocks.BeginPass();
  EXPECT_FALSE(blocks.Vouched(5, "x", 2000)) << "nothing found canonical yet in this pass";
  blocks.FoundCanonical(9, "n", 2000);
  EXPECT_FALSE(blocks.Vouched(9, "other", 2000));
  EXPECT_FALSE(blocks.Vouched(8, "never-asked", 2000));
}

// Bounded: past max_entries the lowest blocks are forgotten, and a forgotten block is asked again.
TEST(CanonicalBlocks, BoundedForgettingTheLowestFirst) {
  CanonicalBlocks blocks(3);
  blocks.BeginPass();
  for (int64_t n : {1, 2, 3, 4}) blocks.FoundCanonical(n, "h", 1000);
  EXPECT_EQ(blocks.size(), 3u);
  blocks.BeginPass();
  blocks.FoundCanonical(4, "h", 500);  // a block listed at 1000 found canonical: vouches from 1000
  EXPECT_TRUE(blocks.Vouched(2, "h", 2000));
  EXPECT_FALSE(blocks.Vouched(1, "h", 2000)) << "forgotten";
}

}  // namespace
}  // namespace agentpay
