// SHA-256 as lower-case hex (OpenSSL), the one implementation for the gateway (request fingerprints,
// API key hashes, idempotency-key digests) and the agent client (key derivation, fingerprints). It
// lives in http/ because that is the lowest layer that links OpenSSL (for TLS) and that both the
// gateway and the client link; core/ links no crypto library, and SHA-256 is no code to write by hand.
#pragma once

#include <string>
#include <string_view>

namespace agentpay {

// 64 lower-case hex digits of SHA-256(data). Thread-safe.
std::string Sha256Hex(std::string_view data);

}  // namespace agentpay
