// EIP-712 hashing for the one typed message AgentPay verifies and signs: EIP-3009
// TransferWithAuthorization, under the EIP712Domain(name, version, chainId, verifyingContract)
// that USDC-like tokens (Circle FiatTokenV2) use.
#pragma once

#include <cstdint>
#include <string_view>

#include "chain/bytes.h"

namespace agentpay::chain {

inline constexpr std::string_view kEip712DomainType =
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";
inline constexpr std::string_view kTransferWithAuthorizationType =
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,"
    "uint256 validBefore,bytes32 nonce)";

// keccak256 of the type strings above.
Hash32 Eip712DomainTypehash();
Hash32 TransferWithAuthorizationTypehash();

// The token's name and version must match the deployment exactly ("USDC"/"2" on Base Sepolia,
// "USD Coin"/"2" on Base): a wrong name yields a well-formed digest that never validates on chain.
Hash32 DomainSeparator(std::string_view name, std::string_view version, uint64_t chain_id,
                       const Address& verifying_contract);

struct TransferAuthorization {
  Address from;
  Address to;
  U256 value;
  U256 valid_after;   // seconds; the token requires now > valid_after
  U256 valid_before;  // seconds; the token requires now < valid_before
  Hash32 nonce{};
  friend bool operator==(const TransferAuthorization&, const TransferAuthorization&) = default;
};

Hash32 TransferWithAuthorizationStructHash(const TransferAuthorization& authorization);
// keccak256(0x19 0x01 ‖ domain_separator ‖ structHash(authorization)): what the payer signs.
Hash32 Eip3009Digest(const Hash32& domain_separator, const TransferAuthorization& authorization);

}  // namespace agentpay::chain
