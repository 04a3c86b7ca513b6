// The reference facilitator's pre-chain checks for `exact` EIP-3009 payments, made pure: time and
// chain id come in as arguments, so tests and the simulator can replay any moment.
#include "x402/verify.h"

#include "chain/eip712.h"
#include "chain/secp256k1.h"

namespace agentpay::x402 {
namespace {

constexpr std::string_view kExact = "exact";

// The v2 echo names the asset the client chose; it must be ours (an echo that is not an address
// fails too). A payload without an echo (v1, or built by hand) has nothing to compare.
bool EchoedAssetMatches(const PaymentPayload& payload, const Requirements& requirements) {
  if (!payload.accepted || !payload.accepted->is_object()) return true;
  const auto it = payload.accepted->find("asset");
  if (it == payload.accepted->end() || !it->is_string()) return true;
  const Result<Address> asset = chain::ParseAddress(it->get_ref<const std::string&>());
  return asset.ok() && *asset == requirements.asset;
}

}  // namespace

bool SignedByFrom(const PaymentPayload& payload, const Requirements& requirements) {
  const Result<Address> signer =
      chain::RecoverSigner(AuthorizationDigest(payload, requirements), payload.signature);
  return signer.ok() && *signer == payload.authorization.from;
}

std::string_view ReasonCode(Failure failure, Version version) {
  switch (failure) {
    case Failure::kNone:
      return "";
    case Failure::kUnsupportedScheme:
      return "invalid_exact_evm_scheme";
    case Failure::kMissingDomain:
      return "invalid_exact_evm_missing_eip712_domain";
    case Failure::kNetworkMismatch:
      return "invalid_exact_evm_network_mismatch";
    case Failure::kInvalidSignature:
      return "invalid_exact_evm_signature";
    case Failure::kRecipientMismatch:
      return "invalid_exact_evm_recipient_mismatch";
    case Failure::kValidBeforeTooSoon:
    case Failure::kValidBeforeTooLate:  // x402 has one code for both ends of the window
      return "invalid_exact_evm_payload_authorization_valid_before";
    case Failure::kValidAfterInFuture:
      return "invalid_exact_evm_payload_authorization_valid_after";
    case Failure::kValueMismatch:
      return version == Version::kV1 ? "invalid_exact_evm_authorization_value"
                                     : "invalid_exact_evm_payload_authorization_value_mismatch";
    case Failure::kAssetMismatch:
      return "invalid_exact_evm_asset_mismatch";
    case Failure::kTokenNameMismatch:
      return "invalid_exact_evm_token_name_mismatch";
    case Failure::kTokenVersionMismatch:
      return "invalid_exact_evm_token_version_mismatch";
    case Failure::kNonceAlreadyUsed:
      return "invalid_exact_evm_nonce_already_used";
    case Failure::kInsufficientBalance:
      return "invalid_exact_evm_insufficient_balance";
    case Failure::kSimulationFailed:
      return "invalid_exact_evm_transaction_simulation_failed";
  }
  AGENTPAY_CHECK(false && "unknown Failure");
  return "";
}

chain::Hash32 DomainSeparatorOf(const Requirements& requirements) {
  if (requirements.domain_separator) return *requirements.domain_separator;
  // Keyed by every input of the hash, so it can only ever answer for the domain asked about; one
  // entry, because a gateway verifies against one configured domain. Per thread: no locking.
  struct Memo {
    bool valid = false;
    uint64_t chain_id = 0;
    Address verifying_contract;
    std::string name, version;
    chain::Hash32 separator{};
  };
  thread_local Memo memo;
  if (!memo.valid || memo.chain_id != requirements.chain_id ||
      memo.verifying_contract != requirements.asset || memo.name != requirements.asset_name ||
      memo.version != requirements.asset_version) {
    memo.valid = false;  // stays false if an assignment below throws (out of memory)
    memo.separator = chain::DomainSeparator(requirements.asset_name, requirements.asset_version,
                                            requirements.chain_id, requirements.asset);
    memo.chain_id = requirements.chain_id;
    memo.verifying_contract = requirements.asset;
    memo.name = requirements.asset_name;
    memo.version = requirements.asset_version;
    memo.valid = true;
  }
  return memo.separator;
}

chain::Hash32 AuthorizationDigest(const PaymentPayload& payload, const Requirements& requirements) {
  return chain::Eip3009Digest(DomainSeparatorOf(requirements), payload.authorization);
}

Failure VerifyExact(const PaymentPayload& payload, const Requirements& requirements,
                    int64_t now_seconds, int64_t valid_before_buffer_seconds,
                    int64_t valid_before_skew_seconds) {
  AGENTPAY_CHECK(now_seconds >= 0 && valid_before_buffer_seconds >= 0 &&
                 valid_before_skew_seconds >= 0 && requirements.max_timeout_seconds >= 0);
  if (payload.scheme != kExact || requirements.scheme != kExact) {
    return Failure::kUnsupportedScheme;
  }
  if (requirements.asset_name.empty() || requirements.asset_version.empty()) {
    return Failure::kMissingDomain;
  }
  if (!payload.chain_id || *payload.chain_id != requirements.chain_id) {
    return Failure::kNetworkMismatch;
  }
  const TransferAuthorization& authorization = payload.authorization;
  if (authorization.to != requirements.pay_to) return Failure::kRecipientMismatch;
  // Each term is below 2^63, so these sums cannot overflow 256 bits.
  const U256 now(static_cast<uint64_t>(now_seconds));
  const U256 earliest_valid_before =
      *U256::CheckedAdd(now, U256(static_cast<uint64_t>(valid_before_buffer_seconds)));
  if (authorization.valid_before < earliest_valid_before) return Failure::kValidBeforeTooSoon;
  const U256 latest_valid_before = *U256::CheckedAdd(
      *U256::CheckedAdd(now, U256(static_cast<uint64_t>(requirements.max_timeout_seconds))),
      U256(static_cast<uint64_t>(valid_before_skew_seconds)));
  if (authorization.valid_before > latest_valid_before) return Failure::kValidBeforeTooLate;
  if (authorization.valid_after > now) return Failure::kValidAfterInFuture;
  if (authorization.value != requirements.amount) return Failure::kValueMismatch;
  if (payload.version == Version::kV2 && !EchoedAssetMatches(payload, requirements)) {
    return Failure::kAssetMismatch;
  }
  // Last: the one costly check, reached only by a payment that is right in every other way.
  if (!SignedByFrom(payload, requirements)) return Failure::kInvalidSignature;
  return Failure::kNone;
}

}  // namespace agentpay::x402
