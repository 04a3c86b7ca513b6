// The chain of a simulated run (`agentpay sim swarm`): the built-in devnet (the real EIP-3009
// token rules, on the run's own clock, mining deterministically), seen by the gateway through a
// node that fails as real ones do — calls refused, calls that time out after the node acted, calls
// that hang — and reached from the gateway's x402 path through an executor that gives every chain
// call a latency in simulated time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chain/chain.h"
#include "chain/devnet.h"
#include "core/world.h"
#include "sim/swarm_world.h"

namespace agentpay::sim {

// How the node misbehaves, in per mille of calls (or of chain tasks, for hangs).
struct NodeMix {
  int unreachable = 0;  // refused before reaching the node: nothing done (rpc_unreachable)
  int timeout = 0;      // answered rpc_timeout; a broadcast may have been accepted all the same
  int hang = 0;         // of the gateway's chain tasks: no answer until the RPC timeout
  int64_t max_latency_ms = 1;
  int64_t rpc_timeout_ms = 5000;  // how long a hung call holds its task
};

// The chain time: the run's simulated time from the wall clock's origin, without the wall clock's
// steps (a node's clock is not the gateway machine's).
class ChainClock final : public Clock {
 public:
  explicit ChainClock(const Scheduler& scheduler) : scheduler_(scheduler) {}
  int64_t NowMs() override { return SimClock::kOriginMs + scheduler_.now_ms(); }

 private:
  const Scheduler& scheduler_;
};

// The node as the gateway and its reconciler see it: every call first draws its fault. While a
// task hangs (Hang), every call answers rpc_timeout, a broadcast after reaching the node or not.
// Remembers every transaction the node accepted, for the world's faults (drops) and checks.
class SimNode final : public chain::Chain {
 public:
  SimNode(chain::Devnet& devnet, SeededRandom& random) : devnet_(devnet), random_(random) {}
  void SetMix(const NodeMix& mix) { mix_ = mix; }
  const NodeMix& mix() const { return mix_; }
  // The calls made while one is alive hang: the executor ran them past the RPC timeout.
  class Hang {
   public:
    explicit Hang(SimNode& node) : node_(node) { node_.hanging_ = true; }
    ~Hang() { node_.hanging_ = false; }
    Hang(const Hang&) = delete;
    Hang& operator=(const Hang&) = delete;

   private:
    SimNode& node_;
  };
  // Transactions the node accepted (in order; a re-sent one once).
  const std::vector<chain::Hash32>& accepted() const { return accepted_; }
  int64_t calls() const { return calls_; }
  // A fee spike: while set, Fees() answers this base fee (and a max fee to match) instead of the
  // devnet's; nullopt ends it. The devnet's blocks keep their own base fee: a spike is what the
  // node says, as a busy chain's node would for a while.
  void SetSpike(std::optional<chain::U256> base_fee) { spike_base_fee_ = base_fee; }
  bool spiking() const { return spike_base_fee_.has_value(); }
  // The faults the node drew (rpc_unreachable, rpc_timeout, hangs, gap refusals) and the spikes.
  const FaultCounts& faults() const { return faults_; }
  void Count(FaultKind kind) { faults_.Count(kind); }
  // Two transactions the relayer sent (or tried to) with one account nonce but different
  // calldata, i.e. two payments (a fee bump re-signs the same calldata; a gap filler has none):
  // what, if it happened.
  const std::optional<std::string>& nonce_reused() const { return nonce_reused_; }

  Result<uint64_t> ChainId() override;
  Result<bool> AuthorizationState(const chain::Address& token, const chain::Address& from,
                                  const chain::Hash32& nonce) override;
  Result<chain::U256> BalanceOf(const chain::Address& token, const chain::Address& owner) override;
  Result<chain::Bytes> Call(const chain::Address& to, const chain::Bytes& data) override;
  Result<uint64_t> EstimateGas(const chain::Address& from, const chain::Address& to,
                               const chain::Bytes& data) override;
  Result<chain::FeeData> Fees() override;
  Result<uint64_t> PendingNonce(const chain::Address& account) override;
  Result<uint64_t> MinedNonce(const chain::Address& account) override;
  Result<std::optional<chain::U256>> NativeBalance(const chain::Address& account) override;
  Result<chain::Hash32> SendRawTransaction(const chain::Bytes& raw) override;
  Result<std::optional<chain::Receipt>> GetReceipt(const chain::Hash32& hash) override;
  Result<std::optional<chain::TxInfo>> GetTransaction(const chain::Hash32& hash) override;
  Result<uint64_t> BlockNumber() override;
  Result<std::optional<chain::Hash32>> BlockHash(uint64_t number) override;
  Result<int64_t> LatestBlockTimestamp() override;

 private:
  // The fault of one call: ok (go on), rpc_unreachable or rpc_timeout.
  Status Fault();
  // Remembers the calldata of a transaction sent with its nonce (NonceReused).
  void NoteSent(const chain::Bytes& raw);
  // A read that fails does nothing on the node; one that gets through is the devnet's answer.
  template <typename Call>
  auto Read(Call call) -> decltype(call(std::declval<chain::Devnet&>())) {
    if (Status fault = Fault(); !fault.ok()) return fault;
    return call(devnet_);
  }

  chain::Devnet& devnet_;
  SeededRandom& random_;
  NodeMix mix_;
  bool hanging_ = false;
  std::vector<chain::Hash32> accepted_;
  int64_t calls_ = 0;
  std::optional<chain::U256> spike_base_fee_;
  FaultCounts faults_;
  std::map<uint64_t, chain::Bytes> calldata_by_nonce_;
  std::optional<std::string> nonce_reused_;
};

// The x402 path's chain calls: each task an event of the running gateway process after the node's
// latency; a hanging one (NodeMix::hang) runs only after the RPC timeout, every call in it timing
// out. Blocking store writes complete inside a task, as with SimExecutor.
class SimChainExecutor final : public Executor {
 public:
  SimChainExecutor(Scheduler& scheduler, SeededRandom& random, SimStore& store, SimNode& node)
      : scheduler_(scheduler), random_(random), store_(store), node_(node) {}
  bool TrySubmit(std::function<void()> task) override;

 private:
  Scheduler& scheduler_;
  SeededRandom& random_;
  SimStore& store_;
  SimNode& node_;
};

}  // namespace agentpay::sim
