// See event_threads.h.
#include "core/event_threads.h"

#include <cstdio>
#include <cstdlib>

namespace agentpay {

namespace {
thread_local const char* event_thread_name = nullptr;
}  // namespace

void MarkEventThread(const char* name) { event_thread_name = name; }

const char* EventThreadName() { return event_thread_name; }

void AssertMayBlock(const char* call) {
  if (event_thread_name == nullptr) return;
  std::fprintf(stderr, "agentpay: %s would wait on the event thread \"%s\"; aborting\n", call,
               event_thread_name);
  std::abort();
}

}  // namespace agentpay
