// The devnet's reads for its JSON-RPC endpoint (devnet_rpc.cc): blocks, transactions with their
// place in a block, receipts with their block context, and eth_getLogs, shown as a node shows
// them from the devnet's memory.
#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chain/devnet.h"
#include "chain/devnet_decode.h"
#include "chain/devnet_state.h"
#include "core/check.h"

namespace agentpay::chain {
namespace {

DevnetTransaction TransactionView(const Hash32& hash, const DecodedTransaction& transaction) {
  DevnetTransaction view;
  view.hash = hash;
  view.from = transaction.from;
  view.to = transaction.to;
  view.chain_id = transaction.chain_id;
  view.nonce = transaction.nonce;
  view.gas_limit = transaction.gas_limit;
  view.max_priority_fee_per_gas = transaction.max_priority_fee_per_gas;
  view.max_fee_per_gas = transaction.max_fee_per_gas;
  view.value = transaction.value;
  view.data = transaction.data;
  view.y_parity = transaction.y_parity;
  view.r = transaction.r;
  view.s = transaction.s;
  return view;
}

DevnetTransaction MinedView(const MinedTransaction& mined) {
  DevnetTransaction view = TransactionView(mined.info.hash, mined.transaction);
  view.block_number = mined.receipt.block_number;
  view.block_hash = mined.receipt.block_hash;
  view.index = mined.index;
  return view;
}

// geth's rule: a filter with more topic positions than the log has topics never matches it.
bool LogMatches(const LogEntry& log, const DevnetLogFilter& filter) {
  if (!filter.addresses.empty() && std::find(filter.addresses.begin(), filter.addresses.end(),
                                             log.address) == filter.addresses.end()) {
    return false;
  }
  if (filter.topics.size() > log.topics.size()) return false;
  for (size_t position = 0; position < filter.topics.size(); ++position) {
    const std::vector<Hash32>& wanted = filter.topics[position];
    if (!wanted.empty() &&
        std::find(wanted.begin(), wanted.end(), log.topics[position]) == wanted.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::optional<DevnetBlock>> Devnet::Block(std::optional<uint64_t> number) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const uint64_t wanted = number.value_or(state_->block_number());
  if (wanted > state_->block_number()) return std::optional<DevnetBlock>();
  const BlockRecord& record = state_->BlockAt(wanted);
  DevnetBlock block;
  block.number = wanted;
  block.hash = record.hash;
  block.parent_hash = record.parent_hash;
  block.timestamp_s = record.timestamp_s;
  block.transactions = record.transactions;
  for (const Hash32& hash : record.transactions) {
    const MinedTransaction* mined = state_->FindMined(hash);
    AGENTPAY_CHECK(mined != nullptr);  // a block's transactions stay mined
    block.gas_used += mined->receipt.gas_used;
    block.logs.insert(block.logs.end(), mined->receipt.logs.begin(), mined->receipt.logs.end());
  }
  return std::optional<DevnetBlock>(std::move(block));
}

Result<std::optional<DevnetTransaction>> Devnet::Transaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (const MinedTransaction* mined = state_->FindMined(transaction_hash)) {
    return std::optional<DevnetTransaction>(MinedView(*mined));
  }
  if (const PendingTransaction* pending = state_->FindPending(transaction_hash)) {
    return std::optional<DevnetTransaction>(
        TransactionView(transaction_hash, pending->transaction));
  }
  return std::optional<DevnetTransaction>();
}

Result<std::optional<DevnetReceipt>> Devnet::ReceiptWithContext(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  if (mined == nullptr) return std::optional<DevnetReceipt>();
  DevnetReceipt answer;
  answer.receipt = mined->receipt;
  answer.transaction = MinedView(*mined);
  const BlockRecord& block = state_->BlockAt(mined->receipt.block_number);
  for (uint64_t index = 0; index <= mined->index; ++index) {
    const MinedTransaction* earlier = state_->FindMined(block.transactions.at(index));
    AGENTPAY_CHECK(earlier != nullptr);
    answer.cumulative_gas_used += earlier->receipt.gas_used;
    if (index < mined->index) answer.first_log_index += earlier->receipt.logs.size();
  }
  return std::optional<DevnetReceipt>(std::move(answer));
}

Result<uint64_t> Devnet::MinedNonce(const Address& account) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->AccountNonce(account);
}

Result<std::optional<U256>> Devnet::NativeBalance(const Address&) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return std::optional<U256>();
}

Result<std::vector<DevnetPlacedLog>> Devnet::Logs(const DevnetLogFilter& filter) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (filter.from_block > filter.to_block) {
    return Status::Error(ErrorCode::kInvalidBlockRange, "fromBlock " + std::to_string(filter.from_block) +
                                                    " is after toBlock " +
                                                    std::to_string(filter.to_block));
  }
  std::vector<DevnetPlacedLog> found;
  const uint64_t latest = state_->block_number();
  if (filter.from_block > latest) return found;
  const uint64_t to_block = std::min(filter.to_block, latest);
  if (to_block - filter.from_block >= kDevnetMaxLogBlockRange) {
    return Status::Error(ErrorCode::kBlockRangeTooLarge,
                         "the range spans " + std::to_string(to_block - filter.from_block + 1) +
                             " blocks; at most " + std::to_string(kDevnetMaxLogBlockRange) +
                             " per call");
  }
  for (uint64_t number = filter.from_block; number <= to_block; ++number) {
    const BlockRecord& block = state_->BlockAt(number);
    uint64_t log_index = 0;
    for (uint64_t index = 0; index < block.transactions.size(); ++index) {
      const MinedTransaction* mined = state_->FindMined(block.transactions[index]);
      AGENTPAY_CHECK(mined != nullptr);
      for (const LogEntry& log : mined->receipt.logs) {
        if (LogMatches(log, filter)) {
          if (found.size() == kDevnetMaxLogResults) {
            return Status::Error(ErrorCode::kTooManyResults,
                                 "more than " + std::to_string(kDevnetMaxLogResults) +
                                     " logs match; narrow the block range or the filter");
          }
          found.push_back({log, number, block.hash, mined->info.hash, index, log_index});
        }
        ++log_index;
      }
    }
  }
  return found;
}

}  // namespace agentpay::chain
