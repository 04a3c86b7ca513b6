// Solidity ABI for the few contract calls AgentPay makes against EIP-3009 tokens: settling an
// authorization (both overloads), checking whether its nonce is spent, reading a balance, and
// reading ERC-20 Transfer events back from receipts.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "chain/bytes.h"
#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "core/result.h"

namespace agentpay::chain {

using Selector = std::array<uint8_t, 4>;

inline constexpr std::string_view kTransferWithAuthorizationVrsSignature =
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,"
    "bytes32)";
inline constexpr std::string_view kTransferWithAuthorizationBytesSignature =
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)";
inline constexpr std::string_view kAuthorizationStateSignature =
    "authorizationState(address,bytes32)";
inline constexpr std::string_view kBalanceOfSignature = "balanceOf(address)";
inline constexpr std::string_view kTransferEventSignature = "Transfer(address,address,uint256)";

// First four bytes of keccak256(signature), e.g. "balanceOf(address)" → 0x70a08231.
Selector FunctionSelector(std::string_view signature);

// Calldata for transferWithAuthorization(…, uint8 v, bytes32 r, bytes32 s), selector 0xe3ee160e.
Bytes EncodeTransferWithAuthorizationVrs(const TransferAuthorization& authorization,
                                         const Signature& signature);
// Calldata for transferWithAuthorization(…, bytes signature), selector 0xcf092995: the 65 bytes
// travel as a dynamic `bytes` (offset word, length word, data padded to 96 bytes).
Bytes EncodeTransferWithAuthorizationBytes(const TransferAuthorization& authorization,
                                           const Signature& signature);
// Calldata for authorizationState(address authorizer, bytes32 nonce), selector 0xe94a0102.
Bytes EncodeAuthorizationState(const Address& authorizer, const Hash32& nonce);
// Calldata for balanceOf(address), selector 0x70a08231.
Bytes EncodeBalanceOf(const Address& owner);

// Return values of eth_call. Strict: exactly one 32-byte word; a bool must be 0 or 1.
// Errors: "invalid_abi".
Result<bool> DecodeBool(std::span<const uint8_t> data);
Result<U256> DecodeUint256(std::span<const uint8_t> data);

// topic0 of the ERC-20 event Transfer(address indexed from, address indexed to, uint256 value).
Hash32 TransferEventTopic();

struct TransferEvent {
  Address from;
  Address to;
  U256 value;
  friend bool operator==(const TransferEvent&, const TransferEvent&) = default;
};

// Decodes an ERC-20 Transfer log: exactly three topics (ERC-721's Transfer has four and the same
// topic0, so it is refused), clean address padding, and a single 32-byte data word.
// Errors: "not_transfer_event" when topic0 differs, "invalid_abi" for malformed shapes.
Result<TransferEvent> DecodeTransferEvent(std::span<const Hash32> topics,
                                          std::span<const uint8_t> data);

}  // namespace agentpay::chain
