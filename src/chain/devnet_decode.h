// Internal to the devnet (its interface is devnet.h): decoding of what reaches the token (the
// calldata of transferWithAuthorization, EIP-1559 raw transactions), the checks a transaction
// passes before it enters the pool, and the ABI word helpers the devnet's files share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "chain/abi.h"
#include "chain/bytes.h"
#include "chain/devnet.h"
#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "core/result.h"

namespace agentpay::chain {

inline constexpr uint64_t kBaseFeePerGas = kDevnetBaseFeePerGas;
inline constexpr size_t kWord = 32;

// rpc_error with this message (geth's wording, which clients match on).
Status RpcError(std::string message);
Bytes WordBytes(const U256& value);

struct Selectors {
  Selector transfer_vrs = FunctionSelector(kTransferWithAuthorizationVrsSignature);
  Selector transfer_bytes = FunctionSelector(kTransferWithAuthorizationBytesSignature);
  Selector authorization_state = FunctionSelector(kAuthorizationStateSignature);
  Selector balance_of = FunctionSelector(kBalanceOfSignature);
  Selector total_supply = FunctionSelector("totalSupply()");
  Selector name = FunctionSelector("name()");
  Selector version = FunctionSelector("version()");
};

const Selectors& KnownSelectors();
// The first four bytes of calldata; nullopt when it is shorter.
std::optional<Selector> SelectorOf(std::span<const uint8_t> data);
// Either transferWithAuthorization overload.
bool IsSettlementSelector(const std::optional<Selector>& selector);

// The address argument in the word at byte offset `at` of the arguments; nullopt when the word is
// not all there or its upper bytes are dirty (the ABI decoder reverts on those).
std::optional<Address> AddressAt(std::span<const uint8_t> args, size_t at);
// Exactly 32 bytes as a hash; nullopt for any other length.
std::optional<Hash32> HashFrom(std::span<const uint8_t> bytes);

struct AuthorizationCall {
  TransferAuthorization authorization;
  std::optional<Signature> signature;  // nullopt: not 65 bytes, which fails as a bad signature
};

// Both transferWithAuthorization overloads; nullopt for calldata the ABI decoder rejects.
std::optional<AuthorizationCall> DecodeAuthorizationCall(std::span<const uint8_t> data);

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

// What geth and the token check before a transaction enters the pool, nonce aside.
Status CheckAdmissible(const DecodedTransaction& transaction, const DevnetConfig& config);

}  // namespace agentpay::chain
