// See sweep.h. One SimRun is reused across the whole sweep, without event recording, so a sweep
// allocates nothing per run.
#include "sim/sweep.h"

#include <cmath>
#include <cstdio>

#include "core/check.h"

namespace agentpay::sim {
namespace {

int64_t Draw(SplitMix64& random, const int64_t (&range)[2]) {
  return random.Uniform(range[0], range[1]);
}

size_t RowIndex(bool dedup, RetryKey key, RetentionBand band) {
  size_t key_index = key == RetryKey::kStable ? 0 : 1;
  if (!dedup) return 6 + key_index;
  return key_index * 3 + static_cast<size_t>(band);
}

void Tally(const SimRun& run, SweepRow* row) {
  const SimResult& r = run.result;
  ++row->runs;
  if (r.client_outcome == ClientOutcome::kSuccess) ++row->success;
  if (r.client_outcome == ClientOutcome::kRejected) ++row->rejected;
  if (r.effects > 1) ++row->duplicate_effects;
  if (r.client_outcome == ClientOutcome::kExhausted) {
    ++(r.effects >= 1 ? row->exhausted_with_effect : row->exhausted_without_effect);
  }
}

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

nlohmann::ordered_json RangesJson() {
  using R = SweepRanges;
  auto pair = [](const int64_t(&range)[2]) {
    return nlohmann::ordered_json::array({range[0], range[1]});
  };
  return {{"fault", {"none", "lost_response", "transient_503", "rejected_400"}},
          {"service_ms", pair(R::kServiceMs)},
          {"timeout_ms", pair(R::kTimeoutMs)},
          {"max_attempts", pair(R::kMaxAttempts)},
          {"initial_delay_ms", pair(R::kInitialDelayMs)},
          {"jitter", {false, true}},
          {"dedup", {"on", "off"}},
          {"retry_key", {"stable", "new"}},
          {"retention_ms", {0, pair(R::kShortRetentionMs), pair(R::kLongRetentionMs)}}};
}

}  // namespace

SimParams DrawSimParams(SplitMix64& random) {
  SimParams p;
  p.fault = static_cast<Fault>(random.Uniform(0, 3));
  p.service_ms = Draw(random, SweepRanges::kServiceMs);
  p.timeout_ms = Draw(random, SweepRanges::kTimeoutMs);
  p.max_attempts = static_cast<int>(Draw(random, SweepRanges::kMaxAttempts));
  p.initial_delay_ms = Draw(random, SweepRanges::kInitialDelayMs);
  p.jitter = random.Uniform(0, 1) == 1;
  p.dedup = random.Uniform(0, 1) == 1;
  p.retry_key = random.Uniform(0, 1) == 1 ? RetryKey::kNew : RetryKey::kStable;
  switch (random.Uniform(0, 2)) {
    case 0:
      p.retention_ms = 0;
      break;
    case 1:
      p.retention_ms = Draw(random, SweepRanges::kShortRetentionMs);
      break;
    default:
      p.retention_ms = Draw(random, SweepRanges::kLongRetentionMs);
      break;
  }
  return p;
}

RetentionBand RetentionBandOf(const SimRun& run) {
  if (!run.params.dedup) return RetentionBand::kIgnored;
  if (run.params.retention_ms == 0) return RetentionBand::kZero;
  // A request at t ≤ end_ms for a key committed at c ≥ 0 is replayed when t < c + retention, which
  // retention > end_ms guarantees.
  return run.params.retention_ms <= run.end_ms ? RetentionBand::kShorterThanRun
                                               : RetentionBand::kLongerThanRun;
}

std::string_view RetentionBandName(RetentionBand band) {
  switch (band) {
    case RetentionBand::kZero:
      return "zero";
    case RetentionBand::kShorterThanRun:
      return "shorter_than_run";
    case RetentionBand::kLongerThanRun:
      return "longer_than_run";
    case RetentionBand::kIgnored:
      return "ignored";
  }
  return "?";
}

SweepTable RunSweep(uint64_t runs, uint64_t seed, const std::function<void(uint64_t)>& progress,
                    uint64_t progress_every) {
  AGENTPAY_CHECK(runs <= kMaxSweepRuns);
  SweepTable table;
  table.runs = runs;
  table.seed = seed;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    SweepRow& row = table.rows[i];
    row.dedup = i < 6;
    row.retry_key = (i < 6 ? i / 3 : i - 6) == 0 ? RetryKey::kStable : RetryKey::kNew;
    row.band = i < 6 ? static_cast<RetentionBand>(i % 3) : RetentionBand::kIgnored;
  }
  SplitMix64 random(seed);
  SimRun run;
  for (uint64_t done = 1; done <= runs; ++done) {
    SimulateInto(DrawSimParams(random), EventRecording::kSkip, &run);
    const SimParams& p = run.params;
    Tally(run, &table.rows[RowIndex(p.dedup, p.retry_key, RetentionBandOf(run))]);
    if (progress_every != 0 && done % progress_every == 0 && progress) progress(done);
  }
  if (progress) progress(runs);
  return table;
}

nlohmann::ordered_json SweepTableToJson(const SweepTable& table) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const SweepRow& row : table.rows) {
    // Percentages rounded to 0.01 so that the JSON reads like the table.
    auto pct = [&](uint64_t part) { return std::round(Percent(part, row.runs) * 100) / 100; };
    rows.push_back({{"dedup", row.dedup ? "on" : "off"},
                    {"retry_key", RetryKeyName(row.retry_key)},
                    {"retention_band", RetentionBandName(row.band)},
                    {"runs", row.runs},
                    {"success", row.success},
                    {"rejected", row.rejected},
                    {"duplicate_effects", row.duplicate_effects},
                    {"exhausted_with_effect", row.exhausted_with_effect},
                    {"exhausted_without_effect", row.exhausted_without_effect},
                    {"success_pct", pct(row.success)},
                    {"rejected_pct", pct(row.rejected)},
                    {"duplicate_effects_pct", pct(row.duplicate_effects)},
                    {"exhausted_with_effect_pct", pct(row.exhausted_with_effect)},
                    {"exhausted_without_effect_pct", pct(row.exhausted_without_effect)}});
  }
  return {{"runs", table.runs}, {"seed", table.seed}, {"ranges", RangesJson()}, {"rows", rows}};
}

std::string SweepTableToText(const SweepTable& table) {
  char line[256];
  std::snprintf(line, sizeof line, "%llu runs, seed %llu\n\n",
                static_cast<unsigned long long>(table.runs),
                static_cast<unsigned long long>(table.seed));
  std::string text = line;
  std::snprintf(line, sizeof line, "%-5s  %-6s  %-16s  %10s  %8s  %8s  %10s  %14s  %14s\n", "dedup",
                "key", "retention", "runs", "success", "rejected", "duplicate", "exhausted+eff",
                "exhausted-eff");
  text += line;
  for (const SweepRow& row : table.rows) {
    std::snprintf(line, sizeof line,
                  "%-5s  %-6s  %-16s  %10llu  %7.1f%%  %7.1f%%  %9.1f%%  %13.1f%%  %13.1f%%\n",
                  row.dedup ? "on" : "off", std::string(RetryKeyName(row.retry_key)).c_str(),
                  std::string(RetentionBandName(row.band)).c_str(),
                  static_cast<unsigned long long>(row.runs), Percent(row.success, row.runs),
                  Percent(row.rejected, row.runs), Percent(row.duplicate_effects, row.runs),
                  Percent(row.exhausted_with_effect, row.runs),
                  Percent(row.exhausted_without_effect, row.runs));
    text += line;
  }
  text +=
      "\nduplicate: more than one effect for the one intended. exhausted+eff: the client gave up,\n"
      "yet an effect committed that it never heard of. exhausted-eff: gave up, nothing committed.\n"
      "retention is measured against the run's last event; it is ignored when dedup is off.\n";
  return text;
}

}  // namespace agentpay::sim
