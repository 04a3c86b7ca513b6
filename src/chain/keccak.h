// Keccak-256 as Ethereum uses it (the original Keccak padding, not NIST SHA3-256, which gives
// different digests silently). Backed by Crypto++ Keccak_256; OpenSSL 3.0 has no Keccak.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "chain/bytes.h"

namespace agentpay::chain {

Hash32 Keccak256(std::span<const uint8_t> data);
// Hashes the bytes of text as they are (no hex decoding): for type strings and signatures.
Hash32 Keccak256(std::string_view text);

}  // namespace agentpay::chain
