// See sim_command.h. Every value is taken as text and parsed by src/sim, so that the CLI and
// GET /v1/sim accept exactly the same values and a bad one exits 2 with the model's own message.
#include "cli/sim_command.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/progress.h"
#include "cli/sim_http.h"
#include "cli/swarm_command.h"
#include "sim/model_format.h"
#include "sim/sweep.h"

namespace agentpay {
namespace {

struct SimOptions {
  std::map<std::string, std::string, std::less<>> values;  // by snake_case parameter name
  std::map<std::string, CLI::Option*, std::less<>> flags;
  bool jitter = false;
  CLI::Option* jitter_flag = nullptr;
  std::string format;
  std::string sweep;
  std::string seed = "1";
  CLI::Option* seed_flag = nullptr;
  bool serve = false;
  std::string listen = "127.0.0.1:8404";
};

std::string FlagOf(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

bool Given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

int Usage(const std::string& message) {
  std::fprintf(stderr, "agentpay sim: %s\n", message.c_str());
  return 2;
}

// The model names parameters in snake_case; a person at the shell typed a flag.
std::string InFlagTerms(const std::string& message) {
  for (std::string_view name : sim::kSimParamNames) {
    if (message.rfind(name, 0) == 0 && message.size() > name.size() &&
        message[name.size()] == ' ') {
      return FlagOf(name) + message.substr(name.size());
    }
  }
  return message;
}

std::optional<uint64_t> ParseCount(const std::string& text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Text when a person reads stdout, JSON when a program does, unless --format says; nullopt when
// --format names neither.
std::optional<bool> WantJson(const SimOptions& options) {
  if (options.format.empty()) return isatty(STDOUT_FILENO) == 0;
  if (options.format == "json") return true;
  if (options.format == "text") return false;
  return std::nullopt;
}

int RunSweep(const SimOptions& options, bool json) {
  for (const auto& [name, flag] : options.flags) {
    if (Given(flag))
      return Usage("--sweep draws every model parameter itself; drop " + FlagOf(name));
  }
  if (Given(options.jitter_flag))
    return Usage("--sweep draws every model parameter itself; drop --jitter");
  const std::optional<uint64_t> parsed_runs = ParseCount(options.sweep);
  if (!parsed_runs || *parsed_runs < 1 || *parsed_runs > sim::kMaxSweepRuns) {
    return Usage("--sweep must be a number of runs between 1 and " +
                 std::to_string(sim::kMaxSweepRuns) + ", got '" + options.sweep + "'");
  }
  const std::optional<uint64_t> parsed_seed = ParseCount(options.seed);
  if (!parsed_seed) {
    return Usage("--seed must be a whole number between 0 and 2^64-1, got '" + options.seed + "'");
  }
  const uint64_t runs = *parsed_runs;
  const uint64_t seed = *parsed_seed;
  std::function<void(uint64_t)> progress;
  if (isatty(STDERR_FILENO) != 0) {
    progress = [runs](uint64_t done) { DrawProgress(done, runs, "runs"); };
  }
  sim::SweepTable table = sim::RunSweep(runs, seed, progress, runs / 100 > 0 ? runs / 100 : 1);
  std::string out =
      json ? sim::SweepTableToJson(table).dump(2) + "\n" : sim::SweepTableToText(table);
  std::fputs(out.c_str(), stdout);
  return 0;
}

int RunOnce(const SimOptions& options, bool json) {
  if (Given(options.seed_flag)) return Usage("--seed goes with --sweep");
  auto lookup = [&options](std::string_view name) -> std::optional<std::string> {
    if (name == "jitter")
      return Given(options.jitter_flag) ? std::optional<std::string>("on") : std::nullopt;
    auto flag = options.flags.find(name);
    if (flag == options.flags.end() || !Given(flag->second)) return std::nullopt;
    return options.values.find(name)->second;
  };
  auto params = sim::ParseSimParams(lookup);
  if (!params.ok()) return Usage(InFlagTerms(params.status().message()));
  auto run = sim::Simulate(*params);
  if (!run.ok()) return Usage(InFlagTerms(run.status().message()));
  std::string out = json ? sim::SimRunToJson(*run).dump(2) + "\n" : sim::SimRunToText(*run);
  std::fputs(out.c_str(), stdout);
  return 0;
}

void AddModelFlags(CLI::App& sim, SimOptions& options) {
  const sim::SimParams defaults;
  auto add = [&](std::string_view name, std::string initial, const std::string& help) {
    std::string& value = options.values[std::string(name)] = std::move(initial);
    std::string type = name == "fault"         ? "MODE"
                       : name == "dedup"       ? "on|off"
                       : name == "retry_key"   ? "stable|new"
                       : name.ends_with("_ms") ? "MS"
                                               : "N";
    options.flags[std::string(name)] =
        sim.add_option(FlagOf(name), value, help)->type_name(type)->capture_default_str();
  };
  add("fault", std::string(sim::FaultName(defaults.fault)),
      "none, lost_response (the responses of the first commit are lost), transient_503 (attempt 1 "
      "gets 503) or rejected_400 (every attempt gets 400)");
  add("service_ms", std::to_string(defaults.service_ms), "server execution time, ms (0-86400000)");
  add("timeout_ms", std::to_string(defaults.timeout_ms),
      "client wait per attempt, ms (1-86400000)");
  add("max_attempts", std::to_string(defaults.max_attempts),
      "total attempts, first included (1-100)");
  add("initial_delay_ms", std::to_string(defaults.initial_delay_ms),
      "wait after the first retryable failure, ms, doubled per attempt up to 8000 (0-86400000)");
  options.jitter_flag =
      sim.add_flag("--jitter", options.jitter,
                   "scale each delay by the fixed sequence 50,100,25,75,10,90,40,60 %");
  add("dedup", defaults.dedup ? "on" : "off", "on or off: the server deduplicates operation keys");
  add("retry_key", std::string(sim::RetryKeyName(defaults.retry_key)),
      "stable (one key for all attempts) or new (a fresh key per attempt)");
  add("retention_ms", std::to_string(defaults.retention_ms),
      "how long a committed result is kept after its commit, ms (0-86400000)");
}

}  // namespace

std::function<int()> AddSimCommand(CLI::App& sim) {
  auto options = std::make_shared<SimOptions>();
  sim.footer(
      "One client intends one effect; the model follows it across attempts, timeouts, retries, "
      "late "
      "responses, deduplication and server commits (integer ms, deterministic).");
  AddModelFlags(sim, *options);
  sim.add_option("--format", options->format,
                 "json or text (default: text when stdout is a terminal, else json)")
      ->type_name("json|text");
  sim.add_option(
         "--sweep", options->sweep,
         "run N parameter sets drawn from --seed (1-1000000000) and print outcomes by policy "
         "(dedup x retry key x retention band); takes no model flags")
      ->type_name("N");
  options->seed_flag =
      sim.add_option("--seed", options->seed, "seed of --sweep (0-18446744073709551615)")
          ->type_name("S")
          ->capture_default_str();
  sim.add_flag("--serve", options->serve, "serve GET /v1/sim over HTTP instead of running once");
  sim.add_option("--listen", options->listen, "HOST:PORT for --serve")->capture_default_str();
  CLI::App* swarm = sim.add_subcommand(
      "swarm", "run the real gateway under a deterministic simulator, seed after seed");
  auto run_swarm = AddSwarmCommand(*swarm);
  return [options, &sim, swarm, run_swarm]() {
    if (swarm->parsed()) return run_swarm();
    if (options->serve) return RunSimServer(options->listen);
    const std::optional<bool> json = WantJson(*options);
    if (!json) return Usage("--format must be json or text, got '" + options->format + "'");
    if (sim.count("--sweep") > 0) return RunSweep(*options, *json);
    return RunOnce(*options, *json);
  };
}

}  // namespace agentpay
