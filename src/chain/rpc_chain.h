// Chain over a node's JSON-RPC API (Anvil, geth, a hosted provider over HTTPS). Every
// quantity and hex string in an answer is parsed strictly; anything off-shape is rpc_malformed.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "chain/chain.h"
#include "chain/json_rpc.h"
#include "chain/rpc_pool.h"
#include "http/client.h"

namespace agentpay::chain {

// A receipt with more logs than this is refused (rpc_malformed): a transferWithAuthorization
// emits two.
inline constexpr size_t kMaxReceiptLogs = 1024;

class RpcChain final : public Chain {
 public:
  // Precondition: timeout_ms > 0; it bounds each RPC call, not a whole method. `trust`: as for
  // JsonRpcClient. Several endpoints of one chain are used as one (rpc_pool.h: failover).
  RpcChain(Endpoint endpoint, int64_t timeout_ms, std::shared_ptr<const TlsTrust> trust = nullptr);
  RpcChain(std::vector<Endpoint> endpoints, int64_t timeout_ms,
           std::shared_ptr<const TlsTrust> trust = nullptr);

  Result<uint64_t> ChainId() override;
  // The chain id endpoint i alone answers (no failover): the start-up check of every endpoint.
  Result<uint64_t> EndpointChainId(size_t i);
  Result<bool> AuthorizationState(const Address& token, const Address& from,
                                  const Hash32& nonce) override;
  Result<U256> BalanceOf(const Address& token, const Address& owner) override;
  Result<Bytes> Call(const Address& to, const Bytes& data) override;
  Result<uint64_t> EstimateGas(const Address& from, const Address& to, const Bytes& data) override;
  // Base fee of the latest block; tip from eth_maxPriorityFeePerGas, or, when the node refuses
  // that method (rpc_error), eth_gasPrice minus the base fee (at least zero).
  Result<FeeData> Fees() override;
  Result<uint64_t> PendingNonce(const Address& account) override;
  Result<uint64_t> MinedNonce(const Address& account) override;
  Result<std::optional<U256>> NativeBalance(const Address& account) override;
  // "already known"/"already imported" → kTxAlreadyKnown. "nonce too low" → kTxAlreadyKnown when
  // the node knows this transaction's hash, else the node's rpc_error.
  Result<Hash32> SendRawTransaction(const Bytes& raw) override;
  // Up to kMaxRpcBatchCalls at a time in one JSON-RPC batch, each answer read as
  // SendRawTransaction reads it. A node that refuses batches (one error object for the whole) or
  // answers one with something unusable (rpc_malformed) gets them one by one, then and from then
  // on.
  std::vector<Result<Hash32>> SendRawTransactions(std::span<const Bytes> raws) override;
  Result<std::optional<Receipt>> GetReceipt(const Hash32& transaction_hash) override;
  Result<std::optional<TxInfo>> GetTransaction(const Hash32& transaction_hash) override;
  Result<uint64_t> BlockNumber() override;
  Result<std::optional<Hash32>> BlockHash(uint64_t number) override;
  Result<int64_t> LatestBlockTimestamp() override;

  // For node-specific calls (anvil_*, evm_mine in tests; txpool_status in diagnostics).
  RpcPool& rpc() { return client_; }

 private:
  // eth_getTransactionCount at `block_tag` ("pending" or "latest").
  Result<uint64_t> TransactionCount(const Address& account, const char* block_tag);
  Result<nlohmann::json> LatestBlock();
  Result<U256> PriorityFee(const U256& base_fee);
  // The outcome of an eth_sendRawTransaction the node refused with `detail`.
  Result<Hash32> RefusedSend(const Hash32& hash, const RpcErrorDetail& detail,
                             const Status& refusal);

  // The answer to eth_sendRawTransaction of `raw` (SendRawTransaction's rules).
  Result<Hash32> SentAs(const Bytes& raw, Result<nlohmann::json> answer,
                        const RpcErrorDetail& detail);

  RpcPool client_;
  std::atomic<bool> batches_refused_{false};
};

}  // namespace agentpay::chain
