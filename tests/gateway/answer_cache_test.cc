// The answer cache on its own: what it keeps, until when, within which bound.
#include "gateway/answer_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace agentpay {
namespace {

constexpr int64_t kMargin = 60000;

Operation Final(const std::string& key, int64_t retained_until_ms, size_t body_bytes = 16) {
  Operation op;
  op.id = "op_" + key;
  op.principal = "account:a1";
  op.idempotency_key = key;
  op.fingerprint = "fp_" + key;
  op.route = "/";
  op.amount = 5;
  op.fulfillment = Fulfillment::kSucceeded;
  op.response = StoredResponse{200, "application/json", std::string(body_bytes, 'x')};
  op.retained_until_ms = retained_until_ms;
  return op;
}

TEST(AnswerCache, KeepsAFinalOperationUnderItsKeyAndAnswersWithItsRecord) {
  AnswerCache cache(1 << 20, kMargin);
  Operation op = Final("k1", 1000000);
  cache.Remember(op, 3, 1000);
  auto entry = cache.Find("account:a1", "k1", 2000);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->op, op);
  EXPECT_EQ(entry->record, (KeyRecord{"account:a1", "k1", "op_k1", "fp_k1", 0, 3}));
  // The same decision a read of the store gives: a replay, or a mismatch for another request.
  EXPECT_EQ(DecideArrival(&entry->record, &entry->op, "fp_k1", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kReplay);
  EXPECT_EQ(DecideArrival(&entry->record, &entry->op, "other", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kMismatch);
  EXPECT_EQ(cache.Find("account:a2", "k1", 2000), nullptr);  // another principal's key
  EXPECT_EQ(cache.Find("account:a1", "k2", 2000), nullptr);
  AnswerCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.bytes, AnswerCache::EntryBytes(op));
}

TEST(AnswerCache, KeepsNothingButFinalAnswersWithARetention) {
  AnswerCache cache(1 << 20, kMargin);
  Operation in_progress = Final("a", 1000000);
  in_progress.fulfillment = Fulfillment::kInProgress;
  Operation pending_retry = Final("b", 1000000);
  pending_retry.fulfillment = Fulfillment::kPendingRetry;
  Operation no_answer = Final("c", 1000000);
  no_answer.response.reset();
  Operation no_retention = Final("d", 1000000);
  no_retention.retained_until_ms.reset();
  for (const Operation& op : {in_progress, pending_retry, no_answer, no_retention}) {
    cache.Remember(op, 0, 1000);
    EXPECT_EQ(cache.Find(op.principal, op.idempotency_key, 1000), nullptr) << op.idempotency_key;
  }
  Operation rejected = Final("e", 1000000);
  rejected.fulfillment = Fulfillment::kRejected;
  cache.Remember(rejected, 0, 1000);
  EXPECT_NE(cache.Find(rejected.principal, "e", 1000), nullptr);
  EXPECT_EQ(cache.stats().entries, 1u);
}

// The key is forgotten when its retention ends, wherever that is decided first: the cache stops a
// margin before, and keeps nothing that is already that close.
TEST(AnswerCache, AnswersOnlyUntilAMarginBeforeTheRetentionEnds) {
  AnswerCache cache(1 << 20, kMargin);
  const int64_t until = 500000;
  cache.Remember(Final("k", until), 0, 1000);
  EXPECT_NE(cache.Find("account:a1", "k", until - kMargin - 1), nullptr);
  EXPECT_EQ(cache.Find("account:a1", "k", until - kMargin), nullptr);
  EXPECT_EQ(cache.stats().entries, 0u);  // dropped when found past its time
  cache.Remember(Final("k", until), 0, until - kMargin);
  EXPECT_EQ(cache.stats().entries, 0u);
  // A retention shorter than the margin (--retention-ms 0 included) is never cached.
  cache.Remember(Final("short", 1000 + kMargin - 1), 0, 1000);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST(AnswerCache, StaysWithinItsBoundEvictingTheLeastRecentlyUsed) {
  const size_t bound = 16 * 64 * 1024;  // 64 KiB a shard
  AnswerCache cache(bound, kMargin);
  const int kKeys = 2000;
  for (int i = 0; i < kKeys; ++i) {
    cache.Remember(Final("k" + std::to_string(i), 10000000, 1024), 0, 1000);
    // The first key is used all along: it stays.
    ASSERT_NE(cache.Find("account:a1", "k0", 1000), nullptr) << i;
  }
  AnswerCache::Stats stats = cache.stats();
  EXPECT_LE(stats.bytes, bound);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_EQ(stats.entries + stats.evictions, static_cast<uint64_t>(kKeys));
  EXPECT_NE(cache.Find("account:a1", "k" + std::to_string(kKeys - 1), 1000), nullptr);
  EXPECT_EQ(cache.Find("account:a1", "k1", 1000), nullptr);  // the oldest unused went first
  // An answer larger than an eighth of a shard's share is not kept at all.
  cache.Remember(Final("big", 10000000, 9 * 1024), 0, 1000);
  EXPECT_EQ(cache.Find("account:a1", "big", 1000), nullptr);
}

TEST(AnswerCache, RemembersAKeyOnceAndOffKeepsNothing) {
  AnswerCache cache(1 << 20, kMargin);
  Operation op = Final("k", 1000000);
  cache.Remember(op, 0, 1000);
  cache.Remember(op, 0, 1000);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, AnswerCache::EntryBytes(op));
  AnswerCache off(0, kMargin);
  EXPECT_FALSE(off.enabled());
  off.Remember(op, 0, 1000);
  EXPECT_EQ(off.Find("account:a1", "k", 1000), nullptr);
  EXPECT_EQ(off.stats().entries, 0u);
}

TEST(AnswerCache, RecordsAtMostTheTracesShareOfArrivals) {
  AnswerCache cache(1 << 20, kMargin);
  cache.Remember(Final("k", 1000000), kMaxRecordedArrivals - 2, 1000);
  auto entry = cache.Find("account:a1", "k", 1000);
  ASSERT_NE(entry, nullptr);
  auto first = entry->TakeArrivalRecord();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->arrivals_recorded, kMaxRecordedArrivals - 2);
  auto second = entry->TakeArrivalRecord();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->arrivals_recorded, kMaxRecordedArrivals - 1);
  EXPECT_FALSE(entry->TakeArrivalRecord().has_value());
  EXPECT_FALSE(entry->TakeArrivalRecord().has_value());
}

}  // namespace
}  // namespace agentpay
