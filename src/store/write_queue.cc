// See write_queue.h.
#include "store/write_queue.h"

#include <exception>

namespace agentpay {

void WriteQueue::Push(TransactionFn fn, WriteDone done) {
  auto job = std::make_unique<QueuedDecision>(QueuedDecision{std::move(fn), std::move(done)});
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() < options_.max_queued_writes) queue_.push_back(std::move(job));
  }
  if (job) {  // not queued
    job->done(
        Status::Error(ErrorCode::kStoreOverloaded, "too many decisions waiting for the store"));
    return;
  }
  ready_.notify_one();
}

void WriteQueue::Serve(
    const std::function<void(std::vector<std::unique_ptr<QueuedDecision>>&)>& commit,
    const Ahead* ahead) {
  for (;;) {
    const bool holding = ahead != nullptr && ahead->holding();
    auto batch = holding ? TakeBatchWithin(ahead->linger) : TakeBatch();
    if (batch.empty()) {
      if (!holding) return;
      ahead->let_go();  // nothing came, or the store stops: let go, then wait as usual
      continue;
    }
    commit(batch);
  }
}

std::vector<std::unique_ptr<QueuedDecision>> WriteQueue::TakeBatch() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
  return TakeQueued(options_.max_batch);
}

std::vector<std::unique_ptr<QueuedDecision>> WriteQueue::TakeBatchWithin(
    std::chrono::microseconds wait) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, wait, [this] { return stopping_ || !queue_.empty(); });
  return TakeQueued(options_.max_batch);
}

std::vector<std::unique_ptr<QueuedDecision>> WriteQueue::TakeWaiting(size_t taken) {
  std::lock_guard lock(mutex_);
  return TakeQueued(taken < options_.max_batch ? options_.max_batch - taken : 0);
}

std::vector<std::unique_ptr<QueuedDecision>> WriteQueue::TakeQueued(size_t room) {
  std::vector<std::unique_ptr<QueuedDecision>> batch;
  while (!queue_.empty() && batch.size() < room) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void WriteQueue::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
}

size_t WriteQueue::depth() {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

Status RunDecision(const TransactionFn& fn, Transaction& tx) {
  try {
    return fn(tx);
  } catch (const std::exception& error) {
    return Status::Error(ErrorCode::kInternalError, error.what());
  }
}

}  // namespace agentpay
