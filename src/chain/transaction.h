// EIP-1559 (type 2) transactions: the facilitator submits transferWithAuthorization with one.
// Signing yields the raw bytes for eth_sendRawTransaction and the hash to reconcile against;
// decoding reads them back (the devnet's pool, the relayer replacing its own stuck transaction).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "chain/bytes.h"
#include "chain/secp256k1.h"
#include "core/result.h"

namespace agentpay::chain {

// Calldata above this is refused: it leaves room for the other fields under the 128 KiB that
// geth's transaction pool accepts, and nothing AgentPay sends comes near it.
inline constexpr size_t kMaxTransactionDataBytes = 120 * 1024;

struct Eip1559Transaction {
  uint64_t chain_id = 0;  // EIP-2294 bounds chain ids well inside 64 bits
  uint64_t nonce = 0;     // EIP-2681 bounds nonces to 64 bits
  U256 max_priority_fee_per_gas;
  U256 max_fee_per_gas;
  uint64_t gas_limit = 0;
  std::optional<Address> to;  // nullopt: contract creation
  U256 value;
  Bytes data;
  // The access list is always empty.
};

struct SignedTransaction {
  Bytes raw;    // 0x02 ‖ rlp([chainId, nonce, …, accessList, yParity, r, s])
  Hash32 hash;  // keccak256(raw): the hash the node reports
};

// keccak256(0x02 ‖ rlp([chainId, nonce, maxPriorityFee, maxFee, gas, to, value, data, []])).
Hash32 Eip1559SigningHash(const Eip1559Transaction& transaction);

// Errors: "transaction_too_large" (data over kMaxTransactionDataBytes), "signing_failed".
Result<SignedTransaction> SignEip1559(const Eip1559Transaction& transaction, const PrivateKey& key);

struct DecodedTransaction {
  uint64_t chain_id = 0;
  uint64_t nonce = 0;
  U256 max_priority_fee_per_gas;
  U256 max_fee_per_gas;
  uint64_t gas_limit = 0;
  std::optional<Address> to;
  U256 value;
  Bytes data;
  Address from;  // recovered from the signature
  uint8_t y_parity = 0;
  U256 r, s;
};

// 0x02 ‖ rlp([chainId, nonce, tip, maxFee, gas, to, value, data, accessList, yParity, r, s]).
// Errors are rpc_error with geth-like messages.
Result<DecodedTransaction> DecodeRawTransaction(std::span<const uint8_t> raw);

}  // namespace agentpay::chain
