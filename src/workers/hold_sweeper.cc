// See hold_sweeper.h.
#include "workers/hold_sweeper.h"

#include "core/settlement.h"
#include "settlement/answers.h"
#include "x402/verify.h"

namespace agentpay {
namespace {

// Releases one operation's expired hold if it is still expired inside the decision's transaction
// (a retry may have captured or resumed it since the listing).
Status ReleaseOne(Transaction& tx, const Operation& op, int64_t now, Random& random,
                  SweepReport& report) {
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
          {op.id, now, TraceActor::kWorker, "hold_expired", expiry->reason,
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

// X19: closes one unpaid operation if, inside the decision's transaction, it still waits for a
// retry no attempt holds and its authorization can no longer settle.
Status CloseOne(Transaction& tx, const Operation& op, int64_t now, Random& random,
                SweepReport& report) {
  auto payment = tx.FindX402Payment(op.id);
  if (!payment.ok()) return payment.status();
  if (!payment->has_value()) {
    return Status::Error(ErrorCode::kStoreCorrupt, "x402 operation without a payment: " + op.id);
  }
  const bool can_settle = AuthorizationCanSettle((*payment)->authorization.valid_before_s, now,
                                                 x402::kDefaultValidBeforeBufferSeconds);
  auto closed = ExpireUnpaidX402Operation(op, now, can_settle, ExpiredUnsubmittedResponse(op.id));
  if (!closed) return Status::Ok();
  if (Status s = tx.UpdateOperation(*closed); !s.ok()) return s;
  const std::string reason = "no retry came before the authorization expired (valid before " +
                             std::to_string((*payment)->authorization.valid_before_s) +
                             "), after " + std::to_string(op.attempts) +
                             " upstream call(s) that may have done the work";
  if (Status s =
          tx.AppendEvent({op.id, now, TraceActor::kWorker, "closed_unpaid", reason,
                          TraceFacts().Attempt(op.attempts).Reason("authorization_expired")});
      !s.ok()) {
    return s;
  }
  if (Status s = tx.InsertAlert(UnpaidAfterPossibleWorkAlert(random, op.id, reason, now));
      !s.ok()) {
    return s;
  }
  ++report.closed_unpaid;
  ++report.alerts;
  report.decisions.push_back({op.id, "closed_unpaid_alert_raised", reason});
  return Status::Ok();
}

// Each operation's decision in its own transaction, on the operation as that transaction reads it
// (one gone since the listing is skipped); the reports added up.
using DecideOne = Status (*)(Transaction&, const Operation&, int64_t, Random&, SweepReport&);
Status DecideEach(Store& store, const std::vector<Operation>& ops, DecideOne decide, Clock& clock,
                  Random& random, SweepReport& report) {
  for (const Operation& listed : ops) {
    SweepReport one;
    Status status = store.Write([&](Transaction& tx) {
      one = SweepReport{};
      const int64_t now = clock.NowMs();
      auto found = tx.FindOperation(listed.id);
      if (!found.ok()) return found.status();
      if (!found->has_value()) return Status::Ok();
      return decide(tx, **found, now, random, one);
    });
    if (!status.ok()) return status;
    report.released += one.released;
    report.closed_unpaid += one.closed_unpaid;
    report.alerts += one.alerts;
    for (WorkerDecision& decision : one.decisions) report.decisions.push_back(std::move(decision));
  }
  return Status::Ok();
}

}  // namespace

Result<SweepReport> SweepExpiredHolds(Store& store, Clock& clock, Random& random, int batch,
                                      std::string* cursor) {
  std::vector<Operation> expired;
  Status listed = store.Read([&](Transaction& tx) {
    auto ops = tx.ListExpiredHolds(clock.NowMs(), batch);
    if (!ops.ok()) return ops.status();
    expired = std::move(*ops);
    return Status::Ok();
  });
  if (!listed.ok()) return listed;
  SweepReport report;
  if (Status s = DecideEach(store, expired, ReleaseOne, clock, random, report); !s.ok()) return s;
  // X19, a page a pass: from the cursor, back to the start once past the newest.
  const std::string from = cursor != nullptr ? *cursor : "";
  std::vector<Operation> waiting;
  listed = store.Read([&](Transaction& tx) {
    auto ops = tx.ListUnpaidRetries(from, batch);
    if (!ops.ok()) return ops.status();
    waiting = std::move(*ops);
    return Status::Ok();
  });
  if (!listed.ok()) return listed;
  if (cursor != nullptr) {
    *cursor = waiting.size() < static_cast<size_t>(batch) ? "" : waiting.back().id;
  }
  if (Status s = DecideEach(store, waiting, CloseOne, clock, random, report); !s.ok()) return s;
  return report;
}

}  // namespace agentpay
