// What the shell tells a payment's state machine (core/wallet_payment.h, core/x402_payment.h) of
// the store's work it asked for: a read's result, and a decision's commit.
#pragma once

namespace agentpay {

enum class ReadResult { kOk, kOverloaded, kFailed };
enum class CommitResult {
  kOk,         // committed (or rolled back on purpose: the decision found nothing to write)
  kKeyTaken,   // a key reserved as new was there (the wallet's presumed-new begin)
  kClaimLost,  // a decision whose attempt lost its claim to a later one: nothing written
  kFailed,     // any other error: nothing written, or the answer lost
};

}  // namespace agentpay
