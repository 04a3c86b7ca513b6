// When the reconciler looks at each unresolved settlement again, and how many chain calls it may
// make (issue 13 item 4): per-operation exponential backoff, capped, brought forward to the moment
// the authorization expires (when the answer can change from "wait" to "void"); and a token bucket
// over the RPC calls of all passes. Pure: time comes in as arguments.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace agentpay {

struct ReconcileBackoff {
  int64_t initial_delay_ms = 1000;  // after the first look
  int64_t max_delay_ms = 60000;     // no operation waits longer between looks
};

// The time of the next look at an operation looked at `looks` (>= 1) times, the last at now_ms:
// now + min(max, initial * 2^(looks-1)), or expires_ms if that comes sooner and is still ahead
// (the moment validBefore + buffer passes and an unused authorization becomes void). In the
// max_delay_ms after expires_ms, now + initial: the decision is imminent there (the chain's clock
// catching up, an expired transaction mined or dropped), and a look that came a moment too early
// must not wait out a long backoff. expires_ms 0: never expires.
// Preconditions: looks >= 1, 0 < initial <= max.
int64_t NextLookMs(const ReconcileBackoff& backoff, int looks, int64_t now_ms, int64_t expires_ms);

// Which operations are due, by id. Bounded: past max_entries a new operation is simply always
// due (it is looked at whenever the cursor reaches it, at the pace the RPC budget allows).
class ReconcileSchedule {
 public:
  ReconcileSchedule(ReconcileBackoff backoff, size_t max_entries);

  bool Due(std::string_view id, int64_t now_ms) const;
  // A look happened at now_ms and the operation is still unresolved.
  void Looked(const std::string& id, int64_t now_ms, int64_t expires_ms);
  // The operation is resolved (or gone): its entry goes.
  void Forget(std::string_view id);
  // The cursor went round all unresolved operations: entries not looked at or passed over since the
  // previous round belong to operations no longer listed (resolved elsewhere) and go.
  void Passed(std::string_view id);
  void EndRound();
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    int64_t next_ms = 0;
    int looks = 0;
    bool listed = true;  // seen by the cursor this round
  };
  ReconcileBackoff backoff_;
  size_t max_entries_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// At most `per_second` RPC calls per second on average, with bursts of at most one second's worth.
class RpcBudget {
 public:
  // Precondition: per_second > 0. Starts full.
  RpcBudget(int64_t per_second, int64_t now_ms);
  // Takes `calls` if that many are available at now_ms; returns whether it did.
  bool TryTake(int64_t calls, int64_t now_ms);
  int64_t per_second() const { return per_second_; }

 private:
  void Refill(int64_t now_ms);
  int64_t per_second_;
  int64_t milli_tokens_;  // calls * 1000: whole milliseconds refill exactly
  int64_t last_ms_;
};

}  // namespace agentpay
