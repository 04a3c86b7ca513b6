// DevnetState: the token's FiatTokenV2 rules (Simulate, Run, Settle), minting, the pool's
// bookkeeping, and the planning and application of blocks.
#include "chain/devnet_state.h"

#include <algorithm>
#include <string_view>

#include "chain/abi.h"
#include "chain/keccak.h"
#include "chain/multicall.h"
#include "chain/secp256k1.h"
#include "core/check.h"

namespace agentpay::chain {
namespace {

void AppendBigEndian(Bytes& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

U256 TimestampWord(int64_t timestamp_s) {
  return U256(static_cast<uint64_t>(std::max<int64_t>(timestamp_s, 0)));
}

Hash32 AddressTopic(const Address& address) {
  Hash32 topic{};
  std::copy(address.bytes.begin(), address.bytes.end(), topic.begin() + 12);
  return topic;
}

Hash32 AuthorizationUsedTopic() {
  static const Hash32 topic = Keccak256(std::string_view("AuthorizationUsed(address,bytes32)"));
  return topic;
}

}  // namespace

int64_t FloorDiv(int64_t value, int64_t divisor) {
  return value / divisor - ((value % divisor != 0 && value < 0) ? 1 : 0);
}

Status Corrupt(const std::string& what) {
  return Status::Error(ErrorCode::kDevnetStore, "event log does not replay: " + what);
}

DevnetState::DevnetState(const DevnetConfig& config, int64_t genesis_ms)
    : token_(config.token),
      domain_separator_(
          DomainSeparator(config.token_name, config.token_version, config.chain_id, config.token)),
      block_timestamp_s_(FloorDiv(genesis_ms, 1000)) {
  Bytes genesis;
  AppendBigEndian(genesis, config.chain_id);
  genesis.insert(genesis.end(), config.token.bytes.begin(), config.token.bytes.end());
  AppendBigEndian(genesis, static_cast<uint64_t>(genesis_ms));
  block_hash_ = Keccak256(genesis);
  blocks_.push_back({block_hash_, Hash32{}, block_timestamp_s_, {}});
}

U256 DevnetState::Balance(const Address& owner) const {
  auto found = balances_.find(owner);
  return found == balances_.end() ? U256() : found->second;
}

uint64_t DevnetState::AccountNonce(const Address& account) const {
  auto found = account_nonces_.find(account);
  return found == account_nonces_.end() ? 0 : found->second;
}

uint64_t DevnetState::PendingNonce(const Address& account) const {
  uint64_t nonce = AccountNonce(account);
  while (pending_by_sender_.count({account, nonce}) > 0) ++nonce;
  return nonce;
}

const PendingTransaction* DevnetState::FindPending(const Hash32& hash) const {
  auto found = pending_.find(hash);
  return found == pending_.end() ? nullptr : &found->second;
}

const MinedTransaction* DevnetState::FindMined(const Hash32& hash) const {
  auto found = mined_.find(hash);
  return found == mined_.end() ? nullptr : &found->second;
}

Status DevnetState::CheckNonce(const DecodedTransaction& transaction) const {
  const uint64_t next = PendingNonce(transaction.from);
  if (transaction.nonce < AccountNonce(transaction.from)) return RpcError("nonce too low");
  if (transaction.nonce < next) return RpcError("replacement transaction underpriced");
  if (transaction.nonce > next) return RpcError("nonce too high");
  return Status::Ok();
}

// Circle FiatTokenV2 order: validity window, unused nonce, signature, then the transfer.
Execution DevnetState::Simulate(std::span<const uint8_t> data, int64_t timestamp_s) const {
  std::optional<AuthorizationCall> call = DecodeAuthorizationCall(data);
  if (!call) return {std::string(), {}};
  const TransferAuthorization& authorization = call->authorization;
  const U256 now = TimestampWord(timestamp_s);
  if (!(now > authorization.valid_after)) {
    return {"FiatTokenV2: authorization is not yet valid", authorization};
  }
  if (!(now < authorization.valid_before)) {
    return {"FiatTokenV2: authorization is expired", authorization};
  }
  if (AuthorizationUsed(authorization.from, authorization.nonce)) {
    return {"FiatTokenV2: authorization is used or canceled", authorization};
  }
  Result<Address> signer =
      call->signature
          ? RecoverSigner(Eip3009Digest(domain_separator_, authorization), *call->signature)
          : Result<Address>(Status::Error(ErrorCode::kInvalidSignature, "not 65 bytes"));
  if (!signer.ok() || *signer != authorization.from) {
    return {"FiatTokenV2: invalid signature", authorization};
  }
  if (authorization.to == Address{}) return {"ERC20: transfer to the zero address", authorization};
  if (Balance(authorization.from) < authorization.value) {
    return {"ERC20: transfer amount exceeds balance", authorization};
  }
  return {std::nullopt, authorization};
}

Execution DevnetState::Run(const DecodedTransaction& transaction, int64_t timestamp_s) const {
  if (transaction.gas_limit < kDevnetSettlementGas) return {"out of gas", {}};
  // transferWithAuthorization is not payable: the ABI dispatcher reverts without a reason.
  if (!transaction.value.IsZero()) return {std::string(), {}};
  return Simulate(transaction.data, timestamp_s);
}

Status DevnetState::Mint(const Address& owner, const U256& amount) {
  std::optional<U256> supply = U256::CheckedAdd(total_supply_, amount);
  if (!supply) return Status::Error(ErrorCode::kInvalidAmount, "the total supply would pass 2^256 - 1");
  total_supply_ = *supply;
  balances_[owner] = *U256::CheckedAdd(Balance(owner), amount);  // ≤ the supply
  return Status::Ok();
}

void DevnetState::AddPending(const Hash32& hash, DecodedTransaction transaction, int64_t due_ms) {
  AGENTPAY_CHECK(!Knows(hash));
  const uint64_t sequence = next_sequence_++;
  pending_by_sender_[{transaction.from, transaction.nonce}] = hash;
  pending_by_due_.insert({due_ms, sequence, hash});
  pending_.emplace(hash, PendingTransaction{std::move(transaction), due_ms, sequence});
}

bool DevnetState::RemovePending(const Hash32& hash) {
  auto found = pending_.find(hash);
  if (found == pending_.end()) return false;
  const PendingTransaction& pending = found->second;
  pending_by_sender_.erase({pending.transaction.from, pending.transaction.nonce});
  pending_by_due_.erase({pending.due_ms, pending.sequence, hash});
  pending_.erase(found);
  return true;
}

DevnetState::BlockPlan DevnetState::PlanBlock(int64_t limit_ms, bool one_second) const {
  BlockPlan plan;
  std::vector<Hash32>& chosen = plan.transactions;
  std::set<Hash32> taken;
  std::map<Address, uint64_t> next_nonces;  // senders whose nonce this block already advanced
  // A sender's later transaction may be due first: keep passing until nothing more can run.
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& [due_ms, sequence, hash] : pending_by_due_) {
      if (due_ms > limit_ms) break;
      if (taken.count(hash) > 0) continue;
      const DecodedTransaction& transaction = pending_.at(hash).transaction;
      auto advanced = next_nonces.find(transaction.from);
      const uint64_t expected =
          advanced != next_nonces.end() ? advanced->second : AccountNonce(transaction.from);
      if (transaction.nonce != expected) continue;
      if (chosen.empty()) {
        plan.first_due_ms = due_ms;
        if (one_second) limit_ms = std::min(limit_ms, FloorDiv(due_ms, 1000) * 1000 + 999);
      }
      chosen.push_back(hash);
      taken.insert(hash);
      next_nonces[transaction.from] = transaction.nonce + 1;
      progress = true;
    }
  }
  return plan;
}

Status DevnetState::ApplyBlock(int64_t timestamp_s, const std::vector<Hash32>& hashes) {
  std::map<Address, uint64_t> next_nonces;
  for (const Hash32& hash : hashes) {
    const PendingTransaction* pending = FindPending(hash);
    if (pending == nullptr) return Corrupt("block includes unknown transaction " + Hex(hash));
    const Address& from = pending->transaction.from;
    const uint64_t expected = next_nonces.count(from) > 0 ? next_nonces[from] : AccountNonce(from);
    if (pending->transaction.nonce != expected) return Corrupt("nonce gap at " + Hex(hash));
    next_nonces[from] = expected + 1;
  }
  const Hash32 parent_hash = block_hash_;
  Bytes header(block_hash_.begin(), block_hash_.end());
  AppendBigEndian(header, ++block_number_);
  block_timestamp_s_ = std::max(block_timestamp_s_, timestamp_s);
  AppendBigEndian(header, static_cast<uint64_t>(block_timestamp_s_));
  for (const Hash32& hash : hashes) header.insert(header.end(), hash.begin(), hash.end());
  block_hash_ = Keccak256(header);
  blocks_.push_back({block_hash_, parent_hash, block_timestamp_s_, hashes});
  for (uint64_t index = 0; index < hashes.size(); ++index) MineOne(hashes[index], index);
  return Status::Ok();
}

void DevnetState::MineOne(const Hash32& hash, uint64_t index) {
  const DecodedTransaction transaction = pending_.at(hash).transaction;
  RemovePending(hash);
  ++account_nonces_[transaction.from];
  const Execution execution = Run(transaction, block_timestamp_s_);
  MinedTransaction mined;
  mined.info = {hash, transaction.nonce, transaction.from, block_number_};
  mined.receipt.transaction_hash = hash;
  mined.receipt.block_number = block_number_;
  mined.receipt.block_hash = block_hash_;
  mined.receipt.gas_used = std::min(transaction.gas_limit, kDevnetSettlementGas);
  mined.revert_reason = execution.revert_reason;
  mined.transaction = transaction;
  mined.index = index;
  if (transaction.to == Multicall3Address()) {
    RunAggregate3(transaction, mined);
  } else if (!execution.revert_reason) {
    mined.receipt.status = 1;
    mined.receipt.logs = Settle(execution.authorization);
    mined.settled = {execution.authorization};
  }
  mined_.emplace(hash, std::move(mined));
}

void DevnetState::RunAggregate3(const DecodedTransaction& transaction, MinedTransaction& mined) {
  // Admitted only with calls of the token's transferWithAuthorization (CheckAdmissible).
  std::optional<std::vector<Call3>> calls = DecodeAggregate3(transaction.data);
  AGENTPAY_CHECK(calls.has_value());
  const uint64_t gas = kDevnetSettlementGas * calls->size();
  mined.receipt.gas_used = std::min(transaction.gas_limit, gas);
  mined.revert_reason.reset();
  if (transaction.gas_limit < gas) {
    mined.revert_reason = "out of gas";
    return;
  }
  std::vector<LogEntry> logs;
  for (const Call3& call : *calls) {
    const Execution execution = Simulate(call.call_data, block_timestamp_s_);
    if (!execution.revert_reason) {
      std::vector<LogEntry> settled = Settle(execution.authorization);
      logs.insert(logs.end(), settled.begin(), settled.end());
      mined.settled.push_back(execution.authorization);
      continue;
    }
    if (call.allow_failure) continue;
    for (auto it = mined.settled.rbegin(); it != mined.settled.rend(); ++it) Unsettle(*it);
    mined.settled.clear();
    mined.revert_reason = "Multicall3: call failed";
    return;
  }
  mined.receipt.status = 1;
  mined.receipt.logs = std::move(logs);
}

void DevnetState::Unsettle(const TransferAuthorization& a) {
  used_authorizations_.erase({a.from, a.nonce});
  balances_[a.to] = *U256::CheckedSub(Balance(a.to), a.value);
  balances_[a.from] = *U256::CheckedAdd(Balance(a.from), a.value);
}

void DevnetState::Rollback(uint64_t depth, int64_t due_ms) {
  AGENTPAY_CHECK(depth <= block_number_);
  for (; depth > 0; --depth) {
    const BlockRecord block = blocks_.back();
    for (auto it = block.transactions.rbegin(); it != block.transactions.rend(); ++it) {
      auto found = mined_.find(*it);
      AGENTPAY_CHECK(found != mined_.end());
      MinedTransaction& mined = found->second;
      for (auto a = mined.settled.rbegin(); a != mined.settled.rend(); ++a) Unsettle(*a);
      --account_nonces_[mined.transaction.from];
      DecodedTransaction transaction = std::move(mined.transaction);
      mined_.erase(found);
      AddPending(*it, std::move(transaction), due_ms);
    }
    blocks_.pop_back();
    --block_number_;
    block_hash_ = blocks_.back().hash;
    block_timestamp_s_ = blocks_.back().timestamp_s;
  }
}

std::vector<LogEntry> DevnetState::Settle(const TransferAuthorization& authorization) {
  used_authorizations_.insert({authorization.from, authorization.nonce});
  // Simulate checked the balance; from == to leaves it as it was.
  balances_[authorization.from] =
      *U256::CheckedSub(Balance(authorization.from), authorization.value);
  balances_[authorization.to] = *U256::CheckedAdd(Balance(authorization.to), authorization.value);
  std::vector<LogEntry> logs;
  logs.push_back({token_,
                  {AuthorizationUsedTopic(), AddressTopic(authorization.from), authorization.nonce},
                  {}});
  logs.push_back(
      {token_,
       {TransferEventTopic(), AddressTopic(authorization.from), AddressTopic(authorization.to)},
       WordBytes(authorization.value)});
  return logs;
}

}  // namespace agentpay::chain
