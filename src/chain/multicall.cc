// aggregate3's calldata; see multicall.h.
#include "chain/multicall.h"

#include <algorithm>

#include "chain/abi.h"
#include "core/check.h"

namespace agentpay::chain {
namespace {

constexpr size_t kWord = 32;

void PutWord(Bytes& out, uint64_t value) {
  out.insert(out.end(), kWord - 8, 0);
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

size_t Padded(size_t size) { return (size + kWord - 1) / kWord * kWord; }

// The word at `at` as a small unsigned number; nullopt when it is not all there or too large.
std::optional<size_t> SmallWord(std::span<const uint8_t> data, size_t at) {
  if (at > data.size() || data.size() - at < kWord) return std::nullopt;
  for (size_t i = 0; i < kWord - 8; ++i) {
    if (data[at + i] != 0) return std::nullopt;
  }
  uint64_t value = 0;
  for (size_t i = kWord - 8; i < kWord; ++i) value = (value << 8) | data[at + i];
  if (value > data.size()) return std::nullopt;
  return static_cast<size_t>(value);
}

// One call's encoding: target, allowFailure, offset 0x60, then the bytes (length, padded data).
Bytes EncodeCall(const Call3& call) {
  Bytes out;
  out.insert(out.end(), 12, 0);
  out.insert(out.end(), call.target.bytes.begin(), call.target.bytes.end());
  PutWord(out, call.allow_failure ? 1 : 0);
  PutWord(out, 3 * kWord);
  PutWord(out, call.call_data.size());
  out.insert(out.end(), call.call_data.begin(), call.call_data.end());
  out.insert(out.end(), Padded(call.call_data.size()) - call.call_data.size(), 0);
  return out;
}

}  // namespace

const Address& Multicall3Address() {
  static const Address address = *ParseAddress("0xcA11bde05977b3631167028862bE2a173976CA11");
  return address;
}

Bytes EncodeAggregate3(std::span<const Call3> calls) {
  AGENTPAY_CHECK(!calls.empty() && calls.size() <= kMaxAggregate3Calls);
  const Selector selector = FunctionSelector(kAggregate3Signature);
  Bytes out(selector.begin(), selector.end());
  PutWord(out, kWord);  // the array starts right after this head word
  PutWord(out, calls.size());
  std::vector<Bytes> encoded;
  encoded.reserve(calls.size());
  for (const Call3& call : calls) encoded.push_back(EncodeCall(call));
  size_t offset = calls.size() * kWord;  // from the start of the offsets
  for (const Bytes& element : encoded) {
    PutWord(out, offset);
    offset += element.size();
  }
  for (const Bytes& element : encoded) out.insert(out.end(), element.begin(), element.end());
  return out;
}

std::optional<std::vector<Call3>> DecodeAggregate3(std::span<const uint8_t> data) {
  const Selector selector = FunctionSelector(kAggregate3Signature);
  if (data.size() < 4 || !std::equal(selector.begin(), selector.end(), data.begin())) {
    return std::nullopt;
  }
  const std::span<const uint8_t> args = data.subspan(4);
  if (SmallWord(args, 0) != kWord) return std::nullopt;
  const std::optional<size_t> count = SmallWord(args, kWord);
  if (!count || *count == 0 || *count > kMaxAggregate3Calls) return std::nullopt;
  const size_t offsets_at = 2 * kWord;
  std::vector<Call3> calls;
  size_t expected = *count * kWord;  // canonical: each element right after the one before
  for (size_t i = 0; i < *count; ++i) {
    const std::optional<size_t> offset = SmallWord(args, offsets_at + i * kWord);
    if (offset != expected) return std::nullopt;
    const size_t at = offsets_at + *offset;
    if (at > args.size() || args.size() - at < 4 * kWord) return std::nullopt;
    Call3 call;
    if (!std::all_of(args.begin() + at, args.begin() + at + 12, [](uint8_t b) { return b == 0; })) {
      return std::nullopt;
    }
    std::copy(args.begin() + at + 12, args.begin() + at + kWord, call.target.bytes.begin());
    const std::optional<size_t> flag = SmallWord(args, at + kWord);
    if (flag != 0 && flag != 1) return std::nullopt;
    call.allow_failure = flag == 1;
    if (SmallWord(args, at + 2 * kWord) != 3 * kWord) return std::nullopt;
    const std::optional<size_t> length = SmallWord(args, at + 3 * kWord);
    if (!length) return std::nullopt;
    const size_t body = at + 4 * kWord;
    if (args.size() - body < Padded(*length)) return std::nullopt;
    call.call_data.assign(args.begin() + body, args.begin() + body + *length);
    if (!std::all_of(args.begin() + body + *length, args.begin() + body + Padded(*length),
                     [](uint8_t b) { return b == 0; })) {
      return std::nullopt;
    }
    expected += 4 * kWord + Padded(*length);
    calls.push_back(std::move(call));
  }
  if (offsets_at + expected != args.size()) return std::nullopt;  // nothing after the last
  return calls;
}

}  // namespace agentpay::chain
