// See answer_cache.h.
#include "gateway/answer_cache.h"

#include <algorithm>
#include <functional>

namespace agentpay {

namespace {
// What an entry costs beyond its strings' bytes: the entry, its list node, its map node and key,
// the shared_ptr's control block, each string's header. A round figure; the bound is an estimate.
constexpr size_t kEntryOverheadBytes = 512;
}  // namespace

AnswerCache::AnswerCache(size_t max_bytes, int64_t margin_ms)
    : max_bytes_(max_bytes),
      shard_max_bytes_(max_bytes / kShards),
      margin_ms_(margin_ms),
      shards_(kShards) {}

size_t AnswerCache::EntryBytes(const Operation& op) {
  size_t bytes = kEntryOverheadBytes;
  // The operation's strings, the record's copies of four of them, and the map's key.
  for (const std::string* s :
       {&op.id, &op.principal, &op.idempotency_key, &op.fingerprint, &op.route, &op.claimed_by}) {
    bytes += s->size();
  }
  bytes += 2 * (op.principal.size() + op.idempotency_key.size()) + op.id.size() +
           op.fingerprint.size() + 1;
  if (op.response) bytes += op.response->body.size() + op.response->content_type.size();
  return bytes;
}

std::optional<KeyRecord> AnswerCache::Entry::TakeArrivalRecord() {
  int32_t seen = arrivals_recorded_.load(std::memory_order_relaxed);
  while (seen < kMaxRecordedArrivals) {
    if (arrivals_recorded_.compare_exchange_weak(seen, seen + 1, std::memory_order_relaxed)) {
      KeyRecord before = record;
      before.arrivals_recorded = seen;
      return before;
    }
  }
  return std::nullopt;
}

std::string AnswerCache::MapKey(std::string_view principal, std::string_view key) {
  std::string map_key;
  map_key.reserve(principal.size() + 1 + key.size());
  // A principal never holds a NUL (an account id or an address); the key is visible ASCII.
  map_key.append(principal).push_back('\0');
  map_key.append(key);
  return map_key;
}

AnswerCache::Shard& AnswerCache::ShardOf(const std::string& map_key) {
  return shards_[std::hash<std::string>{}(map_key) % kShards];
}

void AnswerCache::EraseLocked(Shard& shard, std::list<std::shared_ptr<Entry>>::iterator it) {
  shard.bytes -= (*it)->bytes;
  shard.by_key.erase(MapKey((*it)->record.principal, (*it)->record.key));
  shard.lru.erase(it);
}

void AnswerCache::Remember(const Operation& op, int32_t arrivals_recorded, int64_t now_ms) {
  if (!enabled() || !IsFinal(op) || !op.response || !op.retained_until_ms) return;
  const int64_t serve_until = *op.retained_until_ms - margin_ms_;
  if (now_ms >= serve_until) return;
  const size_t bytes = EntryBytes(op);
  if (bytes > shard_max_bytes_ / 8) return;  // too large to be worth it
  std::string map_key = MapKey(op.principal, op.idempotency_key);
  Shard& shard = ShardOf(map_key);
  std::lock_guard lock(shard.mu);
  if (auto found = shard.by_key.find(map_key); found != shard.by_key.end()) {
    // Already known: the same final operation (a key's final operation is its last until its
    // retention ends), touched.
    shard.lru.splice(shard.lru.begin(), shard.lru, found->second);
    return;
  }
  KeyRecord record{op.principal,   op.idempotency_key, op.id,
                   op.fingerprint, op.created_ms,      arrivals_recorded};
  shard.lru.push_front(std::make_shared<Entry>(std::move(record), op, serve_until, bytes));
  shard.by_key.emplace(std::move(map_key), shard.lru.begin());
  shard.bytes += bytes;
  while (shard.bytes > shard_max_bytes_ && shard.lru.size() > 1) {
    EraseLocked(shard, std::prev(shard.lru.end()));
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

std::shared_ptr<AnswerCache::Entry> AnswerCache::Find(std::string_view principal,
                                                      std::string_view key, int64_t now_ms) {
  if (!enabled()) return nullptr;
  const std::string map_key = MapKey(principal, key);
  Shard& shard = ShardOf(map_key);
  std::lock_guard lock(shard.mu);
  auto found = shard.by_key.find(map_key);
  if (found == shard.by_key.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (now_ms >= (*found->second)->serve_until_ms) {
    EraseLocked(shard, found->second);
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, found->second);
  hits_.fetch_add(1, std::memory_order_relaxed);
  return *found->second;
}

AnswerCache::Stats AnswerCache::stats() const {
  Stats stats;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    stats.entries += shard.lru.size();
    stats.bytes += shard.bytes;
  }
  stats.hits = hits_.load(std::memory_order_relaxed);
  stats.misses = misses_.load(std::memory_order_relaxed);
  stats.evictions = evictions_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace agentpay
