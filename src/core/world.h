// The world as the core sees it: time and randomness are injected by the shell (DESIGN rule 1), so
// the same code runs under the real clock and under a simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace agentpay {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock Unix time in milliseconds.
  virtual int64_t NowMs() = 0;
};

// Waiting, as the request pipeline sees it: a clock for durations and deadlines, and one-shot
// timers. The shell passes real ones (http/timers.h); a simulator passes virtual ones, so the same
// pipeline code runs under both.
class Timers {
 public:
  virtual ~Timers() = default;
  // Milliseconds on a clock that never goes back (arbitrary origin): for durations and deadlines,
  // never for what is stored.
  virtual int64_t MonotonicMs() = 0;
  // Runs `fn` once, at least `delay_ms` (>= 0) from now, on one of the timers' threads; `fn` must
  // not block. Timers destroyed before that drop `fn` without running it.
  virtual void After(int64_t delay_ms, std::function<void()> fn) = 0;
};

// Work that may block (admin calls, views, the re-reads of attached duplicates), run off the
// caller's thread: a pool of threads in the shell (http/worker_pool.h), the simulator's own queue
// under simulation.
class Executor {
 public:
  virtual ~Executor() = default;
  // False (and the task dropped) when it cannot be taken now: the caller answers 503.
  virtual bool TrySubmit(std::function<void()> task) = 0;
};

class Random {
 public:
  virtual ~Random() = default;
  // Fills out[0..size) with unpredictable bytes.
  virtual void Fill(unsigned char* out, size_t size) = 0;
};

// Lower-case hex of `size` random bytes.
std::string RandomHex(Random& random, size_t size);

// Identifiers with at least 128 random bits, URL-safe (CONTRACT §1).
// "op_" + 12 hex digits of the creation time + 32 random hex digits: unguessable, and ordered by
// time so that new rows append to the store's indexes instead of landing on random pages.
std::string NewOperationId(Random& random, int64_t now_ms);
std::string NewAccountId(Random& random);    // "acct_" + 24 hex
std::string NewApiKey(Random& random);       // "ak_" + 64 hex (256 bits)

}  // namespace agentpay
