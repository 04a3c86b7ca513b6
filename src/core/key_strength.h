// How hard an idempotency key is to guess (issue 36 item 6, docs/threat-model.md T25). An x402
// key proves the payer only if nobody else can know it: a key that scores below the gateway's
// --min-idempotency-key-bits still deduplicates, but does not prove the payer. Pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace agentpay {

// A conservative estimate, in whole bits, of the entropy of `key` (docs/protocol.md §5a):
//  1. the alphabet is the union of the character classes the key uses: digits (10), lowercase
//     (26), uppercase (26), other visible ASCII (33); each counted character is worth
//     log2(alphabet size) bits;
//  2. a key that repeats a shorter unit (`abcabcabc`, `xxxx`) counts that unit only;
//  3. a character equal to the one before it or next to it in ASCII (`aa`, `de`, `21`) counts
//     nothing: runs and sequences are the first thing a guesser tries.
// Random keys (UUIDs, 32+ hex digits, 22+ base64url characters) score far above 96 bits; short
// or patterned ones (`order-42`: 42 bits) far below. It is a floor on guessable shapes, not a
// dictionary check: a long phrase of English words scores high. Keys should be random.
int64_t EstimateKeyBits(std::string_view key);

}  // namespace agentpay
