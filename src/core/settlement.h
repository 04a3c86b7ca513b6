// x402 settlement (CONTRACT §3, §5; issue 3 item 4): the reconciliation of a submitted EIP-3009
// transfer against what the chain shows, and the x402 operation transitions around it. Pure: the
// shell reads the chain, the clock and the store, and persists what these functions return.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/operation.h"

namespace agentpay {

// The signed EIP-3009 authorization, as far as settlement needs it. Strings are lower-case 0x hex
// (from: 20 bytes, nonce: 32 bytes); times are Unix seconds, as signed; value in atomic units.
struct Authorization {
  std::string from;
  std::string nonce_hex;
  int64_t valid_after_s = 0;
  int64_t valid_before_s = 0;
  int64_t value = 0;
  bool operator==(const Authorization&) const = default;
};

// The relayer transaction that carries one authorization, stored (keyed by (from, nonce)) in the
// same decision that marks the operation `submitted`, before the first broadcast: after a crash the
// reconciler re-broadcasts exactly these bytes, never a newly signed transaction.
struct SettlementRecord {
  std::string operation_id;
  Authorization authorization;
  std::string tx_hash;     // lower-case 0x hex, 32 bytes
  std::string raw_tx_hex;  // lower-case 0x hex, the signed EIP-1559 transaction
  int64_t submitted_ms = 0;
  int64_t broadcasts = 0;  // broadcasts started; each is recorded before it is sent
  bool operator==(const SettlementRecord&) const = default;
};

// Precondition: hex fields well-formed (see Authorization), 0 < value, valid_after < valid_before.
// The record counts its first broadcast, which the shell sends once the record is durable.
SettlementRecord NewSettlementRecord(std::string operation_id, Authorization authorization,
                                     std::string tx_hash, std::string raw_tx_hex,
                                     int64_t submitted_ms);
// The same record with one more broadcast of the same bytes (a kRebroadcast).
SettlementRecord RecordRebroadcast(const SettlementRecord& record);

// What the node says about our transaction's receipt. "Matching Transfer" means a Transfer log of
// the asset from authorization.from to payTo of exactly authorization.value.
enum class ReceiptView { kNone, kSuccessWithTransfer, kSuccessWithoutMatchingTransfer, kReverted };

// One look at the chain. Read order matters: authorizationState first, then the receipt, then the
// transaction. A nonce seen used before our receipt was seen missing cannot have been used by our
// transaction, so `nonce_used && receipt == kNone` reliably means "used by another transaction".
struct ChainObservation {
  ReceiptView receipt = ReceiptView::kNone;
  bool tx_known = false;     // the node knows our transaction (pending or mined)
  bool nonce_used = false;   // authorizationState(from, nonce)
  int64_t chain_time_s = 0;  // timestamp of the latest block
  // With a receipt: how deep its block is (1 = the latest block; head - block + 1).
  int64_t confirmations = 0;
  // With a receipt: the transaction it is of (ours, or one ours replaced at the same relayer
  // nonce; only one of them can be mined), and its block. Not read by Reconcile.
  std::string receipt_tx_hash;
  int64_t receipt_block = -1;
  std::string receipt_block_hash;
};

enum class ReconcileAction { kMarkSettled, kRebroadcast, kMarkVoid, kMarkFailed, kWait };
std::string_view ReconcileActionName(ReconcileAction action);

struct Reconciliation {
  ReconcileAction action;
  Settlement next_settlement;          // `current` for kRebroadcast and kWait
  std::string reason;                  // for the trace event and, on kMarkFailed, the admin alert
  std::string rebroadcast_raw_tx_hex;  // kRebroadcast only: the record's bytes, unchanged
};

// The reconciliation rules, in the order they are applied (vb = validBefore, B = expiry_buffer_s;
// "expired" = chain_time >= vb + B, when no block can use the authorization any more, with B
// covering clock skew between nodes and shallow reorgs):
//
// N = the confirmations required (--confirmations, at least 1).
//
//   receipt                        | tx_known | nonce_used | chain time   | action
//   -------------------------------+----------+------------+--------------+----------------------
//   success + Transfer, >= N deep  | -        | -          | -            | kMarkSettled
//   success + Transfer, < N deep   | -        | -          | -            | kWait        (6)
//   reverted / success w/o Transfer| -        | yes        | -            | kMarkFailed  (1)
//   reverted / success w/o Transfer| -        | no         | expired      | kMarkVoid    (2)
//   reverted / success w/o Transfer| -        | no         | not expired  | kWait        (3)
//   none                           | yes      | no         | expired      | kMarkVoid    (2, 7)
//   none                           | yes      | -          | -            | kWait        (pending)
//   none                           | no       | yes        | -            | kMarkFailed  (1)
//   none                           | no       | no         | < vb         | kRebroadcast (4)
//   none                           | no       | no         | expired      | kMarkVoid    (2)
//   none                           | no       | no         | [vb, vb + B) | kWait        (5)
//
// (1) Our transaction did not move the money, but the authorization's nonce is spent: the payer
//     cancelled it, signed another authorization with that nonce, or a third party relayed ours
//     (then payTo was paid). The reconciler cannot tell which: failed always raises an alert.
// (2) Only kMarkVoid releases anything (CONTRACT §5): expired and confirmed unused. `void` is
//     reached only from `unknown`; from `submitted` this row answers kWait, and the receipt
//     deadline (AfterReceiptTimeout) moves the operation to `unknown` first.
// (3) Our transaction was mined without using the authorization (out of gas, a balance drop): it
//     cannot be re-broadcast (its account nonce is spent), yet the authorization stays usable by
//     anyone holding it until it expires; calling it failed now could let a client pay twice.
// (4) The node dropped it: the same signed bytes go out again (same hash); never a new signature.
// (5) Past validBefore no block can execute it, but a lagging node could still show an earlier
//     time; the buffer must pass before the nonce's "unused" is final.
// (6) A reorganisation shallower than N can still remove the block: settled (and a paid body
//     released) only once it is N deep. If the block goes, the later looks find our transaction
//     pending again (wait) or gone (re-broadcast the same bytes), and it settles again.
// (7) Still pending once expired: any block that includes it now executes it after validBefore,
//     where it can only revert, and the nonce is confirmed unused, so it is void like one that is
//     gone. Waiting for it to leave the pool could last for ever: a node may hold it, and the
//     relayer-nonce gap repair sends it again to use up its relayer nonce.
// Precondition: current is kSubmitted or kUnknown; expiry_buffer_s >= 0; confirmations >= 1.
Reconciliation Reconcile(Settlement current, const SettlementRecord& record,
                         const ChainObservation& seen, int64_t expiry_buffer_s,
                         int64_t confirmations);

// The receipt deadline (--receipt-timeout-ms) passed without a receipt. Precondition: kSubmitted.
Settlement AfterReceiptTimeout(Settlement submitted);

// CONTRACT §5: a budget reservation and its nonce are released only once the authorization has
// expired (chain time >= validBefore + buffer) and the chain confirms it was never used. For the
// agent client's budget; the same rule as Reconcile's kMarkVoid.
bool MayReleaseReservation(const Authorization& authorization, bool nonce_used,
                           int64_t chain_time_s, int64_t buffer_s);

// ---- The x402 operation ------------------------------------------------------------------------
// Intent is always accepted: a payment refused at verification (402) creates no operation. A is the
// attempt holding the lease (`lease_expires_ms`), a = `attempts` (upstream calls started). While an
// attempt is settling, fulfillment is in_progress with a live lease, so a concurrent request with
// the same key attaches (DecideArrival) and one authorization gives one settlement.
//
// Decision table: from (settlement / fulfillment), event -> to: answer.
// X1  new, settle=before -> submitted / in_progress, a=0: A stores the tx, broadcasts, waits.
// X2  new, settle=after -> none / in_progress, a=1: A calls the upstream.
// X3  submitted / in_progress, Reconcile kMarkSettled -> settled / in_progress: A goes on to X9
//     (settle=before) or finishes with the 2xx it holds, X10 (settle=after).
// X4  submitted, receipt deadline -> unknown / not_started (a=0) or pending_retry (a>0):
//     202 settlement_unknown + Location. (The request's looks up to the deadline, and which of
//     X3, X4 and X5 ends them: core/receipt_wait.h.)
// X5  submitted|unknown, Reconcile kMarkFailed -> failed / rejected, final: stored answer, never
//     402 (a).
// X6  unknown, Reconcile kMarkVoid -> void / rejected, final, key released (b): stored 402.
// X7  unknown, Reconcile kMarkSettled -> settled, fulfillment unchanged: the next retry is X9.
// X8  submitted|unknown, retry -> unchanged: 202 settlement_unknown; nothing is submitted.
// X9  settled, retry (or A after X3) -> in_progress, a+1: the upstream is called, no new charge.
// X10 settled / in_progress, upstream 1xx-3xx -> succeeded, final: the upstream's answer.
// X11 settled / in_progress, upstream 4xx -> rejected, final (c): the upstream's answer.
// X12 settled|none / in_progress, upstream 5xx, timeout or failure -> pending_retry:
//     502/504 fulfillment_pending; settlement unchanged.
// X13 none / in_progress, upstream 1xx-3xx -> submitted / in_progress: A stores the tx and
//     broadcasts; then X3 and X10, or X4, or X5.
// X14 none / in_progress, upstream 4xx -> none / rejected, final (d): the upstream's answer.
// X15 none, retry, authorization can still settle -> in_progress, a+1: the upstream is called.
// X16 none, retry, authorization too late -> none / rejected, final, key released (b): stored 402.
// X17 settled, no live attempt, the block holding its receipt reorganised away and the receipt
//     gone -> unknown, fulfillment unchanged (e): the reconciler sends the same bytes (rule 4)
//     and X7 settles it again; a retry meanwhile gets 202 (X8) or, if final, its stored answer.
// X18 unknown after X17 with fulfillment final (the paid answer went out), Reconcile kMarkVoid or
//     kMarkFailed -> void / failed, the stored answer kept (f): an alert for the operator.
// X19 none / pending_retry, no live attempt, authorization too late (as X16 judges it) -> none /
//     rejected, final, key released (b), stored 402: the sweeper closes what no retry came for.
// Void and failed are final. Settled changes again only by X17; otherwise only fulfillment moves.
//
// (a) Every failed settlement has a spent nonce (see (1) above): the payer may have paid, so a 402
//     (which makes x402 clients sign again) is refused; e.g. 409 `settlement_failed`, kept for the
//     retention period, with an admin alert. The upstream already worked if a > 0 (settle=after).
// (b) The key is released at once (retained_until = now): nothing was charged, and a new payment
//     with the same key must start a new operation instead of replaying the 402 forever.
// (c) CONTRACT §3: settle=before charges even when the upstream refuses the input.
// (d) settle=after 4xx: the authorization is simply never submitted. Settlement stays `none` (not
//     `void`): the gateway has nothing on chain to reconcile; the payer's own budget is released by
//     MayReleaseReservation once the authorization expires unused.
// (e) Only a reorganisation deeper than --confirmations can do this (shallower ones are rule 6):
//     an operator chose N too small for the chain, or the chain reorganised unusually deep.
// (f) The payer got the paid answer and the chain holds no payment for it (the authorization
//     expired before it was mined again, or the payer spent it elsewhere): an operator decides.
// (g) X6, X16 and X19 from pending_retry (UnpaidAfterPossibleWork): an upstream call was made
//     (settle=after: it answered, or answered 5xx, timed out or was cut by a crash), so the
//     upstream may have done the work, and now it will never be paid: an alert for the operator
//     with the closing, as the hold sweeper raises for a wallet hold.
// X4 on settle=after (a > 0): the upstream's 2xx is not kept (a response is stored only when
// final); once settled, the retry calls the upstream again with the same upstream Idempotency-Key.
// Crash recovery (RecoverInterrupted) turns the in_progress of a dead attempt (its gateway process
// gone, or its lease expired) into pending_retry and leaves settlement as is; the reconciler
// applies X4 to `submitted` records older than the receipt deadline.

enum class SettleOrder { kBeforeUpstream, kAfterUpstream };

struct X402OperationParams {
  std::string id, principal, idempotency_key, fingerprint, route;
  int64_t amount = 0;
  SettleOrder order = SettleOrder::kBeforeUpstream;
  // The attempt's claim: receipt timeout + route timeout + a margin, so that it covers the
  // settlement wait and the upstream call in either order.
  int64_t lease_ms = 0;
  std::string claimant;  // the instance id of the gateway process taking the claim
};

// X1, X2. Precondition: amount > 0, principal "payer:<address>". The shell stores the operation
// and, for settle=before, the SettlementRecord in one decision, and broadcasts after the commit.
Operation NewX402Operation(const X402OperationParams& params, int64_t now_ms);

// X3, X7. Precondition: settlement submitted or unknown (fulfillment may be final after X17).
Operation MarkSettled(const Operation& op, int64_t now_ms);
// X17. Precondition: settlement settled, no live claim (the shell's check).
Operation MarkReorganised(const Operation& op, int64_t now_ms);
// X18. Precondition: settlement unknown, fulfillment final; `settlement` void or failed.
Operation MarkLostAfterDelivery(const Operation& op, Settlement settlement, int64_t now_ms);
// X4. Precondition: settlement submitted.
Operation MarkUnknown(const Operation& op, int64_t now_ms);
// X6. Precondition: settlement unknown, no attempt in progress, response.status >= 400.
Operation MarkVoid(const Operation& op, int64_t now_ms, StoredResponse response);
// X5. Precondition: settlement submitted or unknown; response.status >= 400 and != 402.
Operation MarkFailed(const Operation& op, int64_t now_ms, StoredResponse response,
                     int64_t retention_ms);

// What a retry of an unfinished x402 operation does (DecideArrival said kResume).
enum class X402Resume {
  kAnswerUnknown,  // X8: settlement submitted or unknown; nothing changes, nothing is submitted
  kCallUpstream,   // X9, X15: BeginX402Call, then the upstream
  kCloseUnpaid,    // X16: CloseUnpaidX402Operation
};
std::string_view X402ResumeName(X402Resume resume);
// `authorization_can_settle`: the shell's judgement that the stored authorization could still be
// mined before validBefore (only consulted when settlement is none). Precondition: !IsFinal(op).
X402Resume DecideX402Resume(const Operation& op, bool authorization_can_settle);

// X9, X15 (and A itself after X3 on settle=before): the claim goes to the gateway process
// `claimant` (its instance id). Precondition: !IsFinal(op), settlement settled or none.
Operation BeginX402Call(const Operation& op, int64_t now_ms, int64_t lease_ms,
                        const std::string& claimant);

// X10-X14: the upstream answered (or not) an attempt. `submit_settlement` (X13) tells the shell to
// sign and store the SettlementRecord together with `next`, then broadcast; once Reconcile says
// kMarkSettled, MarkSettled and then CompleteX402Call again with the same outcome finish it (X10).
struct X402Completion {
  Verdict verdict;
  Operation next;
  bool submit_settlement = false;
};
// Precondition: fulfillment in_progress, settlement settled or none.
X402Completion CompleteX402Call(const Operation& op, const UpstreamOutcome& outcome, int64_t now_ms,
                                int64_t retention_ms);

// X16. Precondition: settlement none, !IsFinal(op), response.status >= 400.
Operation CloseUnpaidX402Operation(const Operation& op, int64_t now_ms, StoredResponse response);

// The shell's judgement for X15/X16/X19: an authorization valid before `valid_before_s` can still
// be mined if the deadline is more than `margin_s` (x402's validBefore buffer) after now.
bool AuthorizationCanSettle(int64_t valid_before_s, int64_t now_ms, int64_t margin_s);

// X19: the closing of an unpaid operation no retry came for, or nullopt when it is not one (not
// none / pending_retry, an attempt's lease still live, or the authorization can still settle).
// Precondition: response.status >= 400.
std::optional<Operation> ExpireUnpaidX402Operation(const Operation& op, int64_t now_ms,
                                                   bool authorization_can_settle,
                                                   StoredResponse response);

// (g): closing `before` unpaid (X6 void, X16, X19) leaves work the upstream may have done unpaid:
// not settled, fulfillment pending_retry after an upstream call (a > 0; crash recovery also makes a
// settle=before attempt pending_retry, with a = 0: no upstream call was made).
bool UnpaidAfterPossibleWork(const Operation& before);

}  // namespace agentpay
