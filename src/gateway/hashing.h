// The gateway's secrets: constant-time comparison and the stored digests of idempotency keys, on
// the SHA-256 of http/sha256.h (which this header brings, as its callers hash with it too).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/sha256.h"

namespace agentpay {

// Constant-time equality for secrets.
bool SecretEquals(std::string_view a, std::string_view b);

// The stored form of an x402 idempotency secret (the Idempotency-Key the payer sent, or
// "payment-id:" + its payment-identifier id) of the payer `payer` (0x + 40 hex digits, any case):
// "payer-sha256:" + hex SHA-256 of (lowercase payer, "\n", secret). The secret proves the payer
// (docs/threat-model.md T1), so it is never stored, shown or logged as it is; the payer is in the
// digest so that two payers' equal strings neither match nor look alike (T25).
std::string PayerKeyDigest(std::string_view payer, std::string_view secret);
// The form keys were stored in before (issue 36 item 6): "sha256:" + hex SHA-256 of the secret
// alone. Still found for the payer whose principal holds it, until retention drops it.
std::string LegacyKeyDigest(std::string_view secret);
// Whether `secret`, sent by `payer`, is the one whose digest (either form) is `digest`, in time
// independent of where they differ. A legacy digest has no payer in it: the caller checks that
// `payer` is the operation's.
bool KeyMatchesDigest(std::string_view payer, std::string_view secret, std::string_view digest);

}  // namespace agentpay
