// x402 settlement reconciliation and operation transitions; see settlement.h for the decision
// tables and docs/state-machine.md for how the gateway and the reconciler use them.
#include "core/settlement.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/check.h"

namespace agentpay {
namespace {

bool IsLowerHex(std::string_view text, size_t bytes) {
  if (!text.starts_with("0x") || text.size() < 4 || text.size() % 2 != 0) return false;
  if (bytes != 0 && text.size() != 2 + 2 * bytes) return false;
  for (char c : text.substr(2)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// chain_time >= valid_before + buffer, without overflow: a validBefore so far away that the sum
// does not fit never expires.
bool PastExpiry(int64_t valid_before_s, int64_t buffer_s, int64_t chain_time_s) {
  AGENTPAY_CHECK(buffer_s >= 0);
  if (valid_before_s > std::numeric_limits<int64_t>::max() - buffer_s) return false;
  return chain_time_s >= valid_before_s + buffer_s;
}

Reconciliation Decided(ReconcileAction action, Settlement next, std::string reason) {
  return {action, next, std::move(reason), ""};
}

// Row (2) of the table: void only from unknown, so that every void settlement went through the
// receipt deadline (issue 3: submitted -> settled | unknown | failed).
Reconciliation VoidOrWait(Settlement current, std::string why) {
  if (current == Settlement::kSubmitted) {
    return Decided(ReconcileAction::kWait, current,
                   why + "; still submitted: the receipt deadline moves it to unknown first");
  }
  return Decided(ReconcileAction::kMarkVoid, Settlement::kVoid, why + ": nothing was charged");
}

// A receipt exists but our transaction did not move the money (reverted, or no matching Transfer).
Reconciliation MinedWithoutTransfer(Settlement current, bool expired,
                                    const ChainObservation& seen) {
  const std::string what = seen.receipt == ReceiptView::kReverted
                               ? "our transaction reverted"
                               : "our transaction succeeded without the matching Transfer";
  if (seen.nonce_used) {
    return Decided(ReconcileAction::kMarkFailed, Settlement::kFailed,
                   what +
                       " and the nonce is used by another transaction; payTo may have been "
                       "paid by a third party's relay of the same authorization");
  }
  if (expired) return VoidOrWait(current, what + "; the authorization expired unused");
  return Decided(ReconcileAction::kWait, current,
                 what +
                     "; the authorization is unused but still valid, so anyone holding it "
                     "could still submit it: wait for its expiry");
}

}  // namespace

SettlementRecord NewSettlementRecord(std::string operation_id, Authorization authorization,
                                     std::string tx_hash, std::string raw_tx_hex,
                                     int64_t submitted_ms) {
  AGENTPAY_CHECK(!operation_id.empty());
  AGENTPAY_CHECK(IsLowerHex(authorization.from, 20));
  AGENTPAY_CHECK(IsLowerHex(authorization.nonce_hex, 32));
  AGENTPAY_CHECK(authorization.value > 0);
  AGENTPAY_CHECK(authorization.valid_after_s < authorization.valid_before_s);
  AGENTPAY_CHECK(IsLowerHex(tx_hash, 32));
  AGENTPAY_CHECK(IsLowerHex(raw_tx_hex, 0));
  return {std::move(operation_id),
          std::move(authorization),
          std::move(tx_hash),
          std::move(raw_tx_hex),
          submitted_ms,
          1};
}

SettlementRecord RecordRebroadcast(const SettlementRecord& record) {
  SettlementRecord next = record;
  next.broadcasts = record.broadcasts + 1;
  return next;
}

std::string_view ReconcileActionName(ReconcileAction action) {
  switch (action) {
    case ReconcileAction::kMarkSettled:
      return "mark_settled";
    case ReconcileAction::kRebroadcast:
      return "rebroadcast";
    case ReconcileAction::kMarkVoid:
      return "mark_void";
    case ReconcileAction::kMarkFailed:
      return "mark_failed";
    case ReconcileAction::kWait:
      return "wait";
  }
  AGENTPAY_CHECK(false);
}

Reconciliation Reconcile(Settlement current, const SettlementRecord& record,
                         const ChainObservation& seen, int64_t expiry_buffer_s,
                         int64_t confirmations) {
  AGENTPAY_CHECK(current == Settlement::kSubmitted || current == Settlement::kUnknown);
  AGENTPAY_CHECK(confirmations >= 1);
  const int64_t valid_before_s = record.authorization.valid_before_s;
  const bool expired = PastExpiry(valid_before_s, expiry_buffer_s, seen.chain_time_s);
  switch (seen.receipt) {
    case ReceiptView::kSuccessWithTransfer:
      if (seen.confirmations < confirmations) {
        return Decided(ReconcileAction::kWait, current,
                       "receipt success with the matching Transfer, " +
                           std::to_string(std::max<int64_t>(seen.confirmations, 0)) + " of " +
                           std::to_string(confirmations) + " confirmations");
      }
      return Decided(ReconcileAction::kMarkSettled, Settlement::kSettled,
                     "receipt success with the matching Transfer");
    case ReceiptView::kSuccessWithoutMatchingTransfer:
    case ReceiptView::kReverted:
      return MinedWithoutTransfer(current, expired, seen);
    case ReceiptView::kNone:
      break;
  }
  if (seen.tx_known) {
    if (!seen.nonce_used && expired) {
      return VoidOrWait(current,
                        "our transaction is pending but the authorization expired unused, so no "
                        "block can execute it any more");
    }
    return Decided(ReconcileAction::kWait, current, "our transaction is pending");
  }
  if (seen.nonce_used) {
    // Read order (settlement.h): the nonce was used before our receipt was seen missing.
    return Decided(ReconcileAction::kMarkFailed, Settlement::kFailed,
                   "our transaction is gone and the nonce is used by another transaction; payTo "
                   "may have been paid by a third party's relay of the same authorization");
  }
  if (seen.chain_time_s < valid_before_s) {
    Reconciliation again = Decided(ReconcileAction::kRebroadcast, current,
                                   "our transaction is gone before validBefore: broadcast the same "
                                   "signed bytes again");
    again.rebroadcast_raw_tx_hex = record.raw_tx_hex;
    return again;
  }
  if (expired)
    return VoidOrWait(current, "our transaction is gone and the authorization expired unused");
  return Decided(
      ReconcileAction::kWait, current,
      "past validBefore but within the expiry buffer: the unused nonce is not final yet");
}

Settlement AfterReceiptTimeout(Settlement submitted) {
  AGENTPAY_CHECK(submitted == Settlement::kSubmitted);
  return Settlement::kUnknown;
}

bool MayReleaseReservation(const Authorization& authorization, bool nonce_used,
                           int64_t chain_time_s, int64_t buffer_s) {
  return !nonce_used && PastExpiry(authorization.valid_before_s, buffer_s, chain_time_s);
}

Operation NewX402Operation(const X402OperationParams& params, int64_t now_ms) {
  AGENTPAY_CHECK(params.principal.starts_with("payer:"));
  AGENTPAY_CHECK(params.lease_ms > 0);
  Operation op = NewAcceptedOperation(params.id, params.principal, params.idempotency_key,
                                      params.fingerprint, params.route, params.amount, now_ms);
  // in_progress from the start in both orders: the lease makes a concurrent same-key request attach
  // instead of submitting or calling on its own.
  op.fulfillment = Fulfillment::kInProgress;
  op.lease_expires_ms = now_ms + params.lease_ms;
  op.claimed_by = params.claimant;
  switch (params.order) {
    case SettleOrder::kBeforeUpstream:
      op.settlement = Settlement::kSubmitted;
      op.attempts = 0;  // the upstream is called only once settled (BeginX402Call)
      break;
    case SettleOrder::kAfterUpstream:
      op.settlement = Settlement::kNone;
      op.attempts = 1;
      break;
  }
  return op;
}

Operation MarkSettled(const Operation& op, int64_t now_ms) {
  AGENTPAY_CHECK(op.settlement == Settlement::kSubmitted || op.settlement == Settlement::kUnknown);
  Operation next = op;
  // Fulfillment is untouched: a live attempt goes on to the upstream (or finishes with the 2xx it
  // holds); otherwise the next retry is free (or, after X17, replays the answer already given).
  next.settlement = Settlement::kSettled;
  next.updated_ms = now_ms;
  return next;
}

Operation MarkReorganised(const Operation& op, int64_t now_ms) {
  AGENTPAY_CHECK(op.settlement == Settlement::kSettled);
  Operation next = op;
  next.settlement = Settlement::kUnknown;
  next.updated_ms = now_ms;
  return next;
}

Operation MarkLostAfterDelivery(const Operation& op, Settlement settlement, int64_t now_ms) {
  AGENTPAY_CHECK(op.settlement == Settlement::kUnknown && IsFinal(op));
  AGENTPAY_CHECK(settlement == Settlement::kVoid || settlement == Settlement::kFailed);
  Operation next = op;
  next.settlement = settlement;
  next.updated_ms = now_ms;
  return next;
}

Operation MarkUnknown(const Operation& op, int64_t now_ms) {
  AGENTPAY_CHECK(!IsFinal(op));
  Operation next = op;
  next.settlement = AfterReceiptTimeout(op.settlement);
  // The attempt ends with a 202; nothing may claim the operation until the settlement resolves.
  next.fulfillment = op.attempts == 0 ? Fulfillment::kNotStarted : Fulfillment::kPendingRetry;
  next.lease_expires_ms = 0;
  next.updated_ms = now_ms;
  return next;
}

Operation MarkVoid(const Operation& op, int64_t now_ms, StoredResponse response) {
  AGENTPAY_CHECK(op.settlement == Settlement::kUnknown);
  AGENTPAY_CHECK(op.fulfillment != Fulfillment::kInProgress);
  AGENTPAY_CHECK(response.status >= 400);
  Operation next = op;
  next.settlement = Settlement::kVoid;
  next.fulfillment = Fulfillment::kRejected;
  next.response = std::move(response);
  next.lease_expires_ms = 0;
  next.retained_until_ms = now_ms;  // (b): the key is free for a new payment at once
  next.updated_ms = now_ms;
  return next;
}

Operation MarkFailed(const Operation& op, int64_t now_ms, StoredResponse response,
                     int64_t retention_ms) {
  AGENTPAY_CHECK(op.settlement == Settlement::kSubmitted || op.settlement == Settlement::kUnknown);
  AGENTPAY_CHECK(!IsFinal(op));
  // (a): the nonce is spent, so the payer may have paid: a 402 would make the client sign again.
  AGENTPAY_CHECK(response.status >= 400 && response.status != 402);
  Operation next = op;
  next.settlement = Settlement::kFailed;
  next.fulfillment = Fulfillment::kRejected;
  next.response = std::move(response);
  next.lease_expires_ms = 0;
  next.retained_until_ms = now_ms + retention_ms;
  next.updated_ms = now_ms;
  return next;
}

std::string_view X402ResumeName(X402Resume resume) {
  switch (resume) {
    case X402Resume::kAnswerUnknown:
      return "answer_unknown";
    case X402Resume::kCallUpstream:
      return "call_upstream";
    case X402Resume::kCloseUnpaid:
      return "close_unpaid";
  }
  AGENTPAY_CHECK(false);
}

X402Resume DecideX402Resume(const Operation& op, bool authorization_can_settle) {
  AGENTPAY_CHECK(!IsFinal(op));
  switch (op.settlement) {
    case Settlement::kSubmitted:
    case Settlement::kUnknown:
      // Never a second authorization for a key whose settlement is in flight or unknown.
      return X402Resume::kAnswerUnknown;
    case Settlement::kSettled:
      return X402Resume::kCallUpstream;
    case Settlement::kNone:
      return authorization_can_settle ? X402Resume::kCallUpstream : X402Resume::kCloseUnpaid;
    case Settlement::kHeld:
    case Settlement::kReleased:  // wallet states
    case Settlement::kVoid:
    case Settlement::kFailed:  // always final
      break;
  }
  AGENTPAY_CHECK(false);
}

Operation BeginX402Call(const Operation& op, int64_t now_ms, int64_t lease_ms,
                        const std::string& claimant) {
  AGENTPAY_CHECK(!IsFinal(op));
  AGENTPAY_CHECK(op.settlement == Settlement::kSettled || op.settlement == Settlement::kNone);
  Operation next = op;
  next.fulfillment = Fulfillment::kInProgress;
  next.lease_expires_ms = now_ms + lease_ms;
  next.claimed_by = claimant;
  next.attempts = op.attempts + 1;
  next.updated_ms = now_ms;
  return next;
}

X402Completion CompleteX402Call(const Operation& op, const UpstreamOutcome& outcome, int64_t now_ms,
                                int64_t retention_ms) {
  AGENTPAY_CHECK(op.fulfillment == Fulfillment::kInProgress);
  AGENTPAY_CHECK(op.settlement == Settlement::kSettled || op.settlement == Settlement::kNone);
  X402Completion completion{ClassifyUpstream(outcome), op, false};
  Operation& next = completion.next;
  next.updated_ms = now_ms;
  const bool paid = op.settlement == Settlement::kSettled;
  switch (completion.verdict) {
    case Verdict::kCapture:
      if (!paid) {
        // X13: settle now; the attempt keeps its lease through the receipt wait.
        next.settlement = Settlement::kSubmitted;
        completion.submit_settlement = true;
        return completion;
      }
      next.fulfillment = Fulfillment::kSucceeded;
      break;
    case Verdict::kRelease:
      // X11 (paid: settle=before charges refused input) or X14 (never submitted).
      next.fulfillment = Fulfillment::kRejected;
      break;
    case Verdict::kKeep:
      next.fulfillment = Fulfillment::kPendingRetry;
      next.lease_expires_ms = 0;
      return completion;
  }
  next.response = StoredResponse{outcome.status, outcome.content_type, outcome.body};
  next.lease_expires_ms = 0;
  next.retained_until_ms = now_ms + retention_ms;
  return completion;
}

bool AuthorizationCanSettle(int64_t valid_before_s, int64_t now_ms, int64_t margin_s) {
  // Compared in seconds as x402 verifies a window; saturating, so no deadline overflows.
  const int64_t now_s = now_ms / 1000;
  return valid_before_s > now_s && valid_before_s - now_s > margin_s;
}

std::optional<Operation> ExpireUnpaidX402Operation(const Operation& op, int64_t now_ms,
                                                   bool authorization_can_settle,
                                                   StoredResponse response) {
  if (op.settlement != Settlement::kNone || op.fulfillment != Fulfillment::kPendingRetry) {
    return std::nullopt;
  }
  if (op.lease_expires_ms > now_ms || authorization_can_settle) return std::nullopt;
  return CloseUnpaidX402Operation(op, now_ms, std::move(response));
}

bool UnpaidAfterPossibleWork(const Operation& before) {
  return before.settlement != Settlement::kSettled &&
         before.fulfillment == Fulfillment::kPendingRetry && before.attempts > 0;
}

Operation CloseUnpaidX402Operation(const Operation& op, int64_t now_ms, StoredResponse response) {
  AGENTPAY_CHECK(op.settlement == Settlement::kNone);
  AGENTPAY_CHECK(!IsFinal(op));
  AGENTPAY_CHECK(response.status >= 400);
  Operation next = op;
  next.fulfillment = Fulfillment::kRejected;
  next.response = std::move(response);
  next.lease_expires_ms = 0;
  next.retained_until_ms = now_ms;  // (b)
  next.updated_ms = now_ms;
  return next;
}

}  // namespace agentpay
