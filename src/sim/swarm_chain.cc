// See swarm_chain.h.
#include "sim/swarm_chain.h"

#include <utility>

#include "chain/json_rpc.h"

namespace agentpay::sim {

Status SimNode::Fault() {
  ++calls_;
  if (hanging_) return Status::Error(ErrorCode::kRpcTimeout, "sim: the node did not answer");
  if (random_.Chance(mix_.unreachable)) {
    return Status::Error(ErrorCode::kRpcUnreachable, "sim: the node refused the connection");
  }
  if (random_.Chance(mix_.timeout)) {
    return Status::Error(ErrorCode::kRpcTimeout, "sim: the node's answer was lost");
  }
  return Status::Ok();
}

Result<uint64_t> SimNode::ChainId() {
  return Read([&](chain::Devnet& d) { return d.ChainId(); });
}
Result<bool> SimNode::AuthorizationState(const chain::Address& token, const chain::Address& from,
                                         const chain::Hash32& nonce) {
  return Read([&](chain::Devnet& d) { return d.AuthorizationState(token, from, nonce); });
}
Result<chain::U256> SimNode::BalanceOf(const chain::Address& token, const chain::Address& owner) {
  return Read([&](chain::Devnet& d) { return d.BalanceOf(token, owner); });
}
Result<chain::Bytes> SimNode::Call(const chain::Address& to, const chain::Bytes& data) {
  return Read([&](chain::Devnet& d) { return d.Call(to, data); });
}
Result<uint64_t> SimNode::EstimateGas(const chain::Address& from, const chain::Address& to,
                                      const chain::Bytes& data) {
  return Read([&](chain::Devnet& d) { return d.EstimateGas(from, to, data); });
}
Result<chain::FeeData> SimNode::Fees() {
  return Read([&](chain::Devnet& d) { return d.Fees(); });
}
Result<uint64_t> SimNode::PendingNonce(const chain::Address& account) {
  return Read([&](chain::Devnet& d) { return d.PendingNonce(account); });
}
Result<uint64_t> SimNode::MinedNonce(const chain::Address& account) {
  return Read([&](chain::Devnet& d) { return d.MinedNonce(account); });
}
Result<std::optional<chain::U256>> SimNode::NativeBalance(const chain::Address& account) {
  return Read([&](chain::Devnet& d) { return d.NativeBalance(account); });
}
Result<std::optional<chain::Receipt>> SimNode::GetReceipt(const chain::Hash32& hash) {
  return Read([&](chain::Devnet& d) { return d.GetReceipt(hash); });
}
Result<std::optional<chain::TxInfo>> SimNode::GetTransaction(const chain::Hash32& hash) {
  return Read([&](chain::Devnet& d) { return d.GetTransaction(hash); });
}
Result<uint64_t> SimNode::BlockNumber() {
  return Read([&](chain::Devnet& d) { return d.BlockNumber(); });
}
Result<std::optional<chain::Hash32>> SimNode::BlockHash(uint64_t number) {
  return Read([&](chain::Devnet& d) { return d.BlockHash(number); });
}
Result<int64_t> SimNode::LatestBlockTimestamp() {
  return Read([&](chain::Devnet& d) { return d.LatestBlockTimestamp(); });
}

// A broadcast that times out may still have reached the node: half of them did.
Result<chain::Hash32> SimNode::SendRawTransaction(const chain::Bytes& raw) {
  Status fault = Fault();
  if (fault.error() == ErrorCode::kRpcUnreachable) return fault;
  if (!fault.ok() && random_.Chance(500)) return fault;
  Result<chain::Hash32> sent = devnet_.SendRawTransaction(raw);
  if (sent.ok()) accepted_.push_back(*sent);
  if (!fault.ok()) return fault;
  return sent;
}

bool SimChainExecutor::TrySubmit(std::function<void()> task) {
  const NodeMix& mix = node_.mix();
  const bool hangs = random_.Chance(mix.hang);
  const int64_t delay = hangs ? mix.rpc_timeout_ms : random_.Between(0, mix.max_latency_ms);
  scheduler_.After(delay, scheduler_.gateway_epoch(), [this, hangs, task = std::move(task)] {
    SimStore::Inline blocking(store_);
    if (!hangs) return task();
    SimNode::Hang hang(node_);
    task();
  });
  return true;
}

}  // namespace agentpay::sim
