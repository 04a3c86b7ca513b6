// Internal to the devnet (its interface is devnet.h): DevnetState, the chain in memory and free of
// I/O: the token's ledger (supply, balances, used authorizations), the accounts' nonces, the pool
// of pending transactions, the mined blocks with their receipts, and the token's rules that run
// a settlement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chain/bytes.h"
#include "chain/chain.h"
#include "chain/devnet.h"
#include "chain/devnet_decode.h"
#include "chain/eip712.h"
#include "core/result.h"

namespace agentpay::chain {

// value / divisor rounded toward minus infinity, so that block seconds from clock milliseconds
// stay right before 1970 too. Precondition: divisor > 0.
int64_t FloorDiv(int64_t value, int64_t divisor);
// A "devnet_store" error: the event log does not replay because of `what`.
Status Corrupt(const std::string& what);

struct PendingTransaction {
  DecodedTransaction transaction;
  int64_t due_ms = 0;
  uint64_t sequence = 0;  // submission order, to break ties between equal due times
};

struct MinedTransaction {
  TxInfo info;
  Receipt receipt;
  std::optional<std::string> revert_reason;  // nullopt: succeeded
  DecodedTransaction transaction;
  uint64_t index = 0;  // position in its block
  // What it applied, when it succeeded: one authorization, or each of a Multicall3 aggregate3's
  // calls that did not fail.
  std::vector<TransferAuthorization> settled;
};

// A mined block as the state remembers it (block 0 is the genesis).
struct BlockRecord {
  Hash32 hash{};
  Hash32 parent_hash{};
  int64_t timestamp_s = 0;
  std::vector<Hash32> transactions;
};

// The outcome of running a settlement: a revert reason, or the authorization to apply.
struct Execution {
  std::optional<std::string> revert_reason;
  TransferAuthorization authorization;
};

class DevnetState {
 public:
  DevnetState(const DevnetConfig& config, int64_t genesis_ms);

  uint64_t block_number() const { return block_number_; }
  int64_t block_timestamp_s() const { return block_timestamp_s_; }
  const U256& total_supply() const { return total_supply_; }
  size_t pending_count() const { return pending_.size(); }
  U256 Balance(const Address& owner) const;
  bool AuthorizationUsed(const Address& authorizer, const Hash32& nonce) const {
    return used_authorizations_.count({authorizer, nonce}) > 0;
  }
  uint64_t AccountNonce(const Address& account) const;
  uint64_t PendingNonce(const Address& account) const;
  bool Knows(const Hash32& hash) const { return pending_.count(hash) || mined_.count(hash); }
  const PendingTransaction* FindPending(const Hash32& hash) const;
  const MinedTransaction* FindMined(const Hash32& hash) const;
  // Precondition: number <= block_number().
  const BlockRecord& BlockAt(uint64_t number) const { return blocks_.at(number); }

  // rpc_error when transaction's nonce is not its sender's next one.
  Status CheckNonce(const DecodedTransaction& transaction) const;
  // transferWithAuthorization(data) at a block with this timestamp, against the current state.
  Execution Simulate(std::span<const uint8_t> data, int64_t timestamp_s) const;

  Status Mint(const Address& owner, const U256& amount);
  // Precondition: !Knows(hash).
  void AddPending(const Hash32& hash, DecodedTransaction transaction, int64_t due_ms);
  bool RemovePending(const Hash32& hash);
  struct BlockPlan {
    std::vector<Hash32> transactions;
    int64_t first_due_ms = 0;  // the due time of the first transaction (0 when there is none)
  };
  // The pending transactions that can run in the next block, in order: due by limit_ms, and
  // each its sender's next nonce. With one_second, only those due in the same second as the
  // first.
  BlockPlan PlanBlock(int64_t limit_ms, bool one_second) const;
  // Mines a block. Errors ("devnet_store") when the transactions are not a plan of this state,
  // which only a corrupt event log can cause.
  Status ApplyBlock(int64_t timestamp_s, const std::vector<Hash32>& hashes);
  // A reorganisation: the latest `depth` blocks are no longer canonical. Their effects are undone
  // and their transactions go back to the pool, due at `due_ms` (a node puts them back in its
  // mempool), to be mined again in new blocks. Precondition: depth <= block_number().
  void Rollback(uint64_t depth, int64_t due_ms);

 private:
  Execution Run(const DecodedTransaction& transaction, int64_t timestamp_s) const;
  std::vector<LogEntry> Settle(const TransferAuthorization& authorization);
  // Undoes Settle (a reorganisation, or an aggregate3 that reverts after some of its calls ran).
  void Unsettle(const TransferAuthorization& authorization);
  // Runs an aggregate3 transaction's calls in order against the state, each seeing the ones before
  // it: a failed call with allowFailure is skipped; one without reverts the whole transaction.
  void RunAggregate3(const DecodedTransaction& transaction, MinedTransaction& mined);
  void MineOne(const Hash32& hash, uint64_t index);

  Address token_;
  Hash32 domain_separator_;
  uint64_t block_number_ = 0;
  int64_t block_timestamp_s_;
  Hash32 block_hash_;
  U256 total_supply_;
  std::map<Address, U256> balances_;
  std::set<std::pair<Address, Hash32>> used_authorizations_;
  std::map<Address, uint64_t> account_nonces_;
  std::map<Hash32, PendingTransaction> pending_;
  std::map<std::pair<Address, uint64_t>, Hash32> pending_by_sender_;
  std::set<std::tuple<int64_t, uint64_t, Hash32>> pending_by_due_;
  uint64_t next_sequence_ = 0;
  std::map<Hash32, MinedTransaction> mined_;
  std::vector<BlockRecord> blocks_;  // index: block number
};

}  // namespace agentpay::chain
