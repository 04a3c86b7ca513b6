// The queue in which the writers of one budget file take their turns, first come first served.
// SQLite's own lock goes to whichever waiter happens to try when it comes free, so on a busy
// machine a writer could wait past any timeout while others kept cutting in (see write_queue.cc).
// The queue only orders the writers; SQLite's lock still makes each transaction safe by itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/result.h"

namespace agentpay::client {

// The queue is a file beside the budget file, PATH + kWriteQueueSuffix (mode 0600): a ticket
// counter and one bell per place in line in its first page, which every writer maps, and one lock
// per waiting writer that the kernel drops when its process ends.
inline constexpr const char* kWriteQueueSuffix = "-queue";

// The shared first page of the queue file, as every process maps it (see write_queue.cc).
struct QueuePage;

// A writer's turn, held until destroyed: every writer that came later waits for it.
class WriteTurn {
 public:
  WriteTurn(WriteTurn&& other) noexcept
      : fd_(other.fd_), page_(other.page_), ticket_(other.ticket_) {
    other.fd_ = -1;
  }
  WriteTurn(const WriteTurn&) = delete;
  WriteTurn& operator=(const WriteTurn&) = delete;
  WriteTurn& operator=(WriteTurn&&) = delete;
  // Lets the next writer go and rings its bell.
  ~WriteTurn();

 private:
  friend class WriteQueue;
  WriteTurn(int fd, QueuePage* page, int64_t ticket) : fd_(fd), page_(page), ticket_(ticket) {}
  int fd_;  // -1: nothing to let go
  QueuePage* page_;
  int64_t ticket_;
};

class WriteQueue {
 public:
  // Opens or creates the queue of the budget file at `budget_path`.
  static Result<std::unique_ptr<WriteQueue>> Open(const std::string& budget_path);
  ~WriteQueue();
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Takes a ticket and waits until the writer with the ticket before it has finished, given up
  // or ended. Waits at most `timeout_ms`; past it, error "store_error" saying how many writers
  // are still ahead, and the ticket is given up (the writers behind it go on).
  Result<WriteTurn> Wait(int64_t timeout_ms);

 private:
  WriteQueue(int fd, QueuePage* page) : fd_(fd), page_(page) {}
  Result<std::optional<int64_t>> TakeTicket(int64_t deadline_ms);
  int fd_;
  QueuePage* page_;  // the file's first page, mapped shared
};

}  // namespace agentpay::client
