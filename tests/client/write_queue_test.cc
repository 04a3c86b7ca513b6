// The budget file's write queue (src/client/write_queue.h) with real processes: a waiter that gives
// up says how many writers are ahead of it, and a writer killed while it holds its turn does not
// hold up the one behind it.
#include "client/write_queue.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace agentpay::client {
namespace {

class WriteQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/agentpay-queue-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/budget.db";
  }
  void TearDown() override {
    if (holder_ > 0) {
      ::kill(holder_, SIGKILL);
      ::waitpid(holder_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  // Forks a process that takes the first turn and keeps it until killed; returns once it has it.
  void HoldTheFirstTurn() {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    holder_ = fork();
    ASSERT_GE(holder_, 0);
    if (holder_ == 0) {
      ::close(ready[0]);
      auto queue = WriteQueue::Open(path_);
      if (!queue.ok()) _exit(1);
      auto turn = (*queue)->Wait(1000);
      if (!turn.ok()) _exit(1);
      (void)!::write(ready[1], "h", 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the holder could not take its turn";
    ::close(ready[0]);
  }

  std::string dir_, path_;
  pid_t holder_ = -1;
};

TEST_F(WriteQueueTest, AWaiterThatGivesUpSaysHowManyWritersAreAhead) {
  HoldTheFirstTurn();
  auto queue = WriteQueue::Open(path_);
  ASSERT_TRUE(queue.ok());
  auto turn = (*queue)->Wait(200);
  ASSERT_FALSE(turn.ok());
  EXPECT_EQ(turn.status().code(), "store_error");
  EXPECT_EQ(turn.status().message(), "database is locked: 1 writer(s) still ahead after 200 ms");
}

// The turn is a lock that the kernel drops when its process ends, however it ends: a `pay` killed
// in the middle of its transaction leaves no turn behind that the others would wait for.
TEST_F(WriteQueueTest, ATurnEndsWithItsProcess) {
  HoldTheFirstTurn();
  ASSERT_EQ(::kill(holder_, SIGKILL), 0);
  ASSERT_EQ(::waitpid(holder_, nullptr, 0), holder_);
  holder_ = -1;
  auto queue = WriteQueue::Open(path_);
  ASSERT_TRUE(queue.ok());
  auto turn = (*queue)->Wait(10000);  // the second ticket: it waits for the killed holder's turn
  EXPECT_TRUE(turn.ok()) << turn.status().ToString();
}

}  // namespace
}  // namespace agentpay::client
