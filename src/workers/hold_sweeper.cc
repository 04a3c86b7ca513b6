// See hold_sweeper.h.
#include "workers/hold_sweeper.h"

namespace agentpay {
namespace {

// Releases one operation's expired hold if it is still expired inside the decision's transaction
// (a retry may have captured or resumed it since the listing).
Status ReleaseOne(Transaction& tx, const std::string& operation_id, Clock& clock, Random& random,
                  SweepReport& report) {
  const int64_t now = clock.NowMs();
  auto found = tx.FindOperation(operation_id);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return Status::Ok();
  const Operation& op = **found;
  auto expiry = ExpireHold(op, now);
  if (!expiry) return Status::Ok();
  auto account = WalletAccountOf(op.principal);
  if (!account) {
    return Status::Error(ErrorCode::kStoreCorrupt, "held operation without a wallet: " + op.id);
  }
  auto moved = tx.Move(*account, MoveKind::kRelease, op.amount, op.id, now);
  if (!moved.ok()) return moved.status();
  if (*moved != MoveOutcome::kOk) {
    return Status::Error(ErrorCode::kStoreCorrupt, "hold of " + op.id + " is not on its account");
  }
  if (Status s = tx.UpdateOperation(expiry->next); !s.ok()) return s;
  if (Status s = tx.AppendEvent(
          {op.id, now, "worker", "hold_expired", expiry->reason,
           TraceFacts().Attempt(op.attempts).Amount(op.amount).Reason("hold_ttl_passed")});
      !s.ok()) {
    return s;
  }
  Alert alert{"alert_" + RandomHex(random, 16),
              op.id,
              "hold_expired_after_possible_work",
              expiry->reason,
              now,
              std::nullopt,
              "",
              ""};
  if (Status s = tx.InsertAlert(alert); !s.ok()) return s;
  ++report.released;
  ++report.alerts;
  report.decisions.push_back({op.id, "hold_released_alert_raised", expiry->reason});
  return Status::Ok();
}

}  // namespace

Result<SweepReport> SweepExpiredHolds(Store& store, Clock& clock, Random& random, int batch) {
  std::vector<Operation> expired;
  Status listed = store.Read([&](Transaction& tx) {
    auto ops = tx.ListExpiredHolds(clock.NowMs(), batch);
    if (!ops.ok()) return ops.status();
    expired = std::move(*ops);
    return Status::Ok();
  });
  if (!listed.ok()) return listed;
  SweepReport report;
  for (const Operation& op : expired) {
    SweepReport one;
    Status status = store.Write([&](Transaction& tx) {
      one = SweepReport{};
      return ReleaseOne(tx, op.id, clock, random, one);
    });
    if (!status.ok()) return status;
    report.released += one.released;
    report.alerts += one.alerts;
    for (WorkerDecision& decision : one.decisions) report.decisions.push_back(std::move(decision));
  }
  return report;
}

}  // namespace agentpay
