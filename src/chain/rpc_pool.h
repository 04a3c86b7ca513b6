// Several JSON-RPC endpoints of one chain (`--chain-rpc` given more than once, or `chain_rpc =
// [...]`) used as one. A call goes to the first endpoint in the configured order that is not
// resting, and moves to the next on a failure that says nothing about the chain:
//
//   what endpoint i did with the call                  | endpoint i                 | the call
//   ---------------------------------------------------|----------------------------|--------------
//   answered a result, or a JSON-RPC error (rpc_error) | healthy again              | returns it
//   rpc_unreachable, rpc_timeout, rpc_unavailable      | rests 1 s, doubling with   | next endpoint
//   (HTTP 429 or 5xx), rpc_malformed                   | each failure up to 30 s    |
//   (every endpoint tried once and failed)             | -                          | first failure
//
// Resting endpoints are still tried, after the others, when no other is left. Moving on is safe for
// every call the gateway makes: reads, and eth_sendRawTransaction of the same signed bytes (a node
// that has them already answers "already known", chain.h).
//
// Receipts, transactions and eth_call are not asked of an endpoint that lags: its latest block, as
// last seen (from eth_blockNumber or a latest block read, within kHeadFreshMs), more than
// kMaxLagBlocks behind another endpoint's, while an endpoint that does not lag is available.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "chain/json_rpc.h"

namespace agentpay::chain {

inline constexpr int64_t kRpcFirstRestMs = 1000;
inline constexpr int64_t kRpcMaxRestMs = 30000;
inline constexpr uint64_t kMaxLagBlocks = 3;
inline constexpr int64_t kHeadFreshMs = 30000;

// Milliseconds of a monotonic clock (steady_clock), the pool's default.
int64_t SteadyNowMs();

class RpcPool {
 public:
  // Preconditions: endpoints not empty; timeout_ms > 0 (each attempt's, as for JsonRpcClient).
  RpcPool(std::vector<Endpoint> endpoints, int64_t timeout_ms,
          std::shared_ptr<const TlsTrust> trust = nullptr,
          std::function<int64_t()> now_ms = SteadyNowMs,
          uint64_t max_response_bytes = kDefaultMaxRpcResponseBytes);
  RpcPool(const RpcPool&) = delete;
  RpcPool& operator=(const RpcPool&) = delete;

  // JsonRpcClient::Call over the pool, by the table above. Thread-safe.
  Result<nlohmann::json> Call(std::string_view method, nlohmann::json params,
                              RpcErrorDetail* error_detail = nullptr);
  // JsonRpcClient::CallBatch over the pool: the whole batch moves to the next endpoint as a call
  // would (every call the gateway batches is one it may send twice: eth_sendRawTransaction of the
  // same bytes). An endpoint is ordered as for the first call's method. Thread-safe.
  Result<std::vector<RpcAnswer>> CallBatch(std::span<const RpcCall> calls);
  // Endpoint i alone, no failover (the start-up check of every endpoint's chain id).
  Result<nlohmann::json> CallOn(size_t i, std::string_view method, nlohmann::json params);

  size_t size() const { return clients_.size(); }
  const Endpoint& endpoint(size_t i) const { return clients_[i]->endpoint(); }
  int64_t timeout_ms() const { return clients_[0]->timeout_ms(); }

 private:
  struct Health {
    int64_t rest_until_ms = 0;  // resting while now < this
    int64_t rest_ms = 0;        // the last rest; 0 when healthy
    uint64_t head = 0;          // latest block seen
    int64_t head_seen_ms = -1;  // when; -1: never
  };
  // The order to try endpoints in for `method`, by the rules above.
  std::vector<size_t> Order(std::string_view method);
  // Endpoint i's health after a call that ended with `outcome`, and the latest block it showed.
  void Record(size_t i, const Status& outcome, std::optional<uint64_t> head);
  void Record(size_t i, std::string_view method, const Result<nlohmann::json>& result);
  // `attempt(i)` on each endpoint in Order(method) until one answers, by the table above.
  template <typename T>
  Result<T> FailOver(std::string_view method, const std::function<Result<T>(size_t)>& attempt);

  std::vector<std::unique_ptr<JsonRpcClient>> clients_;
  std::function<int64_t()> now_ms_;
  std::mutex mutex_;
  std::vector<Health> health_;  // under mutex_
};

}  // namespace agentpay::chain
