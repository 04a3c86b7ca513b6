// Verification of an x402 `exact` EVM payment against what the gateway asked for, without the
// chain: the checks of the reference facilitator (@x402/evm 2.27 verifyEIP3009) plus a cap on
// validBefore, as a pure function of the payload, the requirements and the time. The cheap checks
// run first and signature recovery (the costly secp256k1 step) last. Nonce state and balance need
// the chain and are the settlement code's job; their reason codes are here so all codes live
// together.
#pragma once

#include <cstdint>
#include <string_view>

#include "chain/bytes.h"
#include "x402/wire.h"

namespace agentpay::x402 {

enum class Failure {
  kNone,
  kUnsupportedScheme,   // payload or requirement scheme is not "exact"
  kMissingDomain,       // requirement lacks the EIP-712 name or version (our configuration)
  kNetworkMismatch,     // payload network unknown or another chain
  kInvalidSignature,    // not signed by `from` under our domain (incl. high s, bad v)
  kRecipientMismatch,   // authorization.to != payTo
  kValidBeforeTooSoon,  // validBefore < now + buffer (expired or about to)
  kValidBeforeTooLate,  // validBefore > now + maxTimeoutSeconds + skew (AgentPay, not reference)
  kValidAfterInFuture,  // validAfter > now
  kValueMismatch,       // value != amount (exact, not "at least")
  kAssetMismatch,       // the v2 `accepted` echo names another asset
  // Found by the settlement code on chain, never by VerifyExact:
  kTokenNameMismatch,     // the token's EIP-712 name differs from asset_name
  kTokenVersionMismatch,  // the token's EIP-712 version differs from asset_version
  kNonceAlreadyUsed,      // authorizationState(from, nonce) is true
  kInsufficientBalance,   // from holds less than value
  kSimulationFailed,      // the token would revert the transfer for another reason
};

// The x402 reason string (errorReason / invalidReason / problem `code`), as @x402/evm 2.27 spells
// it; "" for kNone. The v1 facilitator names a value mismatch differently, hence `version`.
// kAssetMismatch has no reference string (the reference server answers "No matching payment
// requirements" before verifying); it is AgentPay's "invalid_exact_evm_asset_mismatch".
std::string_view ReasonCode(Failure failure, Version version = Version::kV2);

// The reference facilitator's margin for block time: validBefore must be at least this far ahead.
inline constexpr int64_t kDefaultValidBeforeBufferSeconds = 6;

// AgentPay's cap on validBefore: at most now + the advertised maxTimeoutSeconds + this allowance
// for the client's clock running ahead of ours. The official clients sign validBefore = their now
// + maxTimeoutSeconds; a later one would keep an authorization (and, if its settlement reverted,
// the operation and the payer's reservation) alive for longer than the route asked.
inline constexpr int64_t kValidBeforeSkewSeconds = 30;

// The EIP-712 domain separator of the requirements: requirements.domain_separator when set, else
// chain::DomainSeparator(asset_name, asset_version, chain_id, asset), remembered per thread for
// the last four inputs asked (so the gateway's one configured domain is hashed once per thread).
chain::Hash32 DomainSeparatorOf(const Requirements& requirements);

// The EIP-3009 digest `from` must have signed: domain DomainSeparatorOf(requirements),
// message = payload.authorization.
chain::Hash32 AuthorizationDigest(const PaymentPayload& payload, const Requirements& requirements);

// The first failed check, cheap ones first: scheme, domain present, network, recipient,
// validBefore ≥ now + buffer, validBefore ≤ now + requirements.max_timeout_seconds + skew,
// validAfter ≤ now, value == amount, (v2) the echoed accepted.asset, and only then the signature.
// The reference checks the signature right after the network: a payload failing both the
// signature and a later check gets the later check's failure here (see ProvesSigner for the
// gateway, which needs to know). kNone when all pass.
// Preconditions: now_seconds ≥ 0, buffer ≥ 0, skew ≥ 0, requirements.max_timeout_seconds ≥ 0.
Failure VerifyExact(const PaymentPayload& payload, const Requirements& requirements,
                    int64_t now_seconds,
                    int64_t valid_before_buffer_seconds = kDefaultValidBeforeBufferSeconds,
                    int64_t valid_before_skew_seconds = kValidBeforeSkewSeconds);

// Whether `failure` (from VerifyExact) comes after the signature check, i.e. the signer was proven
// (kNone). Any other failure leaves the signer unproven: the caller that wants to know who signed
// (to answer a retry of an existing key) must call SignedByFrom itself.
inline bool ProvesSigner(Failure failure) { return failure == Failure::kNone; }

// The signature check alone: payload.signature is `from`'s (low s, v ∈ {27, 28}) over the
// EIP-3009 digest of the requirements' domain. The costly step (one secp256k1 recovery).
bool SignedByFrom(const PaymentPayload& payload, const Requirements& requirements);

}  // namespace agentpay::x402
