// Counters the gateway exports at /metrics (Prometheus text format). Lock-free increments on hot
// paths.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "core/idempotency.h"
#include "core/operation.h"
#include "gateway/answer_cache.h"
#include "settlement/events.h"

namespace agentpay {

struct StoreStats;
struct ServerStats;

// What a caller of the facilitator's listener asked for (gateway/facilitator.h).
enum class FacilitatorCall : uint8_t { kSupported, kVerify, kSettle, kStatus, kOther };
inline constexpr size_t kFacilitatorCalls = 5;
std::string_view FacilitatorCallName(FacilitatorCall call);

// Also the SettlementCounter the reconciler counts into (`final`: the gateway's own calls on its
// member need no virtual dispatch).
class Metrics final : public SettlementCounter {
 public:
  void CountSettlement(SettlementEvent event, uint64_t count) override {
    settlement_events_[static_cast<size_t>(event)] += count;
  }
  void CountSettlement(SettlementEvent event) { CountSettlement(event, 1); }
  void CountResponse(int status);
  void CountArrival(ArrivalOutcome outcome) { ++arrivals_[static_cast<size_t>(outcome)]; }
  void CountVerdict(Verdict verdict) { ++verdicts_[static_cast<size_t>(verdict)]; }
  void CountUpstream(int64_t latency_ms, bool answered);
  void CountAttachTimeout() { ++attach_timeouts_; }
  void CountRecovered(uint64_t count) { recovered_ += count; }
  // A request that found an x402 operation without proving it comes from the payer (409).
  void CountProofRefused() { ++proof_refused_; }
  // One answer of the facilitator's listener, by call and status class (2xx, 4xx, 5xx).
  void CountFacilitator(FacilitatorCall call, int status);
  void CountPrune(uint64_t pruned, uint64_t keys_deleted, bool failed) {
    ++prunes_;
    results_pruned_ += pruned;
    keys_pruned_ += keys_deleted;
    if (failed) ++prune_failures_;
  }
  void CountResolved(uint64_t alerts, uint64_t refunded_amount) {
    ++resolutions_;
    alerts_resolved_ += alerts;
    refunded_amount_ += refunded_amount;
  }
  void CountSweep(uint64_t released, uint64_t alerts, bool failed) {
    ++sweeps_;
    holds_expired_ += released;
    alerts_raised_ += alerts;
    if (failed) ++sweep_failures_;
  }

  std::string Render(const StoreStats& store, const ServerStats* server,
                     const AnswerCache::Stats& answer_cache) const;

 private:
  std::array<std::atomic<uint64_t>, 6> responses_by_class_{};  // index = status / 100
  std::array<std::atomic<uint64_t>, 5> arrivals_{};
  std::array<std::atomic<uint64_t>, 3> verdicts_{};
  std::atomic<uint64_t> upstream_calls_{0};
  std::atomic<uint64_t> upstream_unanswered_{0};
  std::atomic<uint64_t> upstream_latency_ms_sum_{0};
  std::atomic<uint64_t> attach_timeouts_{0};
  std::atomic<uint64_t> recovered_{0};
  std::atomic<uint64_t> proof_refused_{0};
  // [call][status / 100], status classes 0-5
  std::array<std::array<std::atomic<uint64_t>, 6>, kFacilitatorCalls> facilitator_{};
  std::atomic<uint64_t> sweeps_{0};
  std::atomic<uint64_t> holds_expired_{0};
  std::atomic<uint64_t> alerts_raised_{0};
  std::atomic<uint64_t> sweep_failures_{0};
  std::atomic<uint64_t> prunes_{0};
  std::atomic<uint64_t> prune_failures_{0};
  std::atomic<uint64_t> results_pruned_{0};
  std::atomic<uint64_t> keys_pruned_{0};
  std::atomic<uint64_t> resolutions_{0};
  std::atomic<uint64_t> alerts_resolved_{0};
  std::atomic<uint64_t> refunded_amount_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(SettlementEvent::kCount)>
      settlement_events_{};
};

}  // namespace agentpay
