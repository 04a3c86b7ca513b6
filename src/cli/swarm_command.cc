// See swarm_command.h.
#include "cli/swarm_command.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/progress.h"
#include "core/mutants.h"
#include "sim/swarm.h"

namespace agentpay {
namespace {

struct SwarmOptions {
  uint64_t seeds = 100;
  uint64_t seed_start = 1;
  std::vector<std::string> trace;  // SEED FILE
  std::string part = "all";        // sim::Part
  int mutant = 0;  // core/mutants.h; settable only in a mutant build
};

constexpr uint64_t kMaxSeeds = 1'000'000'000;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void PrintViolation(uint64_t seed, sim::Part part, const sim::SeedOutcome& outcome) {
  const sim::SwarmViolation& v = *outcome.violation;
  std::printf("SEED=%" PRIu64 " VIOLATION at step %" PRIu64 ": %s: %s\n", seed, v.step,
              v.invariant.c_str(), v.detail.c_str());
  std::printf("  mix: %s\n", outcome.mix.c_str());
  std::string mutant;
#ifdef AGENTPAY_SIM_MUTANTS
  for (int n = 1; n <= kMutantCount; ++n) {
    if (MutantActive(static_cast<Mutant>(n))) mutant = " --mutant " + std::to_string(n);
  }
#endif
  const std::string part_flag =
      part == sim::Part::kAll ? "" : " --part " + std::string(sim::PartName(part));
  std::printf("  again: agentpay sim swarm --seeds 1 --seed-start %" PRIu64 "%s%s\n", seed,
              part_flag.c_str(), mutant.c_str());
}

// The faults the seeds drew, kind by kind, one line per part of the world.
void PrintFaults(const sim::FaultCounts& faults) {
  using sim::FaultKind;
  struct Group {
    const char* name;
    FaultKind first, last;
  };
  const Group groups[] = {{"network", FaultKind::kLostRequest, FaultKind::kDuplicate},
                          {"gateway", FaultKind::kCrash, FaultKind::kClockStep},
                          {"seller", FaultKind::kSeller4xx, FaultKind::kSellerBroken},
                          {"chain", FaultKind::kRpcUnreachable, FaultKind::kNonceGapRefusal}};
  for (const Group& group : groups) {
    std::string line;
    for (auto kind = static_cast<size_t>(group.first); kind <= static_cast<size_t>(group.last);
         ++kind) {
      if (!line.empty()) line += ", ";
      line += std::to_string(faults.by_kind[kind]) + " " +
              std::string(sim::FaultKindName(static_cast<FaultKind>(kind)));
    }
    std::printf("  faults, %s: %s\n", group.name, line.c_str());
  }
}

// --trace SEED FILE: one seed, written in the inspector's trace format.
int RunTrace(const SwarmOptions& options, sim::Part part) {
  const std::string& text = options.trace[0];
  uint64_t seed = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    std::fprintf(
        stderr,
        "agentpay sim swarm: --trace SEED FILE: SEED must be a whole number 0-2^64-1, got '%s'\n",
        text.c_str());
    return 2;
  }
  const std::string& path = options.trace[1];
  std::printf("SEED=%" PRIu64 "\n", seed);
  sim::TracedSeed traced = sim::RunSeedTraced(seed, part);
  const size_t events = traced.trace["events"].size();
  if (events > sim::kMaxTraceEvents) {
    std::fprintf(stderr,
                 "agentpay sim swarm: seed %" PRIu64
                 "'s trace has %zu events, more than the %zu "
                 "the inspector opens; nothing written\n",
                 seed, events, sim::kMaxTraceEvents);
    return 2;
  }
  const std::string body =
      traced.trace.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::FILE* out = std::fopen(path.c_str(), "w");
  bool written = out != nullptr;
  if (written) {
    written = std::fwrite(body.data(), 1, body.size(), out) == body.size();
    written = std::fclose(out) == 0 && written;
  }
  if (!written) {
    std::fprintf(stderr, "agentpay sim swarm: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::printf("wrote %zu events of seed %" PRIu64
              " to %s (the inspector opens it: /inspector/, \"Open a saved trace\")\n",
              events, seed, path.c_str());
  if (traced.outcome.violation) {
    PrintViolation(seed, part, traced.outcome);
    return 1;
  }
  std::printf("seed %" PRIu64 " held every invariant: %" PRIu64 " steps\n", seed,
              traced.outcome.steps);
  return 0;
}

int RunSwarm(const SwarmOptions& options) {
#ifdef AGENTPAY_SIM_MUTANTS
  SetActiveMutant(static_cast<Mutant>(options.mutant));
  if (options.mutant != 0) std::printf("MUTANT=%d\n", options.mutant);
#endif
  const std::optional<sim::Part> part = sim::ParsePart(options.part);
  if (!part) {
    std::fprintf(stderr,
                 "agentpay sim swarm: --part must be wallet, x402, budget or all, got '%s'\n",
                 options.part.c_str());
    return 2;
  }
  if (!options.trace.empty()) return RunTrace(options, *part);
  if (options.seeds < 1 || options.seeds > kMaxSeeds) {
    std::fprintf(stderr, "agentpay sim swarm: --seeds must be 1-%" PRIu64 "\n", kMaxSeeds);
    return 2;
  }
  if (options.seed_start > UINT64_MAX - (options.seeds - 1)) {
    std::fprintf(stderr, "agentpay sim swarm: --seed-start + --seeds passes 2^64\n");
    return 2;
  }
  const uint64_t last = options.seed_start + (options.seeds - 1);
  std::printf("SEED=%" PRIu64 "..%" PRIu64 "\n", options.seed_start, last);
  if (*part != sim::Part::kAll) std::printf("PART=%s\n", options.part.c_str());
  std::fflush(stdout);
  const bool progress = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  uint64_t steps = 0, requests = 0, answers = 0, crashes = 0, charges = 0, done = 0;
  uint64_t x402_payments = 0, reorgs = 0, dropped = 0, released = 0;
  sim::FaultCounts faults;
  uint64_t events_hash = 0xcbf29ce484222325ULL;  // FNV-1a over the seeds' own hashes, in order
  uint64_t slowest_seed = options.seed_start;
  double slowest = -1;
  double last_drawn = -1;
  for (uint64_t seed = options.seed_start;; ++seed) {
    const auto seed_start = std::chrono::steady_clock::now();
    sim::SeedOutcome outcome = sim::RunSeed(seed, *part);
    const double took = SecondsSince(seed_start);
    if (took > slowest) {
      slowest = took;
      slowest_seed = seed;
    }
    ++done;
    steps += outcome.steps;
    requests += static_cast<uint64_t>(outcome.requests);
    answers += static_cast<uint64_t>(outcome.answers);
    crashes += static_cast<uint64_t>(outcome.crashes);
    charges += static_cast<uint64_t>(outcome.charges);
    x402_payments += static_cast<uint64_t>(outcome.x402_payments);
    reorgs += static_cast<uint64_t>(outcome.reorgs);
    dropped += static_cast<uint64_t>(outcome.dropped);
    released += static_cast<uint64_t>(outcome.released);
    faults.Add(outcome.faults);
    for (int shift = 0; shift < 64; shift += 8) {
      events_hash ^= (outcome.event_hash >> shift) & 0xff;
      events_hash *= 0x100000001b3ULL;
    }
    if (outcome.violation) {
      if (progress) std::fputc('\n', stderr);
      PrintViolation(seed, *part, outcome);
      return 1;
    }
    const double elapsed = SecondsSince(start);
    if (progress && (elapsed - last_drawn >= 0.1 || seed == last)) {
      DrawProgress(done, options.seeds, "seeds");
      last_drawn = elapsed;
    }
    if (seed == last) break;
  }
  const double elapsed = SecondsSince(start);
  std::printf("%" PRIu64 " %s held every invariant in %.1f s: %.0f seeds/s, %.0f steps/s\n", done,
              done == 1 ? "seed" : "seeds", elapsed, elapsed > 0 ? done / elapsed : 0.0,
              elapsed > 0 ? steps / elapsed : 0.0);
  std::printf("  %" PRIu64 " steps, %" PRIu64 " requests, %" PRIu64 " answers, %" PRIu64
              " crashes, %" PRIu64 " operations charged\n",
              steps, requests, answers, crashes, charges);
  std::printf("  x402: %" PRIu64 " authorizations used on chain, %" PRIu64
              " reorganisations, %" PRIu64 " transactions dropped, %" PRIu64
              " budget reservations released unused\n",
              x402_payments, reorgs, dropped, released);
  PrintFaults(faults);
  std::printf("  slowest seed: %" PRIu64 " (%.0f ms)\n", slowest_seed, slowest * 1000);
  std::printf("  events hash: %016" PRIx64 " (the same seeds give the same hash)\n", events_hash);
  return 0;
}

}  // namespace

std::function<int()> AddSwarmCommand(CLI::App& swarm) {
  auto options = std::make_shared<SwarmOptions>();
  swarm.footer(
      "Each seed runs the real gateway (wallet and x402 pipelines, SQLite store code, hold "
      "sweeper, reconciler) on simulated time against simulated clients, network, seller and "
      "chain, with crashes, clock steps, lost transactions and reorganisations, and checks its "
      "invariants after every step. The same seed gives the same run.");
  CLI::Option* seeds =
      swarm.add_option("--seeds", options->seeds, "how many seeds to run (1-1000000000)")
          ->type_name("N")
          ->capture_default_str();
  CLI::Option* seed_start = swarm.add_option("--seed-start", options->seed_start, "the first seed")
                                ->type_name("S")
                                ->capture_default_str();
  swarm
      .add_option("--trace", options->trace,
                  "run seed SEED alone and write it to FILE in the inspector's trace format")
      ->expected(2)
      ->type_name("SEED FILE")
      ->excludes(seeds)
      ->excludes(seed_start);
  swarm
      .add_option("--part", options->part,
                  "which clients a seed draws: wallet, x402 (each with its own budget), budget "
                  "(crowds sharing one budget) or all")
      ->type_name("PART")
      ->capture_default_str();
#ifdef AGENTPAY_SIM_MUTANTS
  swarm
      .add_option("--mutant", options->mutant,
                  "put back a flawed approach: 1 a fresh key after a timeout, 2 a timeout taken "
                  "as success, 3 a hold or budget released on timeout, 4 retries without bound, "
                  "5 an x402 payment voided at its receipt deadline, 6 a relayer nonce taken "
                  "afresh after a restart, 7 a budget released before its authorization expired")
      ->check(CLI::Range(0, kMutantCount))
      ->type_name("N");
#endif
  return [options] { return RunSwarm(*options); };
}

}  // namespace agentpay
