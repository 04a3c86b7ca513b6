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
// "payment-id:" + its payment-identifier id): "sha256:" + hex SHA-256. The secret proves the payer
// (docs/threat-model.md T1), so it is never stored, shown or logged as it is.
std::string KeyDigest(std::string_view secret);
// Whether `secret` is the one whose digest is `digest`, in time independent of where they differ.
bool KeyMatchesDigest(std::string_view secret, std::string_view digest);

}  // namespace agentpay
