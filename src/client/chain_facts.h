// What the chain says about one of the buyer's EIP-3009 authorizations: the facts that decide a
// reservation (CONTRACT §5) and the evidence shown for "paid, not delivered".
#pragma once

#include <cstdint>
#include <string>

#include "chain/rpc_chain.h"
#include "core/result.h"

namespace agentpay::client {

struct AuthorizationFacts {
  int64_t chain_time_s = 0;  // latest block, read BEFORE authorization_used (core/budget.h)
  bool authorization_used = false;
  std::string transaction;  // the tx that emitted AuthorizationUsed(payer, nonce), "" if not found
};

// Reads chain time, then authorizationState(payer, nonce) on `asset`, then (when used, and
// find_transaction) the AuthorizationUsed log naming the transaction. Addresses and the nonce are
// 0x hex. A failed log search leaves `transaction` empty; the other reads fail the call.
Result<AuthorizationFacts> ReadAuthorizationFacts(chain::RpcChain& chain, const std::string& asset,
                                                  const std::string& payer,
                                                  const std::string& nonce, bool find_transaction);

}  // namespace agentpay::client
