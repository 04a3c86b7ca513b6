// Sweeps of the request/effect model: N parameter sets drawn deterministically from a seed, and the
// outcomes tallied by policy (dedup × retry key × retention band) for `agentpay sim --sweep N`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sim/model.h"

namespace agentpay::sim {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and the same numbers on every platform, so a
// seed names a sweep for good.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [low, high] by multiply-shift (Lemire); the bias is below 2^-40 for these ranges.
  int64_t Uniform(int64_t low, int64_t high) {
    uint64_t span = static_cast<uint64_t>(high - low) + 1;
    return low + static_cast<int64_t>((static_cast<unsigned __int128>(Next()) * span) >> 64);
  }

 private:
  uint64_t state_;
};

// The ranges a sweep draws from, uniformly and independently; they bracket the guided experiments.
struct SweepRanges {
  static constexpr int64_t kServiceMs[2] = {0, 10000};
  static constexpr int64_t kTimeoutMs[2] = {1, 5000};
  static constexpr int64_t kMaxAttempts[2] = {1, 8};
  static constexpr int64_t kInitialDelayMs[2] = {0, 4000};
  // retention_ms: a third 0, a third in kShortRetentionMs, a third in kLongRetentionMs.
  static constexpr int64_t kShortRetentionMs[2] = {1, 20000};
  static constexpr int64_t kLongRetentionMs[2] = {20001, kMaxTimeMs};
  // fault: each of the four with probability 1/4; jitter, dedup, retry_key: each value 1/2.
};

SimParams DrawSimParams(SplitMix64& random);

// Retention measured against the run it governed (its last event, end_ms): kZero forgets at once,
// kShorterThanRun (0 < retention ≤ end_ms) may forget within the run, kLongerThanRun cannot.
// kIgnored when dedup is off (MODEL.md: retention is then ignored).
enum class RetentionBand : uint8_t { kZero, kShorterThanRun, kLongerThanRun, kIgnored };
RetentionBand RetentionBandOf(const SimRun& run);
std::string_view RetentionBandName(RetentionBand band);

struct SweepRow {
  bool dedup = true;
  RetryKey retry_key = RetryKey::kStable;
  RetentionBand band = RetentionBand::kZero;
  uint64_t runs = 0;
  uint64_t success = 0;
  uint64_t rejected = 0;
  uint64_t duplicate_effects = 0;  // effects > 1
  uint64_t exhausted_with_effect =
      0;  // exhausted, effects ≥ 1: an effect the client never heard of
  uint64_t exhausted_without_effect = 0;  // exhausted, effects = 0
};

struct SweepTable {
  uint64_t runs = 0;
  uint64_t seed = 0;
  // Fixed order: dedup on × {stable, new} × {zero, shorter, longer}, then dedup off × {stable,
  // new}.
  std::array<SweepRow, 8> rows;
};

inline constexpr uint64_t kMaxSweepRuns = 1'000'000'000;

// Runs `runs` (≤ kMaxSweepRuns) parameter sets drawn from `seed`; calls progress(done) every
// `progress_every` runs (0: never) and once at the end.
SweepTable RunSweep(uint64_t runs, uint64_t seed, const std::function<void(uint64_t)>& progress,
                    uint64_t progress_every);

// {runs, seed, ranges, rows: [{dedup, retry_key, retention_band, runs, success, rejected,
//  duplicate_effects, exhausted_with_effect, exhausted_without_effect, *_pct}]}
nlohmann::ordered_json SweepTableToJson(const SweepTable& table);
std::string SweepTableToText(const SweepTable& table);

}  // namespace agentpay::sim
