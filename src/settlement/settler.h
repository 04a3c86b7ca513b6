// The relayer's side of EIP-3009 settlement over a Chain (CONTRACT §5): what the token would say of
// a payment before anything is stored, the relayer's signed transaction, its broadcast, and one
// look at the chain in the order the reconciliation rules of core/settlement.h require. Below both
// the gateway (which settles) and the workers (whose reconciler settles what the gateway could
// not).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
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
  chain::Address token;  // the payee is each authorization's own (`to`, which the payer signed)
  std::string asset_name, asset_version;  // the EIP-712 domain the gateway advertises
  FeeCaps fee_caps;                       // settlement/fees.h; none by default
  // A hosted node bills per call (issue 14 item 6): the fees and the relayer's pending nonce are
  // read at most this often. Fees move at most 12.5% a block and a transaction's max fee covers six
  // blocks of that (chain::FeeData); the relayer's nonce is the store's, the node's only a floor.
  int64_t fee_refresh_ms = 1000;
  int64_t nonce_refresh_ms = 5000;
  // The gas a settlement needs is the same from payment to payment of one token (the same slots
  // written, all cold): eth_estimateGas, several executions on the node, is asked at most this
  // often, and the payments between are simulated with one eth_call of the same transfer. The
  // largest estimate seen is kept.
  int64_t gas_refresh_ms = 60000;
  // A settlement counts only once its receipt is this many blocks deep (--confirmations; 1: the
  // block that includes it). Above 1, a look at a mined settlement also asks for the head.
  int64_t confirmations = 1;
};

// What the receipt of a settlement transaction says, and the block it is in.
struct ReceiptLook {
  ReceiptView view = ReceiptView::kNone;
  uint64_t block_number = 0;  // with a receipt
  std::string block_hash;     // with a receipt: 0x hex
  std::string tx_hash;        // with a receipt: the record's transaction, or one it replaced
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
  // errors only (nothing was decided; the client may retry), and kChainFeesTooHigh.
  //
  // The happy path asks the node one thing: a simulation of the transfer (eth_call, or
  // eth_estimateGas when the gas estimate is due), which succeeds only if the authorization is
  // unused, in its window, validly signed and covered by the payer's balance.
  // The reads that explain a refusal (authorizationState, balanceOf, the token's domain) are made
  // only after one. The payment's value is reserved against the payer's balance (reservations()):
  // the simulation proves the balance covers this payment alone, and only when the payer has
  // others in flight is balanceOf read to see whether it covers them all (kInsufficientBalance
  // when not). `limited` instead when the payer has too many payments in flight
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
    // kNone only: what the chain showed the payer holds at least (core/payer_reservations.h
    // ClusterReserveFacts): its balance when balanceOf was read, else this payment's value.
    int64_t covered = 0;
    bool covered_is_balance = false;
  };
  // `now_ms`: wall clock (reservation lapses, the fee and nonce caches). `reserved_elsewhere`:
  // what the store's reservations of the payer (every gateway's) hold; above 0 the balance is
  // read, so that the decision can count them (the simulation covers this payment alone).
  Result<Preflight> Check(const chain::TransferAuthorization& authorization,
                          const chain::Signature& signature, int64_t now_ms,
                          int64_t reserved_elsewhere = 0);
  // The network ("eip155:<chain id>") and asset (lower-case 0x hex) the store's payer
  // reservations are kept under.
  std::string Network() const;
  std::string AssetHex() const;
  Reservations& reservations() { return reservations_; }
  // authorizationState(from, nonce) of the token: whether the authorization was used (or cancelled).
  Result<bool> AuthorizationUsed(const chain::TransferAuthorization& authorization);
  // The inputs alone, for a payment checked earlier (settle=after: after the upstream answered):
  // fees, the relayer's nonce and the gas estimate from the caches when fresh, and the
  // simulation (the estimate itself when it is due). Error
  // kChainFeesTooHigh (nothing may be signed now) when the base fee is above the cap; the node's
  // rpc_error when the transfer would revert.
  Result<TxInputs> ReadTxInputs(const chain::TransferAuthorization& authorization,
                                const chain::Signature& signature, int64_t now_ms);

  // The record with its transaction fields filled: signed with `relayer_nonce` (taken from the
  // store in the same decision). Pure apart from the signature; no network.
  Result<X402PaymentRecord> Sign(X402PaymentRecord record, const TxInputs& inputs,
                                 int64_t relayer_nonce, int64_t now_ms) const;
  // The records, all with one transaction signed with `relayer_nonce` (taken from the store in
  // the same decision): for one record Sign's; for several (at most chain::kMaxAggregate3Calls)
  // Multicall3's aggregate3 of each one's transferWithAuthorization, each call allowed to fail on
  // its own (chain/multicall.h), so that every authorization settles, or not, by itself and is
  // shown by its own logs (chain::ShowsAuthorizationSettled). `inputs`: Together's of theirs.
  // Pure apart from the signature; no network.
  Result<std::vector<X402PaymentRecord>> SignTogether(std::vector<X402PaymentRecord> records,
                                                      const TxInputs& inputs, int64_t relayer_nonce,
                                                      int64_t now_ms) const;
  // The inputs of one transaction settling several payments: the highest fees and pending nonce
  // read for any of them, and the sum of their gas limits with room for Multicall3's own work.
  // Precondition: 1 to chain::kMaxAggregate3Calls inputs.
  static TxInputs Together(std::span<const TxInputs> each);
  // Whether the node runs Multicall3's aggregate3 at chain::Multicall3Address() (one eth_call of
  // it, reading the token's name): batched settlement needs it. Errors: transport errors, and
  // kInvalidConfig when there is no such contract there.
  Status CheckMulticall3();
  // The relayer nonce of a transaction signed in the decision `tx`: the store's next nonce, never
  // below `chain_floor`, the node's count (Transaction::TakeRelayerNonce).
  Result<int64_t> TakeNonce(Transaction& tx, int64_t chain_floor);
  // Sends the record's bytes. A node that already has them is success. A refusal also forgets the
  // cached fees and nonce (the node may have refused them).
  Status Broadcast(const X402PaymentRecord& record);
  // Broadcast of each record, in the order given, together (chain::Chain::SendRawTransactions):
  // one outcome each.
  std::vector<Status> Broadcast(std::span<const X402PaymentRecord* const> records);
  // What the receipt of the record's transaction says (one call): the gateway's poll. A record
  // whose transaction replaced others asks for theirs too, newest first, until one has a receipt
  // (the same nonce: at most one of them is mined).
  Result<ReceiptLook> LookForReceipt(const X402PaymentRecord& record);
  // A transaction that only uses up the relayer's account nonce `nonce` (value 0 to itself, 21000
  // gas) at today's fees within the caps, sent at once: the filler of a nonce gap no stored
  // transaction can fill (the reconciler's gap check). Same nonce and fees, same bytes. Errors:
  // kChainFeesTooHigh, the node's refusal, transport errors.
  Status SendNoop(int64_t nonce, int64_t now_ms);
  // Whether the node knows the record's transaction, or one it replaced (pending or mined).
  Result<bool> NodeKnows(const X402PaymentRecord& record);

  // A transaction the node holds unmined (`stuck`: why): what settlement/fees.h's ReplacementFees
  // says of it at today's fees (the cached ones), and for row (4) the record signed anew with the
  // same relayer nonce, recipient, calldata and gas limit at the higher fee (a batch's
  // transaction stays the whole batch's: every member's record takes the replacement), the old
  // transaction appended to replaced_raw_txs (at most kMaxReplacements), submitted_ms = now_ms, one
  // more broadcast. Store it, then Broadcast it. Errors: transport errors reading the fees,
  // store_corrupt.
  static constexpr size_t kMaxReplacements = 16;
  struct Replacement {
    ReplacementDecision decision;
    std::optional<X402PaymentRecord> record;  // decision.replace only
  };
  Result<Replacement> Replace(const X402PaymentRecord& record, int64_t now_ms,
                              Stuck stuck = Stuck::kUnmined);
  // One look for core's Reconcile, in at most four calls, each field read only where Reconcile's
  // table reads it, in the order core/settlement.h requires: the receipt first (a matching
  // Transfer settles it, with the head when more than one confirmation is required, and nothing
  // else is asked); then authorizationState; when that says used
  // and the receipt was missing, the receipt once more (so that "used" was read before "missing");
  // then, with no receipt, the transaction; and the latest block's time only when the nonce is
  // unused (a pending transaction too is void once expired). Unread fields keep their defaults.
  // `receipt`: what LookForReceipt just said, when the caller has asked (then it is not asked
  // again).
  Result<ChainObservation> Observe(const X402PaymentRecord& record,
                                   std::optional<ReceiptLook> receipt = std::nullopt);

  // The look at a settling payment never signed (no transaction of ours can be on chain):
  // authorizationState, and the latest block's time when it is unused. No receipt, the
  // transaction unknown.
  Result<ChainObservation> ObserveUnsigned(const X402PaymentRecord& record);

 private:
  // The record with `signed_tx` as its transaction, signed now with `relayer_nonce`: what Sign and
  // SignTogether write into each record (its first broadcast counted, NewSettlementRecord).
  X402PaymentRecord WithTransaction(X402PaymentRecord record,
                                    const chain::SignedTransaction& signed_tx,
                                    int64_t relayer_nonce, int64_t now_ms) const;
  Result<x402::Failure> DiagnoseInvalidSignature();
  // The balance read and the reservation, retried when a release made the read stale.
  // Precondition: value and validBefore fit in int64 (Check refuses others first).
  Result<Preflight> ReserveBalance(const chain::TransferAuthorization& authorization,
                                   int64_t now_s);
  // Why the node refused to simulate the transfer (`revert`): its reason, or else what the token
  // says of the nonce and the balance.
  Result<Preflight> ExplainRevert(const chain::TransferAuthorization& authorization,
                                  std::string revert);
  // How deep a mined settlement is (1 without asking when one confirmation is enough).
  Result<int64_t> Confirmations(const ReceiptLook& receipt);
  Result<chain::FeeData> CachedFees(int64_t now_ms);
  Result<int64_t> CachedPendingNonce(int64_t now_ms);

  // A value read from the node and when (wall clock); fresh while 0 <= now - read_ms < refresh.
  template <typename T>
  struct Cached {
    std::optional<T> value;
    int64_t read_ms = 0;
    bool Fresh(int64_t now_ms, int64_t refresh_ms) const {
      return value && now_ms >= read_ms && now_ms - read_ms < refresh_ms;
    }
  };

  chain::Chain& chain_;
  SettlerConfig config_;
  chain::PrivateKey relayer_key_;
  chain::Address relayer_;
  Reservations reservations_;
  std::mutex cache_mutex_;
  Cached<chain::FeeData> fees_;
  Cached<int64_t> pending_nonce_;
  Cached<uint64_t> gas_;  // the largest eth_estimateGas answer, read_ms: when last asked
  std::atomic<bool> took_nonce_{false};  // read by a mutant only (core/mutants.h)
};

// The record with `mined_tx_hash` (ChainObservation::receipt_tx_hash) as its transaction: when the
// chain mined one the record's transaction replaced, the two change places, so that the hash the
// operation reports is the one on chain. Unchanged for its own hash, an empty or unknown one.
X402PaymentRecord AsMined(const X402PaymentRecord& record, std::string_view mined_tx_hash);
// The record of a payment Reconcile just called settled from `seen`: AsMined, and the block of
// its receipt with `now_ms` (what the reconciler's watch for reorganisations reads).
X402PaymentRecord AsSettled(const X402PaymentRecord& record, const ChainObservation& seen,
                            int64_t now_ms);

// The record's authorization and signature in chain form. Errors: "store_corrupt".
Result<chain::TransferAuthorization> AuthorizationOf(const X402PaymentRecord& record);
Result<chain::Signature> SignatureOf(const X402PaymentRecord& record);

}  // namespace agentpay
