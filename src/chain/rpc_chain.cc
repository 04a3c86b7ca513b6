// RpcChain: each method is one or two JSON-RPC calls plus strict parsing of the answer. A Reader
// collects the first bad field of an object so that the parsers stay flat.
#include "chain/rpc_chain.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "chain/abi.h"
#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;

Status Malformed(std::string_view context, std::string_view what) {
  return Status::Error(ErrorCode::kRpcMalformed, std::string(context) + ": " + std::string(what));
}

Result<U256> ParseQuantity(const json& value, std::string_view context) {
  if (!value.is_string()) return Malformed(context, "expected a hex quantity string");
  std::optional<U256> quantity = ParseU256Hex(value.get_ref<const std::string&>());
  if (!quantity) return Malformed(context, "invalid hex quantity");
  return *quantity;
}

Result<uint64_t> ParseUint64(const json& value, std::string_view context) {
  Result<U256> quantity = ParseQuantity(value, context);
  if (!quantity.ok()) return quantity.status();
  if (quantity->Limb(1) != 0 || quantity->Limb(2) != 0 || quantity->Limb(3) != 0) {
    return Malformed(context, "quantity does not fit in 64 bits");
  }
  return quantity->Limb(0);
}

Result<Bytes> ParseData(const json& value, std::string_view context, size_t size = kAnySize) {
  if (!value.is_string()) return Malformed(context, "expected a hex string");
  Result<Bytes> bytes = ParseHex(value.get_ref<const std::string&>(), size);
  if (!bytes.ok()) return Malformed(context, bytes.status().message());
  return bytes;
}

Result<Hash32> ParseHash(const json& value, std::string_view context) {
  Result<Bytes> bytes = ParseData(value, context, 32);
  if (!bytes.ok()) return bytes.status();
  Hash32 hash;
  std::copy(bytes->begin(), bytes->end(), hash.begin());
  return hash;
}

// Reads fields of one JSON object; the first failure sticks and later reads return defaults.
class Reader {
 public:
  Reader(const json& object, std::string context) : object_(object), context_(std::move(context)) {
    if (!object_.is_object()) status_ = Malformed(context_, "expected an object");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  bool Has(const char* key) const { return object_.find(key) != object_.end(); }
  // Present and null (a missing field is not null: reading it fails).
  bool IsNull(const char* key) const {
    auto it = object_.find(key);
    return it != object_.end() && it->is_null();
  }

  template <typename T, typename Parse>
  T Read(const char* key, Parse parse) {
    if (!ok()) return T{};
    auto it = object_.find(key);
    if (it == object_.end()) {
      status_ = Malformed(context_, std::string("missing field ") + key);
      return T{};
    }
    Result<T> value = parse(*it, context_ + "." + key);
    if (!value.ok()) {
      status_ = value.status();
      return T{};
    }
    return std::move(*value);
  }
  U256 Quantity(const char* key) { return Read<U256>(key, ParseQuantity); }
  uint64_t Uint64(const char* key) { return Read<uint64_t>(key, ParseUint64); }
  Hash32 Hash(const char* key) { return Read<Hash32>(key, ParseHash); }
  Bytes Data(const char* key) {
    return Read<Bytes>(key, [](const json& v, std::string_view c) { return ParseData(v, c); });
  }
  Address AddressField(const char* key) {
    return Read<Address>(key, [](const json& v, std::string_view c) -> Result<Address> {
      if (!v.is_string()) return Malformed(c, "expected an address string");
      Result<Address> address = ParseAddress(v.get_ref<const std::string&>());
      if (!address.ok()) return Malformed(c, address.status().message());
      return address;
    });
  }
  // A field that must be an array of at most max_size elements; nullptr after a failure.
  const json* Array(const char* key, size_t max_size) {
    if (!ok()) return nullptr;
    auto it = object_.find(key);
    if (it == object_.end() || !it->is_array() || it->size() > max_size) {
      status_ = Malformed(context_, std::string(key) + " is not an array of at most " +
                                        std::to_string(max_size) + " elements");
      return nullptr;
    }
    return &*it;
  }

 private:
  const json& object_;
  std::string context_;
  Status status_;
};

Result<LogEntry> ParseLog(const json& value, const std::string& context) {
  Reader reader(value, context);
  LogEntry log;
  log.address = reader.AddressField("address");
  log.data = reader.Data("data");
  const json* topics = reader.Array("topics", 4);
  if (!reader.ok()) return reader.status();
  for (const json& topic : *topics) {
    Result<Hash32> hash = ParseHash(topic, context + ".topics");
    if (!hash.ok()) return hash.status();
    log.topics.push_back(*hash);
  }
  return log;
}

// A receipt object; nullopt for the pending-receipt shape some nodes return (no block yet).
Result<std::optional<Receipt>> ParseReceipt(const json& value, const Hash32& expected_hash) {
  const std::string context = "eth_getTransactionReceipt";
  Reader reader(value, context);
  if (reader.ok() && reader.IsNull("blockNumber")) return std::optional<Receipt>();
  Receipt receipt;
  receipt.transaction_hash = reader.Hash("transactionHash");
  const uint64_t status = reader.Uint64("status");
  receipt.block_number = reader.Uint64("blockNumber");
  receipt.block_hash = reader.Hash("blockHash");
  receipt.gas_used = reader.Uint64("gasUsed");
  if (reader.Has("contractAddress") && !reader.IsNull("contractAddress")) {
    receipt.contract_address = reader.AddressField("contractAddress");
  }
  const json* logs = reader.Array("logs", kMaxReceiptLogs);
  if (!reader.ok()) return reader.status();
  if (status > 1) return Malformed(context, "status is neither 0x0 nor 0x1");
  receipt.status = static_cast<uint8_t>(status);
  if (receipt.transaction_hash != expected_hash) {
    return Malformed(context, "receipt is for " + Hex(receipt.transaction_hash));
  }
  for (const json& entry : *logs) {
    Result<LogEntry> log = ParseLog(entry, context + ".logs[]");
    if (!log.ok()) return log.status();
    receipt.logs.push_back(std::move(*log));
  }
  return std::optional<Receipt>(std::move(receipt));
}

Result<TxInfo> ParseTxInfo(const json& value, const Hash32& expected_hash) {
  const std::string context = "eth_getTransactionByHash";
  Reader reader(value, context);
  TxInfo info;
  info.hash = reader.Hash("hash");
  info.nonce = reader.Uint64("nonce");
  info.from = reader.AddressField("from");
  if (!reader.IsNull("blockNumber")) info.block_number = reader.Uint64("blockNumber");
  if (!reader.ok()) return reader.status();
  if (info.hash != expected_hash) return Malformed(context, "answer is for " + Hex(info.hash));
  return info;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

}  // namespace

RpcChain::RpcChain(Endpoint endpoint, int64_t timeout_ms, std::shared_ptr<const TlsTrust> trust)
    : RpcChain(std::vector<Endpoint>{std::move(endpoint)}, timeout_ms, std::move(trust)) {}

RpcChain::RpcChain(std::vector<Endpoint> endpoints, int64_t timeout_ms,
                   std::shared_ptr<const TlsTrust> trust)
    : client_(std::move(endpoints), timeout_ms, std::move(trust)) {}

Result<uint64_t> RpcChain::ChainId() {
  Result<json> answer = client_.Call("eth_chainId", json::array());
  if (!answer.ok()) return answer.status();
  return ParseUint64(*answer, "eth_chainId");
}

Result<uint64_t> RpcChain::EndpointChainId(size_t i) {
  Result<json> answer = client_.CallOn(i, "eth_chainId", json::array());
  if (!answer.ok()) return answer.status();
  return ParseUint64(*answer, "eth_chainId");
}

Result<bool> RpcChain::AuthorizationState(const Address& token, const Address& from,
                                          const Hash32& nonce) {
  Result<Bytes> answer = Call(token, EncodeAuthorizationState(from, nonce));
  if (!answer.ok()) return answer.status();
  return DecodeBool(*answer);
}

Result<U256> RpcChain::BalanceOf(const Address& token, const Address& owner) {
  Result<Bytes> answer = Call(token, EncodeBalanceOf(owner));
  if (!answer.ok()) return answer.status();
  return DecodeUint256(*answer);
}

Result<Bytes> RpcChain::Call(const Address& to, const Bytes& data) {
  json call = {{"to", ToLowerHex(to)}, {"data", Hex(data)}};
  Result<json> answer = client_.Call("eth_call", json::array({std::move(call), "latest"}));
  if (!answer.ok()) return answer.status();
  return ParseData(*answer, "eth_call");
}

Result<uint64_t> RpcChain::EstimateGas(const Address& from, const Address& to, const Bytes& data) {
  json call = {{"from", ToLowerHex(from)}, {"to", ToLowerHex(to)}, {"data", Hex(data)}};
  Result<json> answer = client_.Call("eth_estimateGas", json::array({std::move(call)}));
  if (!answer.ok()) return answer.status();
  return ParseUint64(*answer, "eth_estimateGas");
}

Result<json> RpcChain::LatestBlock() {
  Result<json> answer = client_.Call("eth_getBlockByNumber", json::array({"latest", false}));
  if (!answer.ok()) return answer.status();
  if (!answer->is_object())
    return Malformed("eth_getBlockByNumber", "latest block is not an object");
  return answer;
}

Result<U256> RpcChain::PriorityFee(const U256& base_fee) {
  Result<json> tip = client_.Call("eth_maxPriorityFeePerGas", json::array());
  if (tip.ok()) return ParseQuantity(*tip, "eth_maxPriorityFeePerGas");
  if (tip.status().error() != ErrorCode::kRpcError) return tip.status();
  // The node lacks the method: the tip is what the legacy gas price offers above the base fee.
  Result<json> price = client_.Call("eth_gasPrice", json::array());
  if (!price.ok()) return price.status();
  Result<U256> gas_price = ParseQuantity(*price, "eth_gasPrice");
  if (!gas_price.ok()) return gas_price.status();
  return U256::CheckedSub(*gas_price, base_fee).value_or(U256());
}

Result<FeeData> RpcChain::Fees() {
  Result<json> block = LatestBlock();
  if (!block.ok()) return block.status();
  Reader reader(*block, "eth_getBlockByNumber");
  if (!reader.Has("baseFeePerGas") || reader.IsNull("baseFeePerGas")) {
    return Malformed("eth_getBlockByNumber",
                     "latest block has no baseFeePerGas (pre-London chain)");
  }
  FeeData fees;
  fees.base_fee_per_gas = reader.Quantity("baseFeePerGas");
  if (!reader.ok()) return reader.status();
  Result<U256> tip = PriorityFee(fees.base_fee_per_gas);
  if (!tip.ok()) return tip.status();
  fees.max_priority_fee_per_gas = *tip;
  std::optional<U256> max_fee = MaxFeeFor(fees.base_fee_per_gas, fees.max_priority_fee_per_gas);
  if (!max_fee) return Malformed("Fees", "fee values overflow 256 bits");
  fees.max_fee_per_gas = *max_fee;
  return fees;
}

Result<uint64_t> RpcChain::TransactionCount(const Address& account, const char* block_tag) {
  Result<json> answer =
      client_.Call("eth_getTransactionCount", json::array({ToLowerHex(account), block_tag}));
  if (!answer.ok()) return answer.status();
  return ParseUint64(*answer, "eth_getTransactionCount");
}

Result<uint64_t> RpcChain::PendingNonce(const Address& account) {
  return TransactionCount(account, "pending");
}

Result<uint64_t> RpcChain::MinedNonce(const Address& account) {
  return TransactionCount(account, "latest");
}

Result<std::optional<U256>> RpcChain::NativeBalance(const Address& account) {
  Result<json> answer =
      client_.Call("eth_getBalance", json::array({ToLowerHex(account), "latest"}));
  if (!answer.ok()) return answer.status();
  Result<U256> balance = ParseQuantity(*answer, "eth_getBalance");
  if (!balance.ok()) return balance.status();
  return std::optional<U256>(*balance);
}

Result<Hash32> RpcChain::SendRawTransaction(const Bytes& raw) {
  RpcErrorDetail detail;
  Result<json> answer = client_.Call("eth_sendRawTransaction", json::array({Hex(raw)}), &detail);
  return SentAs(raw, std::move(answer), detail);
}

Result<Hash32> RpcChain::SentAs(const Bytes& raw, Result<json> answer,
                                const RpcErrorDetail& detail) {
  const Hash32 expected = Keccak256(raw);
  if (!answer.ok()) {
    if (answer.status().error() != ErrorCode::kRpcError) return answer.status();
    return RefusedSend(expected, detail, answer.status());
  }
  Result<Hash32> hash = ParseHash(*answer, "eth_sendRawTransaction");
  if (!hash.ok()) return hash.status();
  if (*hash != expected) {
    return Malformed("eth_sendRawTransaction",
                     "node reports hash " + Hex(*hash) + " for transaction " + Hex(expected));
  }
  return hash;
}

std::vector<Result<Hash32>> RpcChain::SendRawTransactions(std::span<const Bytes> raws) {
  std::vector<Result<Hash32>> sent;
  sent.reserve(raws.size());
  for (size_t at = 0; at < raws.size(); at += kMaxRpcBatchCalls) {
    std::span<const Bytes> part = raws.subspan(at, std::min(kMaxRpcBatchCalls, raws.size() - at));
    if (part.size() == 1 || batches_refused_.load(std::memory_order_relaxed)) {
      for (const Bytes& raw : part) sent.push_back(SendRawTransaction(raw));
      continue;
    }
    std::vector<RpcCall> calls;
    calls.reserve(part.size());
    for (const Bytes& raw : part)
      calls.push_back({"eth_sendRawTransaction", json::array({Hex(raw)})});
    Result<std::vector<RpcAnswer>> answers = client_.CallBatch(calls);
    if (!answers.ok() && (answers.status().error() == ErrorCode::kRpcError ||
                          answers.status().error() == ErrorCode::kRpcMalformed)) {
      // The node answered the batch with one error (it takes no batches: it sent none of them),
      // or with something that is no batch's answer: one by one, now and from then on. Sending a
      // transaction again is safe (the same bytes: "already known").
      batches_refused_.store(true, std::memory_order_relaxed);
      for (const Bytes& raw : part) sent.push_back(SendRawTransaction(raw));
      continue;
    }
    for (size_t i = 0; i < part.size(); ++i) {
      if (!answers.ok()) {
        sent.push_back(answers.status());
      } else {
        RpcAnswer& answer = (*answers)[i];
        sent.push_back(SentAs(part[i], std::move(answer.result), answer.error_detail));
      }
    }
  }
  return sent;
}

Result<Hash32> RpcChain::RefusedSend(const Hash32& hash, const RpcErrorDetail& detail,
                                     const Status& refusal) {
  const std::string message = Lower(detail.message);
  const auto already_known = [&] {
    return Status::Error(ErrorCode::kTxAlreadyKnown,
                         "the node already has transaction " + Hex(hash) + ": " + detail.message);
  };
  // geth/erigon "already known", Anvil "transaction already imported", old clients "known
  // transaction: <hash>": all are lookups by hash, so this is the very same transaction.
  if (Contains(message, "already known") || Contains(message, "alreadyknown") ||
      Contains(message, "already imported") || Contains(message, "known transaction")) {
    return already_known();
  }
  // "nonce too low" is also what a mined copy of this transaction gets: ask for it by hash.
  if (Contains(message, "nonce too low")) {
    Result<std::optional<TxInfo>> known = GetTransaction(hash);
    if (known.ok() && known->has_value()) return already_known();
  }
  return refusal;
}

Result<std::optional<Receipt>> RpcChain::GetReceipt(const Hash32& transaction_hash) {
  Result<json> answer =
      client_.Call("eth_getTransactionReceipt", json::array({Hex(transaction_hash)}));
  if (!answer.ok()) return answer.status();
  if (answer->is_null()) return std::optional<Receipt>();
  return ParseReceipt(*answer, transaction_hash);
}

Result<std::optional<TxInfo>> RpcChain::GetTransaction(const Hash32& transaction_hash) {
  Result<json> answer =
      client_.Call("eth_getTransactionByHash", json::array({Hex(transaction_hash)}));
  if (!answer.ok()) return answer.status();
  if (answer->is_null()) return std::optional<TxInfo>();
  Result<TxInfo> info = ParseTxInfo(*answer, transaction_hash);
  if (!info.ok()) return info.status();
  return std::optional<TxInfo>(std::move(*info));
}

Result<uint64_t> RpcChain::BlockNumber() {
  Result<json> answer = client_.Call("eth_blockNumber", json::array());
  if (!answer.ok()) return answer.status();
  return ParseUint64(*answer, "eth_blockNumber");
}

Result<std::optional<Hash32>> RpcChain::BlockHash(uint64_t number) {
  Result<json> answer =
      client_.Call("eth_getBlockByNumber", json::array({U256(number).ToHexQuantity(), false}));
  if (!answer.ok()) return answer.status();
  if (answer->is_null()) return std::optional<Hash32>();
  if (!answer->is_object()) return Malformed("eth_getBlockByNumber", "block is not an object");
  Reader reader(*answer, "eth_getBlockByNumber");
  const Hash32 hash = reader.Hash("hash");
  if (!reader.ok()) return reader.status();
  return std::optional<Hash32>(hash);
}

Result<int64_t> RpcChain::LatestBlockTimestamp() {
  Result<json> block = LatestBlock();
  if (!block.ok()) return block.status();
  Reader reader(*block, "eth_getBlockByNumber");
  const U256 timestamp = reader.Quantity("timestamp");
  if (!reader.ok()) return reader.status();
  if (!timestamp.FitsInt64()) return Malformed("eth_getBlockByNumber", "timestamp out of range");
  return timestamp.ToInt64();
}

}  // namespace agentpay::chain
