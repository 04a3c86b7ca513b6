// The stable codes of operating errors (Status, DESIGN rule 3): one enumerator per code and one
// table, ErrorCodeName, to the name that logs, CLI output and tests show. A name never changes once
// released. Every layer's codes are listed here because core is the lowest layer: each code is
// produced by the folder named in its group, and compared as the enum, never as its name.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/check.h"

namespace agentpay {

enum class ErrorCode : uint8_t {
  kOk,  // not an error: the code of an ok Status
  // Anywhere.
  kInvalidArgument,  // a caller's argument is out of its documented range
  kInvalidConfig,    // a configuration value (flag, file, URL) cannot be used
  kInternalError,    // a bug caught at a boundary (an exception escaped a decision)
  kIoError,          // a file could not be created or written
  kListenFailed,     // http: the listening socket could not be opened
  kInvalidTarget,    // http: a request target that is not a normalisable origin-form path
  // store/ and sqlite/.
  kStoreUnavailable,  // the database cannot be opened, read or committed to
  kStoreOverloaded,  // the writer's queue (StoreOptions::max_queued_writes) or the readers' is full
  kStoreError,       // an SQL statement failed
  kStoreConstraint,  // an SQL statement broke a constraint
  kStoreCorrupt,     // a stored row does not decode or breaks an invariant
  kStoreNotFound,    // an update named a row that does not exist
  kStoreConflict,    // a generated id collided with an existing row
  kStoreTooNew,      // the schema is newer than this binary
  kStoreIncompatible,  // the schema is from a pre-release build
  kStoreKeyTaken,      // a key reserved as new exists (Transaction::ReserveNewKey)
  kStoreClaimLost,     // a claimed update found the claim taken (UpdateClaimedOperationOrFail)
  kInstanceTaken,      // another live process holds this instance id
  kRollback,           // not a failure: a decision asked for its writes to be rolled back
  // chain/: the JSON-RPC client (json_rpc.h tells them apart) and the chain.
  kRpcUnreachable,  // the request was never sent
  kRpcTimeout,      // the request may have been received; no complete answer
  kRpcError,        // the node answered with a JSON-RPC error object
  kRpcMalformed,    // the answer is not a usable JSON-RPC response
  kRpcUnavailable,  // HTTP 429 or 5xx, or JSON-RPC "limit exceeded": not served now; maybe received
  kTxAlreadyKnown,  // the node already has this transaction (chain.h)
  kChainUnavailable,
  kChainFeesTooHigh,      // the chain's base fee is above the relayer's --max-fee-per-gas
  kDevnetStore,           // the devnet's event log cannot be written or replayed
  kDevnetConfigMismatch,  // the devnet's file was made with another configuration
  kInvalidBlockRange,
  kBlockRangeTooLarge,
  kTooManyResults,
  kInvalidAbi,
  kNotTransferEvent,
  kInvalidHex,
  kInvalidAddress,
  kInvalidAmount,
  kInvalidPrivateKey,
  kInvalidSignature,
  kInvalidSignatureS,  // a high-s signature (EIP-2)
  kInvalidSignatureV,
  kInvalidRlp,
  kInvalidFees,
  kTransactionTooLarge,
  kSigningFailed,
  // x402/.
  kMalformedPayment,  // a payment header does not decode
  kInvalidBase64,
  // client/: the budget file and the choice of an offer.
  kBudgetMissing,
  kBudgetSchema,
  kBudgetRequired,
  kBudgetMismatch,
  kInvalidBudget,
  kInvalidReservation,
  kNoOffer,
  kX402VersionNotUsable,
  kNetworkNotAllowed,
  kAssetNotAllowed,
  kPayeeNotAllowed,      // the offer pays an address outside the client's --payee list
  kAmountAboveMax,       // the offer asks more than the client's --max-amount
  kBudgetAssetMismatch,  // the offer is in another asset than the budget file counts in
  kChainRpcMismatch,     // --chain-rpc is another chain than the offer's (the last: result_test.cc)
};

// The code's stable name ("" for kOk). The one table of names: -Wswitch (-Wall -Werror) refuses an
// enumerator without one.
constexpr std::string_view ErrorCodeName(ErrorCode code) {
  // One line per code, read as the table it is.
  // clang-format off
  switch (code) {
    case ErrorCode::kOk: return "";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidConfig: return "invalid_config";
    case ErrorCode::kInternalError: return "internal_error";
    case ErrorCode::kIoError: return "io_error";
    case ErrorCode::kListenFailed: return "listen_failed";
    case ErrorCode::kInvalidTarget: return "invalid_target";
    case ErrorCode::kStoreUnavailable: return "store_unavailable";
    case ErrorCode::kStoreOverloaded: return "store_overloaded";
    case ErrorCode::kStoreError: return "store_error";
    case ErrorCode::kStoreConstraint: return "store_constraint";
    case ErrorCode::kStoreCorrupt: return "store_corrupt";
    case ErrorCode::kStoreNotFound: return "store_not_found";
    case ErrorCode::kStoreConflict: return "store_conflict";
    case ErrorCode::kStoreTooNew: return "store_too_new";
    case ErrorCode::kStoreIncompatible: return "store_incompatible";
    case ErrorCode::kStoreKeyTaken: return "store_key_taken";
    case ErrorCode::kStoreClaimLost: return "store_claim_lost";
    case ErrorCode::kInstanceTaken: return "instance_taken";
    case ErrorCode::kRollback: return "rollback";
    case ErrorCode::kRpcUnreachable: return "rpc_unreachable";
    case ErrorCode::kRpcTimeout: return "rpc_timeout";
    case ErrorCode::kRpcError: return "rpc_error";
    case ErrorCode::kRpcMalformed: return "rpc_malformed";
    case ErrorCode::kRpcUnavailable: return "rpc_unavailable";
    case ErrorCode::kTxAlreadyKnown: return "tx_already_known";
    case ErrorCode::kChainUnavailable: return "chain_unavailable";
    case ErrorCode::kChainFeesTooHigh: return "chain_fees_too_high";
    case ErrorCode::kDevnetStore: return "devnet_store";
    case ErrorCode::kDevnetConfigMismatch: return "devnet_config_mismatch";
    case ErrorCode::kInvalidBlockRange: return "invalid_block_range";
    case ErrorCode::kBlockRangeTooLarge: return "block_range_too_large";
    case ErrorCode::kTooManyResults: return "too_many_results";
    case ErrorCode::kInvalidAbi: return "invalid_abi";
    case ErrorCode::kNotTransferEvent: return "not_transfer_event";
    case ErrorCode::kInvalidHex: return "invalid_hex";
    case ErrorCode::kInvalidAddress: return "invalid_address";
    case ErrorCode::kInvalidAmount: return "invalid_amount";
    case ErrorCode::kInvalidPrivateKey: return "invalid_private_key";
    case ErrorCode::kInvalidSignature: return "invalid_signature";
    case ErrorCode::kInvalidSignatureS: return "invalid_signature_s";
    case ErrorCode::kInvalidSignatureV: return "invalid_signature_v";
    case ErrorCode::kInvalidRlp: return "invalid_rlp";
    case ErrorCode::kInvalidFees: return "invalid_fees";
    case ErrorCode::kTransactionTooLarge: return "transaction_too_large";
    case ErrorCode::kSigningFailed: return "signing_failed";
    case ErrorCode::kMalformedPayment: return "malformed_payment";
    case ErrorCode::kInvalidBase64: return "invalid_base64";
    case ErrorCode::kBudgetMissing: return "budget_missing";
    case ErrorCode::kBudgetSchema: return "budget_schema";
    case ErrorCode::kBudgetRequired: return "budget_required";
    case ErrorCode::kBudgetMismatch: return "budget_mismatch";
    case ErrorCode::kInvalidBudget: return "invalid_budget";
    case ErrorCode::kInvalidReservation: return "invalid_reservation";
    case ErrorCode::kNoOffer: return "no_offer";
    case ErrorCode::kX402VersionNotUsable: return "x402_version_not_usable";
    case ErrorCode::kNetworkNotAllowed: return "network_not_allowed";
    case ErrorCode::kAssetNotAllowed: return "asset_not_allowed";
    case ErrorCode::kPayeeNotAllowed: return "payee_not_allowed";
    case ErrorCode::kAmountAboveMax: return "amount_above_max";
    case ErrorCode::kBudgetAssetMismatch: return "budget_asset_mismatch";
    case ErrorCode::kChainRpcMismatch: return "chain_rpc_mismatch";
  }
  // clang-format on
  AGENTPAY_CHECK(false && "ErrorCode out of range");
  return "";
}

}  // namespace agentpay
