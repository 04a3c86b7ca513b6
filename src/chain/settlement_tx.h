// Pure helpers for settling an EIP-3009 authorization on chain: build the relayer's signed
// transferWithAuthorization transaction, and find the token's Transfer log in its receipt.
#pragma once

#include <cstdint>
#include <optional>

#include "chain/abi.h"
#include "chain/chain.h"
#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "chain/transaction.h"
#include "core/result.h"

namespace agentpay::chain {

// An EIP-1559 transaction from the relayer to `token` calling transferWithAuthorization(…, v, r,
// s), value 0, signed with relayer_key. Same inputs, same bytes (RFC 6979): re-building it is
// the same as re-broadcasting it. Preconditions: gas_limit > 0.
// Errors: "invalid_fees" (max fee below the tip), and those of SignEip1559.
Result<SignedTransaction> BuildTransferWithAuthorizationTx(
    const TransferAuthorization& authorization, const Signature& signature, const Address& token,
    uint64_t chain_id, uint64_t relayer_nonce, const FeeData& fees, uint64_t gas_limit,
    const PrivateKey& relayer_key);

// The first log of `receipt` emitted by `token` that decodes as ERC-20 Transfer(from, to, value)
// with exactly these from and to; nullopt when there is none. Logs of other contracts and
// malformed Transfer logs are ignored. What a Transfer says; whether it is a given authorization's
// is ShowsAuthorizationSettled's to say.
std::optional<TransferEvent> FindTransfer(const Receipt& receipt, const Address& token,
                                          const Address& from, const Address& to);

// Whether `receipt` shows this very authorization executed: the token's
// AuthorizationUsed(authorization.from, authorization.nonce) log (EIP-3009), with its Transfer of
// authorization.value from `from` to `to` as the token's next log or the one before it (USDC and
// the devnet emit AuthorizationUsed first). Another Transfer between the same two addresses of the
// same value, in the same transaction or not, is not this authorization's: a transaction that
// settles several authorizations shows each one by its own pair of logs.
bool ShowsAuthorizationSettled(const Receipt& receipt, const Address& token,
                               const TransferAuthorization& authorization);

}  // namespace agentpay::chain
