// `agentpay sim swarm`: the real gateway (its wallet and x402 pipelines, core, the SQLite store
// code, the hold sweeper and the reconciler) run on simulated time by one seed at a time, against
// simulated clients, network, seller and chain, with crashes, and its invariants checked after
// every step (swarm_world.h and swarm_chain.h for the world).
//
// Swarm testing: each seed draws its own mix — how many clients of which kind, the rates of every
// fault — so that the runs together explore far more combinations than any one configuration.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace agentpay::sim {

// Which part of the product a seed's mix exercises (`--part`): every kind of client (kAll, the
// draw of a seed as it always was), wallet clients only, x402 clients each with its own budget, or
// crowds of x402 clients sharing one budget.
enum class Part { kAll, kWallet, kX402, kBudget };
std::string_view PartName(Part part);
std::optional<Part> ParsePart(std::string_view name);

// The faults a seed drew, by kind: what happened, not the rates of the mix.
enum class FaultKind {
  // the network
  kLostRequest,
  kLostAnswer,
  kDuplicate,
  // the gateway's process and machine
  kCrash,
  kWriteCut,  // a store write not yet acknowledged when its process died
  kClockStep,
  // the seller
  kSeller4xx,
  kSeller5xx,
  kSellerSlow,
  kSellerHang,
  kSellerDrop,    // did the work, then dropped the connection
  kSellerBroken,  // an operation answered 503 for good
  // the chain
  kRpcUnreachable,
  kRpcTimeout,
  kRpcHang,  // a chain task held until the RPC timeout
  kTxDropped,
  kReorg,
  kLateReceipt,      // a transaction the node accepted in a seed whose blocks come late
  kFeeSpike,         // a spell of base fees above the relayer's cap
  kNonceGapRefusal,  // a transaction the node refused for a gap before its nonce
};
inline constexpr size_t kFaultKinds = static_cast<size_t>(FaultKind::kNonceGapRefusal) + 1;
std::string_view FaultKindName(FaultKind kind);

struct FaultCounts {
  std::array<int64_t, kFaultKinds> by_kind{};
  void Count(FaultKind kind, int64_t n = 1) { by_kind[static_cast<size_t>(kind)] += n; }
  int64_t operator[](FaultKind kind) const { return by_kind[static_cast<size_t>(kind)]; }
  void Add(const FaultCounts& other) {
    for (size_t i = 0; i < kFaultKinds; ++i) by_kind[i] += other.by_kind[i];
  }
};

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
  FaultCounts faults;
  std::optional<SwarmViolation> violation;
};

// Runs one seed to its end (every client done, the books settled) or to its first violation. The
// same seed and part give the same run.
SeedOutcome RunSeed(uint64_t seed, Part part = Part::kAll);

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
TracedSeed RunSeedTraced(uint64_t seed, Part part = Part::kAll);

}  // namespace agentpay::sim
