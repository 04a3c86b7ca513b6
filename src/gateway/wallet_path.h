// The wallet payment path (CONTRACT §3–4): reserve the key and hold the price in one decision, call
// the upstream, then capture, release or keep in a second decision. Nothing here blocks a thread:
// each step continues in the callback of the store decision or upstream call before it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/operation.h"
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
  enum class BeginKind { kProceed, kReplay, kMismatch, kAttach, kInsufficientFunds };
  struct Begin {
    BeginKind kind = BeginKind::kProceed;
    Operation op;  // the operation as committed (proceed) or as found (replay, attach)
    bool new_key = false;  // the decision reserved the key for a new operation
  };
  struct PaidRequest;

  // The rest of Pay once the API key's account is known (from memory, or a read off this thread).
  void Authenticated(std::shared_ptr<const HttpRequest> request, const RouteConfig& route,
                     Respond respond, ApiKeys::Lookup account);
  void Start(std::shared_ptr<PaidRequest> paid);
  // Reads the key off the calling thread (a read may wait on the database: Store::ReadAsync on
  // the readers' pool): a replay or a mismatch is answered from the read once what it saw is
  // durable, anything else goes on to the begin decision, and so does a request whose read the
  // full pool refused (decided by the writer, which reads the key itself). `after_conflict`: a
  // begin decision that presumed the key new found it taken.
  void LookThenBegin(std::shared_ptr<PaidRequest> paid, bool after_conflict);
  struct Look;
  void Looked(std::shared_ptr<PaidRequest> paid, const Look& look, bool after_conflict,
              Status read);
  // Queues the begin decision; `key_presumed_new`: a read just found no such key, or reads are
  // remote and the key was not looked at (DecideBegin).
  void QueueBegin(std::shared_ptr<PaidRequest> paid, bool key_presumed_new);
  // The two decisions of a paid request, each run as one store transaction. With
  // `key_presumed_new` the key is reserved as new (Transaction::ReserveNewKey): a key taken
  // fails the decision with store_key_taken, and the key is looked at (LookThenBegin).
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
  void OnBegun(std::shared_ptr<PaidRequest> paid, Status status);
  void OnUpstreamAnswered(std::shared_ptr<PaidRequest> paid, UpstreamOutcome outcome);
  HttpResponse FinishAnswer(const PaidRequest& paid, const UpstreamOutcome& outcome,
                            const Status& status);
  // The request's attempt, in hand from its begin decision until its last decision is answered.
  void TakeAttempt(PaidRequest& paid);
  void DropAttempt(PaidRequest& paid);

  GatewayContext ctx_;
  ApiKeys& api_keys_;
  AttemptsInHand attempts_;
};

}  // namespace agentpay
