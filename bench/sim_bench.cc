// Runs of the request/effect model per second on one core, in sweep mode (no event recording), next
// to two baselines measured in the same process: drawing the parameters alone, and recording
// events. Issue 6 floor: one million runs per minute. Run: taskset -c 1 build/bench/sim_bench Exit
// status 1 when sweep mode is below the floor.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "sim/model.h"
#include "sim/sweep.h"

namespace {

using agentpay::sim::DrawSimParams;
using agentpay::sim::EventRecording;
using agentpay::sim::SimParams;
using agentpay::sim::SimRun;
using agentpay::sim::SplitMix64;

constexpr double kFloorRunsPerMinute = 1e6;

void SetRates(benchmark::State& state) { state.SetItemsProcessed(state.iterations()); }

// The console report, plus runs per second of CPU time per benchmark for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.cpu_accumulated_time > 0) {
        runs_per_second_[run.benchmark_name()] =
            static_cast<double>(run.iterations) / run.cpu_accumulated_time;
      }
    }
  }
  const std::map<std::string, double>& runs_per_second() const { return runs_per_second_; }

 private:
  std::map<std::string, double> runs_per_second_;
};

// Baseline: the cost of drawing parameters, so that the model's own share can be read off.
void BM_DrawParamsOnly(benchmark::State& state) {
  SplitMix64 random(1);
  for (auto _ : state) {
    SimParams p = DrawSimParams(random);
    benchmark::DoNotOptimize(p);
  }
  SetRates(state);
}
BENCHMARK(BM_DrawParamsOnly);

// Sweep mode, as `agentpay sim --sweep` runs it.
void BM_SweepRun(benchmark::State& state) {
  SplitMix64 random(1);
  SimRun run;
  for (auto _ : state) {
    agentpay::sim::SimulateInto(DrawSimParams(random), EventRecording::kSkip, &run);
    benchmark::DoNotOptimize(run.result);
  }
  SetRates(state);
}
BENCHMARK(BM_SweepRun);

// Baseline: the same runs recording every event (the reused vector keeps its capacity).
void BM_RecordedRun(benchmark::State& state) {
  SplitMix64 random(1);
  SimRun run;
  for (auto _ : state) {
    agentpay::sim::SimulateInto(DrawSimParams(random), EventRecording::kRecord, &run);
    benchmark::DoNotOptimize(run.events.data());
  }
  SetRates(state);
}
BENCHMARK(BM_RecordedRun);

// The worst case the CLI allows per run: 100 attempts, each a new operation.
void BM_HundredAttemptRun(benchmark::State& state) {
  SimParams p{
      .service_ms = 0, .timeout_ms = 1, .max_attempts = 100, .initial_delay_ms = 0, .dedup = false};
  SimRun run;
  for (auto _ : state) {
    agentpay::sim::SimulateInto(p, EventRecording::kSkip, &run);
    benchmark::DoNotOptimize(run.result);
  }
  SetRates(state);
}
BENCHMARK(BM_HundredAttemptRun);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::printf("\n%-22s %14s %16s\n", "model runs, one core", "runs/s", "runs/min");
  for (const auto& [name, per_second] : reporter.runs_per_second()) {
    std::printf("%-22s %14.0f %16.0f\n", name.c_str(), per_second, per_second * 60);
  }
  auto sweep = reporter.runs_per_second().find("BM_SweepRun");
  if (sweep == reporter.runs_per_second().end()) return 0;  // filtered out
  double per_minute = sweep->second * 60;
  std::printf("sweep mode: %.0f runs/min, %.0fx the floor of %.0f runs/min: %s\n", per_minute,
              per_minute / kFloorRunsPerMinute, kFloorRunsPerMinute,
              per_minute >= kFloorRunsPerMinute ? "PASS" : "FAIL");
  return per_minute >= kFloorRunsPerMinute ? 0 : 1;
}
