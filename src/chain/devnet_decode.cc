// Decoding for the devnet: the words and selectors of the token's calldata, both
// transferWithAuthorization overloads, and the admission checks geth and the token make before a
// transaction enters the pool (raw transactions decode in chain/transaction.h).
#include "chain/devnet_decode.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "chain/json_rpc.h"
#include "chain/multicall.h"
#include "chain/transaction.h"

namespace agentpay::chain {
namespace {

constexpr uint64_t kIntrinsicGas = 21'000;

}  // namespace

Status RpcError(std::string message) { return Status::Error(ErrorCode::kRpcError, message); }

Bytes WordBytes(const U256& value) {
  const std::array<uint8_t, 32> word = value.ToBigEndian();
  return Bytes(word.begin(), word.end());
}

const Selectors& KnownSelectors() {
  static const Selectors selectors;
  return selectors;
}

std::optional<Selector> SelectorOf(std::span<const uint8_t> data) {
  if (data.size() < 4) return std::nullopt;
  return Selector{data[0], data[1], data[2], data[3]};
}

bool IsSettlementSelector(const std::optional<Selector>& selector) {
  return selector && (*selector == KnownSelectors().transfer_vrs ||
                      *selector == KnownSelectors().transfer_bytes);
}

// ---- Calldata ----------------------------------------------------------------------------

namespace {

// The 32-byte word at byte offset `at` of the arguments, if it is all there.
std::optional<std::span<const uint8_t, 32>> WordAt(std::span<const uint8_t> args, size_t at) {
  if (at > args.size() || args.size() - at < kWord) return std::nullopt;
  return args.subspan(at).first<32>();
}

std::optional<U256> UintAt(std::span<const uint8_t> args, size_t at) {
  auto word = WordAt(args, at);
  if (!word) return std::nullopt;
  return U256::FromBigEndian(*word);
}

}  // namespace

std::optional<Address> AddressAt(std::span<const uint8_t> args, size_t at) {
  auto word = WordAt(args, at);
  if (!word || !std::all_of(word->begin(), word->begin() + 12, [](uint8_t b) { return b == 0; })) {
    return std::nullopt;
  }
  Address address;
  std::copy(word->begin() + 12, word->end(), address.bytes.begin());
  return address;
}

namespace {

// The signature of the (…, bytes signature) overload: a dynamic tail at the offset in word 6.
std::optional<std::optional<Signature>> SignatureTail(std::span<const uint8_t> args) {
  std::optional<U256> offset = UintAt(args, 6 * kWord);
  if (!offset || *offset > U256(args.size())) return std::nullopt;
  const size_t at = static_cast<size_t>(offset->Limb(0));
  std::optional<U256> length = UintAt(args, at);
  if (!length || *length > U256(args.size() - at - kWord)) return std::nullopt;
  if (*length != U256(65)) return std::optional<Signature>();
  Signature signature;
  std::copy_n(args.begin() + static_cast<std::ptrdiff_t>(at + kWord), 65, signature.bytes.begin());
  return std::optional<Signature>(signature);
}

}  // namespace

std::optional<AuthorizationCall> DecodeAuthorizationCall(std::span<const uint8_t> data) {
  const std::optional<Selector> selector = SelectorOf(data);
  if (!IsSettlementSelector(selector)) return std::nullopt;
  const std::span<const uint8_t> args = data.subspan(4);
  AuthorizationCall call;
  std::optional<Address> from = AddressAt(args, 0);
  std::optional<Address> to = AddressAt(args, kWord);
  std::optional<U256> value = UintAt(args, 2 * kWord);
  std::optional<U256> valid_after = UintAt(args, 3 * kWord);
  std::optional<U256> valid_before = UintAt(args, 4 * kWord);
  auto nonce = WordAt(args, 5 * kWord);
  if (!from || !to || !value || !valid_after || !valid_before || !nonce) return std::nullopt;
  call.authorization = {*from, *to, *value, *valid_after, *valid_before, {}};
  std::copy(nonce->begin(), nonce->end(), call.authorization.nonce.begin());
  if (*selector == KnownSelectors().transfer_bytes) {
    auto signature = SignatureTail(args);
    if (!signature) return std::nullopt;
    call.signature = *signature;
    return call;
  }
  std::optional<U256> v = UintAt(args, 6 * kWord);
  auto r = WordAt(args, 7 * kWord);
  auto s = WordAt(args, 8 * kWord);
  if (!v || *v > U256(255) || !r || !s) return std::nullopt;
  Signature signature;
  std::copy(r->begin(), r->end(), signature.bytes.begin());
  std::copy(s->begin(), s->end(), signature.bytes.begin() + 32);
  signature.bytes[64] = static_cast<uint8_t>(v->Limb(0));
  call.signature = signature;
  return call;
}

std::optional<Hash32> HashFrom(std::span<const uint8_t> bytes) {
  if (bytes.size() != 32) return std::nullopt;
  Hash32 hash;
  std::copy(bytes.begin(), bytes.end(), hash.begin());
  return hash;
}

Status CheckAdmissible(const DecodedTransaction& transaction, const DevnetConfig& config) {
  if (transaction.chain_id != config.chain_id) {
    return RpcError("invalid chain id for signer: have " + std::to_string(transaction.chain_id) +
                    " want " + std::to_string(config.chain_id));
  }
  if (transaction.gas_limit < kIntrinsicGas) return RpcError("intrinsic gas too low");
  if (transaction.max_priority_fee_per_gas > transaction.max_fee_per_gas) {
    return RpcError("max priority fee per gas higher than max fee per gas");
  }
  if (transaction.max_fee_per_gas < U256(kBaseFeePerGas)) {
    return RpcError("max fee per gas less than block base fee");
  }
  if (transaction.data.size() > kMaxTransactionDataBytes) return RpcError("oversized data");
  if (transaction.to == Multicall3Address()) {
    // Multicall3's aggregate3 of the token's transferWithAuthorization calls (a batched
    // settlement), and nothing else at that address.
    std::optional<std::vector<Call3>> calls = DecodeAggregate3(transaction.data);
    if (!calls || !transaction.value.IsZero()) {
      return RpcError("unsupported call: the devnet's Multicall3 runs only aggregate3, unpaid");
    }
    for (const Call3& call : *calls) {
      if (call.target != config.token || !IsSettlementSelector(SelectorOf(call.call_data))) {
        return RpcError("unsupported call: aggregate3 of transferWithAuthorization calls of " +
                        ToChecksumHex(config.token) + " only");
      }
    }
    return Status::Ok();
  }
  if (transaction.to != config.token) {
    return RpcError("unsupported call: the devnet runs only its token at " +
                    ToChecksumHex(config.token));
  }
  if (!IsSettlementSelector(SelectorOf(transaction.data))) {
    return RpcError("unsupported call: the devnet accepts only transferWithAuthorization");
  }
  return Status::Ok();
}

}  // namespace agentpay::chain
