// The chain as the gateway's settlement and reconciliation code sees it: the few reads and the one
// write (a raw transaction) that EIP-3009 settlement needs. RpcChain talks to a node; the devnet
// implements the same interface in-process.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "chain/bytes.h"
#include "core/result.h"

namespace agentpay::chain {

// Stable error code of Chain::SendRawTransaction: the node already has this very transaction (in
// its pool, or mined). Not a failure of the broadcast: follow the hash as if it had been accepted.
// The code is ErrorCode::kTxAlreadyKnown; this is its name, for comparing with Status::code().
inline constexpr std::string_view kTxAlreadyKnown = ErrorCodeName(ErrorCode::kTxAlreadyKnown);

struct FeeData {
  U256 base_fee_per_gas;          // of the latest block
  U256 max_priority_fee_per_gas;  // the tip
  U256 max_fee_per_gas;           // 2 * base + tip: survives six full blocks of base-fee growth
  friend bool operator==(const FeeData&, const FeeData&) = default;
};

// The max fee per gas a transaction is signed with: 2 * base + tip. nullopt on overflow.
inline std::optional<U256> MaxFeeFor(const U256& base_fee_per_gas,
                                     const U256& max_priority_fee_per_gas) {
  std::optional<U256> twice_base = U256::CheckedAdd(base_fee_per_gas, base_fee_per_gas);
  if (!twice_base) return std::nullopt;
  return U256::CheckedAdd(*twice_base, max_priority_fee_per_gas);
}

struct LogEntry {
  Address address;             // the emitting contract
  std::vector<Hash32> topics;  // at most four
  Bytes data;
  friend bool operator==(const LogEntry&, const LogEntry&) = default;
};

struct Receipt {
  Hash32 transaction_hash{};
  uint8_t status = 0;  // 1 success, 0 reverted
  uint64_t block_number = 0;
  Hash32 block_hash{};
  uint64_t gas_used = 0;
  std::vector<LogEntry> logs;
  std::optional<Address> contract_address;  // set for contract creations
  friend bool operator==(const Receipt&, const Receipt&) = default;
};

struct TxInfo {
  Hash32 hash{};
  uint64_t nonce = 0;
  Address from;
  std::optional<uint64_t> block_number;  // nullopt while pending
  friend bool operator==(const TxInfo&, const TxInfo&) = default;
};

// Every method may fail with the transport codes of json_rpc.h (rpc_unreachable, rpc_timeout,
// rpc_error, rpc_malformed) or their equivalents in other implementations; rpc_timeout means
// "unknown", never "did not happen". Implementations must be safe to call from several threads.
class Chain {
 public:
  virtual ~Chain() = default;

  virtual Result<uint64_t> ChainId() = 0;
  // authorizationState(from, nonce) of an EIP-3009 token at the latest block: true once used
  // or canceled. Errors also: "invalid_abi" (e.g. `token` is not a contract).
  virtual Result<bool> AuthorizationState(const Address& token, const Address& from,
                                          const Hash32& nonce) = 0;
  // balanceOf(owner) at the latest block. Errors also: "invalid_abi".
  virtual Result<U256> BalanceOf(const Address& token, const Address& owner) = 0;
  // eth_call at the latest block. A revert is rpc_error whose message carries the reason.
  virtual Result<Bytes> Call(const Address& to, const Bytes& data) = 0;
  // eth_estimateGas. A transaction that would revert is rpc_error with the reason.
  virtual Result<uint64_t> EstimateGas(const Address& from, const Address& to,
                                       const Bytes& data) = 0;
  virtual Result<FeeData> Fees() = 0;
  // The next nonce of `account`, counting its pending transactions. Nodes differ where the pool
  // has a gap: geth counts only the pending run without one, Anvil counts past it.
  virtual Result<uint64_t> PendingNonce(const Address& account) = 0;
  // The next nonce of `account` at the latest block: its mined transactions only.
  virtual Result<uint64_t> MinedNonce(const Address& account) = 0;
  // eth_getBalance at the latest block: the native currency `account` pays gas with, in wei.
  // nullopt from a chain that charges no gas (the built-in devnet).
  virtual Result<std::optional<U256>> NativeBalance(const Address& account) = 0;
  // Broadcasts a signed transaction and returns its hash (keccak256 of raw). When the node
  // already has exactly this transaction the result is the error kTxAlreadyKnown.
  virtual Result<Hash32> SendRawTransaction(const Bytes& raw) = 0;
  // SendRawTransaction of each, in order, one outcome each. A node reached over the network gets
  // them together where it can (RpcChain: one JSON-RPC batch), so that they arrive in this order
  // and at once; this default sends them one by one.
  virtual std::vector<Result<Hash32>> SendRawTransactions(std::span<const Bytes> raws) {
    std::vector<Result<Hash32>> sent;
    sent.reserve(raws.size());
    for (const Bytes& raw : raws) sent.push_back(SendRawTransaction(raw));
    return sent;
  }
  // nullopt while the transaction is not mined (pending, dropped or unknown).
  virtual Result<std::optional<Receipt>> GetReceipt(const Hash32& transaction_hash) = 0;
  // nullopt when the node does not know the transaction (never seen, or dropped from its pool).
  virtual Result<std::optional<TxInfo>> GetTransaction(const Hash32& transaction_hash) = 0;
  virtual Result<uint64_t> BlockNumber() = 0;
  // The hash of the canonical block `number`; nullopt past the head. A reorganisation changes it,
  // and the hash of every block after it.
  virtual Result<std::optional<Hash32>> BlockHash(uint64_t number) = 0;
  // Seconds since the epoch, as the chain sees it (EIP-3009 validity is judged against this).
  virtual Result<int64_t> LatestBlockTimestamp() = 0;
};

}  // namespace agentpay::chain
