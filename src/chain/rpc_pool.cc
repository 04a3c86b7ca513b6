// See rpc_pool.h.
#include "chain/rpc_pool.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;

// A failure that says nothing about the chain: another endpoint may answer.
bool MovesOn(const Status& status) {
  switch (status.error()) {
    case ErrorCode::kRpcUnreachable:
    case ErrorCode::kRpcTimeout:
    case ErrorCode::kRpcUnavailable:
    case ErrorCode::kRpcMalformed:
      return true;
    default:
      return false;
  }
}

// Reads whose answer depends on how far the node has got.
bool NeedsCurrentNode(std::string_view method) {
  return method == "eth_getTransactionReceipt" || method == "eth_getTransactionByHash" ||
         method == "eth_call";
}

// The block number an answer shows as the node's latest, if it shows one.
std::optional<uint64_t> HeadOf(std::string_view method, const json& result) {
  const json* quantity = nullptr;
  if (method == "eth_blockNumber") {
    quantity = &result;
  } else if (method == "eth_getBlockByNumber" && result.is_object()) {
    auto number = result.find("number");
    if (number != result.end()) quantity = &*number;
  }
  if (quantity == nullptr || !quantity->is_string()) return std::nullopt;
  auto value = ParseU256Hex(quantity->get_ref<const std::string&>());
  if (!value || !value->FitsInt64()) return std::nullopt;
  return static_cast<uint64_t>(value->ToInt64());
}

}  // namespace

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

RpcPool::RpcPool(std::vector<Endpoint> endpoints, int64_t timeout_ms,
                 std::shared_ptr<const TlsTrust> trust, std::function<int64_t()> now_ms,
                 uint64_t max_response_bytes)
    : now_ms_(std::move(now_ms)), health_(endpoints.size()) {
  AGENTPAY_CHECK(!endpoints.empty());
  for (Endpoint& endpoint : endpoints) {
    clients_.push_back(std::make_unique<JsonRpcClient>(std::move(endpoint), timeout_ms,
                                                       max_response_bytes, trust));
  }
}

std::vector<size_t> RpcPool::Order(std::string_view method) {
  const int64_t now = now_ms_();
  std::lock_guard lock(mutex_);
  std::vector<size_t> ready, resting;
  uint64_t best_head = 0;
  for (const Health& h : health_) {
    if (h.head_seen_ms >= 0 && now - h.head_seen_ms <= kHeadFreshMs) {
      best_head = std::max(best_head, h.head);
    }
  }
  auto lags = [&](size_t i) {
    const Health& h = health_[i];
    return NeedsCurrentNode(method) && h.head_seen_ms >= 0 &&
           now - h.head_seen_ms <= kHeadFreshMs && h.head + kMaxLagBlocks < best_head;
  };
  std::vector<size_t> lagging;
  for (size_t i = 0; i < health_.size(); ++i) {
    if (health_[i].rest_until_ms > now) {
      resting.push_back(i);
    } else if (lags(i)) {
      lagging.push_back(i);
    } else {
      ready.push_back(i);
    }
  }
  // Resting ones last, the one whose rest ends first before the others.
  std::stable_sort(resting.begin(), resting.end(), [&](size_t a, size_t b) {
    return health_[a].rest_until_ms < health_[b].rest_until_ms;
  });
  ready.insert(ready.end(), lagging.begin(), lagging.end());
  ready.insert(ready.end(), resting.begin(), resting.end());
  return ready;
}

void RpcPool::Record(size_t i, const Status& outcome, std::optional<uint64_t> head) {
  const int64_t now = now_ms_();
  std::lock_guard lock(mutex_);
  Health& h = health_[i];
  if (outcome.ok() || !MovesOn(outcome)) {
    h.rest_ms = 0;
    h.rest_until_ms = 0;
    if (head) {
      h.head = *head;
      h.head_seen_ms = now;
    }
    return;
  }
  h.rest_ms = h.rest_ms == 0 ? kRpcFirstRestMs : std::min(kRpcMaxRestMs, 2 * h.rest_ms);
  h.rest_until_ms = now + h.rest_ms;
}

void RpcPool::Record(size_t i, std::string_view method, const Result<json>& result) {
  Record(i, result.status(), result.ok() ? HeadOf(method, *result) : std::nullopt);
}

template <typename T>
Result<T> RpcPool::FailOver(std::string_view method,
                            const std::function<Result<T>(size_t)>& attempt) {
  // When every endpoint failed, the answer is the first failure that may have reached a node: a
  // call that may have been received must not be reported as never sent.
  std::optional<Status> failure;
  for (size_t i : Order(method)) {
    Result<T> result = attempt(i);
    if (result.ok() || !MovesOn(result.status())) return result;
    if (!failure || (failure->error() == ErrorCode::kRpcUnreachable &&
                     result.status().error() != ErrorCode::kRpcUnreachable)) {
      failure = result.status();
    }
  }
  return *failure;
}

Result<json> RpcPool::Call(std::string_view method, json params, RpcErrorDetail* error_detail) {
  return FailOver<json>(method, [&](size_t i) {
    Result<json> result = clients_[i]->Call(method, params, error_detail);
    Record(i, method, result);
    return result;
  });
}

Result<std::vector<RpcAnswer>> RpcPool::CallBatch(std::span<const RpcCall> calls) {
  AGENTPAY_CHECK(!calls.empty());
  return FailOver<std::vector<RpcAnswer>>(calls[0].method, [&](size_t i) {
    Result<std::vector<RpcAnswer>> answers = clients_[i]->CallBatch(calls);
    Record(i, answers.status(), std::nullopt);
    return answers;
  });
}

Result<json> RpcPool::CallOn(size_t i, std::string_view method, json params) {
  AGENTPAY_CHECK(i < clients_.size());
  Result<json> result = clients_[i]->Call(method, std::move(params));
  Record(i, method, result);
  return result;
}

}  // namespace agentpay::chain
