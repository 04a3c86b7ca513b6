// Internal to the devnet (its interface is devnet.h): decoding of what reaches the token (the
// calldata of transferWithAuthorization; raw transactions decode with chain/transaction.h), the
// checks a transaction passes before it enters the pool, and the ABI word helpers the devnet's
// files share.
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
#include "chain/transaction.h"
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

// What geth and the token check before a transaction enters the pool, nonce aside.
Status CheckAdmissible(const DecodedTransaction& transaction, const DevnetConfig& config);

}  // namespace agentpay::chain
