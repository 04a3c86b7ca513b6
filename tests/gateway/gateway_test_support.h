// Test doubles shared by the gateway tests: a clock moved by hand, deterministic randomness, and
// an upstream that answers from a script (and can hold calls until released).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "chain/devnet.h"
#include "chain/secp256k1.h"
#include "core/world.h"
#include "gateway/upstream.h"
#include "http/worker_pool.h"
#include "settlement/settler.h"

namespace agentpay::testing_support {

// A fixed test key: 0x11, zeros, then `last`.
inline chain::PrivateKey Key(uint8_t last) {
  std::array<uint8_t, 32> bytes{};
  bytes[0] = 0x11;
  bytes[31] = last;
  return chain::PrivateKey(bytes);
}

// An empty directory of the running test's own (its name and the process id), made anew.
inline std::filesystem::path FreshTestDir(std::string_view prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (std::string(prefix) + std::to_string(::getpid()) + "-" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The x402 tests' chain: the built-in devnet with the token "USD Coin", version 2, at `token`.
inline Result<std::unique_ptr<chain::Devnet>> OpenTestDevnet(Clock& clock,
                                                             const chain::Address& token,
                                                             uint64_t chain_id) {
  chain::DevnetConfig devnet;
  devnet.chain_id = chain_id;
  devnet.token = token;
  devnet.token_name = "USD Coin";
  devnet.token_version = "2";
  return chain::Devnet::Open(devnet, clock);
}

// The settler of that token on that chain.
inline SettlerConfig TestSettlerConfig(const chain::Address& token, uint64_t chain_id) {
  SettlerConfig settler;
  settler.chain_id = chain_id;
  settler.token = token;
  settler.asset_name = "USD Coin";
  settler.asset_version = "2";
  return settler;
}

class ManualClock final : public Clock {
 public:
  int64_t NowMs() override { return now_.load(); }
  void Advance(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_{1'700'000'000'000};
};

class CountingRandom final : public Random {
 public:
  void Fill(unsigned char* out, size_t size) override {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>(counter_ >> (8 * (i % 8)));
    ++counter_;
  }

 private:
  std::mutex mutex_;
  uint64_t counter_ = 1;
};

// Answers from a script; an entry may block until Release() so tests can overlap requests. Calls
// run on the upstream's own threads, as a network call would.
class ScriptedUpstream final : public Upstream {
 public:
  void CallAsync(const RouteConfig&, std::shared_ptr<const HttpRequest>,
                 const std::string& operation_id, UpstreamDone done) override {
    ASSERT_TRUE(pool_.TrySubmit([this, operation_id, done] { done(Call(operation_id)); }));
  }

  UpstreamOutcome Call(const std::string& operation_id) {
    std::unique_lock lock(mutex_);
    ++calls_;
    last_operation_ = operation_id;
    if (block_) {
      ++blocked_;
      blocked_cv_.notify_all();
      release_cv_.wait(lock, [&] { return !block_; });
    }
    UpstreamOutcome outcome;
    if (script_.empty()) {
      outcome.kind = UpstreamKind::kResponded;
      outcome.status = 200;
      outcome.content_type = "application/json";
      outcome.body = R"({"ok":true})";
    } else {
      outcome = script_.front();
      script_.pop_front();
    }
    return outcome;
  }
  void Push(UpstreamKind kind, int status = 0) {
    std::lock_guard lock(mutex_);
    UpstreamOutcome outcome;
    outcome.kind = kind;
    outcome.status = status;
    outcome.body = "status " + std::to_string(status);
    script_.push_back(outcome);
  }
  void Block() {
    std::lock_guard lock(mutex_);
    block_ = true;
  }
  void WaitBlocked(int count) {
    std::unique_lock lock(mutex_);
    blocked_cv_.wait(lock, [&] { return blocked_ >= count; });
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      block_ = false;
    }
    release_cv_.notify_all();
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  std::string last_operation() {
    std::lock_guard lock(mutex_);
    return last_operation_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable release_cv_, blocked_cv_;
  std::deque<UpstreamOutcome> script_;
  bool block_ = false;
  int blocked_ = 0;
  int calls_ = 0;
  std::string last_operation_;
  WorkerPool pool_{8, 64};  // last member: joined first, while the script is still alive
};

}  // namespace agentpay::testing_support
