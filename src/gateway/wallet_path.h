// The wallet payment path (CONTRACT §3–4): reserve the key and hold the price in one decision, call
// the upstream, then capture, release or keep in a second decision. The order of it all is the
// core's state machine (core/wallet_payment.h); this is its driver. Nothing here blocks a thread:
// each effect continues in the callback of the read, decision or upstream call it started.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/operation.h"
#include "core/wallet_payment.h"
#include "gateway/api_keys.h"
#include "gateway/attempts_in_hand.h"
#include "gateway/context.h"
#include "http/server.h"

namespace agentpay {

class WalletPath {
 public:
  WalletPath(const GatewayContext& context, ApiKeys& api_keys)
      : ctx_(context), api_keys_(api_keys), attempts_(context.instance_id) {}

  // A request on `route` carrying `Authorization: Bearer <api key>`; answers through `respond`.
  // `account`: the key's account when it was authenticated already (from the request's head).
  void Pay(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
           std::optional<std::string> account, Respond respond);

 private:
  struct Begin {
    BeginOutcome kind = BeginOutcome::kProceed;
    Operation op;  // the operation as committed (proceed) or as found (replay, attach)
    bool new_key = false;  // the decision reserved the key for a new operation
  };
  struct PaidRequest;

  // The rest of Pay once the API key's account is known (from memory, or a read off this thread).
  void Authenticated(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                     Respond respond, ApiKeys::Lookup account);
  // The driver: feeds `event` to the payment's state machine (core/wallet_payment.h) and carries
  // out the effect it returns. Each effect ends in exactly one more Advance or in the answer.
  void Advance(std::shared_ptr<PaidRequest> paid, const WalletEvent& event);
  // Effect kLook: the key and its operation read on the readers' pool (Store::ReadAsync,
  // unsynced); a full pool answers kOverloaded at once.
  void Look(std::shared_ptr<PaidRequest> paid);
  // Effect kBegin: the begin decision queued to the writer; `presume_new` as DecideBegin's.
  void QueueBegin(std::shared_ptr<PaidRequest> paid, bool presume_new);
  // Effect kCallUpstream and kFinish.
  void CallUpstream(std::shared_ptr<PaidRequest> paid);
  void Finish(std::shared_ptr<PaidRequest> paid);
  // The answer a reply effect names.
  HttpResponse Answer(const PaidRequest& paid, WalletAnswer answer);
  // Counts a replay or mismatch answered from the look and writes the key's trace record of it
  // (after the answer, only while the write queue is short: it never crowds out a decision).
  void RecordLookedArrival(const PaidRequest& paid);
  // The two decisions of a paid request, each run as one store transaction. With
  // `key_presumed_new` the key is reserved as new (Transaction::ReserveNewKey): a key taken
  // fails the decision with store_key_taken, and the key is looked at (row W9).
  Result<Begin> DecideBegin(Transaction& tx, const PaidRequest& paid, bool key_presumed_new);
  // The new operation of a reserved key: inserted, and its price held.
  Result<Begin> BeginNew(Transaction& tx, const PaidRequest& paid, const std::string& op_id,
                         int64_t now, int64_t lease_ms);
  // The existing key's operation decides; nullopt: it is past retention, start a new one.
  Result<std::optional<Begin>> DecideExistingKey(Transaction& tx, const PaidRequest& paid,
                                                 int64_t now, int64_t lease_ms);
  // The attempt's completion; store_claim_lost when it lost its claim (nothing written).
  Result<Completion> DecideFinish(Transaction& tx, const PaidRequest& paid,
                                  const UpstreamOutcome& outcome);
  // The request's attempt, in hand from its begin decision until its last decision is answered.
  void TakeAttempt(PaidRequest& paid);
  void DropAttempt(PaidRequest& paid);

  GatewayContext ctx_;
  ApiKeys& api_keys_;
  AttemptsInHand attempts_;
};

}  // namespace agentpay
