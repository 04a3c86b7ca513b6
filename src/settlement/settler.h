// The relayer's side of EIP-3009 settlement over a Chain (CONTRACT §5): what the token would say of
// a payment before anything is stored, the relayer's signed transaction, its broadcast, and one
// look at the chain in the order the reconciliation rules of core/settlement.h require. Below both
// the gateway (which settles) and the workers (whose reconciler settles what the gateway could
// not).
#pragma once

#include <cstdint>
#include <string>

#include "chain/chain.h"
#include "chain/secp256k1.h"
#include "chain/transaction.h"
#include "core/settlement.h"
#include "core/world.h"
#include "settlement/fees.h"
#include "settlement/reservations.h"
#include "store/store.h"
#include "x402/verify.h"

namespace agentpay {

struct SettlerConfig {
  uint64_t chain_id = 0;
  chain::Address token;
  chain::Address pay_to;
  std::string asset_name, asset_version;  // the EIP-712 domain the gateway advertises
  FeeCaps fee_caps;                       // settlement/fees.h; none by default
};

// What the relayer needs from the node to sign a transaction, read before the settlement
// decision (the decision itself never waits on the network).
struct TxInputs {
  chain::FeeData fees;
  int64_t pending_nonce = 0;  // the relayer's next nonce as the node counts it
  uint64_t gas_limit = 0;
};

class Settler {
 public:
  // Precondition: config.chain_id > 0. `chain` outlives the settler; both are thread-safe.
  Settler(chain::Chain& chain, SettlerConfig config, chain::PrivateKey relayer_key,
          PayerReservationLimits reservation_limits = {});

  const SettlerConfig& config() const { return config_; }
  const chain::Address& relayer() const { return relayer_; }
  std::string RelayerHex() const;
  chain::Chain& chain() { return chain_; }

  // The chain's verdict on a payment that passed VerifyExact, read before anything is stored:
  // kNone with the inputs to sign its settlement, or the x402 failure (nonce used, balance, the
  // token's own domain or signature check, any other simulated revert). Errors are transport
  // errors only (nothing was decided; the client may retry).
  //
  // Before the transfer is simulated, the payment's value is reserved against the payer's balance
  // (reservations()): kInsufficientBalance also when the payer's other authorizations in flight
  // already reserve it. `limited` instead when the payer has too many payments in flight
  // (--max-in-flight-per-payer) or the table is full: nothing was decided, retry later.
  enum class Limited { kNo, kPayerInFlight, kBusy };
  struct Preflight {
    x402::Failure failure = x402::Failure::kNone;
    Limited limited = Limited::kNo;
    std::string detail;  // the token's revert reason, when there was one
    TxInputs inputs;
    // kNone only: this request's hold on the reservation (dropped with the request unless the
    // operation it creates keeps it).
    std::shared_ptr<ReservationHold> hold;
  };
  Result<Preflight> Check(const chain::TransferAuthorization& authorization,
                          const chain::Signature& signature, int64_t now_s);
  Reservations& reservations() { return reservations_; }
  // authorizationState(from, nonce) of the token: whether the authorization was used (or cancelled).
  Result<bool> AuthorizationUsed(const chain::TransferAuthorization& authorization);
  // The inputs alone, for a payment checked earlier (settle=after: after the upstream answered).
  // Error kChainFeesTooHigh (nothing may be signed now) when the base fee is above the cap.
  Result<TxInputs> ReadTxInputs(const chain::TransferAuthorization& authorization,
                                const chain::Signature& signature);

  // The record with its transaction fields filled: signed with `relayer_nonce` (taken from the
  // store in the same decision). Pure apart from the signature; no network.
  Result<X402PaymentRecord> Sign(X402PaymentRecord record, const TxInputs& inputs,
                                 int64_t relayer_nonce, int64_t now_ms) const;
  // Sends the record's bytes. A node that already has them is success.
  Status Broadcast(const X402PaymentRecord& record);
  // authorizationState first, then the receipt, then the transaction (see ChainObservation).
  Result<ChainObservation> Observe(const X402PaymentRecord& record);

 private:
  Result<x402::Failure> DiagnoseInvalidSignature();
  // The balance read and the reservation, retried when a release made the read stale.
  Result<Preflight> ReserveBalance(const chain::TransferAuthorization& authorization,
                                   int64_t now_s);

  chain::Chain& chain_;
  SettlerConfig config_;
  chain::PrivateKey relayer_key_;
  chain::Address relayer_;
  Reservations reservations_;
};

// The record's authorization and signature in chain form. Errors: "store_corrupt".
Result<chain::TransferAuthorization> AuthorizationOf(const X402PaymentRecord& record);
Result<chain::Signature> SignatureOf(const X402PaymentRecord& record);

}  // namespace agentpay
