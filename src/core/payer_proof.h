// Who may have an x402 operation's result (issue 13, docs/threat-model.md T1): a settled
// authorization is public on chain, so re-presenting it proves nothing. A request that finds an
// existing x402 operation by its key is answered about it (replay, attach, resume, mismatch) only
// when it proves it comes from the payer. Pure: the shell says what it knows and does what this
// returns.
#pragma once

#include <string_view>

namespace agentpay {

// What the request presents, beside the key that found the operation.
struct PayerProofFacts {
  // What the key that found the operation is: the default key (payer, nonce); a key the payer
  // chose (an Idempotency-Key or a payment-identifier id, which the chain never sees) that is too
  // easy to guess to be a secret (below --min-idempotency-key-bits, core/key_strength.h); or one
  // hard enough to guess to prove the payer.
  // kPayee: the facilitator's key (payer, nonce) asked for by a caller authenticated as the seller
  // the authorization pays (gateway/facilitator.h): the result is the payee's to know.
  enum class Key { kDefault, kWeak, kSecret, kPayee } key = Key::kDefault;
  // The request's authorization is the one stored with the operation (same nonce and signature).
  bool identical_authorization = false;
  // The stored payment's relayer transaction exists (signed, so it may be in a mempool or mined).
  bool transaction_public = false;
  // The request's own authorization passed every check of the route (time window, amount,
  // recipient, asset, network, signature).
  bool authorization_valid = false;
  // What the chain said of the request's own authorization: not asked yet, unused, or used.
  enum class Chain { kNotAsked, kUnused, kUsed } chain = Chain::kNotAsked;
};

enum class PayerProof {
  kProven,        // answer about the operation
  kAskChain,      // ask authorizationState of the request's authorization, then decide again
  kRefusePublic,  // 409 authorization_already_used: no body, no operation id
};

// The table (docs/threat-model.md T1, T25; every row tested in tests/core/payer_proof_test.cc):
//  | key     | authorization presented            | transaction public | decision      |
//  | default | identical                          | no                 | proven        |
//  | default | identical                          | yes                | refuse public |
//  | default | another (same nonce, other fields) | any                | refuse public |
//  | weak    | identical                          | no                 | proven        |
//  | weak    | identical                          | yes                | refuse public |
//  | weak    | another, failing a route check     | any                | refuse public |
//  | weak    | another, valid, chain not asked    | any                | ask chain     |
//  | weak    | another, valid, unused on chain    | any                | proven        |
//  | weak    | another, valid, used on chain      | any                | refuse public |
//  | secret  | identical                          | any                | proven        |
//  | secret  | another, failing a route check     | any                | refuse public |
//  | secret  | another, valid, chain not asked    | any                | ask chain     |
//  | secret  | another, valid, unused on chain    | any                | proven        |
//  | secret  | another, valid, used on chain      | any                | refuse public |
//  | payee   | identical                          | any                | proven        |
//  | payee   | another                            | any                | refuse public |
// A fresh, valid, unused authorization can only come from the payer's key: it proves the payer as
// a signature over the request would (it is never settled; it expires unused). A used one may have
// been read off the chain. A weak key (`order-42`) is guessable, so with the public authorization
// it proves nothing once the transaction exists; with a fresh one it proves what the fresh one
// does.
PayerProof DecidePayerProof(const PayerProofFacts& facts);

std::string_view PayerProofName(PayerProof proof);

}  // namespace agentpay
