// Mutants: the flawed approaches "timeout is not failure" rejects, put back on purpose so that the
// simulator (`agentpay sim swarm --mutant N`) can show it catches each. Only a build configured
// with -DAGENTPAY_SIM_MUTANTS=ON (the sanitizer build of scripts/test-asan.sh; never a release)
// can switch one on; in every other build MutantActive is always false and SetActiveMutant does
// not exist.
#pragma once

namespace agentpay {

enum class Mutant {
  kNone = 0,
  kFreshRetryOnTimeout = 1,  // a timed-out payment retried under a new key (a fresh signature)
  kTimeoutIsSuccess = 2,     // an upstream timeout captured as if it had answered 2xx
  kReleaseOnTimeout = 3,     // a hold (or an x402 client's budget) released on a timeout
  kUnboundedRetries = 4,     // a client that never gives up
  // The gateway gives an x402 payment up at its receipt deadline: voided (its key freed, its payer
  // reservation released), while its transaction may still be mined.
  kVoidAtReceiptDeadline = 5,
  // After a restart the relayer takes its first nonce from the node's count instead of its store,
  // reusing the nonce of a transaction it stored and the node does not hold.
  kRelayerNonceAfreshAfterRestart = 6,
  // An x402 client's budget reservation released as soon as its nonce is unused, before
  // validBefore plus the buffer (while the authorization can still be used).
  kBudgetReleasedBeforeExpiry = 7,
};
inline constexpr int kMutantCount = 7;

// Whether `mutant` is the one switched on (never, outside a mutant build).
bool MutantActive(Mutant mutant);

#ifdef AGENTPAY_SIM_MUTANTS
void SetActiveMutant(Mutant mutant);
#endif

}  // namespace agentpay
