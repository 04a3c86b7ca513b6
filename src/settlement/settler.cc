// See settler.h.
#include "settlement/settler.h"

#include <algorithm>
#include <limits>

#include "chain/abi.h"
#include "chain/keccak.h"
#include "chain/multicall.h"
#include "chain/settlement_tx.h"
#include "core/check.h"
#include "core/mutants.h"
#include "store/records.h"

namespace agentpay {
namespace {

static_assert(kMaxPaymentsPerTransaction == chain::kMaxAggregate3Calls,
              "the audit allows as many payments a transaction as a batch holds");

using chain::Address;
using x402::Failure;

// Headroom over the node's gas estimate: the estimate is for the current state, and a transaction
// that runs out of gas spends the relayer's nonce without settling.
uint64_t GasWithMargin(uint64_t estimate) { return estimate + estimate / 4 + 10000; }

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// The token's revert reasons (Circle FiatTokenV2 and OpenZeppelin ERC-20 spellings) as failures.
Failure FailureOfRevert(const std::string& reason) {
  if (Contains(reason, "authorization is used or canceled")) return Failure::kNonceAlreadyUsed;
  if (Contains(reason, "exceeds balance")) return Failure::kInsufficientBalance;
  if (Contains(reason, "authorization is expired")) return Failure::kValidBeforeTooSoon;
  if (Contains(reason, "authorization is not yet valid")) return Failure::kValidAfterInFuture;
  if (Contains(reason, "invalid signature")) return Failure::kInvalidSignature;
  return Failure::kSimulationFailed;
}

// An ABI-encoded `string` return value (offset word, length word, bytes). nullopt if malformed.
std::optional<std::string> DecodeAbiString(const chain::Bytes& data) {
  constexpr size_t kMaxLength = 1024;
  if (data.size() < 64) return std::nullopt;
  auto word = [&](size_t at) -> std::optional<uint64_t> {
    for (size_t i = at; i < at + 24; ++i) {
      if (data[i] != 0) return std::nullopt;
    }
    uint64_t value = 0;
    for (size_t i = at + 24; i < at + 32; ++i) value = value << 8 | data[i];
    return value;
  };
  auto offset = word(0);
  if (!offset || *offset > data.size() - 32) return std::nullopt;
  auto length = word(*offset);
  if (!length || *length > kMaxLength || *length > data.size() - *offset - 32) return std::nullopt;
  auto begin = data.begin() + static_cast<std::ptrdiff_t>(*offset + 32);
  return std::string(begin, begin + static_cast<std::ptrdiff_t>(*length));
}

bool IsTransportError(const Status& status) { return status.error() != ErrorCode::kRpcError; }

// The hashes of the record's transaction and, newest first, of those it replaced.
Result<std::vector<chain::Hash32>> HashesNewestFirst(const X402PaymentRecord& record) {
  auto current = chain::ParseHash32(record.tx_hash);
  if (!current.ok()) {
    return Status::Error(ErrorCode::kStoreCorrupt, "stored transaction hash is not hex");
  }
  std::vector<chain::Hash32> hashes{*current};
  for (auto raw = record.replaced_raw_txs.rbegin(); raw != record.replaced_raw_txs.rend(); ++raw) {
    auto bytes = chain::ParseHex(*raw);
    if (!bytes.ok()) {
      return Status::Error(ErrorCode::kStoreCorrupt, "stored replaced transaction is not hex");
    }
    hashes.push_back(chain::Keccak256(*bytes));
  }
  return hashes;
}

// What a refused ReservationCheck (kTooManyInFlight or kTableFull) tells the client.
Settler::Limited LimitedBy(ReserveOutcome refused) {
  return refused == ReserveOutcome::kTooManyInFlight ? Settler::Limited::kPayerInFlight
                                                     : Settler::Limited::kBusy;
}

}  // namespace

Settler::Settler(chain::Chain& chain, SettlerConfig config, chain::PrivateKey relayer_key,
                 PayerReservationLimits reservation_limits)
    : chain_(chain),
      config_(std::move(config)),
      relayer_key_(std::move(relayer_key)),
      relayer_(chain::AddressOf(relayer_key_)),
      reservations_(reservation_limits) {
  AGENTPAY_CHECK(config_.chain_id > 0);
}

std::string Settler::RelayerHex() const { return chain::ToLowerHex(relayer_); }
std::string Settler::Network() const { return "eip155:" + std::to_string(config_.chain_id); }
std::string Settler::AssetHex() const { return chain::ToLowerHex(config_.token); }

Result<Settler::Preflight> Settler::ReserveBalance(
    const chain::TransferAuthorization& authorization, int64_t now_s) {
  // A release between a balance read and its reservation makes the read stale (it may predate
  // the settlement released): read again, a few times at most.
  constexpr int kMaxBalanceReads = 3;
  AGENTPAY_CHECK(authorization.value.FitsInt64() && authorization.valid_before.FitsInt64());
  Preflight preflight;
  const std::string payer = chain::ToLowerHex(authorization.from);
  const std::string nonce = chain::Hex(authorization.nonce);
  const int64_t value = authorization.value.ToInt64();
  const int64_t valid_before_s = authorization.valid_before.ToInt64();
  for (int read = 0; read < kMaxBalanceReads; ++read) {
    ReservationCheck check = reservations_.BeginCheck(payer, now_s);
    if (check.outcome != ReserveOutcome::kReserved) {
      preflight.limited = LimitedBy(check.outcome);
      return preflight;
    }
    auto balance = chain_.BalanceOf(config_.token, authorization.from);
    if (!balance.ok()) {
      reservations_.EndCheck(payer);
      return balance.status();
    }
    const int64_t usable =
        balance->FitsInt64() ? balance->ToInt64() : std::numeric_limits<int64_t>::max();
    switch (reservations_.Reserve(payer, nonce, value, valid_before_s, usable, check.epoch,
                                  now_s)) {
      case ReserveOutcome::kReserved:
        preflight.hold = std::make_shared<ReservationHold>(reservations_, payer, nonce);
        preflight.covered = usable;
        preflight.covered_is_balance = true;
        return preflight;
      case ReserveOutcome::kInsufficientBalance:
        preflight.failure = Failure::kInsufficientBalance;
        if (*balance >= authorization.value) {
          preflight.detail = "the payer's other payments in flight already reserve its balance";
        }
        return preflight;
      case ReserveOutcome::kStale:
        continue;
      case ReserveOutcome::kTooManyInFlight:
      case ReserveOutcome::kTableFull:
        break;  // BeginCheck's answers only
    }
    AGENTPAY_CHECK(false);
  }
  preflight.limited = Limited::kBusy;
  return preflight;
}

Result<Settler::Preflight> Settler::Check(const chain::TransferAuthorization& authorization,
                                          const chain::Signature& signature, int64_t now_ms,
                                          int64_t reserved_elsewhere) {
  const int64_t now_s = now_ms / 1000;
  Preflight preflight;
  if (!authorization.value.FitsInt64() || !authorization.valid_before.FitsInt64()) {
    preflight.failure = Failure::kInsufficientBalance;  // no balance is that large
    return preflight;
  }
  const std::string payer = chain::ToLowerHex(authorization.from);
  ReservationCheck check = reservations_.BeginCheck(payer, now_s);
  if (check.outcome != ReserveOutcome::kReserved) {
    preflight.limited = LimitedBy(check.outcome);
    return preflight;
  }
  auto inputs = ReadTxInputs(authorization, signature, now_ms);
  if (!inputs.ok()) {
    reservations_.EndCheck(payer);
    if (IsTransportError(inputs.status())) return inputs.status();
    return ExplainRevert(authorization, inputs.status().message());
  }
  // The simulation succeeded at the latest block: the payer's balance covers this payment. That
  // is all a payer with nothing else in flight needs; otherwise (or when a settlement released
  // since may have made the simulation stale) the balance itself is read.
  const int64_t value = authorization.value.ToInt64();
  const std::string nonce = chain::Hex(authorization.nonce);
  // Other gateways' reservations of the payer: the balance must be read to count them.
  ReserveOutcome simulated = ReserveOutcome::kStale;
  if (reserved_elsewhere > 0) {
    reservations_.EndCheck(payer);
  } else {
    simulated = reservations_.Reserve(payer, nonce, value, authorization.valid_before.ToInt64(),
                                      value, check.epoch, now_s);
  }
  switch (simulated) {
    case ReserveOutcome::kReserved:
      preflight.hold = std::make_shared<ReservationHold>(reservations_, payer, nonce);
      preflight.covered = value;
      preflight.covered_is_balance = false;
      break;
    case ReserveOutcome::kInsufficientBalance:
    case ReserveOutcome::kStale: {
      auto reserved = ReserveBalance(authorization, now_s);
      if (!reserved.ok()) return reserved.status();
      preflight = std::move(*reserved);
      break;
    }
    case ReserveOutcome::kTooManyInFlight:
    case ReserveOutcome::kTableFull:
      AGENTPAY_CHECK(false);  // BeginCheck's answers only
  }
  preflight.inputs = *inputs;
  return preflight;
}

Result<Settler::Preflight> Settler::ExplainRevert(const chain::TransferAuthorization& authorization,
                                                  std::string revert) {
  Preflight preflight;
  preflight.detail = std::move(revert);
  preflight.failure = FailureOfRevert(preflight.detail);
  if (preflight.failure == Failure::kInvalidSignature) {
    auto diagnosed = DiagnoseInvalidSignature();
    if (!diagnosed.ok()) return diagnosed.status();
    preflight.failure = *diagnosed;
  }
  if (preflight.failure != Failure::kSimulationFailed) return preflight;
  // A token whose revert reasons we do not know (or that gives none): ask it directly.
  auto used = chain_.AuthorizationState(config_.token, authorization.from, authorization.nonce);
  if (!used.ok()) return used.status();
  if (*used) {
    preflight.failure = Failure::kNonceAlreadyUsed;
    return preflight;
  }
  auto balance = chain_.BalanceOf(config_.token, authorization.from);
  if (!balance.ok()) return balance.status();
  if (*balance < authorization.value) preflight.failure = Failure::kInsufficientBalance;
  return preflight;
}

Result<bool> Settler::AuthorizationUsed(const chain::TransferAuthorization& authorization) {
  return chain_.AuthorizationState(config_.token, authorization.from, authorization.nonce);
}

Result<chain::FeeData> Settler::CachedFees(int64_t now_ms) {
  {
    std::lock_guard lock(cache_mutex_);
    if (fees_.Fresh(now_ms, config_.fee_refresh_ms)) return *fees_.value;
  }
  auto fees = chain_.Fees();
  if (!fees.ok()) return fees.status();
  std::lock_guard lock(cache_mutex_);
  fees_ = {*fees, now_ms};
  return *fees;
}

Result<int64_t> Settler::CachedPendingNonce(int64_t now_ms) {
  {
    std::lock_guard lock(cache_mutex_);
    if (pending_nonce_.Fresh(now_ms, config_.nonce_refresh_ms)) return *pending_nonce_.value;
  }
  auto nonce = chain_.PendingNonce(relayer_);
  if (!nonce.ok()) return nonce.status();
  if (*nonce > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::Error(ErrorCode::kRpcMalformed, "relayer nonce out of range");
  }
  std::lock_guard lock(cache_mutex_);
  pending_nonce_ = {static_cast<int64_t>(*nonce), now_ms};
  return static_cast<int64_t>(*nonce);
}

Result<TxInputs> Settler::ReadTxInputs(const chain::TransferAuthorization& authorization,
                                       const chain::Signature& signature, int64_t now_ms) {
  TxInputs inputs;
  // Fees first: above the cap nothing else needs asking.
  auto fees = CachedFees(now_ms);
  if (!fees.ok()) return fees.status();
  FeeDecision capped = ApplyFeeCaps(*fees, config_.fee_caps);
  if (capped.too_high) return Status::Error(ErrorCode::kChainFeesTooHigh, capped.reason);
  inputs.fees = capped.fees;
  const chain::Bytes transfer = chain::EncodeTransferWithAuthorizationVrs(authorization, signature);
  std::optional<uint64_t> known_gas;
  {
    std::lock_guard lock(cache_mutex_);
    if (gas_.Fresh(now_ms, config_.gas_refresh_ms)) known_gas = gas_.value;
  }
  if (known_gas) {
    // One execution instead of the estimate's several: the same verdict on the transfer.
    auto simulated = chain_.Call(config_.token, transfer);
    if (!simulated.ok()) return simulated.status();
  } else {
    auto estimated = chain_.EstimateGas(relayer_, config_.token, transfer);
    if (!estimated.ok()) return estimated.status();
    std::lock_guard lock(cache_mutex_);
    known_gas = std::max(*estimated, gas_.value.value_or(0));
    gas_ = {*known_gas, now_ms};
  }
  inputs.gas_limit = GasWithMargin(*known_gas);
  auto nonce = CachedPendingNonce(now_ms);
  if (!nonce.ok()) return nonce.status();
  inputs.pending_nonce = *nonce;
  return inputs;
}

// We verified the signature against the domain we advertise, yet the token refuses it: the
// token's own EIP-712 domain differs from our configuration (or the token is not EIP-3009).
Result<Failure> Settler::DiagnoseInvalidSignature() {
  struct Probe {
    chain::Bytes selector;
    const std::string& expected;
    Failure failure;
  };
  const Probe probes[] = {
      {{0x06, 0xfd, 0xde, 0x03}, config_.asset_name, Failure::kTokenNameMismatch},
      {{0x54, 0xfd, 0x4d, 0x50}, config_.asset_version, Failure::kTokenVersionMismatch}};
  for (const Probe& probe : probes) {
    auto answer = chain_.Call(config_.token, probe.selector);
    if (!answer.ok()) {
      if (IsTransportError(answer.status())) return answer.status();
      continue;  // the token has no such getter: nothing to compare
    }
    auto value = DecodeAbiString(*answer);
    if (value && *value != probe.expected) return probe.failure;
  }
  return Failure::kInvalidSignature;
}

Result<X402PaymentRecord> Settler::Sign(X402PaymentRecord record, const TxInputs& inputs,
                                        int64_t relayer_nonce, int64_t now_ms) const {
  AGENTPAY_CHECK(relayer_nonce >= 0 && inputs.gas_limit > 0);
  auto authorization = AuthorizationOf(record);
  if (!authorization.ok()) return authorization.status();
  auto signature = SignatureOf(record);
  if (!signature.ok()) return signature.status();
  auto signed_tx = chain::BuildTransferWithAuthorizationTx(
      *authorization, *signature, config_.token, config_.chain_id,
      static_cast<uint64_t>(relayer_nonce), inputs.fees, inputs.gas_limit, relayer_key_);
  if (!signed_tx.ok()) return signed_tx.status();
  return WithTransaction(std::move(record), *signed_tx, relayer_nonce, now_ms);
}

X402PaymentRecord Settler::WithTransaction(X402PaymentRecord record,
                                           const chain::SignedTransaction& signed_tx,
                                           int64_t relayer_nonce, int64_t now_ms) const {
  SettlementRecord settlement =
      NewSettlementRecord(record.operation_id, record.authorization, chain::Hex(signed_tx.hash),
                          chain::Hex(signed_tx.raw), now_ms);
  record.tx_hash = settlement.tx_hash;
  record.raw_tx_hex = settlement.raw_tx_hex;
  record.relayer = RelayerHex();
  record.relayer_nonce = relayer_nonce;
  record.submitted_ms = settlement.submitted_ms;
  record.broadcasts = settlement.broadcasts;
  return record;
}

TxInputs Settler::Together(std::span<const TxInputs> each) {
  AGENTPAY_CHECK(!each.empty() && each.size() <= chain::kMaxAggregate3Calls);
  // Multicall3's own work per call (the loop, the call, copying the answer) is well inside one
  // payment's margin (GasWithMargin); this covers the rest of aggregate3 around them.
  constexpr uint64_t kAggregateGas = 20000;
  TxInputs together = each.front();
  if (each.size() == 1) return together;
  together.gas_limit = kAggregateGas;
  for (const TxInputs& inputs : each) {
    together.fees.max_fee_per_gas =
        std::max(together.fees.max_fee_per_gas, inputs.fees.max_fee_per_gas);
    together.fees.max_priority_fee_per_gas =
        std::max(together.fees.max_priority_fee_per_gas, inputs.fees.max_priority_fee_per_gas);
    together.pending_nonce = std::max(together.pending_nonce, inputs.pending_nonce);
    together.gas_limit += inputs.gas_limit;  // each at most a block's gas: no overflow
  }
  return together;
}

Result<std::vector<X402PaymentRecord>> Settler::SignTogether(std::vector<X402PaymentRecord> records,
                                                             const TxInputs& inputs,
                                                             int64_t relayer_nonce,
                                                             int64_t now_ms) const {
  AGENTPAY_CHECK(!records.empty() && records.size() <= chain::kMaxAggregate3Calls);
  if (records.size() == 1) {
    auto one = Sign(std::move(records.front()), inputs, relayer_nonce, now_ms);
    if (!one.ok()) return one.status();
    records.front() = std::move(*one);
    return records;
  }
  AGENTPAY_CHECK(relayer_nonce >= 0 && inputs.gas_limit > 0);
  std::vector<chain::Call3> calls;
  for (const X402PaymentRecord& record : records) {
    auto authorization = AuthorizationOf(record);
    if (!authorization.ok()) return authorization.status();
    auto signature = SignatureOf(record);
    if (!signature.ok()) return signature.status();
    calls.push_back({config_.token, /*allow_failure=*/true,
                     chain::EncodeTransferWithAuthorizationVrs(*authorization, *signature)});
  }
  chain::Eip1559Transaction batch;
  batch.chain_id = config_.chain_id;
  batch.nonce = static_cast<uint64_t>(relayer_nonce);
  batch.max_priority_fee_per_gas = inputs.fees.max_priority_fee_per_gas;
  batch.max_fee_per_gas = inputs.fees.max_fee_per_gas;
  batch.gas_limit = inputs.gas_limit;
  batch.to = chain::Multicall3Address();
  batch.data = chain::EncodeAggregate3(calls);
  auto signed_tx = chain::SignEip1559(batch, relayer_key_);
  if (!signed_tx.ok()) return signed_tx.status();
  for (X402PaymentRecord& record : records) {
    record = WithTransaction(std::move(record), *signed_tx, relayer_nonce, now_ms);
  }
  return records;
}

Status Settler::CheckMulticall3() {
  // name() of the token, allowed to fail: Multicall3 answers the ABI encoding of one Result
  // (at least six words) whatever the token says; an address without code answers nothing.
  const chain::Call3 probe{config_.token, true, {0x06, 0xfd, 0xde, 0x03}};
  auto answer = chain_.Call(chain::Multicall3Address(), chain::EncodeAggregate3({&probe, 1}));
  if (!answer.ok() && IsTransportError(answer.status())) return answer.status();
  if (!answer.ok() || answer->size() < 6 * 32) {
    return Status::Error(ErrorCode::kInvalidConfig,
                         "--settle-batch-max above 1 needs Multicall3 at " +
                             chain::ToChecksumHex(chain::Multicall3Address()) +
                             ", and the node runs no aggregate3 there" +
                             (answer.ok() ? std::string() : ": " + answer.status().message()));
  }
  return Status::Ok();
}

Status Settler::Broadcast(const X402PaymentRecord& record) {
  const X402PaymentRecord* one[] = {&record};
  return std::move(Broadcast(one)[0]);
}

std::vector<Status> Settler::Broadcast(std::span<const X402PaymentRecord* const> records) {
  std::vector<Status> outcomes(records.size());
  std::vector<chain::Bytes> raws;
  std::vector<size_t> sent;  // the index in `records` of each of `raws`
  for (size_t i = 0; i < records.size(); ++i) {
    AGENTPAY_CHECK(records[i]->submitted());
    auto raw = chain::ParseHex(records[i]->raw_tx_hex);
    if (!raw.ok()) {
      outcomes[i] = Status::Error(ErrorCode::kStoreCorrupt, "stored transaction is not hex");
      continue;
    }
    raws.push_back(std::move(*raw));
    sent.push_back(i);
  }
  std::vector<Result<chain::Hash32>> answers = chain_.SendRawTransactions(raws);
  AGENTPAY_CHECK(answers.size() == raws.size());
  bool refused = false;
  for (size_t k = 0; k < answers.size(); ++k) {
    const Status& status = answers[k].status();
    if (answers[k].ok() || status.error() == ErrorCode::kTxAlreadyKnown) continue;
    outcomes[sent[k]] = status;
    refused = refused || !IsTransportError(status);
  }
  if (refused) {
    // "nonce too low", "max fee per gas less than block base fee", ...: read both afresh.
    std::lock_guard lock(cache_mutex_);
    fees_ = {};
    pending_nonce_ = {};
  }
  return outcomes;
}

Result<ReceiptLook> Settler::LookForReceipt(const X402PaymentRecord& record) {
  AGENTPAY_CHECK(record.submitted());
  auto authorization = AuthorizationOf(record);
  if (!authorization.ok()) return authorization.status();
  auto hashes = HashesNewestFirst(record);
  if (!hashes.ok()) return hashes.status();
  for (const chain::Hash32& hash : *hashes) {
    auto receipt = chain_.GetReceipt(hash);
    if (!receipt.ok()) return receipt.status();
    if (!receipt->has_value()) continue;
    const chain::Receipt& r = **receipt;
    ReceiptLook look{ReceiptView::kReverted, r.block_number, chain::Hex(r.block_hash),
                     chain::Hex(hash)};
    if (r.status == 1) {
      // This very authorization's AuthorizationUsed and its Transfer to the payee the payer signed
      // for (the gateway's own, or a seller's through the facilitator).
      look.view = chain::ShowsAuthorizationSettled(r, config_.token, *authorization)
                      ? ReceiptView::kSuccessWithTransfer
                      : ReceiptView::kSuccessWithoutMatchingTransfer;
    }
    return look;
  }
  return ReceiptLook{};
}

Result<int64_t> Settler::TakeNonce(Transaction& tx, int64_t chain_floor) {
  auto taken = tx.TakeRelayerNonce(RelayerHex(), chain_floor);
  if (taken.ok() && MutantActive(Mutant::kRelayerNonceAfreshAfterRestart) &&
      !took_nonce_.exchange(true)) {
    return chain_floor;  // the first nonce since the process started: the node's count alone
  }
  return taken;
}

Status Settler::SendNoop(int64_t nonce, int64_t now_ms) {
  AGENTPAY_CHECK(nonce >= 0);
  constexpr uint64_t kTransferGas = 21000;
  auto fees = CachedFees(now_ms);
  if (!fees.ok()) return fees.status();
  FeeDecision capped = ApplyFeeCaps(*fees, config_.fee_caps);
  if (capped.too_high) return Status::Error(ErrorCode::kChainFeesTooHigh, capped.reason);
  chain::Eip1559Transaction noop;
  noop.chain_id = config_.chain_id;
  noop.nonce = static_cast<uint64_t>(nonce);
  noop.max_priority_fee_per_gas = capped.fees.max_priority_fee_per_gas;
  noop.max_fee_per_gas = capped.fees.max_fee_per_gas;
  noop.gas_limit = kTransferGas;
  noop.to = relayer_;
  auto signed_tx = chain::SignEip1559(noop, relayer_key_);
  if (!signed_tx.ok()) return signed_tx.status();
  auto sent = chain_.SendRawTransaction(signed_tx->raw);
  if (sent.ok() || sent.status().error() == ErrorCode::kTxAlreadyKnown) return Status::Ok();
  return sent.status();
}

Result<bool> Settler::NodeKnows(const X402PaymentRecord& record) {
  AGENTPAY_CHECK(record.submitted());
  auto hashes = HashesNewestFirst(record);
  if (!hashes.ok()) return hashes.status();
  for (const chain::Hash32& hash : *hashes) {
    auto tx = chain_.GetTransaction(hash);
    if (!tx.ok()) return tx.status();
    if (tx->has_value()) return true;
  }
  return false;
}

Result<Settler::Replacement> Settler::Replace(const X402PaymentRecord& record, int64_t now_ms,
                                              Stuck stuck) {
  AGENTPAY_CHECK(record.submitted());
  auto raw = chain::ParseHex(record.raw_tx_hex);
  if (!raw.ok()) return Status::Error(ErrorCode::kStoreCorrupt, "stored transaction is not hex");
  auto old = chain::DecodeRawTransaction(*raw);
  if (!old.ok() || old->from != relayer_ || record.relayer_nonce < 0 ||
      old->nonce != static_cast<uint64_t>(record.relayer_nonce)) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "stored transaction of " + record.operation_id +
                             " is not the relayer's at its relayer nonce");
  }
  Replacement replacement;
  if (record.replaced_raw_txs.size() >= kMaxReplacements) {
    replacement.decision.reason =
        "stuck, not replaced: replaced " + std::to_string(kMaxReplacements) + " times already";
    return replacement;
  }
  auto fees = CachedFees(now_ms);
  if (!fees.ok()) return fees.status();
  chain::FeeData old_fees;
  old_fees.max_fee_per_gas = old->max_fee_per_gas;
  old_fees.max_priority_fee_per_gas = old->max_priority_fee_per_gas;
  replacement.decision =
      ReplacementFees(old_fees, ApplyFeeCaps(*fees, config_.fee_caps), config_.fee_caps, stuck);
  if (!replacement.decision.replace) return replacement;
  // The same transaction at the new fees: one payment's transfer, or a batch's aggregate3.
  chain::Eip1559Transaction again;
  again.chain_id = config_.chain_id;
  again.nonce = old->nonce;
  again.max_priority_fee_per_gas = replacement.decision.fees.max_priority_fee_per_gas;
  again.max_fee_per_gas = replacement.decision.fees.max_fee_per_gas;
  again.gas_limit = old->gas_limit;
  again.to = old->to;
  again.value = old->value;
  again.data = old->data;
  auto signed_tx = chain::SignEip1559(again, relayer_key_);
  if (!signed_tx.ok()) return signed_tx.status();
  X402PaymentRecord next = record;
  next.replaced_raw_txs.push_back(record.raw_tx_hex);
  next.tx_hash = chain::Hex(signed_tx->hash);
  next.raw_tx_hex = chain::Hex(signed_tx->raw);
  next.submitted_ms = now_ms;
  next.broadcasts = record.broadcasts + 1;
  replacement.record = std::move(next);
  return replacement;
}

Result<int64_t> Settler::Confirmations(const ReceiptLook& receipt) {
  if (config_.confirmations <= 1) return 1;
  auto head = chain_.BlockNumber();
  if (!head.ok()) return head.status();
  // A node whose head is behind the receipt's block is behind: not one confirmation yet.
  if (*head < receipt.block_number) return 0;
  return static_cast<int64_t>(
      std::min<uint64_t>(*head - receipt.block_number + 1, std::numeric_limits<int64_t>::max()));
}

Result<ChainObservation> Settler::Observe(const X402PaymentRecord& record,
                                          std::optional<ReceiptLook> receipt) {
  auto authorization = AuthorizationOf(record);
  if (!authorization.ok()) return authorization.status();
  ChainObservation seen;
  auto settled = [&](const ReceiptLook& look) -> Result<ChainObservation> {
    seen.receipt = look.view;
    seen.receipt_tx_hash = look.tx_hash;
    seen.receipt_block = static_cast<int64_t>(look.block_number);
    seen.receipt_block_hash = look.block_hash;
    seen.tx_known = seen.nonce_used = true;  // what the Transfer itself shows
    auto depth = Confirmations(look);
    if (!depth.ok()) return depth.status();
    seen.confirmations = *depth;
    return seen;
  };
  if (!receipt) {
    auto looked = LookForReceipt(record);
    if (!looked.ok()) return looked.status();
    receipt = *looked;
  }
  if (receipt->view == ReceiptView::kSuccessWithTransfer) return settled(*receipt);
  seen.receipt = receipt->view;
  seen.receipt_tx_hash = receipt->tx_hash;
  auto used = chain_.AuthorizationState(config_.token, authorization->from, authorization->nonce);
  if (!used.ok()) return used.status();
  seen.nonce_used = *used;
  if (seen.nonce_used && seen.receipt == ReceiptView::kNone) {
    // Our transaction may have been mined between the two reads: "used" must come before
    // "missing" for Reconcile to call the nonce someone else's.
    auto again = LookForReceipt(record);
    if (!again.ok()) return again.status();
    if (again->view == ReceiptView::kSuccessWithTransfer) return settled(*again);
    seen.receipt = again->view;
    seen.receipt_tx_hash = again->tx_hash;
  }
  if (seen.receipt == ReceiptView::kNone) {
    auto known = NodeKnows(record);
    if (!known.ok()) return known.status();
    seen.tx_known = *known;  // pending: still void once expired, so the time is read
  } else {
    seen.tx_known = true;  // mined
    seen.confirmations = 1;
  }
  if (seen.nonce_used) return seen;  // failed or pending, whatever the time
  auto time = chain_.LatestBlockTimestamp();
  if (!time.ok()) return time.status();
  seen.chain_time_s = *time;
  return seen;
}

Result<ChainObservation> Settler::ObserveUnsigned(const X402PaymentRecord& record) {
  AGENTPAY_CHECK(!record.submitted());
  auto authorization = AuthorizationOf(record);
  if (!authorization.ok()) return authorization.status();
  ChainObservation seen;
  auto used = chain_.AuthorizationState(config_.token, authorization->from, authorization->nonce);
  if (!used.ok()) return used.status();
  seen.nonce_used = *used;
  if (seen.nonce_used) return seen;
  auto time = chain_.LatestBlockTimestamp();
  if (!time.ok()) return time.status();
  seen.chain_time_s = *time;
  return seen;
}

X402PaymentRecord AsMined(const X402PaymentRecord& record, std::string_view mined_tx_hash) {
  if (mined_tx_hash.empty() || mined_tx_hash == record.tx_hash) return record;
  X402PaymentRecord mined = record;
  for (size_t i = 0; i < record.replaced_raw_txs.size(); ++i) {
    auto raw = chain::ParseHex(record.replaced_raw_txs[i]);
    if (!raw.ok() || chain::Hex(chain::Keccak256(*raw)) != mined_tx_hash) continue;
    mined.tx_hash = std::string(mined_tx_hash);
    mined.raw_tx_hex = record.replaced_raw_txs[i];
    mined.replaced_raw_txs.erase(mined.replaced_raw_txs.begin() + static_cast<std::ptrdiff_t>(i));
    mined.replaced_raw_txs.push_back(record.raw_tx_hex);
    return mined;
  }
  return record;
}

X402PaymentRecord AsSettled(const X402PaymentRecord& record, const ChainObservation& seen,
                            int64_t now_ms) {
  X402PaymentRecord settled = AsMined(record, seen.receipt_tx_hash);
  settled.settled_block = seen.receipt_block;
  settled.settled_block_hash = seen.receipt_block_hash;
  settled.settled_ms = now_ms;
  return settled;
}

Result<chain::TransferAuthorization> AuthorizationOf(const X402PaymentRecord& record) {
  const Authorization& a = record.authorization;
  auto from = chain::ParseAddress(a.from);
  auto to = chain::ParseAddress(record.pay_to);
  auto nonce = chain::ParseHash32(a.nonce_hex);
  if (!from.ok() || !to.ok() || !nonce.ok() || a.value <= 0 || a.valid_after_s < 0 ||
      a.valid_before_s < 0) {
    return Status::Error(ErrorCode::kStoreCorrupt,
                         "malformed x402 payment of " + record.operation_id);
  }
  chain::TransferAuthorization out;
  out.from = *from;
  out.to = *to;
  out.value = chain::U256(static_cast<uint64_t>(a.value));
  out.valid_after = chain::U256(static_cast<uint64_t>(a.valid_after_s));
  out.valid_before = chain::U256(static_cast<uint64_t>(a.valid_before_s));
  out.nonce = *nonce;
  return out;
}

Result<chain::Signature> SignatureOf(const X402PaymentRecord& record) {
  auto signature = chain::ParseSignature(record.signature_hex);
  if (!signature.ok()) {
    return Status::Error(ErrorCode::kStoreCorrupt, "malformed signature of " + record.operation_id);
  }
  return *signature;
}

}  // namespace agentpay
