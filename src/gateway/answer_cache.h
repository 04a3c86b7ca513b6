// A bounded in-memory copy of finished keys, so that a replay (or a refused reuse of a key, 422) is
// answered on the I/O thread without reading the store.
//
// Why it is correct across several gateways: it holds only operations that are final (IsFinal),
// read or written by a decision that is durable, each under the key it was made for (its
// principal and idempotency_key, its fingerprint the key's); a final operation never changes
// (CONTRACT §3), and its key names it until its retention ends. The one thing that ends a final
// operation's key is its retention: once `retained_until_ms` has passed, DecideArrival forgets the
// key and the next request with it is a new action, on whichever gateway it arrives. So an entry
// answers only until `retained_until_ms - margin_ms`, where the margin covers the clock difference
// between gateways; past that the request goes to the store, as it would without the cache. What a
// hit answers is DecideArrival's own decision on the cached record and operation: the same
// function, the same inputs as a read of the store would give.
//
// Bounded by bytes (an estimate of each entry's heap: its strings and the stored body) and
// evicted least recently used, in 16 shards of a sixteenth of the bound each; an entry larger than
// an eighth of its shard's share is not kept. Safe to
// call from any thread; each shard has its own lock, held only to find, touch or insert.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/idempotency.h"
#include "core/operation.h"

namespace agentpay {

class AnswerCache {
 public:
  struct Entry {
    KeyRecord record;
    Operation op;            // final, with its stored answer
    int64_t serve_until_ms;  // retained_until_ms - margin: answers only before this
    size_t bytes;            // the estimate the bound counts
    Entry(KeyRecord r, Operation o, int64_t until, size_t b)
        : record(std::move(r)),
          op(std::move(o)),
          serve_until_ms(until),
          bytes(b),
          arrivals_recorded_(record.arrivals_recorded) {}
    // Whether one more repeated arrival may be recorded in the trace, counting it if so: the trace
    // records at most kMaxRecordedArrivals (the store's own check caps it across gateways; this
    // spares the writer a write per replay that the store would refuse). The record as it stood
    // before this arrival, for ArrivalEvent.
    std::optional<KeyRecord> TakeArrivalRecord();

   private:
    std::atomic<int32_t> arrivals_recorded_;
  };
  struct Stats {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
  };

  // max_bytes 0: the cache is off (Remember keeps nothing, Find finds nothing).
  AnswerCache(size_t max_bytes, int64_t margin_ms);
  AnswerCache(const AnswerCache&) = delete;
  AnswerCache& operator=(const AnswerCache&) = delete;

  bool enabled() const { return max_bytes_ > 0; }
  // Keeps `op` under its key if it is final with a stored answer and may still be answered at
  // `now_ms`; otherwise leaves the cache as it was (an entry already there for the key stays: it
  // is the same final operation). `arrivals_recorded`: the key's count as the store had it (0
  // when not known). Callers pass only what a durable decision wrote or a durable read found.
  void Remember(const Operation& op, int32_t arrivals_recorded, int64_t now_ms);
  // The entry of (principal, key) if it may still answer at `now_ms`; an entry past its time is
  // dropped.
  std::shared_ptr<Entry> Find(std::string_view principal, std::string_view key, int64_t now_ms);
  Stats stats() const;

  // The estimate of an entry's bytes (exposed for tests).
  static size_t EntryBytes(const Operation& op);

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    // Most recently used first; the map points into it.
    std::list<std::shared_ptr<Entry>> lru;
    std::unordered_map<std::string, std::list<std::shared_ptr<Entry>>::iterator> by_key;
    size_t bytes = 0;
  };
  static std::string MapKey(std::string_view principal, std::string_view key);
  Shard& ShardOf(const std::string& map_key);
  void EraseLocked(Shard& shard, std::list<std::shared_ptr<Entry>>::iterator it);

  const size_t max_bytes_;
  const size_t shard_max_bytes_;
  const int64_t margin_ms_;
  std::vector<Shard> shards_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace agentpay
