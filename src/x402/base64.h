// Standard base64 (RFC 4648 §4: alphabet A–Z a–z 0–9 + /, '=' padding), the encoding of every x402
// header. The decoder is strict on purpose: one header value has exactly one accepted spelling.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace agentpay::x402 {

// Padded standard base64 of the bytes of `data`.
std::string Base64Encode(std::string_view data);

// Inverse of Base64Encode. Refuses (code "invalid_base64", message says why): a length that is not
// a multiple of 4 (missing padding), characters outside the standard alphabet (URL-safe '-' '_',
// whitespace, NUL), '=' anywhere but the last one or two places, and non-zero bits under the
// padding. Empty input decodes to empty output.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace agentpay::x402
