// Multicall3's aggregate3: several calls in one transaction, each allowed to fail on its own or
// not. The batched settlement of x402 payments sends its transferWithAuthorization calls through
// it (one relayer transaction, each authorization still shown by its own logs:
// settlement_tx.h ShowsAuthorizationSettled). Multicall3 is an immutable public contract at the
// same address on the chains that have it; the built-in devnet answers aggregate3 there too.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "chain/bytes.h"

namespace agentpay::chain {

inline constexpr std::string_view kAggregate3Signature = "aggregate3((address,bool,bytes)[])";
// Calls past this many in one aggregate3 are refused by DecodeAggregate3 (and never encoded).
inline constexpr size_t kMaxAggregate3Calls = 64;

// 0xcA11bde05977b3631167028862bE2a173976CA11.
const Address& Multicall3Address();

struct Call3 {
  Address target;
  bool allow_failure = false;
  Bytes call_data;
  friend bool operator==(const Call3&, const Call3&) = default;
};

// Calldata for aggregate3(calls), selector 0x82ad56cb. Precondition: 1 to kMaxAggregate3Calls.
Bytes EncodeAggregate3(std::span<const Call3> calls);
// The calls of aggregate3 calldata, strictly: the selector, canonical offsets (the ones
// EncodeAggregate3 writes), clean address and bool words, lengths within the data, zero padding.
// nullopt for anything else, or for more than kMaxAggregate3Calls calls.
std::optional<std::vector<Call3>> DecodeAggregate3(std::span<const uint8_t> data);

}  // namespace agentpay::chain
