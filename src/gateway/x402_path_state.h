// The x402 path's state of one payment, shared by its three files: the driver and its effects
// (x402_path.cc), the payment's arrival — decoding, verifying and the arrival decision —
// (x402_arrival.cc), and the answers (x402_answers.cc). Private to them: include only there.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/check.h"
#include "core/operation.h"
#include "core/payer_proof.h"
#include "core/settlement.h"
#include "core/x402_payment.h"
#include "gateway/x402_path.h"
#include "x402/verify.h"
#include "x402/wire.h"

namespace agentpay {

// What the arrival decision found (core/x402_payment.h X402Arrival), with the operation and its
// payment as the decision left them.
struct X402Path::Begin {
  X402Arrival kind = X402Arrival::kProceed;
  Operation op;
  X402PaymentRecord payment;
  bool RollsBack() const {
    switch (kind) {
      case X402Arrival::kNeedsPreflight:
      case X402Arrival::kAuthorizationTaken:
      case X402Arrival::kNeedsProof:
      case X402Arrival::kRefusePublic:
      case X402Arrival::kReadAgain:
      case X402Arrival::kUnderfunded:
        return true;
      case X402Arrival::kProceed:
      case X402Arrival::kReplay:
      case X402Arrival::kClosedUnpaid:
      case X402Arrival::kMismatch:
      case X402Arrival::kAttach:
        return false;
    }
    AGENTPAY_CHECK(false);
  }
};

// One payment on its way through the path; shared by the path's callbacks.
struct X402Path::Payment {
  std::shared_ptr<const HttpRequest> request;  // null for a seller's settle
  const RouteConfig* route = nullptr;
  // A seller's settle (SettleForSeller): the requirement it pays as this gateway settles it, and
  // the route its operation is recorded on (`route` points here): settle first, nothing upstream.
  std::optional<x402::Requirements> sold;
  RouteConfig seller_route;
  Respond respond;
  x402::Version version = x402::Version::kV2;
  x402::PaymentPayload payload;
  X402PaymentRecord presented;  // the authorization this request carries (no operation yet)
  std::string principal, key, fingerprint;
  // The digest the key had before it named the payer (hashing.h): a retry of an operation begun
  // before the upgrade is found by it. Empty for the default key.
  std::string legacy_key;
  // What `key` is for the payer proof: the default (payer, nonce), or a key the payer chose
  // (Idempotency-Key or payment-identifier), weak or secret by its estimated bits (T25).
  PayerProofFacts::Key key_kind = PayerProofFacts::Key::kDefault;
  // What the chain said of this request's authorization, when its key found an operation that
  // was paid with another one.
  PayerProofFacts::Chain presented_on_chain = PayerProofFacts::Chain::kNotAsked;
  // A failed check that does not put the payer's identity in doubt (recipient, amount, time
  // window, asset): it refuses a new operation, but a retry of an existing key is still answered.
  x402::Failure deferred = x402::Failure::kNone;

  // Where the payment is in its course (core/x402_payment.h): the shell follows its effects.
  X402Payment machine;
  // What the arrival decisions found, and what the chain said between them.
  X402Arrival begin_kind = X402Arrival::kProceed;  // what the last decision found
  std::optional<TxInputs> inputs;
  std::optional<Settler::Preflight> preflight_failure;  // the token's refusal, for the 402
  std::shared_ptr<ReservationHold> reservation;         // taken by the preflight (Settler::Check)
  // With inputs: the store's epoch of the payer, read before the chain, and what the chain showed
  // the payer holds at least (core/payer_reservations.h ClusterReserveFacts).
  struct Cover {
    int64_t epoch = 0;
    int64_t covered = 0;
    bool is_balance = false;
  };
  std::optional<Cover> cover;

  // What an answer needs beyond the operation: the store's error, the chain's, the preflight that
  // limited the payer.
  Status problem;
  std::string chain_detail;
  std::optional<Settler::Preflight> limited;
  int64_t payer_retry_after_s = 0;

  // The attempt, once this request holds the operation's claim.
  Operation op;
  X402PaymentRecord payment;
  std::optional<UpstreamOutcome> upstream_2xx;  // settle=after: the answer the settlement awaits
  int64_t upstream_started_ms = 0;              // Timers::MonotonicMs
  // The upstream's answer and what CompleteX402Call made of it, until its decision is written.
  UpstreamOutcome outcome;
  std::optional<X402Completion> completion;
  int64_t completed_ms = 0;                // Clock::NowMs of the completion
  std::optional<TxInputs> signing_inputs;  // settle=after: what the signature needs (kSign)
  Operation finished;                      // what the finish or record decision wrote
  Operation settled;                       // MarkSettled, when the receipt paid us
  std::optional<Reconciliation> decided;   // how the receipt wait ended (nullopt: unknown)
  int64_t receipt_deadline_ms = 0;         // Timers::MonotonicMs
  int64_t sent_ms = 0;                     // Timers::MonotonicMs of the broadcast
  int empty_looks = 0;                     // looks that found no receipt
  int64_t last_empty_look_ms = -1;         // ms after the send; -1: none yet
  int64_t poll_delay_ms = 0;               // the last delay scheduled
};

}  // namespace agentpay
