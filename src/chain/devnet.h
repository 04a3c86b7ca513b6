// The built-in devnet: an in-process chain with one EIP-3009 token that enforces Circle
// FiatTokenV2's transferWithAuthorization rules, so the demo and the simulator settle x402
// payments without a node. Time comes from the injected Clock; mining is lazy and deterministic.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "core/result.h"
#include "core/world.h"

namespace agentpay::chain {

// Gas that every settlement uses, reverted or not, and what EstimateGas answers for one.
inline constexpr uint64_t kDevnetSettlementGas = 90'500;
// Raw transactions above this are refused ("oversized data"), as geth refuses them.
inline constexpr size_t kDevnetMaxRawTransactionBytes = 128 * 1024;

struct DevnetConfig {
  uint64_t chain_id = 0;
  Address token;                 // the one contract this chain has
  std::string token_name;        // EIP-712 domain name, e.g. "USDC"
  std::string token_version;     // EIP-712 domain version, e.g. "2"
  int64_t mine_delay_ms = 0;     // a transaction is mined once now >= submitted + delay; ≥ 0
  std::string persistence_path;  // SQLite file; empty: memory only
  size_t max_pending_transactions = 10'000;  // beyond: rpc_error "txpool is full"
  // With automine on, an empty block is stamped once this long has passed since the latest block
  // (0: never), so chain time moves on an idle chain and expired authorizations can be judged.
  int64_t empty_block_interval_ms = 0;
};

// What the JSON-RPC read endpoint (devnet_rpc.h) shows of the chain: blocks, transactions and
// logs as a node would, read from the devnet's memory.
struct DevnetBlock {
  uint64_t number = 0;
  Hash32 hash{};
  Hash32 parent_hash{};  // zero for block 0
  int64_t timestamp_s = 0;
  std::vector<Hash32> transactions;  // in execution order
  uint64_t gas_used = 0;
  std::vector<LogEntry> logs;  // every log of the block, in order (for logsBloom)
};

struct DevnetTransaction {
  Hash32 hash{};
  Address from;
  std::optional<Address> to;
  uint64_t chain_id = 0;
  uint64_t nonce = 0;
  uint64_t gas_limit = 0;
  U256 max_priority_fee_per_gas;
  U256 max_fee_per_gas;
  U256 value;
  Bytes data;
  uint8_t y_parity = 0;
  U256 r, s;
  std::optional<uint64_t> block_number;  // nullopt while pending; then the fields below are unset
  Hash32 block_hash{};
  uint64_t index = 0;  // position in its block
};

struct DevnetReceipt {
  Receipt receipt;
  DevnetTransaction transaction;
  uint64_t first_log_index = 0;      // block-wide index of the receipt's first log
  uint64_t cumulative_gas_used = 0;  // of its block, up to and including it
};

// A log as eth_getLogs places it.
struct DevnetPlacedLog {
  LogEntry entry;
  uint64_t block_number = 0;
  Hash32 block_hash{};
  Hash32 transaction_hash{};
  uint64_t transaction_index = 0;
  uint64_t log_index = 0;  // block-wide
};

// eth_getLogs' filter. An empty addresses list matches any emitter; topics[i] empty matches any
// topic at position i, else one of the listed ones.
struct DevnetLogFilter {
  uint64_t from_block = 0;  // inclusive
  uint64_t to_block = 0;    // inclusive; past the latest block means up to it
  std::vector<Address> addresses;
  std::vector<std::vector<Hash32>> topics;  // at most four positions
};

// One Logs call scans at most this many blocks and returns at most this many logs: a call stays
// a few milliseconds and its answer a few megabytes.
inline constexpr uint64_t kDevnetMaxLogBlockRange = 100'000;
inline constexpr size_t kDevnetMaxLogResults = 5'000;
// What BaseFeePerGas answers and every block carries: the devnet's fees never change.
inline constexpr uint64_t kDevnetBaseFeePerGas = 1'000'000'000;  // 1 gwei
inline constexpr uint64_t kDevnetBlockGasLimit = 30'000'000;

class DevnetLog;    // the SQLite event log (devnet_event_log.h)
class DevnetState;  // balances, nonces, pool, receipts (devnet_state.h)

// Every Chain method first mines what is due by the clock: the transactions whose due time
// (submission + delay) has come, in blocks stamped with that due time (in seconds, never before
// the previous block), so what the chain shows does not depend on how often it is polled.
// A failed write to the persistence file surfaces as rpc_unreachable (rpc_timeout from
// SendRawTransaction, where the transaction may have been recorded). Thread-safe.
class Devnet final : public Chain {
 public:
  // Opens the chain, replaying config.persistence_path when it holds one. Preconditions:
  // config.mine_delay_ms >= 0, config.max_pending_transactions > 0. Errors: "devnet_store" (the
  // file cannot be opened, written or replayed), "devnet_config_mismatch" (the file belongs to
  // another chain id, token, or token name/version: replaying under another EIP-712 domain
  // would rewrite history).
  static Result<std::unique_ptr<Devnet>> Open(DevnetConfig config, Clock& clock);
  ~Devnet() override;
  Devnet(const Devnet&) = delete;
  Devnet& operator=(const Devnet&) = delete;

  Result<uint64_t> ChainId() override;
  Result<bool> AuthorizationState(const Address& token, const Address& from,
                                  const Hash32& nonce) override;
  Result<U256> BalanceOf(const Address& token, const Address& owner) override;
  // The token answers authorizationState, balanceOf, totalSupply, name, version, and simulates
  // transferWithAuthorization (empty result, or rpc_error "execution reverted: <reason>").
  // Other addresses answer empty data, as an account without code does.
  Result<Bytes> Call(const Address& to, const Bytes& data) override;
  // transferWithAuthorization on the token only, simulated at the next block's timestamp.
  Result<uint64_t> EstimateGas(const Address& from, const Address& to, const Bytes& data) override;
  Result<FeeData> Fees() override;
  Result<uint64_t> PendingNonce(const Address& account) override;
  Result<uint64_t> MinedNonce(const Address& account) override;
  // The devnet charges no gas: nullopt.
  Result<std::optional<U256>> NativeBalance(const Address& account) override;
  // Accepts an EIP-1559 transferWithAuthorization to the token whose nonce is the sender's
  // next one. rpc_error messages as geth's: "nonce too low", "nonce too high", "replacement
  // transaction underpriced" (a different transaction with a pending nonce), "txpool is full",
  // "invalid sender", "unsupported call", …
  Result<Hash32> SendRawTransaction(const Bytes& raw) override;
  Result<std::optional<Receipt>> GetReceipt(const Hash32& transaction_hash) override;
  Result<std::optional<TxInfo>> GetTransaction(const Hash32& transaction_hash) override;
  Result<uint64_t> BlockNumber() override;
  Result<std::optional<Hash32>> BlockHash(uint64_t number) override;
  Result<int64_t> LatestBlockTimestamp() override;

  // Reads for the JSON-RPC endpoint; they fail only as the Chain methods do (rpc_unreachable).
  //
  // The one contract of this chain.
  const Address& token() const { return config_.token; }
  // Block `number`, or the latest for nullopt; nullopt when it is not mined yet.
  Result<std::optional<DevnetBlock>> Block(std::optional<uint64_t> number);
  // A pending or mined transaction; nullopt when unknown or dropped.
  Result<std::optional<DevnetTransaction>> Transaction(const Hash32& transaction_hash);
  // nullopt while the transaction is not mined.
  Result<std::optional<DevnetReceipt>> ReceiptWithContext(const Hash32& transaction_hash);
  // The logs matching `filter`, oldest first. Errors: "invalid_block_range" (from_block past
  // to_block), "block_range_too_large" (more than kDevnetMaxLogBlockRange blocks once to_block is
  // capped at the latest), "too_many_results" (more than kDevnetMaxLogResults logs).
  Result<std::vector<DevnetPlacedLog>> Logs(const DevnetLogFilter& filter);

  // Test and demo controls; they work while the chain is unavailable.
  //
  // Creates `amount` tokens for `owner`. Errors: "invalid_amount" (the supply would pass
  // 2^256 - 1), "devnet_store".
  Status Mint(const Address& owner, const U256& amount);
  // Applies to transactions submitted from now on. Precondition: delay_ms >= 0.
  void SetMineDelayMs(int64_t delay_ms);
  // Removes a pending transaction from the pool (anvil_dropTransaction): GetTransaction then
  // answers nullopt and the same bytes may be sent again. False when it was not pending.
  Result<bool> DropTransaction(const Hash32& transaction_hash);
  // A reorganisation (anvil_rollback, then the transactions mined again): the latest `depth` blocks
  // are removed, their effects undone, and their transactions go back to the pool, due after the
  // mine delay, to be mined again in new blocks (another hash, at a later time). What was due is
  // mined first. Returns the head after the removal. Errors: "invalid_argument" (depth 0, or
  // deeper than the chain), "devnet_store".
  Result<uint64_t> Reorg(uint64_t depth);
  // Off: nothing is mined until Mine(). What was due before switching off is mined first.
  Status SetAutomine(bool enabled);
  // Mines one block now with every pending transaction that can run (evm_mine), even none.
  // Returns the new block number.
  Result<uint64_t> Mine();
  struct Controls {
    bool automine = true;
    int64_t mine_delay_ms = 0;
    size_t pending_transactions = 0;
  };
  // The control settings and the pool size, as they are now.
  Controls CurrentControls();
  // While true every Chain method fails with rpc_unreachable (a node that is down); blocks
  // that fall due meanwhile are still mined at their due time once it is back.
  void SetUnavailable(bool unavailable);
  // The revert reason of a mined, reverted transaction ("" when it reverted without one);
  // nullopt when it is not mined or did not revert. What debug_traceTransaction would show.
  std::optional<std::string> RevertReason(const Hash32& transaction_hash);

 private:
  Devnet(DevnetConfig config, Clock& clock, std::unique_ptr<DevnetState> state,
         std::unique_ptr<DevnetLog> log);

  // Fails while unavailable; then mines whatever is due. Call with mutex_ held.
  Status Enter();
  // Mines every due batch (automine only). Call with mutex_ held.
  Status MineDue();
  // Records a block of these transactions, then applies it. Call with mutex_ held.
  Status CommitBlock(int64_t timestamp_s, const std::vector<Hash32>& transactions);
  Result<Bytes> CallLocked(const Address& to, const Bytes& data);

  const DevnetConfig config_;
  Clock& clock_;
  std::mutex mutex_;
  std::unique_ptr<DevnetState> state_;
  std::unique_ptr<DevnetLog> log_;  // null: memory only
  int64_t mine_delay_ms_;
  bool automine_ = true;
  int64_t automine_since_ms_ = INT64_MIN;  // blocks are never stamped before automine resumed
  bool unavailable_ = false;
};

}  // namespace agentpay::chain
