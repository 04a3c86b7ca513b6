// See reconciler.h.
#include "workers/reconciler.h"

#include "core/check.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

struct Candidate {
  Operation op;
  X402PaymentRecord payment;
};

Result<std::vector<Candidate>> ListCandidates(Store& store, int64_t now,
                                              const ReconcilerConfig& config) {
  std::vector<Candidate> candidates;
  Status status = store.Read([&](Transaction& tx) {
    candidates.clear();
    for (Settlement state : {Settlement::kSubmitted, Settlement::kUnknown}) {
      OperationFilter filter;
      filter.settlement = state;
      filter.limit = config.batch;
      auto ops = tx.ListOperations(filter);
      if (!ops.ok()) return ops.status();
      for (Operation& op : *ops) {
        // An attempt still waiting on its receipt owns the operation until its lease runs out.
        if (op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > now) continue;
        auto payment = tx.FindX402Payment(op.id);
        if (!payment.ok()) return payment.status();
        if (!payment->has_value() || !(*payment)->submitted()) {
          return Status::Error(ErrorCode::kStoreCorrupt,
                               "settling operation without a transaction " + op.id);
        }
        if (state == Settlement::kSubmitted &&
            now < (*payment)->submitted_ms + config.receipt_timeout_ms) {
          continue;
        }
        candidates.push_back({std::move(op), std::move(**payment)});
      }
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return candidates;
}

// The decision for one operation; `broadcast` tells the caller to send the stored bytes after
// the commit (a re-broadcast, or after void the filler of the relayer's nonce gap).
struct Applied {
  bool changed = false;
  bool broadcast = false;
};

Result<Applied> Apply(Store& store, Random& random, const Candidate& seen_candidate,
                      const ChainObservation& seen, int64_t now, const ReconcilerConfig& config,
                      ReconcileReport& report) {
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
                                 seen, config.expiry_buffer_seconds);
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

// The relayer-nonce gap rule of reconciler.h. Returns whether it re-sent something.
Result<bool> FillRelayerGap(Store& store, Settler& settler) {
  auto next = settler.chain().PendingNonce(settler.relayer());
  if (!next.ok()) return next.status();
  std::optional<X402PaymentRecord> stuck;
  Status read = store.Read([&](Transaction& tx) {
    auto found =
        tx.FindX402PaymentByRelayerNonce(settler.RelayerHex(), static_cast<int64_t>(*next));
    if (!found.ok()) return found.status();
    stuck = std::move(*found);
    return Status::Ok();
  });
  if (!read.ok()) return read;
  if (!stuck || !stuck->submitted()) return false;
  auto hash = chain::ParseHash32(stuck->tx_hash);
  if (!hash.ok()) {
    return Status::Error(ErrorCode::kStoreCorrupt, "stored transaction hash is not hex");
  }
  auto known = settler.chain().GetTransaction(*hash);
  if (!known.ok()) return known.status();
  if (known->has_value()) return false;  // pending at that nonce: the node will mine it
  if (Status sent = settler.Broadcast(*stuck); !sent.ok()) return sent;
  return true;
}

}  // namespace

Result<ReconcileReport> ReconcileSettlements(Store& store, Settler& settler, Clock& clock,
                                             Random& random, const ReconcilerConfig& config,
                                             SettlementCounter* metrics) {
  AGENTPAY_CHECK(config.batch > 0 && config.expiry_buffer_seconds >= 0);
  ReconcileReport report;
  auto candidates = ListCandidates(store, clock.NowMs(), config);
  if (!candidates.ok()) return candidates.status();
  for (const Candidate& candidate : *candidates) {
    ++report.examined;
    auto seen = settler.Observe(candidate.payment);
    if (!seen.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "chain_error", seen.status().message()});
      continue;
    }
    ReconcileReport delta;
    auto applied = Apply(store, random, candidate, *seen, clock.NowMs(), config, delta);
    if (!applied.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "store_error", applied.status().message()});
      continue;
    }
    for (WorkerDecision& decision : delta.decisions)
      report.decisions.push_back(std::move(decision));
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
  }
  auto filled = FillRelayerGap(store, settler);
  if (!filled.ok()) {
    ++report.errors;
  } else if (*filled) {
    ++report.gaps_filled;
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
  return report;
}

}  // namespace agentpay
