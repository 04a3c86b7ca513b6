// See reconciler.h.
#include "workers/reconciler.h"

#include <functional>
#include <limits>

#include "core/check.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

struct Candidate {
  Operation op;
  X402PaymentRecord payment;
};

// One page of settling operations after `cursor`, with their payments. `eligible` is false for
// the ones no reconciler may touch yet: an attempt still waiting on its receipt owns the operation
// until its lease runs out, and a `submitted` one is left alone until its receipt deadline.
struct Listed {
  Candidate candidate;
  bool eligible = true;
};

Result<std::vector<Listed>> ListPage(Store& store, const std::string& cursor, int64_t now,
                                     const ReconcilerConfig& config) {
  std::vector<Listed> page;
  Status status = store.Read([&](Transaction& tx) {
    page.clear();
    auto ops = tx.ListSettlingOperations(cursor, config.batch);
    if (!ops.ok()) return ops.status();
    for (Operation& op : *ops) {
      auto payment = tx.FindX402Payment(op.id);
      if (!payment.ok()) return payment.status();
      if (!payment->has_value() || !(*payment)->submitted()) {
        return Status::Error(ErrorCode::kStoreCorrupt,
                             "settling operation without a transaction " + op.id);
      }
      const bool claimed =
          op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > now;
      const bool before_deadline = op.settlement == Settlement::kSubmitted &&
                                   now < (*payment)->submitted_ms + config.receipt_timeout_ms;
      page.push_back({{std::move(op), std::move(**payment)}, !claimed && !before_deadline});
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return page;
}

// The decision for one operation; `broadcast` tells the caller to send the stored bytes after
// the commit (a re-broadcast, or after void the filler of the relayer's nonce gap).
struct Applied {
  bool changed = false;
  bool broadcast = false;
  bool resolved = false;  // settled, void or failed: nothing left to reconcile
};

// `confirmations`: the settler's (--confirmations).
Result<Applied> Apply(Store& store, Random& random, const Candidate& seen_candidate,
                      const ChainObservation& seen, int64_t confirmations, int64_t now,
                      const ReconcilerConfig& config, ReconcileReport& report) {
  Applied applied;
  const Operation& listed = seen_candidate.op;
  Status status = store.Write([&](Transaction& tx) {
    applied = Applied{};
    report.decisions.clear();
    auto found = tx.FindOperation(listed.id);
    if (!found.ok()) return found.status();
    if (!found->has_value() || **found != listed) return Status::Ok();  // moved meanwhile
    // A re-broadcast changes only the payment record: compare it too, so that two reconcilers
    // (two gateway processes) never both count one re-broadcast from the same stale record.
    auto payment = tx.FindX402Payment(listed.id);
    if (!payment.ok()) return payment.status();
    if (!payment->has_value() || **payment != seen_candidate.payment) return Status::Ok();
    Operation op = listed;
    std::vector<TraceEvent> events;
    if (op.settlement == Settlement::kSubmitted) {
      // X4 for an attempt that is gone (crash, lost claim): its receipt deadline has passed.
      op = MarkUnknown(op, now);
      ++report.marked_unknown;
      events.push_back({op.id, now, "worker", "settlement_unknown",
                        "no attempt is waiting on " + seen_candidate.payment.tx_hash});
      report.decisions.push_back({op.id, "settlement_unknown", events.back().detail});
    }
    Reconciliation r = Reconcile(Settlement::kUnknown, ToSettlementRecord(seen_candidate.payment),
                                 seen, config.expiry_buffer_seconds, confirmations);
    switch (r.action) {
      case ReconcileAction::kMarkSettled:
        op = MarkSettled(op, now);
        ++report.settled;
        break;
      case ReconcileAction::kRebroadcast: {
        SettlementRecord record = RecordRebroadcast(ToSettlementRecord(seen_candidate.payment));
        X402PaymentRecord payment = seen_candidate.payment;
        payment.broadcasts = record.broadcasts;
        if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
        applied.broadcast = true;
        ++report.rebroadcast;
        break;
      }
      case ReconcileAction::kMarkVoid:
        op = MarkVoid(op, now, SettlementVoidResponse(op.id));
        applied.broadcast = !seen.tx_known;  // fills the relayer nonce; expired, it cannot pay
        ++report.voided;
        break;
      case ReconcileAction::kMarkFailed:
        op = MarkFailed(op, now, SettlementFailedResponse(op.id), config.retention_ms);
        if (Status s = tx.InsertAlert(SettlementFailedAlert(random, op.id, r.reason, now));
            !s.ok()) {
          return s;
        }
        ++report.failed;
        break;
      case ReconcileAction::kWait:
        break;
    }
    applied.resolved = r.action == ReconcileAction::kMarkSettled ||
                       r.action == ReconcileAction::kMarkVoid ||
                       r.action == ReconcileAction::kMarkFailed;
    if (r.action != ReconcileAction::kWait) {
      events.push_back(
          {op.id, now, "worker", std::string(ReconcileActionName(r.action)), r.reason});
      report.decisions.push_back({op.id, std::string(ReconcileActionName(r.action)), r.reason});
    }
    if (op == listed && !applied.broadcast) return Status::Ok();
    applied.changed = true;
    if (op != listed) {
      if (Status s = tx.UpdateOperation(op); !s.ok()) return s;
    }
    for (const TraceEvent& event : events) {
      if (Status s = tx.AppendEvent(event); !s.ok()) return s;
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return applied;
}

// The relayer-nonce gap rule of reconciler.h: from the node's next nonce up, each stored
// transaction the node does not know is sent again, in nonce order, until a nonce the node knows a
// transaction for, one the store has none for, or `more(kRpcCallsPerGapStep)` refuses. Returns how
// many it re-sent.
Result<int> FillRelayerGap(Store& store, Settler& settler,
                           const std::function<bool(int64_t calls)>& more) {
  auto next = settler.chain().PendingNonce(settler.relayer());
  if (!next.ok()) return next.status();
  if (*next > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::Error(ErrorCode::kRpcMalformed, "relayer nonce out of range");
  }
  int filled = 0;
  for (int64_t nonce = static_cast<int64_t>(*next); filled < kMaxGapFillsPerPass; ++nonce) {
    if (filled > 0 && !more(kRpcCallsPerGapStep)) break;
    std::optional<X402PaymentRecord> stuck;
    Status read = store.Read([&](Transaction& tx) {
      auto found = tx.FindX402PaymentByRelayerNonce(settler.RelayerHex(), nonce);
      if (!found.ok()) return found.status();
      stuck = std::move(*found);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    if (!stuck || !stuck->submitted()) break;
    auto hash = chain::ParseHash32(stuck->tx_hash);
    if (!hash.ok()) {
      return Status::Error(ErrorCode::kStoreCorrupt, "stored transaction hash is not hex");
    }
    auto known = settler.chain().GetTransaction(*hash);
    if (!known.ok()) return known.status();
    if (known->has_value()) break;  // the node has it: it mines it, and what it holds after
    if (Status sent = settler.Broadcast(*stuck); !sent.ok()) return sent;
    ++filled;
  }
  return filled;
}

// Looks at one operation and applies the decision; adds to `report`. Returns whether the
// operation is resolved (or moved on without us), so that nothing more is owed to it.
bool LookAt(Store& store, Settler& settler, Clock& clock, Random& random,
            const ReconcilerConfig& config, const Candidate& candidate, ReconcileReport& report) {
  ++report.examined;
  auto seen = settler.Observe(candidate.payment);
  if (!seen.ok()) {
    ++report.errors;
    report.decisions.push_back({candidate.op.id, "chain_error", seen.status().message()});
    return false;
  }
  ReconcileReport delta;
  auto applied = Apply(store, random, candidate, *seen, settler.config().confirmations,
                       clock.NowMs(), config, delta);
  if (!applied.ok()) {
    ++report.errors;
    report.decisions.push_back({candidate.op.id, "store_error", applied.status().message()});
    return false;
  }
  for (WorkerDecision& decision : delta.decisions) report.decisions.push_back(std::move(decision));
  report.settled += delta.settled;
  report.rebroadcast += delta.rebroadcast;
  report.voided += delta.voided;
  report.failed += delta.failed;
  report.marked_unknown += delta.marked_unknown;
  if (applied->broadcast) {
    if (Status sent = settler.Broadcast(candidate.payment); !sent.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "broadcast_error", sent.message()});
    }
  }
  // Settled: the chain balance shows it; void or failed: the money did not move through us.
  if (applied->resolved) settler.reservations().Release(candidate.payment.authorization);
  return applied->resolved;
}

void GapAndMetrics(Store& store, Settler& settler, bool check_gap,
                   const std::function<bool(int64_t calls)>& more, SettlementCounter* metrics,
                   ReconcileReport& report) {
  if (check_gap) {
    auto filled = FillRelayerGap(store, settler, more);
    if (!filled.ok()) {
      ++report.errors;
    } else {
      report.gaps_filled += *filled;
    }
  }
  if (metrics != nullptr) {
    metrics->CountSettlement(SettlementEvent::kGapFilled, report.gaps_filled);
    metrics->CountSettlement(SettlementEvent::kReconcilerRuns, 1);
    metrics->CountSettlement(SettlementEvent::kReconcilerErrors, report.errors);
    metrics->CountSettlement(SettlementEvent::kReconciledSettled, report.settled);
    metrics->CountSettlement(SettlementEvent::kRebroadcast, report.rebroadcast);
    metrics->CountSettlement(SettlementEvent::kVoid, report.voided);
    metrics->CountSettlement(SettlementEvent::kReconciledFailed, report.failed);
  }
}

// When a look at an unresolved operation can first answer differently for its expiry: the
// authorization's validBefore + buffer (+ 1 s for the chain's clock), in wall-clock ms.
int64_t ExpiresMs(const Candidate& candidate, const ReconcilerConfig& config) {
  const int64_t valid_before_s = candidate.payment.authorization.valid_before_s;
  constexpr int64_t kMaxSeconds = INT64_MAX / 1000 - 1;
  if (valid_before_s > kMaxSeconds - config.expiry_buffer_seconds) return 0;
  return (valid_before_s + config.expiry_buffer_seconds + 1) * 1000;
}

}  // namespace

Result<ReconcileReport> ReconcileSettlements(Store& store, Settler& settler, Clock& clock,
                                             Random& random, const ReconcilerConfig& config,
                                             SettlementCounter* metrics) {
  AGENTPAY_CHECK(config.batch > 0 && config.expiry_buffer_seconds >= 0);
  ReconcileReport report;
  const int64_t now = clock.NowMs();
  std::string cursor;
  for (;;) {
    auto page = ListPage(store, cursor, now, config);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    cursor = page->back().candidate.op.id;
    for (const Listed& listed : *page) {
      if (listed.eligible) LookAt(store, settler, clock, random, config, listed.candidate, report);
    }
  }
  GapAndMetrics(
      store, settler, true, [](int64_t) { return true; }, metrics, report);
  return report;
}

Reconciler::Reconciler(Store& store, Settler& settler, Clock& clock, Random& random,
                       ReconcilerConfig config, SettlementCounter* metrics)
    : store_(store),
      settler_(settler),
      clock_(clock),
      random_(random),
      config_(config),
      metrics_(metrics),
      schedule_(config.backoff, config.max_scheduled) {
  AGENTPAY_CHECK(config_.batch > 0 && config_.expiry_buffer_seconds >= 0);
  AGENTPAY_CHECK(config_.max_pages_per_pass > 0);
  AGENTPAY_CHECK(config_.rpc_per_second == 0 ||
                 config_.rpc_per_second >= kRpcCallsPerLook + kRpcCallsPerBroadcast);
  if (config_.rpc_per_second > 0) budget_.emplace(config_.rpc_per_second, clock_.NowMs());
}

// From the cursor to the end of the list, then from the start back to where the pass began (one
// round at most), looking at every eligible operation whose backoff is over, until the RPC budget
// runs out: the cursor then stays at the last operation handled, and the next pass goes on there.
Result<ReconcileReport> Reconciler::RunPass() {
  ReconcileReport report;
  const int64_t now = clock_.NowMs();
  auto take = [&](int64_t calls) { return !budget_ || budget_->TryTake(calls, clock_.NowMs()); };
  const std::string start = cursor_;
  bool wrapped = start.empty();
  bool stop = false;
  for (int pages = 0; !stop && pages < config_.max_pages_per_pass; ++pages) {
    auto page = ListPage(store_, cursor_, now, config_);
    if (!page.ok()) return page.status();
    if (page->empty()) {
      schedule_.EndRound();  // the cursor went past the newest: one round done
      cursor_.clear();
      if (wrapped) break;
      wrapped = true;
      continue;
    }
    for (const Listed& listed : *page) {
      const Candidate& candidate = listed.candidate;
      if (wrapped && !start.empty() && candidate.op.id > start) {
        stop = true;  // back where this pass began
        break;
      }
      schedule_.Passed(candidate.op.id);
      if (listed.eligible && !schedule_.Due(candidate.op.id, now)) ++report.not_due;
      if (listed.eligible && schedule_.Due(candidate.op.id, now)) {
        if (!take(kRpcCallsPerLook + kRpcCallsPerBroadcast)) {
          report.out_of_rpc = true;
          stop = true;
          break;
        }
        if (LookAt(store_, settler_, clock_, random_, config_, candidate, report)) {
          schedule_.Forget(candidate.op.id);
        } else {
          schedule_.Looked(candidate.op.id, clock_.NowMs(), ExpiresMs(candidate, config_));
        }
      }
      cursor_ = candidate.op.id;
    }
  }
  // The gap check at most once per kGapCheckIntervalMs, so that with short sweep intervals its
  // cheaper calls do not take the whole budget before a look can.
  const bool check_gap = now - last_gap_check_ms_ >= kGapCheckIntervalMs &&
                         take(kRpcCallsPerGapCheck);
  if (check_gap) last_gap_check_ms_ = now;
  GapAndMetrics(store_, settler_, check_gap, take, metrics_, report);
  return report;
}

}  // namespace agentpay
