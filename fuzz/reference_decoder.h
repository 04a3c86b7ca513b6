// The fuzzer's oracle: the base64, payment and settle-response decoders of src/x402 before the
// strict JsonTape reader and the in-place base64 decoder replaced them (see reference_decoder.cc).
#pragma once

#include <string_view>

#include "x402/wire.h"

namespace agentpay::x402::reference {

Result<std::string> Base64Decode(std::string_view text);
Result<PaymentPayload> DecodePaymentHeader(std::string_view value, Version version);
Result<SettleResponse> DecodeSettleResponseHeader(std::string_view value);

}  // namespace agentpay::x402::reference
