// See swarm_chain.h.
#include "sim/swarm_chain.h"

#include <utility>

#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "chain/transaction.h"

namespace agentpay::sim {

Status SimNode::Fault() {
  ++calls_;
  if (hanging_) return Status::Error(ErrorCode::kRpcTimeout, "sim: the node did not answer");
  if (random_.Chance(mix_.unreachable)) {
    faults_.Count(FaultKind::kRpcUnreachable);
    return Status::Error(ErrorCode::kRpcUnreachable, "sim: the node refused the connection");
  }
  if (random_.Chance(mix_.timeout)) {
    faults_.Count(FaultKind::kRpcTimeout);
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
  auto fees = Read([&](chain::Devnet& d) { return d.Fees(); });
  if (!fees.ok() || !spike_base_fee_) return fees;
  const chain::U256& tip = fees->max_priority_fee_per_gas;
  return chain::FeeData{*spike_base_fee_, tip, *chain::MaxFeeFor(*spike_base_fee_, tip)};
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
  NoteSent(raw);
  Status fault = Fault();
  if (fault.error() == ErrorCode::kRpcUnreachable) return fault;
  if (!fault.ok() && random_.Chance(500)) return fault;
  Result<chain::Hash32> sent = devnet_.SendRawTransaction(raw);
  if (sent.ok()) accepted_.push_back(*sent);
  if (!sent.ok() && sent.status().message().find("nonce too high") != std::string::npos) {
    faults_.Count(FaultKind::kNonceGapRefusal);
  }
  if (!fault.ok()) return fault;
  return sent;
}

void SimNode::NoteSent(const chain::Bytes& raw) {
  auto sent = chain::DecodeRawTransaction(raw);
  if (!sent.ok() || sent->data.empty()) return;  // a gap filler carries no payment
  auto [known, first] = calldata_by_nonce_.emplace(sent->nonce, sent->data);
  if (first || known->second == sent->data || nonce_reused_) return;
  nonce_reused_ = "relayer nonce " + std::to_string(sent->nonce) +
                  " was signed for two different payments (transaction " +
                  chain::Hex(chain::Keccak256(raw)) + ")";
}

bool SimChainExecutor::TrySubmit(std::function<void()> task) {
  const NodeMix& mix = node_.mix();
  const bool hangs = random_.Chance(mix.hang);
  if (hangs) node_.Count(FaultKind::kRpcHang);
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
