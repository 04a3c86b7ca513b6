// See reconciler.h.
#include "workers/reconciler.h"

#include <functional>
#include <limits>

#include "core/check.h"
#include "core/reconciler_look.h"
#include "core/relayer_gap.h"
#include "settlement/answers.h"

namespace agentpay {
namespace {

struct Candidate {
  Operation op;
  X402PaymentRecord payment;
};

// Whether a reconciler may touch a settling operation now: an attempt still waiting on its receipt
// owns the operation until its lease runs out, and a `submitted` one is left alone until its
// receipt deadline.
bool Eligible(const Operation& op, const X402PaymentRecord& payment, int64_t now,
              const ReconcilerConfig& config) {
  const bool claimed = op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > now;
  const bool before_deadline = op.settlement == Settlement::kSubmitted &&
                               now < payment.submitted_ms + config.receipt_timeout_ms;
  return !claimed && !before_deadline;
}

// One page of settling operations after `cursor`, with their payments (`eligible`: see Eligible).
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
      // Unsigned: a member of a batch that its attempt did not sign (a crash, a failed decision).
      if (!payment->has_value()) {
        return Status::Error(ErrorCode::kStoreCorrupt,
                             "settling operation without a payment " + op.id);
      }
      const bool eligible = Eligible(op, **payment, now, config);
      page.push_back({{std::move(op), std::move(**payment)}, eligible});
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return page;
}

// The decision for one operation; `broadcast` tells the caller to send `send` after the commit
// (a re-broadcast, a replacement, or after void the filler of the relayer's nonce gap).
struct Applied {
  bool changed = false;
  bool broadcast = false;
  X402PaymentRecord send;
  bool resolved = false;  // settled, void or failed: nothing left to reconcile
};

// The replacement's transaction fields on `member`, another payment of the batch whose
// transaction it replaces: a batch's members share the transaction at every fee.
X402PaymentRecord ReplacedIn(X402PaymentRecord member, const X402PaymentRecord& replacement) {
  member.replaced_raw_txs.push_back(member.raw_tx_hex);
  member.tx_hash = replacement.tx_hash;
  member.raw_tx_hex = replacement.raw_tx_hex;
  member.submitted_ms = replacement.submitted_ms;
  ++member.broadcasts;
  return member;
}

// `confirmations`: the settler's (--confirmations). `replacement`: a stuck transaction's
// replacement (Settler::Replace), stored in place of the listed one if Reconcile waits, and in
// place of the same transaction of every other member of its batch. `sign`: for a payment not
// signed yet (an unsigned batch member), the settler and the inputs to sign it alone with when
// Reconcile says it can still be sent.
struct SignAlone {
  Settler& settler;
  TxInputs inputs;
};
Result<Applied> Apply(Store& store, Random& random, const Candidate& seen_candidate,
                      const ChainObservation& seen, int64_t confirmations, int64_t now,
                      const ReconcilerConfig& config,
                      const std::optional<Settler::Replacement>& replacement,
                      const std::optional<SignAlone>& sign, ReconcileReport& report) {
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
    applied.send = seen_candidate.payment;
    std::vector<TraceEvent> events;
    Reconciliation r = Reconcile(Settlement::kUnknown, ToSettlementRecord(seen_candidate.payment),
                                 seen, config.expiry_buffer_seconds, confirmations);
    // What the decision does (core/reconciler_look.h RL1–RL9); here, how it is written.
    const ReconcilerLook look = DecideReconcilerLook(
        listed, r.action, seen, replacement && replacement->record.has_value());
    r.action = look.action;
    if (look.mark_unknown) {
      // X4 for an attempt that is gone (crash, lost claim): its receipt deadline has passed.
      op = MarkUnknown(op, now);
      ++report.marked_unknown;
      events.push_back({op.id, now, TraceActor::kWorker, "settlement_unknown",
                        "no attempt is waiting on " + seen_candidate.payment.tx_hash,
                        TraceFacts()
                            .Attempt(op.attempts)
                            .TxHash(seen_candidate.payment.tx_hash)
                            .Reason("receipt_timeout")});
      report.decisions.push_back({op.id, "settlement_unknown", events.back().detail});
    }
    std::string event_tx = applied.send.tx_hash;  // the transaction the decision is about
    switch (look.outcome) {
      case ReconcilerOutcome::kReplace: {  // stuck on its fee: the replacement goes out instead
        if (Status s = tx.UpdateX402Payment(*replacement->record); !s.ok()) return s;
        const X402PaymentRecord& old = seen_candidate.payment;
        auto members = tx.ListX402PaymentsAtRelayerNonce(old.relayer, old.relayer_nonce);
        if (!members.ok()) return members.status();
        for (const X402PaymentRecord& member : *members) {
          if (member.operation_id == old.operation_id || member.tx_hash != old.tx_hash) continue;
          X402PaymentRecord moved = ReplacedIn(member, *replacement->record);
          if (Status s = tx.UpdateX402Payment(moved); !s.ok()) return s;
          if (Status s = tx.AppendEvent(
                  {member.operation_id, now, TraceActor::kWorker, "tx_replaced",
                   "its batch's transaction " + old.tx_hash + " replaced by " + moved.tx_hash +
                       " at relayer nonce " + std::to_string(moved.relayer_nonce),
                   TraceFacts().TxHash(moved.tx_hash).Reason("fee_bump")});
              !s.ok()) {
            return s;
          }
        }
        applied.send = *replacement->record;
        ++report.replaced;
        const std::string detail = replacement->decision.reason + ": " +
                                   seen_candidate.payment.tx_hash + " replaced by " +
                                   replacement->record->tx_hash + " at relayer nonce " +
                                   std::to_string(replacement->record->relayer_nonce);
        events.push_back({op.id, now, TraceActor::kWorker, "tx_replaced", detail,
                          TraceFacts().TxHash(replacement->record->tx_hash).Reason("fee_bump")});
        report.decisions.push_back({op.id, "tx_replaced", detail});
        break;
      }
      case ReconcilerOutcome::kSettle: {
        op = MarkSettled(op, now);
        // The block is recorded for the watch for reorganisations; if the chain mined a
        // transaction ours replaced, it becomes the one the operation reports.
        X402PaymentRecord mined = AsSettled(seen_candidate.payment, seen, now);
        if (mined.tx_hash != seen_candidate.payment.tx_hash) {
          r.reason += " (of " + mined.tx_hash + ", mined instead of its replacement)";
        }
        if (Status s = tx.UpdateX402Payment(mined); !s.ok()) return s;
        event_tx = mined.tx_hash;
        ++report.settled;
        break;
      }
      case ReconcilerOutcome::kRebroadcast: {
        if (!seen_candidate.payment.submitted()) {
          // Never signed (its batch's attempt is gone): signed now, alone, and sent; from here
          // on it is reconciled as any other.
          if (!sign) return Status::Ok();  // nothing to sign it with: looked at again later
          auto nonce = sign->settler.TakeNonce(tx, sign->inputs.pending_nonce);
          if (!nonce.ok()) return nonce.status();
          auto signed_payment =
              sign->settler.SignTogether({seen_candidate.payment}, sign->inputs, *nonce, now);
          if (!signed_payment.ok()) return signed_payment.status();
          applied.send = std::move(signed_payment->front());
          if (Status s = tx.UpdateX402Payment(applied.send); !s.ok()) return s;
          event_tx = applied.send.tx_hash;
          r.reason = "never signed, its authorization still unused: signed alone as " +
                     applied.send.tx_hash + " at relayer nonce " + std::to_string(*nonce);
          ++report.rebroadcast;
          break;
        }
        SettlementRecord record = RecordRebroadcast(ToSettlementRecord(seen_candidate.payment));
        X402PaymentRecord payment = seen_candidate.payment;
        payment.broadcasts = record.broadcasts;
        if (Status s = tx.UpdateX402Payment(payment); !s.ok()) return s;
        applied.send = payment;
        ++report.rebroadcast;
        break;
      }
      case ReconcilerOutcome::kLostAfterDelivery:
        // X18: the paid answer went out before a reorganisation took the settlement away for
        // good; the stored answer stays, and an operator is told.
        op = MarkLostAfterDelivery(op, look.lost_as, now);
        if (Status s = tx.InsertAlert(SettlementLostAfterDeliveryAlert(
                random, op.id, "the paid answer was delivered; " + r.reason, now));
            !s.ok()) {
          return s;
        }
        ++(look.lost_as == Settlement::kVoid ? report.voided : report.failed);
        break;
      case ReconcilerOutcome::kVoid: {
        const bool after_work = UnpaidAfterPossibleWork(op);  // (g): settle=after, a > 0
        op = MarkVoid(op, now, SettlementVoidResponse(op.id));
        if (after_work) {
          Status alerted = tx.InsertAlert(UnpaidAfterPossibleWorkAlert(
              random, op.id, "the upstream answered before the settlement; " + r.reason, now));
          if (!alerted.ok()) return alerted;
        }
        ++report.voided;
        break;
      }
      case ReconcilerOutcome::kFail:
        op = MarkFailed(op, now, SettlementFailedResponse(op.id), config.retention_ms);
        if (Status s = tx.InsertAlert(SettlementFailedAlert(random, op.id, r.reason, now));
            !s.ok()) {
          return s;
        }
        ++report.failed;
        break;
      case ReconcilerOutcome::kWait:
        break;
    }
    applied.broadcast = look.broadcast;
    applied.resolved = look.resolved;
    if (r.action != ReconcileAction::kWait) {
      if (r.action == ReconcileAction::kMarkSettled) {
        // What the chain showed, on its own row of the trace, then what the reconciler made of it.
        events.push_back(
            {op.id, now, TraceActor::kChain, "mined",
             "receipt of " + event_tx + " in block " + std::to_string(seen.receipt_block),
             TraceFacts().Amount(op.amount).TxHash(event_tx).Block(seen.receipt_block)});
      }
      events.push_back({op.id, now, TraceActor::kWorker, std::string(ReconcileActionName(r.action)),
                        r.reason, TraceFacts().TxHash(event_tx)});
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

// The relayer-nonce gap rule of reconciler.h, walked by the table of core/relayer_gap.h (G1–G11):
// from the relayer's first unmined nonce up, the facts of each nonce (the store's transaction
// there, the node's knowledge of it, the node's pending count, read at most once) go in, and the
// step that comes out is carried out. (The mined nonce, not the pending one, is where it starts:
// Anvil's pending count runs past a gap.) The walk also ends one past everything the store took,
// after kMaxGapFillsPerPass sends, after kMaxGapStepsPerPass nonces, or when `more` refuses the
// chain calls of the next nonce (kRpcCallsPerGapStep) or of the pending count (1).
struct GapFill {
  int resent = 0;
  int noops = 0;
  // The operation whose transaction the node holds at the relayer's next nonce without counting it
  // pending, while that nonce stays unmined: the node will not mine it as it is (the caller has it
  // replaced, Stuck::kHeldAtNextNonce).
  std::optional<std::string> held_at_next_nonce;
};
Result<GapFill> FillRelayerGap(Store& store, Settler& settler, int64_t now,
                               const std::function<bool(int64_t calls)>& more,
                               std::optional<uint64_t>* last_mined) {
  auto next = settler.chain().MinedNonce(settler.relayer());
  if (!next.ok()) return next.status();
  if (*next > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::Error(ErrorCode::kRpcMalformed, "relayer nonce out of range");
  }
  const bool stalled = last_mined == nullptr || *last_mined == *next;
  if (last_mined != nullptr) *last_mined = *next;
  std::optional<uint64_t> pending;  // the node's pending count, read at most once
  GapFill filled;
  const int64_t first = static_cast<int64_t>(*next);
  for (int64_t nonce = first;
       filled.resent + filled.noops < kMaxGapFillsPerPass && nonce - first < kMaxGapStepsPerPass;
       ++nonce) {
    if (nonce > first && !more(kRpcCallsPerGapStep)) return filled;
    std::optional<X402PaymentRecord> stuck;
    int64_t taken = 0;  // the store's next relayer nonce
    Status read = store.Read([&](Transaction& tx) {
      // A batch's members share the transaction: any one of them stands for it.
      auto found = tx.ListX402PaymentsAtRelayerNonce(settler.RelayerHex(), nonce);
      if (!found.ok()) return found.status();
      stuck.reset();
      if (!found->empty()) stuck = std::move(found->front());
      auto next_taken = tx.NextRelayerNonce(settler.RelayerHex());
      if (!next_taken.ok()) return next_taken.status();
      taken = *next_taken;
      return Status::Ok();
    });
    if (!read.ok()) return read;
    GapFacts facts{.nonce = nonce,
                   .first = nonce == first,
                   .ours = stuck && stuck->submitted(),
                   .taken = taken,
                   .stalled = stalled,
                   .node_knows = std::nullopt,
                   .pending = pending};
    // At most three decisions a nonce: each fact is asked for once.
    for (bool moved_on = false; !moved_on;) {
      switch (DecideGapStep(facts)) {
        case GapStep::kReadPending: {
          if (!more(1)) return filled;
          auto read_pending = settler.chain().PendingNonce(settler.relayer());
          if (!read_pending.ok()) return read_pending.status();
          facts.pending = pending = *read_pending;
          break;
        }
        case GapStep::kAskNode: {
          auto known = settler.NodeKnows(*stuck);
          if (!known.ok()) return known.status();
          facts.node_knows = *known;
          break;
        }
        case GapStep::kSendNoop:
          if (Status sent = settler.SendNoop(nonce, now); !sent.ok()) return sent;
          ++filled.noops;
          moved_on = true;
          break;
        case GapStep::kResend:
          if (Status sent = settler.Broadcast(*stuck); !sent.ok()) return sent;
          ++filled.resent;
          moved_on = true;
          break;
        case GapStep::kNext:
          moved_on = true;
          break;
        case GapStep::kHeldAtNextNonce:
          filled.held_at_next_nonce = stuck->operation_id;
          return filled;
        case GapStep::kStop:
          return filled;
      }
    }
  }
  return filled;
}

// X17 for one watched payment whose block is no longer canonical (`seen`: a fresh look). Mined
// again with the matching Transfer (another block): only its block is recorded anew. Otherwise the
// operation goes back to unknown, unless an attempt holds it (the next watch sees it again) or it
// moved meanwhile. Returns whether it went back.
Result<bool> ApplyReorganised(Store& store, const X402PaymentRecord& watched,
                              const ChainObservation& seen, int64_t now, ReconcileReport& report) {
  bool back = false;
  Status status = store.Write([&](Transaction& tx) {
    back = false;
    auto payment = tx.FindX402Payment(watched.operation_id);
    if (!payment.ok()) return payment.status();
    if (!payment->has_value() || **payment != watched) return Status::Ok();  // moved meanwhile
    if (seen.receipt == ReceiptView::kSuccessWithTransfer) {
      return tx.UpdateX402Payment(AsSettled(watched, seen, now));
    }
    auto found = tx.FindOperation(watched.operation_id);
    if (!found.ok()) return found.status();
    if (!found->has_value() || (*found)->settlement != Settlement::kSettled) return Status::Ok();
    const Operation& op = **found;
    if (op.fulfillment == Fulfillment::kInProgress && op.lease_expires_ms > now) {
      return Status::Ok();  // an attempt holds it: looked at again by the next watch
    }
    X402PaymentRecord unsettled = watched;
    unsettled.settled_block = -1;
    unsettled.settled_block_hash.clear();
    unsettled.settled_ms = 0;
    const std::string reason = "block " + std::to_string(watched.settled_block) + " (" +
                               watched.settled_block_hash + ") no longer holds the receipt of " +
                               watched.tx_hash +
                               ": back to unknown; the same signed transaction settles it again";
    if (Status s = tx.UpdateOperation(MarkReorganised(op, now)); !s.ok()) return s;
    if (Status s = tx.UpdateX402Payment(unsettled); !s.ok()) return s;
    if (Status s =
            tx.AppendEvent({op.id, now, TraceActor::kWorker, "settlement_reorganised", reason,
                            TraceFacts()
                                .TxHash(watched.tx_hash)
                                .Block(watched.settled_block)
                                .Reason("reorganisation")});
        !s.ok()) {
      return s;
    }
    report.decisions.push_back({op.id, "settlement_reorganised", reason});
    back = true;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return back;
}

// The watch for reorganisations (reconciler.h): the settlements seen in the last reorg_watch_ms,
// grouped by block, newest first. A block the node calls canonical vouches for the lower ones
// found canonical since it was first listed (core/reorg_watch.h), so a quiet chain costs one call
// a pass and a new settlement one more; each block that changed gets a look at each of its
// payments.
Status WatchSettlements(Store& store, Settler& settler, int64_t now, const ReconcilerConfig& config,
                        const std::function<bool(int64_t calls)>& more, CanonicalBlocks& blocks,
                        ReconcileReport& report) {
  if (config.reorg_watch_ms <= 0) return Status::Ok();
  std::vector<X402PaymentRecord> recent;
  Status read = store.Read([&](Transaction& tx) {
    auto listed = tx.ListRecentSettlements(now - config.reorg_watch_ms, kMaxWatchedSettlements);
    if (!listed.ok()) return listed.status();
    recent = std::move(*listed);
    return Status::Ok();
  });
  if (!read.ok()) return read;
  blocks.BeginPass();
  for (size_t begin = 0; begin < recent.size();) {
    const X402PaymentRecord& first = recent[begin];
    size_t end = begin;
    while (end < recent.size() && recent[end].settled_block == first.settled_block &&
           recent[end].settled_block_hash == first.settled_block_hash) {
      ++end;
    }
    if (first.settled_block < 0) break;
    if (blocks.Vouched(first.settled_block, first.settled_block_hash, now)) {
      begin = end;
      continue;
    }
    if (!more(1)) break;
    auto canonical = settler.chain().BlockHash(static_cast<uint64_t>(first.settled_block));
    if (!canonical.ok()) return canonical.status();
    if (*canonical && chain::Hex(**canonical) == first.settled_block_hash) {
      blocks.FoundCanonical(first.settled_block, first.settled_block_hash, now);
      begin = end;
      continue;
    }
    for (size_t i = begin; i < end; ++i) {
      if (!more(kRpcCallsPerLook + kRpcCallsPerBroadcast)) return Status::Ok();
      auto seen = settler.Observe(recent[i]);
      if (!seen.ok()) return seen.status();
      auto back = ApplyReorganised(store, recent[i], *seen, now, report);
      if (!back.ok()) return back.status();
      if (!*back) continue;
      ++report.reorganised;
      // Gone from the node too: the same bytes go out now rather than at the next look.
      if (!seen->tx_known) {
        if (Status sent = settler.Broadcast(recent[i]); !sent.ok()) {
          report.decisions.push_back({recent[i].operation_id, "broadcast_error", sent.message()});
        }
      }
    }
    begin = end;
  }
  return Status::Ok();
}

// The decision on what one look saw (Apply), then its broadcast and the reservation's release;
// adds to `report`. Returns whether the operation is resolved.
bool Finish(Store& store, Settler& settler, Random& random, const ReconcilerConfig& config,
            const Candidate& candidate, const ChainObservation& seen, int64_t now,
            const std::optional<Settler::Replacement>& replacement,
            const std::optional<SignAlone>& sign, ReconcileReport& report) {
  ReconcileReport delta;
  auto applied = Apply(store, random, candidate, seen, settler.config().confirmations, now, config,
                       replacement, sign, delta);
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
  report.replaced += delta.replaced;
  // (A payment never signed has nothing to send: void's filler is for a transaction we signed.)
  if (applied->broadcast && applied->send.submitted()) {
    if (Status sent = settler.Broadcast(applied->send); !sent.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "broadcast_error", sent.message()});
    }
  }
  // Settled: the chain balance shows it; void or failed: the money did not move through us.
  if (applied->resolved) settler.reservations().Release(candidate.payment.authorization);
  return applied->resolved;
}

// A settling payment never signed: a member of a batch whose attempt went away (a crash, or the
// batch's decision failed) before it signed. Nothing of ours can be on chain, so the look is the
// authorization's state and the chain's time (Reconcile's rows for a transaction the node does
// not know): used (by someone else) is failed, expired unused is void, and still usable is
// signed alone and sent (Apply's kRebroadcast), with the inputs read first.
bool LookAtUnsigned(Store& store, Settler& settler, Clock& clock, Random& random,
                    const ReconcilerConfig& config, const Candidate& candidate,
                    ReconcileReport& report) {
  auto seen = settler.ObserveUnsigned(candidate.payment);
  if (!seen.ok()) {
    ++report.errors;
    report.decisions.push_back({candidate.op.id, "chain_error", seen.status().message()});
    return false;
  }
  const int64_t now = clock.NowMs();
  std::optional<SignAlone> sign;
  const Reconciliation r =
      Reconcile(Settlement::kUnknown, ToSettlementRecord(candidate.payment), *seen,
                config.expiry_buffer_seconds, settler.config().confirmations);
  if (r.action == ReconcileAction::kRebroadcast) {
    auto authorization = AuthorizationOf(candidate.payment);
    auto signature = SignatureOf(candidate.payment);
    Result<TxInputs> inputs = !authorization.ok() ? Result<TxInputs>(authorization.status())
                              : !signature.ok()
                                  ? Result<TxInputs>(signature.status())
                                  : settler.ReadTxInputs(*authorization, *signature, now);
    if (!inputs.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "chain_error", inputs.status().message()});
      return false;
    }
    sign.emplace(SignAlone{settler, *inputs});
  }
  return Finish(store, settler, random, config, candidate, *seen, now, std::nullopt, sign, report);
}

// Looks at one operation and applies the decision; adds to `report`. Returns whether the
// operation is resolved (or moved on without us), so that nothing more is owed to it.
bool LookAt(Store& store, Settler& settler, Clock& clock, Random& random,
            const ReconcilerConfig& config, const Candidate& candidate, ReconcileReport& report,
            Stuck stuck = Stuck::kUnmined) {
  ++report.examined;
  if (!candidate.payment.submitted())
    return LookAtUnsigned(store, settler, clock, random, config, candidate, report);
  auto seen = settler.Observe(candidate.payment);
  if (!seen.ok()) {
    ++report.errors;
    report.decisions.push_back({candidate.op.id, "chain_error", seen.status().message()});
    return false;
  }
  // Unmined since it was signed replace_after_ms ago, pending or dropped by the node (which may
  // evict what pays less than the base fee), its authorization unused: replace it if its fee is
  // why. Held at the relayer's next nonce without being mined (the gap check): replace it now.
  std::optional<Settler::Replacement> replacement;
  const int64_t now = clock.NowMs();
  if (AsksForReplacement(*seen, stuck == Stuck::kHeldAtNextNonce,
                         now - candidate.payment.submitted_ms, config.replace_after_ms, now / 1000,
                         candidate.payment.authorization.valid_before_s)) {
    auto replaced = settler.Replace(candidate.payment, now, stuck);
    if (!replaced.ok()) {
      ++report.errors;
      report.decisions.push_back({candidate.op.id, "chain_error", replaced.status().message()});
      return false;
    }
    if (!replaced->decision.replace && !replaced->decision.at_market) {
      report.decisions.push_back({candidate.op.id, "tx_stuck", replaced->decision.reason});
    }
    replacement = std::move(*replaced);
  }
  return Finish(store, settler, random, config, candidate, *seen, now, replacement, std::nullopt,
                report);
}

// The chain calls one look at this payment may make (reconciler.h): the replaced transactions'
// receipts and presence, and the fees when it is old enough to be replaced.
int64_t CallsPerLook(const X402PaymentRecord& payment, int64_t now, const ReconcilerConfig& config,
                     Stuck stuck = Stuck::kUnmined) {
  const int64_t replaced = static_cast<int64_t>(payment.replaced_raw_txs.size());
  const bool may_replace =
      stuck == Stuck::kHeldAtNextNonce || now - payment.submitted_ms >= config.replace_after_ms;
  return kRpcCallsPerLook + kRpcCallsPerReplaced * replaced + (may_replace ? 1 : 0);
}

// The reorganisation watch and the relayer's nonce gap, first in a pass: a gap holds back every
// transaction after it, so filling it comes before looking at them one by one (the looks of a
// backlog would otherwise spend the RPC budget on operations only the gap keeps unresolved).
void CheckGap(Store& store, Settler& settler, Clock& clock, Random& random,
              const ReconcilerConfig& config, const std::function<bool(int64_t calls)>& more,
              std::optional<uint64_t>* last_mined, CanonicalBlocks& blocks,
              ReconcileReport& report) {
  const int64_t now = clock.NowMs();
  // The watch first: a block that went away is seen as gone before the gap check sends its
  // transaction again (then the operation goes back to unknown, X17, and settles again, X7).
  if (Status watched = WatchSettlements(store, settler, now, config, more, blocks, report);
      !watched.ok()) {
    ++report.errors;
    report.decisions.push_back({"", "reorg_watch_error", watched.message()});
  }
  auto filled = FillRelayerGap(store, settler, now, more, last_mined);
  if (!filled.ok()) {
    ++report.errors;
    report.decisions.push_back({"", "gap_error", filled.status().message()});
    return;
  }
  report.gaps_filled += filled->resent;
  report.gap_noops += filled->noops;
  if (!filled->held_at_next_nonce) return;
  // The transaction everything after it waits on: looked at now (replaced at once, within the
  // fee caps), once no attempt owns its operation.
  std::optional<Candidate> held;
  Status read = store.Read([&](Transaction& tx) -> Status {
    held.reset();
    auto op = tx.FindOperation(*filled->held_at_next_nonce);
    if (!op.ok()) return op.status();
    auto payment = tx.FindX402Payment(*filled->held_at_next_nonce);
    if (!payment.ok()) return payment.status();
    if (op->has_value() && payment->has_value() && (*payment)->submitted()) {
      held = Candidate{std::move(**op), std::move(**payment)};
    }
    return Status::Ok();
  });
  if (!read.ok()) {
    ++report.errors;
    report.decisions.push_back({*filled->held_at_next_nonce, "store_error", read.message()});
    return;
  }
  const bool settling = held && (held->op.settlement == Settlement::kSubmitted ||
                                 held->op.settlement == Settlement::kUnknown);
  if (!settling || !Eligible(held->op, held->payment, now, config) ||
      now - held->payment.submitted_ms < kHeldReplaceAfterMs) {
    return;
  }
  if (!more(CallsPerLook(held->payment, now, config, Stuck::kHeldAtNextNonce) +
            kRpcCallsPerBroadcast)) {
    return;
  }
  LookAt(store, settler, clock, random, config, *held, report, Stuck::kHeldAtNextNonce);
}

void CountPass(SettlementCounter* metrics, const ReconcileReport& report) {
  if (metrics != nullptr) {
    metrics->CountSettlement(SettlementEvent::kGapFilled, report.gaps_filled);
    metrics->CountSettlement(SettlementEvent::kGapNoop, report.gap_noops);
    metrics->CountSettlement(SettlementEvent::kReplaced, report.replaced);
    metrics->CountSettlement(SettlementEvent::kReorganised, report.reorganised);
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
  CanonicalBlocks blocks(kMaxWatchedSettlements);  // one pass: every block is asked about
  CheckGap(
      store, settler, clock, random, config, [](int64_t) { return true; }, nullptr, blocks, report);
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
  CountPass(metrics, report);
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
      schedule_(config.backoff, config.max_scheduled),
      canonical_blocks_(kMaxWatchedSettlements) {
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
  // The gap check at most once per kGapCheckIntervalMs, so that with short sweep intervals its
  // calls leave the budget to the looks.
  if (now - last_gap_check_ms_ >= kGapCheckIntervalMs && take(kRpcCallsPerGapCheck)) {
    last_gap_check_ms_ = now;
    CheckGap(store_, settler_, clock_, random_, config_, take, &last_mined_nonce_,
             canonical_blocks_, report);
  }
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
        if (!take(CallsPerLook(candidate.payment, now, config_) + kRpcCallsPerBroadcast)) {
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
  CountPass(metrics_, report);
  return report;
}

}  // namespace agentpay
