// Attached duplicates; see attachments.h. A waiter is answered once, under its own mutex: a check
// that finds it answered returns without touching anything else, so a timer or a re-read that
// fires after the answer (and after the gateway is gone) is harmless.
#include "gateway/attachments.h"

#include <algorithm>

#include "core/check.h"
#include "gateway/answers.h"

namespace agentpay {

namespace {
constexpr int64_t kRecheckMs = 100;
}  // namespace

struct Attachments::Waiter {
  Operation op;
  AnswerWhenDone answer_when_done;
  Respond respond;
  AnswerStillPending still_pending;  // null: 202 operation_in_progress
  int64_t deadline_ms = 0;
  std::mutex mutex;
  bool answered = false;  // guarded by mutex
};

namespace {

HttpResponse StillPending(const AnswerStillPending& still_pending, const Operation& op,
                          const std::string& detail) {
  if (still_pending) return still_pending(op, detail);
  return PendingAnswer(op, 202, ProblemCode::kOperationInProgress, detail, true);
}

}  // namespace

Attachments::Attachments(Store& store, Timers& timers, Executor& readers, Metrics& metrics,
                         int64_t wait_ms)
    : store_(store), timers_(timers), readers_(readers), metrics_(metrics), wait_ms_(wait_ms) {}

void Attachments::Attach(const Operation& op, AnswerWhenDone answer_when_done, Respond respond,
                         AnswerStillPending still_pending) {
  auto waiter = std::make_shared<Waiter>();
  waiter->op = op;
  waiter->answer_when_done = std::move(answer_when_done);
  waiter->respond = std::move(respond);
  waiter->still_pending = std::move(still_pending);
  waiter->deadline_ms = timers_.MonotonicMs() + wait_ms_;
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      return waiter->respond(StillPending(waiter->still_pending, op,
                                          "the gateway is shutting down; poll the operation"));
    }
    auto& list = waiting_[op.id];
    std::erase_if(list, [](const std::weak_ptr<Waiter>& w) { return w.expired(); });
    list.push_back(waiter);
  }
  std::lock_guard lock(waiter->mutex);
  Submit(waiter);
}

void Attachments::Completed(const std::string& operation_id) {
  std::vector<std::shared_ptr<Waiter>> woken;
  {
    std::lock_guard lock(mutex_);
    auto found = waiting_.find(operation_id);
    if (found == waiting_.end()) return;
    for (const auto& weak : found->second) {
      if (auto waiter = weak.lock()) woken.push_back(std::move(waiter));
    }
  }
  for (const auto& waiter : woken) {
    std::lock_guard lock(waiter->mutex);
    if (!waiter->answered) Submit(waiter);
  }
}

void Attachments::Close() {
  std::vector<std::shared_ptr<Waiter>> left;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (auto& [id, list] : waiting_) {
      for (const auto& weak : list) {
        if (auto waiter = weak.lock()) left.push_back(std::move(waiter));
      }
    }
    waiting_.clear();
  }
  for (const auto& waiter : left) {
    std::lock_guard lock(waiter->mutex);
    if (waiter->answered) continue;
    waiter->answered = true;
    waiter->respond(StillPending(waiter->still_pending, waiter->op,
                                 "the gateway is shutting down; poll the operation"));
  }
}

// Precondition: waiter->mutex held and not answered.
void Attachments::Submit(const std::shared_ptr<Waiter>& waiter) {
  if (readers_.TrySubmit([this, waiter] { Check(waiter); })) return;
  // No reader free to look: the caller polls instead.
  waiter->answered = true;
  Forget(*waiter);
  waiter->respond(StillPending(waiter->still_pending, waiter->op,
                               "the same request is still in flight; poll the operation"));
}

void Attachments::Schedule(const std::shared_ptr<Waiter>& waiter, int64_t delay_ms) {
  timers_.After(delay_ms, [this, waiter] {
    std::lock_guard lock(waiter->mutex);
    if (!waiter->answered) Submit(waiter);
  });
}

void Attachments::Check(const std::shared_ptr<Waiter>& waiter) {
  std::lock_guard lock(waiter->mutex);
  if (waiter->answered) return;
  std::optional<Operation> current;
  Status status = store_.Read([&](Transaction& tx) {
    auto found = tx.FindOperation(waiter->op.id);
    if (!found.ok()) return found.status();
    current = std::move(*found);
    return Status::Ok();
  });
  std::optional<HttpResponse> answer;
  if (!status.ok()) {
    answer = StoreProblem(status);
  } else {
    AGENTPAY_CHECK(current.has_value());
    answer = waiter->answer_when_done(*current);
  }
  const int64_t now = timers_.MonotonicMs();
  if (!answer && now >= waiter->deadline_ms) {
    metrics_.CountAttachTimeout();
    answer = StillPending(waiter->still_pending, current ? *current : waiter->op,
                          "the same request is still in flight; poll the operation or retry later");
  }
  if (!answer) {
    // The next look: a completion in this process wakes it earlier.
    Schedule(waiter, std::min(kRecheckMs, waiter->deadline_ms - now));
    return;
  }
  waiter->answered = true;
  Forget(*waiter);
  waiter->respond(std::move(*answer));
}

void Attachments::Forget(const Waiter& waiter) {
  std::lock_guard lock(mutex_);
  auto found = waiting_.find(waiter.op.id);
  if (found == waiting_.end()) return;
  std::erase_if(found->second, [&](const std::weak_ptr<Waiter>& w) {
    auto held = w.lock();
    return !held || held.get() == &waiter;
  });
  if (found->second.empty()) waiting_.erase(found);
}

}  // namespace agentpay
