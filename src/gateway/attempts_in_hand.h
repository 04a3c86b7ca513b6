// The attempts this gateway process is making (upstream calls of operations it claimed), so that
// it can tell which of its own claims nobody runs any more. Such a claim is left behind when the
// database loses the answer to the decision that took it (the COMMIT may have landed: a restart or
// a dropped connection at that moment), or cannot record the attempt's completion: the request
// was answered 503, and the operation stays in progress under a lease that names this process.
// Another process must wait out that lease (it cannot know); this one knows, and a retry it
// receives takes the operation over at once (ClaimView::kEndedHere), as it would after the lease.
//
// An attempt is in hand from inside the decision that takes its claim (before that decision
// commits, so no later decision can see the claim without it) until the decision that ends it has
// been answered, whatever that answer: bounded by the requests in flight.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/idempotency.h"
#include "core/operation.h"

namespace agentpay {

class AttemptsInHand {
 public:
  explicit AttemptsInHand(const std::string& instance_id) : instance_id_(instance_id) {}

  // `op` as its claiming decision wrote it (its id and attempt number). Returns the token that
  // drops it: the one decision that took it ends it, never another that took the same attempt
  // after this one failed (on PostgreSQL a decision can fail after it ran, when its held-over
  // writes reach the server, and a later decision of the batch may then resume the operation).
  uint64_t Take(const Operation& op) {
    std::lock_guard lock(mutex_);
    const uint64_t token = ++last_token_;
    in_hand_[op.id] = {op.attempts, token};
    return token;
  }
  // Ends what Take started; an attempt another decision has taken since is left.
  void Drop(const std::string& operation_id, uint64_t token) {
    std::lock_guard lock(mutex_);
    auto found = in_hand_.find(operation_id);
    if (found != in_hand_.end() && found->second.token == token) in_hand_.erase(found);
  }
  // What this process knows of `op`'s claim (DecideArrival): kEndedHere when the claim names this
  // process and the attempt it names is not in hand.
  ClaimView ViewOf(const Operation& op) const {
    if (op.fulfillment != Fulfillment::kInProgress || op.claimed_by != instance_id_) {
      return ClaimView::kLease;
    }
    std::lock_guard lock(mutex_);
    auto found = in_hand_.find(op.id);
    return found != in_hand_.end() && found->second.attempt == op.attempts ? ClaimView::kLease
                                                                           : ClaimView::kEndedHere;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return in_hand_.size();
  }

 private:
  struct InHand {
    int32_t attempt = 0;
    uint64_t token = 0;  // of the Take that put it here
  };
  const std::string instance_id_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, InHand> in_hand_;  // by operation id
  uint64_t last_token_ = 0;
};

}  // namespace agentpay
