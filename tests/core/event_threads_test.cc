// The event-thread rule's one enforcement point (core/event_threads.h).
#include "core/event_threads.h"

#include <gtest/gtest.h>

#include <thread>

namespace agentpay {
namespace {

TEST(EventThreads, AThreadMayBlockUntilItMarksItself) {
  EXPECT_EQ(EventThreadName(), nullptr);
  AssertMayBlock("nothing");  // returns
  const char* seen = "unset";
  std::thread marked([&seen] {
    MarkEventThread("http-io");
    seen = EventThreadName();
  });
  marked.join();
  EXPECT_STREQ(seen, "http-io");
  EXPECT_EQ(EventThreadName(), nullptr);  // the mark is the thread's own
}

TEST(EventThreads, AWaitOnAnEventThreadAbortsNamingTheCallAndTheThread) {
  EXPECT_DEATH(
      {
        MarkEventThread("upstream-client");
        AssertMayBlock("SendHttp");
      },
      "SendHttp would wait on the event thread \"upstream-client\"");
}

}  // namespace
}  // namespace agentpay
