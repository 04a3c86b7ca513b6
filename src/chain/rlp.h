// Recursive Length Prefix encoding, the serialisation of Ethereum transactions. Encode-only:
// AgentPay builds transactions but reads chain state through JSON-RPC, never raw RLP.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "chain/bytes.h"

namespace agentpay::chain {

// A byte string: a single byte below 0x80 is itself; otherwise a length prefix and the bytes.
Bytes RlpEncodeBytes(std::span<const uint8_t> data);
// An integer: its minimal big-endian bytes (zero is the empty string, 0x80).
Bytes RlpEncodeUint(const U256& value);
// A list of already-encoded items (each the output of an RlpEncode* function).
Bytes RlpEncodeList(const std::vector<Bytes>& encoded_items);

}  // namespace agentpay::chain
