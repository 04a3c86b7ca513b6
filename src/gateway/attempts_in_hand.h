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

  // `op` as its claiming decision wrote it (its id and attempt number).
  void Take(const Operation& op) {
    std::lock_guard lock(mutex_);
    in_hand_[op.id] = op.attempts;
  }
  // Ends what Take started; an attempt no longer in hand (a later one took its place) is left.
  void Drop(const Operation& op) {
    std::lock_guard lock(mutex_);
    auto found = in_hand_.find(op.id);
    if (found != in_hand_.end() && found->second == op.attempts) in_hand_.erase(found);
  }
  // What this process knows of `op`'s claim (DecideArrival): kEndedHere when the claim names this
  // process and the attempt it names is not in hand.
  ClaimView ViewOf(const Operation& op) const {
    if (op.fulfillment != Fulfillment::kInProgress || op.claimed_by != instance_id_) {
      return ClaimView::kLease;
    }
    std::lock_guard lock(mutex_);
    auto found = in_hand_.find(op.id);
    return found != in_hand_.end() && found->second == op.attempts ? ClaimView::kLease
                                                                   : ClaimView::kEndedHere;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return in_hand_.size();
  }

 private:
  const std::string instance_id_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, int32_t> in_hand_;  // operation id -> attempt number
};

}  // namespace agentpay
