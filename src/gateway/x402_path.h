// The x402 payment path (CONTRACT §3, §5; the X1–X16 table of core/settlement.h): decode and verify
// the payment, reserve the key and store the authorization (and, settling before the upstream, the
// signed relayer transaction) in one decision, broadcast, wait for the receipt up to
// --receipt-timeout-ms, then call the upstream. An outcome not seen in time is `unknown`: 202 with
// Location, and the reconciler (workers/reconciler.h) decides it from the chain.
//
// Nothing here holds a thread while it waits. A payment is a chain of steps, each continuing in the
// completion of the one before: store decisions (Store::WriteAsync), upstream calls
// (Upstream::CallAsync), single chain calls (run one at a time on a small pool of their own, since
// the chain client blocks for the duration of one call), and the pauses between receipt polls
// (Timers::After). Payments in flight are bounded by memory, not by threads.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "core/operation.h"
#include "core/payer_proof.h"
#include "core/receipt_polls.h"
#include "core/x402_payment.h"
#include "gateway/context.h"
#include "gateway/x402_offer.h"
#include "http/server.h"
#include "http/worker_pool.h"
#include "settlement/settler.h"
#include "x402/facilitator.h"

namespace agentpay {

class X402Path {
 public:
  // `settler` settles what `offers` advertise (checked by the gateway); both outlive the path.
  // Chain calls run on `chain_calls` (a simulator's), or when it is null on a pool of
  // config.chain_threads threads of the path's own.
  X402Path(const GatewayContext& context, Settler& settler, const X402Offers& offers,
           Executor* chain_calls = nullptr);
  // Stops the chain pool: call it only once no payment is in flight (Gateway::Drain).
  ~X402Path();

  // A request on `route` carrying PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1); answers through
  // `respond`, exactly once, from any thread.
  void Pay(std::shared_ptr<const HttpRequest> request, const RouteConfig& route, Respond respond);
  // What Pay would refuse before it reads or stores anything (a malformed payment header, a
  // payment invalid for the route, a bad or missing Idempotency-Key), decided from the request's
  // head alone: the listener asks before it reads a body. nullopt: read the body and Pay.
  std::optional<HttpResponse> RefuseFromHead(const HttpRequest& head,
                                             const RouteConfig& route) const;

  // The facilitator's settle (gateway/facilitator.h): a seller's POST /settle, whose payee the
  // caller has checked is the seller's. The payment takes the course of a route that settles
  // first and has nothing upstream: one operation per authorization (its key, whoever sends it
  // and however often), the same preflight, payer reservation, broadcast, receipt wait,
  // reconciler and books as the gateway's own. Answers through `respond`, once, with the settle
  // answer of x402/facilitator.h: 200 {success: true} once settled; 200 {success: false,
  // errorReason: "settlement_pending", transaction} while the chain has not said (the reconciler
  // decides it; the same settle asked again answers what it decided); 200 {success: false,
  // errorReason: <x402 reason>} for a payment refused before anything was sent; a problem+json
  // (429, 503) where nothing was decided and the same settle may be sent again.
  void SettleForSeller(x402::FacilitatorRequest call, Respond respond);
  // The facilitator's verify: the checks of SettleForSeller and the chain's simulation of the
  // transfer (Settler::Check), nothing stored. 200 {isValid, invalidReason?, payer}; 503 when
  // the chain could not be asked.
  void VerifyForSeller(x402::FacilitatorRequest call, Respond respond);
  // The facilitator's status query: the settle answer of the payment of authorization (`payer`,
  // `nonce`, lower-case 0x hex) as it is now, for a caller whose `payees` include its payee. 404
  // `not_found` when there is none, or it pays someone else: whether it exists is not told.
  void SettlementForSeller(std::string payer, std::string nonce, std::vector<chain::Address> payees,
                           Respond respond);

 private:
  struct Payment;
  using PaymentPtr = std::shared_ptr<Payment>;
  struct Begin;

  std::optional<HttpResponse> Prepare(Payment& p) const;
  std::optional<HttpResponse> PrepareForSeller(Payment& p) const;
  std::optional<HttpResponse> Admit(Payment& p, const x402::Requirements& requirements) const;
  // One step of the payment's machine (core/x402_payment.h), then the effect it asks for; every
  // effect below ends by calling Advance with what happened.
  void Advance(PaymentPtr p, const X402Event& event);
  void Look(PaymentPtr p);
  void Decide(PaymentPtr p);
  void Preflight(PaymentPtr p, bool take_payer_token);
  void AskChainForProof(PaymentPtr p);
  void CallUpstream(PaymentPtr p);
  void OnUpstreamAnswered(PaymentPtr p, UpstreamOutcome outcome);
  void ReadInputs(PaymentPtr p);
  void Sign(PaymentPtr p);
  void FinishCall(PaymentPtr p, bool as_failed_call);
  void Settle(PaymentPtr p);
  // Broadcasts the payments gathered since the first of them (Settle), then polls for each receipt;
  // the unsigned ones (batched settlement) are signed first (SignGathered).
  void BroadcastGathered();
  // One decision signs the gathered payments still unsigned, up to settle_batch_max a
  // transaction, each still as its attempt left it; then SendGathered. One the decision could not
  // sign (its operation moved on, the decision failed) ends its wait unknown: the reconciler
  // decides it.
  void SignGathered(std::vector<PaymentPtr> batch, std::function<void()> next);
  void SendGathered(std::vector<PaymentPtr> batch, std::function<void()> next);
  void PollReceipt(PaymentPtr p);
  void SchedulePoll(PaymentPtr p, int64_t delay_ms);
  void OnReceiptDecided(PaymentPtr p, std::optional<Reconciliation> decided);
  void Record(PaymentPtr p, X402Record record);

  // The arrival decision and its parts, inside one transaction.
  static Result<std::optional<KeyRecord>> FindPayerKey(Transaction& tx, const Payment& x);
  Result<Begin> DecideX402Arrival(Transaction& tx, const Payment& p) const;
  Result<Begin> DecideNew(Transaction& tx, const Payment& p, int64_t now) const;
  static Result<Begin> WithoutPreflight(Transaction& tx, const Payment& p);
  static PayerProofFacts ProofFacts(const Payment& x, const X402PaymentRecord& stored);
  Result<X402PaymentRecord> SignAndStore(Transaction& tx, X402PaymentRecord payment,
                                         const TxInputs& inputs, int64_t now) const;
  // Writes `next` if the attempt `held` still holds the claim, then `done(true)`; `done(false)`
  // when it lost it. `also` runs in the same decision, only while the claim holds.
  void WriteClaimed(const Operation& held, Operation next, std::optional<TraceEvent> event,
                    std::function<Status(Transaction&)> also,
                    std::function<void(Result<bool>)> done);
  static CommitResult CommitOf(Payment& p, const Result<bool>& claimed);
  // Runs one blocking chain call on the chain pool; `refused` runs instead when the pool is full.
  void OnChain(std::function<void()> call, std::function<void()> refused);

  // The answers.
  void Reply(const PaymentPtr& p, HttpResponse response) const;
  HttpResponse AnswerFor(const Payment& x, X402Answer answer) const;
  HttpResponse VerdictAnswer(const Payment& x) const;
  static HttpResponse PublicAuthorizationAnswer();
  HttpResponse Challenge(const Payment& p, std::string_view code, std::string_view detail) const;
  // 429 (the payer's in-flight cap) or 503 (the reservation table is busy), with Retry-After.
  HttpResponse PayerLimited(const Settler::Preflight& preflight) const;
  HttpResponse Answer(HttpResponse response, const Payment& p, const Operation& op) const;
  HttpResponse StateAnswer(const Payment& p, const Operation& op, bool replayed) const;
  // A seller's settle answer (SettleForSeller) from the operation's settlement, and its refusal.
  HttpResponse SellerState(const Payment& p, const Operation& op) const;
  HttpResponse SellerRefusal(const Payment& p, std::string_view reason,
                             std::string_view detail) const;

  GatewayContext ctx_;
  Settler& settler_;
  const X402Offers& offers_;
  std::unique_ptr<WorkerPool> own_pool_;  // when no executor was injected
  Executor& chain_calls_;
  // Payments waiting for their broadcast (Settle), in the order they came, and whether a
  // broadcast is on its way to the node (one at a time: they arrive in the order sent).
  std::mutex gathered_mutex_;
  std::vector<PaymentPtr> gathered_;  // under gathered_mutex_
  bool broadcasting_ = false;         // under gathered_mutex_
  bool gather_ended_ = false;         // under gathered_mutex_: the wait for company is over
  // When to look for a receipt, learned from the receipts seen (core/receipt_polls.h).
  std::mutex polls_mutex_;
  ReceiptPolls polls_;  // under polls_mutex_
};

}  // namespace agentpay
