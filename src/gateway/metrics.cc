// See metrics.h.
#include "gateway/metrics.h"

#include <utility>

#include "http/server.h"
#include "store/store.h"

namespace agentpay {
namespace {
void Counter(std::string& out, const std::string& name, const std::string& help, uint64_t value,
             const std::string& labels = "", bool header = true, const char* type = "counter") {
  if (header) out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + std::to_string(value) + "\n";
}
}  // namespace

std::string_view FacilitatorCallName(FacilitatorCall call) {
  switch (call) {
    case FacilitatorCall::kSupported:
      return "supported";
    case FacilitatorCall::kVerify:
      return "verify";
    case FacilitatorCall::kSettle:
      return "settle";
    case FacilitatorCall::kStatus:
      return "status";
    case FacilitatorCall::kOther:
      return "other";
  }
  return "other";
}

void Metrics::CountFacilitator(FacilitatorCall call, int status) {
  const size_t status_class = static_cast<size_t>(status / 100);
  const size_t index = static_cast<size_t>(call);
  if (index < facilitator_.size() && status_class < facilitator_[index].size()) {
    ++facilitator_[index][status_class];
  }
}

void Metrics::CountResponse(int status) {
  size_t index = static_cast<size_t>(status / 100);
  if (index < responses_by_class_.size()) ++responses_by_class_[index];
}

void Metrics::CountUpstream(int64_t latency_ms, bool answered) {
  ++upstream_calls_;
  if (!answered) ++upstream_unanswered_;
  upstream_latency_ms_sum_ += static_cast<uint64_t>(latency_ms < 0 ? 0 : latency_ms);
}

std::string Metrics::Render(const StoreStats& store, const ServerStats* server,
                            const AnswerCache::Stats& answer_cache) const {
  std::string out;
  for (size_t i = 1; i < responses_by_class_.size(); ++i) {
    Counter(out, "agentpay_paid_responses_total", "Responses on paid routes by status class",
            responses_by_class_[i].load(), "class=\"" + std::to_string(i) + "xx\"", i == 1);
  }
  for (size_t i = 0; i < arrivals_.size(); ++i) {
    Counter(out, "agentpay_idempotency_arrivals_total", "Paid requests by idempotency decision",
            arrivals_[i].load(),
            "outcome=\"" + std::string(ArrivalOutcomeName(static_cast<ArrivalOutcome>(i))) + "\"",
            i == 0);
  }
  for (size_t i = 0; i < verdicts_.size(); ++i) {
    Counter(out, "agentpay_wallet_verdicts_total", "Holds captured, released or kept",
            verdicts_[i].load(),
            "verdict=\"" + std::string(VerdictName(static_cast<Verdict>(i))) + "\"", i == 0);
  }
  Counter(out, "agentpay_upstream_calls_total", "Upstream calls started", upstream_calls_.load());
  Counter(out, "agentpay_upstream_unanswered_total", "Upstream calls without a complete answer",
          upstream_unanswered_.load());
  Counter(out, "agentpay_upstream_latency_ms_sum", "Total upstream call time in milliseconds",
          upstream_latency_ms_sum_.load());
  Counter(out, "agentpay_attach_timeouts_total", "Duplicates answered 202 after the attach wait",
          attach_timeouts_.load());
  Counter(out, "agentpay_payer_proof_refused_total",
          "x402 requests refused because they did not prove the payer (authorization_already_used)",
          proof_refused_.load());
  bool first_facilitator = true;
  for (size_t call = 0; call < kFacilitatorCalls; ++call) {
    for (size_t status_class = 2; status_class < 6; ++status_class) {
      const uint64_t count = facilitator_[call][status_class].load();
      if (count == 0 && status_class == 3) continue;  // it answers no 3xx
      Counter(out, "agentpay_facilitator_requests_total",
              "Answers of the facilitator listener, by call and status class", count,
              "call=\"" + std::string(FacilitatorCallName(static_cast<FacilitatorCall>(call))) +
                  "\",status=\"" + std::to_string(status_class) + "xx\"",
              first_facilitator);
      first_facilitator = false;
    }
  }
  Counter(out, "agentpay_recovered_operations_total",
          "In-flight operations moved to pending_retry at start", recovered_.load());
  Counter(out, "agentpay_sweeper_runs_total", "Hold sweeper passes", sweeps_.load());
  Counter(out, "agentpay_sweeper_failures_total", "Hold sweeper passes that failed",
          sweep_failures_.load());
  Counter(out, "agentpay_holds_expired_total", "Expired holds released by the sweeper",
          holds_expired_.load());
  Counter(out, "agentpay_alerts_raised_total", "Alerts raised for the admin",
          alerts_raised_.load());
  Counter(out, "agentpay_pruner_runs_total", "Retention pruner passes", prunes_.load());
  Counter(out, "agentpay_pruner_failures_total", "Retention pruner passes that failed",
          prune_failures_.load());
  Counter(out, "agentpay_results_pruned_total", "Stored results forgotten past their retention",
          results_pruned_.load());
  Counter(out, "agentpay_keys_pruned_total", "Idempotency key records deleted by the pruner",
          keys_pruned_.load());
  Counter(out, "agentpay_resolutions_total", "Admin resolutions recorded (replays not counted)",
          resolutions_.load());
  Counter(out, "agentpay_alerts_resolved_total", "Alerts closed by admin resolutions",
          alerts_resolved_.load());
  Counter(out, "agentpay_refunded_atomic_total",
          "Atomic units returned to wallets by refunded resolutions", refunded_amount_.load());
  for (size_t i = 0; i < settlement_events_.size(); ++i) {
    Counter(out, "agentpay_x402_settlement_events_total",
            "x402 settlements by event (gateway attempts and the reconciler)",
            settlement_events_[i].load(),
            "event=\"" + std::string(SettlementEventName(static_cast<SettlementEvent>(i))) + "\"",
            i == 0);
  }
  Counter(out, "agentpay_store_commits_total", "Database commits", store.commits);
  Counter(out, "agentpay_store_decisions_total",
          "Decisions committed (group commit shares commits)", store.decisions);
  Counter(out, "agentpay_store_syncs_total", "Syncs that made commits durable",
          store.durability_syncs);
  Counter(out, "agentpay_store_rollbacks_total", "Decisions rolled back",
          store.decisions_rolled_back);
  Counter(out, "agentpay_store_write_queue", "Decisions waiting for the writer",
          store.write_queue_depth, "", true, "gauge");
  Counter(out, "agentpay_store_round_trips_total",
          "Waits for the database server's answers (PostgreSQL), by connection",
          store.writer_round_trips, "connection=\"writer\"");
  Counter(out, "agentpay_store_round_trips_total", "", store.reader_round_trips,
          "connection=\"reader\"", false);
  Counter(out, "agentpay_store_wal_bytes_total",
          "Bytes the store writer's commits wrote to SQLite's WAL (PostgreSQL: 0, see pg_stat_wal)",
          store.wal_bytes);
  const std::pair<const char*, uint64_t> writer_phases[] = {{"decide", store.writer_decide_ns},
                                                            {"commit", store.writer_commit_ns},
                                                            {"sync", store.writer_sync_ns},
                                                            {"complete", store.writer_complete_ns}};
  for (const auto& [phase, ns] : writer_phases) {
    Counter(out, "agentpay_store_writer_microseconds_total",
            "The store writer's wall time by phase (the rest it waited for decisions)", ns / 1000,
            "phase=\"" + std::string(phase) + "\"", phase == writer_phases[0].first);
  }
  Counter(out, "agentpay_answer_cache_hits_total",
          "Repeated arrivals answered from the answer cache (no read)", answer_cache.hits);
  Counter(out, "agentpay_answer_cache_misses_total",
          "Arrivals the answer cache did not hold (a new key, most of them)", answer_cache.misses);
  Counter(out, "agentpay_answer_cache_evictions_total",
          "Answers dropped from the cache to keep it within --answer-cache-mb",
          answer_cache.evictions);
  Counter(out, "agentpay_answer_cache_entries", "Final answers the cache holds",
          answer_cache.entries, "", true, "gauge");
  Counter(out, "agentpay_answer_cache_bytes", "The cache's estimate of the memory it holds",
          answer_cache.bytes, "", true, "gauge");
  if (server != nullptr) {
    Counter(out, "agentpay_http_requests_total", "HTTP requests read", server->requests);
    Counter(out, "agentpay_http_rejected_total", "Requests refused at a limit (503)",
            server->rejected_overload);
    Counter(out, "agentpay_http_open_connections", "Open connections", server->open_connections, "",
            true, "gauge");
    Counter(out, "agentpay_http_connections_accepted_total", "Connections accepted",
            server->accepted_connections);
    Counter(out, "agentpay_http_tls_handshakes_total",
            "TLS handshakes completed (--tls-cert), resumed ones included", server->tls_handshakes);
    Counter(out, "agentpay_http_tls_resumed_total", "TLS handshakes that resumed a session",
            server->tls_resumed);
    Counter(out, "agentpay_http_body_bytes_in_flight",
            "Request body bytes held now (--max-body-bytes-in-flight)",
            server->body_bytes_in_flight, "", true, "gauge");
    Counter(out, "agentpay_http_body_budget_rejected_total",
            "Requests whose body was not read: --max-body-bytes-in-flight reached (503)",
            server->rejected_body_budget);
  }
  return out;
}

}  // namespace agentpay
