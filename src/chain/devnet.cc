// The Devnet: opening (replaying the event log), mining what falls due by the clock, the Chain
// methods with the token's read-only calls, and the test and demo controls. Its parts:
// devnet_decode.h, devnet_state.h and devnet_event_log.h; its reads for JSON-RPC: devnet_reads.cc.
#include "chain/devnet.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chain/abi.h"
#include "chain/devnet_decode.h"
#include "chain/devnet_event_log.h"
#include "chain/devnet_state.h"
#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "core/check.h"

namespace agentpay::chain {
namespace {

constexpr uint64_t kPriorityFeePerGas = 1'000'000;  // 0.001 gwei, what Base asks

Status Reverted(const std::string& reason) {
  return RpcError(reason.empty() ? "execution reverted" : "execution reverted: " + reason);
}

// A Solidity `string` return value: offset word, length word, data padded to a word boundary.
Bytes AbiString(std::string_view text) {
  Bytes out = WordBytes(U256(kWord));
  const Bytes length = WordBytes(U256(text.size()));
  out.insert(out.end(), length.begin(), length.end());
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), (kWord - text.size() % kWord) % kWord, 0);
  return out;
}

Status Unreachable(const Status& status) {
  return Status::Error(ErrorCode::kRpcUnreachable, "devnet: " + status.message());
}

}  // namespace

// ---- Devnet ------------------------------------------------------------------------------

Result<std::unique_ptr<Devnet>> Devnet::Open(DevnetConfig config, Clock& clock) {
  AGENTPAY_CHECK(config.mine_delay_ms >= 0);
  AGENTPAY_CHECK(config.max_pending_transactions > 0);
  int64_t genesis_ms = clock.NowMs();
  std::unique_ptr<DevnetLog> log;
  if (!config.persistence_path.empty()) {
    Result<std::unique_ptr<DevnetLog>> opened = DevnetLog::Open(config.persistence_path);
    if (!opened.ok()) return opened.status();
    Result<int64_t> genesis = (*opened)->Bind(config, genesis_ms);
    if (!genesis.ok()) return genesis.status();
    genesis_ms = *genesis;
    log = std::move(*opened);
  }
  auto state = std::make_unique<DevnetState>(config, genesis_ms);
  if (log) {
    Status replayed =
        log->Replay([&state](const LogEvent& event) { return ReplayEvent(*state, event); });
    if (!replayed.ok()) return replayed;
  }
  return std::unique_ptr<Devnet>(
      new Devnet(std::move(config), clock, std::move(state), std::move(log)));
}

Devnet::Devnet(DevnetConfig config, Clock& clock, std::unique_ptr<DevnetState> state,
               std::unique_ptr<DevnetLog> log)
    : config_(std::move(config)),
      clock_(clock),
      state_(std::move(state)),
      log_(std::move(log)),
      mine_delay_ms_(config_.mine_delay_ms) {}

Devnet::~Devnet() = default;

Status Devnet::Enter() {
  if (unavailable_) {
    return Status::Error(ErrorCode::kRpcUnreachable, "devnet: the node is down (SetUnavailable)");
  }
  Status mined = MineDue();
  return mined.ok() ? mined : Unreachable(mined);
}

Status Devnet::MineDue() {
  if (!automine_) return Status::Ok();
  const int64_t now_ms = clock_.NowMs();
  while (true) {
    const DevnetState::BlockPlan plan = state_->PlanBlock(now_ms, true);
    if (plan.transactions.empty()) break;
    const int64_t stamp_ms = std::max(plan.first_due_ms, automine_since_ms_);
    Status committed = CommitBlock(FloorDiv(stamp_ms, 1000), plan.transactions);
    if (!committed.ok()) return committed;
  }
  const int64_t interval_ms = config_.empty_block_interval_ms;
  if (interval_ms > 0 && now_ms - state_->block_timestamp_s() * 1000 >= interval_ms) {
    return CommitBlock(FloorDiv(now_ms, 1000), {});
  }
  return Status::Ok();
}

Status Devnet::CommitBlock(int64_t timestamp_s, const std::vector<Hash32>& transactions) {
  timestamp_s = std::max(timestamp_s, state_->block_timestamp_s());
  if (log_) {
    Bytes data;
    for (const Hash32& hash : transactions) data.insert(data.end(), hash.begin(), hash.end());
    Status logged =
        log_->Append(kBlock, data, timestamp_s, static_cast<int64_t>(state_->block_number() + 1));
    if (!logged.ok()) return logged;
  }
  Status applied = state_->ApplyBlock(timestamp_s, transactions);
  AGENTPAY_CHECK(applied.ok());  // the block was planned from this very state
  return applied;
}

Result<uint64_t> Devnet::ChainId() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return config_.chain_id;
}

Result<bool> Devnet::AuthorizationState(const Address& token, const Address& from,
                                        const Hash32& nonce) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  Result<Bytes> answer = CallLocked(token, EncodeAuthorizationState(from, nonce));
  if (!answer.ok()) return answer.status();
  return DecodeBool(*answer);
}

Result<U256> Devnet::BalanceOf(const Address& token, const Address& owner) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  Result<Bytes> answer = CallLocked(token, EncodeBalanceOf(owner));
  if (!answer.ok()) return answer.status();
  return DecodeUint256(*answer);
}

Result<Bytes> Devnet::Call(const Address& to, const Bytes& data) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return CallLocked(to, data);
}

Result<Bytes> Devnet::CallLocked(const Address& to, const Bytes& data) {
  if (to != config_.token) return Bytes();  // no code there
  const std::optional<Selector> selector = SelectorOf(data);
  const std::span<const uint8_t> args = std::span<const uint8_t>(data).subspan(selector ? 4 : 0);
  const Selectors& known = KnownSelectors();
  if (selector == known.authorization_state) {
    std::optional<Address> authorizer = AddressAt(args, 0);
    std::optional<Hash32> nonce =
        args.size() >= 2 * kWord ? HashFrom(args.subspan(kWord, kWord)) : std::nullopt;
    if (!authorizer || !nonce) return Reverted("");
    return WordBytes(U256(state_->AuthorizationUsed(*authorizer, *nonce) ? 1 : 0));
  }
  if (selector == known.balance_of) {
    std::optional<Address> owner = AddressAt(args, 0);
    if (!owner) return Reverted("");
    return WordBytes(state_->Balance(*owner));
  }
  if (selector == known.total_supply) return WordBytes(state_->total_supply());
  if (selector == known.name) return AbiString(config_.token_name);
  if (selector == known.version) return AbiString(config_.token_version);
  if (IsSettlementSelector(selector)) {
    const int64_t next_block_s =
        std::max(state_->block_timestamp_s(), FloorDiv(clock_.NowMs(), 1000));
    const Execution execution = state_->Simulate(data, next_block_s);
    if (execution.revert_reason) return Reverted(*execution.revert_reason);
    return Bytes();
  }
  return Reverted("");
}

Result<uint64_t> Devnet::EstimateGas(const Address& from, const Address& to, const Bytes& data) {
  (void)from;  // transferWithAuthorization does not depend on the caller
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (to != config_.token || !IsSettlementSelector(SelectorOf(data))) {
    return RpcError("unsupported call: the devnet estimates only transferWithAuthorization");
  }
  Result<Bytes> simulated = CallLocked(to, data);
  if (!simulated.ok()) return simulated.status();
  return kDevnetSettlementGas;
}

Result<FeeData> Devnet::Fees() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const U256 base(kBaseFeePerGas), tip(kPriorityFeePerGas);
  return FeeData{base, tip, *MaxFeeFor(base, tip)};  // small constants: no overflow
}

Result<uint64_t> Devnet::PendingNonce(const Address& account) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->PendingNonce(account);
}

Result<Hash32> Devnet::SendRawTransaction(const Bytes& raw) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (raw.size() > kDevnetMaxRawTransactionBytes) return RpcError("oversized data");
  const Hash32 hash = Keccak256(raw);
  if (state_->Knows(hash)) {
    return Status::Error(ErrorCode::kTxAlreadyKnown, "already known: " + Hex(hash));
  }
  Result<DecodedTransaction> transaction = DecodeRawTransaction(raw);
  if (!transaction.ok()) return transaction.status();
  if (Status admissible = CheckAdmissible(*transaction, config_); !admissible.ok()) {
    return admissible;
  }
  if (Status nonce = state_->CheckNonce(*transaction); !nonce.ok()) return nonce;
  if (state_->pending_count() >= config_.max_pending_transactions) {
    return RpcError("txpool is full");
  }
  const int64_t due_ms = clock_.NowMs() + mine_delay_ms_;
  if (log_) {
    Status logged = log_->Append(kSubmit, raw, due_ms);
    if (!logged.ok()) {
      return Status::Error(ErrorCode::kRpcTimeout, "devnet: " + logged.message());
    }
  }
  state_->AddPending(hash, std::move(*transaction), due_ms);
  (void)MineDue();  // accepted either way; a failed write here is retried by the next call
  return hash;
}

Result<std::optional<Receipt>> Devnet::GetReceipt(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  if (mined == nullptr) return std::optional<Receipt>();
  return std::optional<Receipt>(mined->receipt);
}

Result<std::optional<TxInfo>> Devnet::GetTransaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (const MinedTransaction* mined = state_->FindMined(transaction_hash)) {
    return std::optional<TxInfo>(mined->info);
  }
  const PendingTransaction* pending = state_->FindPending(transaction_hash);
  if (pending == nullptr) return std::optional<TxInfo>();
  return std::optional<TxInfo>(
      TxInfo{transaction_hash, pending->transaction.nonce, pending->transaction.from, {}});
}

Result<uint64_t> Devnet::BlockNumber() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->block_number();
}

Result<std::optional<Hash32>> Devnet::BlockHash(uint64_t number) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (number > state_->block_number()) return std::optional<Hash32>();
  return std::optional<Hash32>(state_->BlockAt(number).hash);
}

Result<int64_t> Devnet::LatestBlockTimestamp() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->block_timestamp_s();
}

Status Devnet::Mint(const Address& owner, const U256& amount) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (!U256::CheckedAdd(state_->total_supply(), amount)) {
    return Status::Error(ErrorCode::kInvalidAmount, "the total supply would pass 2^256 - 1");
  }
  if (log_) {
    Bytes data(owner.bytes.begin(), owner.bytes.end());
    const Bytes amount_bytes = WordBytes(amount);
    data.insert(data.end(), amount_bytes.begin(), amount_bytes.end());
    if (Status logged = log_->Append(kMint, data, clock_.NowMs()); !logged.ok()) return logged;
  }
  return state_->Mint(owner, amount);
}

void Devnet::SetMineDelayMs(int64_t delay_ms) {
  AGENTPAY_CHECK(delay_ms >= 0);
  std::lock_guard lock(mutex_);
  mine_delay_ms_ = delay_ms;
}

Result<bool> Devnet::DropTransaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (state_->FindPending(transaction_hash) == nullptr) return false;
  if (log_) {
    if (Status logged = log_->Append(kDrop, transaction_hash, clock_.NowMs()); !logged.ok()) {
      return logged;
    }
  }
  return state_->RemovePending(transaction_hash);
}

Result<uint64_t> Devnet::Reorg(uint64_t depth) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (depth == 0 || depth > state_->block_number()) {
    return Status::Error(ErrorCode::kInvalidArgument, "a reorganisation removes 1 to " +
                                                          std::to_string(state_->block_number()) +
                                                          " blocks, not " + std::to_string(depth));
  }
  const int64_t due_ms = clock_.NowMs() + mine_delay_ms_;
  if (log_) {
    Status logged = log_->Append(kReorg, {}, due_ms, static_cast<int64_t>(depth));
    if (!logged.ok()) return logged;
  }
  state_->Rollback(depth, due_ms);
  return state_->block_number();
}

Status Devnet::SetAutomine(bool enabled) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (enabled && !automine_) automine_since_ms_ = clock_.NowMs();
  automine_ = enabled;
  return Status::Ok();
}

Result<uint64_t> Devnet::Mine() {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  const DevnetState::BlockPlan plan = state_->PlanBlock(INT64_MAX, false);
  Status committed = CommitBlock(FloorDiv(clock_.NowMs(), 1000), plan.transactions);
  if (!committed.ok()) return committed;
  return state_->block_number();
}

Devnet::Controls Devnet::CurrentControls() {
  std::lock_guard lock(mutex_);
  (void)MineDue();  // the pool as the next read would see it
  return Controls{automine_, mine_delay_ms_, state_->pending_count()};
}

void Devnet::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mutex_);
  unavailable_ = unavailable;
}

std::optional<std::string> Devnet::RevertReason(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  (void)MineDue();  // report what is known even if a block could not be recorded
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  return mined == nullptr ? std::nullopt : mined->revert_reason;
}

}  // namespace agentpay::chain
