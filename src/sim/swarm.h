// `agentpay sim swarm`: the real gateway (its wallet and x402 pipelines, core, the SQLite store
// code, the hold sweeper and the reconciler) run on simulated time by one seed at a time, against
// simulated clients, network, seller and chain, with crashes, and its invariants checked after
// every step (swarm_world.h and swarm_chain.h for the world).
//
// Swarm testing: each seed draws its own mix — how many clients of which kind, the rates of every
// fault — so that the runs together explore far more combinations than any one configuration.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace agentpay::sim {

// A broken invariant: which, where and why.
struct SwarmViolation {
  uint64_t step = 0;      // the step after which it was seen
  std::string invariant;  // a stable name (docs/simulation.md lists them)
  std::string detail;
};

struct SeedOutcome {
  uint64_t seed = 0;
  uint64_t steps = 0;
  int64_t simulated_ms = 0;
  // FNV-1a over everything the clients saw, in order: the same seed gives the same hash.
  uint64_t event_hash = 0;
  std::string mix;   // the seed's draw, one line
  int requests = 0;  // sent by clients (a duplicate counted once)
  int answers = 0;   // answers that reached a client
  int crashes = 0;
  int charges = 0;  // operations charged (captured, or settled on chain)
  // x402: authorizations used on chain, reorganisations and transactions the node dropped, and
  // budget reservations released once their authorization expired unused.
  int x402_payments = 0;
  int reorgs = 0;
  int dropped = 0;
  int released = 0;
  std::optional<SwarmViolation> violation;
};

// Runs one seed to its end (every client done, the books settled) or to its first violation.
SeedOutcome RunSeed(uint64_t seed);

// The inspector opens traces of at most this many events.
inline constexpr size_t kMaxTraceEvents = 10000;

struct TracedSeed {
  SeedOutcome outcome;
  // The run in the inspector's trace format ({"events": [...]}, as GET …/trace answers, plus
  // "seed", "mix" and "violation"): what each client sent and got, crashes and restarts, and every
  // operation's own trace (its detail prefixed with the operation's key), oldest first, on the
  // gateway's wall clock.
  nlohmann::json trace;
};
// RunSeed, keeping the run as a trace: the same run, event for event (the hash is the same).
TracedSeed RunSeedTraced(uint64_t seed);

}  // namespace agentpay::sim
