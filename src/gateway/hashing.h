// SHA-256 and base64 for the gateway (OpenSSL): request fingerprints, API key hashes, x402 headers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agentpay {

std::string Sha256Hex(std::string_view data);
// Standard alphabet with '=' padding, as x402 requires.
std::string Base64Encode(std::string_view data);
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
