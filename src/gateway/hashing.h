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

}  // namespace agentpay
