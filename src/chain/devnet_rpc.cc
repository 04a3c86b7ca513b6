// The devnet's JSON-RPC read endpoint: envelope checks (JSON-RPC 2.0, batches, limits), then one
// function per method that reads the devnet and shapes the answer as geth does (hex quantities,
// null for what is not there, revert reasons as code 3 with Error(string) data).
#include "chain/devnet_rpc.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "core/json_depth.h"

namespace agentpay::chain {
namespace {

using nlohmann::json;

// Largest address or topic alternatives list accepted in one eth_getLogs filter.
constexpr size_t kMaxFilterAlternatives = 100;
// keccak256(rlp([])): the uncles hash of a block without uncles.
constexpr std::string_view kEmptyUnclesHash =
    "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347";
constexpr std::string_view kRevertPrefix = "execution reverted";

struct RpcFailure {
  int code = 0;
  std::string message;
  std::optional<std::string> data;
};

// A method's answer: a result, or a JSON-RPC error.
struct Outcome {
  json result;
  std::optional<RpcFailure> error;
};

Outcome Ok(json result) { return {std::move(result), std::nullopt}; }
Outcome Fail(int code, std::string message, std::optional<std::string> data = std::nullopt) {
  return {nullptr, RpcFailure{code, std::move(message), std::move(data)}};
}
Outcome InvalidParams(const std::string& message) { return Fail(kRpcInvalidParams, message); }

std::string Quantity(uint64_t value) { return U256(value).ToHexQuantity(); }
std::string Quantity(const U256& value) { return value.ToHexQuantity(); }
std::string HashHex(const Hash32& hash) { return Hex(hash); }
const std::string& ZeroHash() {
  static const std::string zero = Hex(Hash32{});
  return zero;
}

// Solidity's Error(string) revert data for `reason`.
std::string RevertData(std::string_view reason) {
  Bytes data = {0x08, 0xc3, 0x79, 0xa0};
  auto word = [&data](uint64_t value) {
    const std::array<uint8_t, 32> bytes = U256(value).ToBigEndian();
    data.insert(data.end(), bytes.begin(), bytes.end());
  };
  word(32);
  word(reason.size());
  data.insert(data.end(), reason.begin(), reason.end());
  data.insert(data.end(), (32 - reason.size() % 32) % 32, 0);
  return Hex(data);
}

// A devnet error as JSON-RPC: reverts as geth shows them, everything else a server error.
Outcome ChainFailure(const Status& status) {
  const std::string& message = status.message();
  if (status.error() == ErrorCode::kRpcError && message.starts_with(kRevertPrefix)) {
    std::string_view reason = std::string_view(message).substr(kRevertPrefix.size());
    if (reason.starts_with(": ")) reason.remove_prefix(2);
    return Fail(kRpcExecutionReverted, message, reason.empty() ? "0x" : RevertData(reason));
  }
  return Fail(kRpcServerError, message);
}

// ---- Parameters --------------------------------------------------------------------------

Outcome CheckArity(const json& params, size_t min, size_t max) {
  if (params.size() < min) {
    return InvalidParams("missing value for required argument " + std::to_string(params.size()));
  }
  if (params.size() > max) {
    return InvalidParams("too many arguments, want at most " + std::to_string(max));
  }
  return Ok(nullptr);
}

std::optional<Address> AddressParam(const json& value) {
  if (!value.is_string()) return std::nullopt;
  Result<Address> address = ParseAddress(value.get_ref<const std::string&>());
  return address.ok() ? std::optional<Address>(*address) : std::nullopt;
}

std::optional<Hash32> HashParam(const json& value) {
  if (!value.is_string()) return std::nullopt;
  Result<Hash32> hash = ParseHash32(value.get_ref<const std::string&>());
  return hash.ok() ? std::optional<Hash32>(*hash) : std::nullopt;
}

// A block tag or number: "latest", "safe", "finalized" (one confirmation: all the latest block),
// "earliest" (0), "pending" (only where the caller allows it: nullopt), or a hex quantity.
struct BlockRef {
  bool pending = false;
  uint64_t number = 0;
};

// Fails (invalid_argument) with the message for an invalid-params answer.
Result<BlockRef> ParseBlockRef(const json& value, uint64_t latest) {
  if (!value.is_string()) {
    return Status::Error(
        ErrorCode::kInvalidArgument,
        "block must be a tag (latest, safe, finalized, earliest, pending) or a hex number");
  }
  const std::string& text = value.get_ref<const std::string&>();
  if (text == "latest" || text == "safe" || text == "finalized") return BlockRef{false, latest};
  if (text == "earliest") return BlockRef{false, 0};
  if (text == "pending") return BlockRef{true, latest};
  std::optional<U256> number = ParseU256Hex(text);
  if (!number || number->Limb(1) != 0 || number->Limb(2) != 0 || number->Limb(3) != 0) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "invalid block " + text + ": want a tag or a hex number");
  }
  return BlockRef{false, number->Limb(0)};
}

// What a state method reads: the latest block or (where allowed) the pending state, or the
// answer that refuses the block asked for.
struct StateBlock {
  std::optional<Outcome> refused;
  bool pending = false;
};

// The state methods (eth_call, eth_estimateGas, eth_getTransactionCount) read the latest block:
// the devnet keeps no older state.
StateBlock RequireLatest(const json& params, size_t index, Devnet& devnet, bool allow_pending) {
  if (params.size() <= index) return {};
  Result<uint64_t> latest = devnet.BlockNumber();
  if (!latest.ok()) return {ChainFailure(latest.status())};
  Result<BlockRef> block = ParseBlockRef(params[index], *latest);
  if (!block.ok()) return {InvalidParams(block.status().message())};
  if (block->pending) {
    if (allow_pending) return {std::nullopt, /*pending=*/true};
    return {InvalidParams("block pending is not supported here: the devnet has no pending state")};
  }
  if (block->number != *latest) {
    return {Fail(kRpcServerError, "historical state is not kept: only the latest block (" +
                                      std::to_string(*latest) + ") can be read")};
  }
  return {};
}

// {to, data|input, from?, ...} of eth_call and eth_estimateGas; other fields are ignored.
struct CallParams {
  Address to;
  Address from;
  Bytes data;
};

// Fails (invalid_argument) with the message for an invalid-params answer.
Result<CallParams> ParseCall(const json& value) {
  if (!value.is_object()) {
    return Status::Error(ErrorCode::kInvalidArgument, "the call must be an object {to, data}");
  }
  CallParams call;
  auto to = value.find("to");
  std::optional<Address> to_address = to != value.end() ? AddressParam(*to) : std::nullopt;
  if (!to_address) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "call.to must be an address (the devnet has no contract creation)");
  }
  call.to = *to_address;
  if (auto from = value.find("from"); from != value.end() && !from->is_null()) {
    std::optional<Address> from_address = AddressParam(*from);
    if (!from_address) {
      return Status::Error(ErrorCode::kInvalidArgument, "call.from must be an address");
    }
    call.from = *from_address;
  }
  auto data = value.find("data");
  auto input = value.find("input");
  if (data != value.end() && input != value.end() && *data != *input) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "both call.data and call.input are set and differ");
  }
  const auto chosen = data != value.end() ? data : input;
  if (chosen != value.end() && !chosen->is_null()) {
    Result<Bytes> bytes =
        chosen->is_string() ? ParseHex(chosen->get_ref<const std::string&>())
                            : Result<Bytes>(Status::Error(ErrorCode::kInvalidHex, "not a string"));
    if (!bytes.ok()) {
      return Status::Error(ErrorCode::kInvalidArgument,
                           "call.data must be 0x-prefixed hex: " + bytes.status().message());
    }
    call.data = std::move(*bytes);
  }
  return call;
}

// ---- Answers ------------------------------------------------------------------------------

std::string LogsBloom(const std::vector<LogEntry>& logs) {
  std::array<uint8_t, 256> bloom{};
  auto add = [&bloom](std::span<const uint8_t> item) {
    const Hash32 hash = Keccak256(item);
    for (size_t i = 0; i < 6; i += 2) {
      const unsigned bit = ((static_cast<unsigned>(hash[i]) << 8) | hash[i + 1]) & 2047u;
      bloom[255 - bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
    }
  };
  for (const LogEntry& log : logs) {
    add(log.address.bytes);
    for (const Hash32& topic : log.topics) add(topic);
  }
  return Hex(bloom);
}

U256 EffectiveGasPrice(const DevnetTransaction& transaction) {
  const U256 base(kDevnetBaseFeePerGas);
  const U256 headroom = U256::CheckedSub(transaction.max_fee_per_gas, base).value_or(U256());
  return *U256::CheckedAdd(base, std::min(headroom, transaction.max_priority_fee_per_gas));
}

json TransactionJson(const DevnetTransaction& transaction) {
  const bool mined = transaction.block_number.has_value();
  json out = {
      {"hash", HashHex(transaction.hash)},
      {"type", "0x2"},
      {"chainId", Quantity(transaction.chain_id)},
      {"nonce", Quantity(transaction.nonce)},
      {"from", ToLowerHex(transaction.from)},
      {"to", transaction.to ? json(ToLowerHex(*transaction.to)) : json(nullptr)},
      {"value", Quantity(transaction.value)},
      {"gas", Quantity(transaction.gas_limit)},
      {"maxFeePerGas", Quantity(transaction.max_fee_per_gas)},
      {"maxPriorityFeePerGas", Quantity(transaction.max_priority_fee_per_gas)},
      {"gasPrice", Quantity(mined ? EffectiveGasPrice(transaction) : transaction.max_fee_per_gas)},
      {"input", Hex(transaction.data)},
      {"accessList", json::array()},
      {"v", Quantity(transaction.y_parity)},
      {"yParity", Quantity(transaction.y_parity)},
      {"r", Quantity(transaction.r)},
      {"s", Quantity(transaction.s)},
      {"blockHash", mined ? json(HashHex(transaction.block_hash)) : json(nullptr)},
      {"blockNumber", mined ? json(Quantity(*transaction.block_number)) : json(nullptr)},
      {"transactionIndex", mined ? json(Quantity(transaction.index)) : json(nullptr)}};
  return out;
}

json LogJson(const LogEntry& log, uint64_t block_number, const Hash32& block_hash,
             const Hash32& transaction_hash, uint64_t transaction_index, uint64_t log_index) {
  json topics = json::array();
  for (const Hash32& topic : log.topics) topics.push_back(HashHex(topic));
  return {{"address", ToLowerHex(log.address)},
          {"topics", std::move(topics)},
          {"data", Hex(log.data)},
          {"blockNumber", Quantity(block_number)},
          {"blockHash", HashHex(block_hash)},
          {"transactionHash", HashHex(transaction_hash)},
          {"transactionIndex", Quantity(transaction_index)},
          {"logIndex", Quantity(log_index)},
          {"removed", false}};
}

json ReceiptJson(const DevnetReceipt& answer) {
  const Receipt& receipt = answer.receipt;
  const DevnetTransaction& transaction = answer.transaction;
  json logs = json::array();
  for (size_t i = 0; i < receipt.logs.size(); ++i) {
    logs.push_back(LogJson(receipt.logs[i], receipt.block_number, receipt.block_hash,
                           receipt.transaction_hash, transaction.index,
                           answer.first_log_index + i));
  }
  return {{"transactionHash", HashHex(receipt.transaction_hash)},
          {"transactionIndex", Quantity(transaction.index)},
          {"blockHash", HashHex(receipt.block_hash)},
          {"blockNumber", Quantity(receipt.block_number)},
          {"from", ToLowerHex(transaction.from)},
          {"to", transaction.to ? json(ToLowerHex(*transaction.to)) : json(nullptr)},
          {"cumulativeGasUsed", Quantity(answer.cumulative_gas_used)},
          {"gasUsed", Quantity(receipt.gas_used)},
          {"effectiveGasPrice", Quantity(EffectiveGasPrice(transaction))},
          {"contractAddress", nullptr},
          {"logs", std::move(logs)},
          {"logsBloom", LogsBloom(receipt.logs)},
          {"status", Quantity(receipt.status)},
          {"type", "0x2"}};
}

// The block as geth shows it, less the Merkle roots and the size: the devnet keeps no tries, so
// it does not make them up.
Outcome BlockJson(const DevnetBlock& block, bool full_transactions, Devnet& devnet) {
  json transactions = json::array();
  for (const Hash32& hash : block.transactions) {
    if (!full_transactions) {
      transactions.push_back(HashHex(hash));
      continue;
    }
    Result<std::optional<DevnetTransaction>> transaction = devnet.Transaction(hash);
    if (!transaction.ok()) return ChainFailure(transaction.status());
    if (!transaction->has_value()) return Fail(kRpcServerError, "mined transaction not found");
    transactions.push_back(TransactionJson(**transaction));
  }
  return Ok(
      {{"number", Quantity(block.number)},
       {"hash", HashHex(block.hash)},
       {"parentHash", HashHex(block.parent_hash)},
       {"timestamp", Quantity(static_cast<uint64_t>(std::max<int64_t>(block.timestamp_s, 0)))},
       {"nonce", "0x0000000000000000"},
       {"mixHash", ZeroHash()},
       {"sha3Uncles", kEmptyUnclesHash},
       {"logsBloom", LogsBloom(block.logs)},
       {"miner", ToLowerHex(Address{})},
       {"difficulty", "0x0"},
       {"totalDifficulty", "0x0"},
       {"extraData", "0x"},
       {"gasLimit", Quantity(kDevnetBlockGasLimit)},
       {"gasUsed", Quantity(block.gas_used)},
       {"baseFeePerGas", Quantity(kDevnetBaseFeePerGas)},
       {"transactions", std::move(transactions)},
       {"uncles", json::array()}});
}

// ---- Methods ------------------------------------------------------------------------------

Outcome ChainIdMethod(const json& params, Devnet& devnet, bool decimal) {
  if (Outcome arity = CheckArity(params, 0, 0); arity.error) return arity;
  Result<uint64_t> chain_id = devnet.ChainId();
  if (!chain_id.ok()) return ChainFailure(chain_id.status());
  return Ok(decimal ? json(std::to_string(*chain_id)) : json(Quantity(*chain_id)));
}

Outcome BlockNumberMethod(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 0, 0); arity.error) return arity;
  Result<uint64_t> number = devnet.BlockNumber();
  if (!number.ok()) return ChainFailure(number.status());
  return Ok(Quantity(*number));
}

Outcome FeeMethod(const json& params, Devnet& devnet, bool tip_only) {
  if (Outcome arity = CheckArity(params, 0, 0); arity.error) return arity;
  Result<FeeData> fees = devnet.Fees();
  if (!fees.ok()) return ChainFailure(fees.status());
  if (tip_only) return Ok(Quantity(fees->max_priority_fee_per_gas));
  return Ok(Quantity(*U256::CheckedAdd(fees->base_fee_per_gas, fees->max_priority_fee_per_gas)));
}

Outcome GetBlockByNumber(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 2); arity.error) return arity;
  if (params.size() == 2 && !params[1].is_boolean()) {
    return InvalidParams("argument 1 (full transactions) must be true or false");
  }
  Result<uint64_t> latest = devnet.BlockNumber();
  if (!latest.ok()) return ChainFailure(latest.status());
  Result<BlockRef> ref = ParseBlockRef(params[0], *latest);
  if (!ref.ok()) return InvalidParams(ref.status().message());
  if (ref->pending) return InvalidParams("block pending is not supported: the devnet has none");
  Result<std::optional<DevnetBlock>> block = devnet.Block(ref->number);
  if (!block.ok()) return ChainFailure(block.status());
  if (!block->has_value()) return Ok(nullptr);
  return BlockJson(**block, params.size() == 2 && params[1].get<bool>(), devnet);
}

Outcome CallMethod(const json& params, Devnet& devnet, bool estimate) {
  if (Outcome arity = CheckArity(params, 1, 2); arity.error) return arity;  // no state overrides
  Result<CallParams> call = ParseCall(params[0]);
  if (!call.ok()) return InvalidParams(call.status().message());
  if (StateBlock block = RequireLatest(params, 1, devnet, false); block.refused) {
    return *block.refused;
  }
  if (estimate) {
    Result<uint64_t> gas = devnet.EstimateGas(call->from, call->to, call->data);
    if (!gas.ok()) return ChainFailure(gas.status());
    return Ok(Quantity(*gas));
  }
  Result<Bytes> answer = devnet.Call(call->to, call->data);
  if (!answer.ok()) return ChainFailure(answer.status());
  return Ok(Hex(*answer));
}

Outcome GetTransactionCount(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 2); arity.error) return arity;
  std::optional<Address> account = AddressParam(params[0]);
  if (!account) return InvalidParams("argument 0 must be an address");
  StateBlock block = RequireLatest(params, 1, devnet, true);
  if (block.refused) return *block.refused;
  Result<uint64_t> count =
      block.pending ? devnet.PendingNonce(*account) : devnet.MinedNonce(*account);
  if (!count.ok()) return ChainFailure(count.status());
  return Ok(Quantity(*count));
}

Outcome GetTransactionByHash(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 1); arity.error) return arity;
  std::optional<Hash32> hash = HashParam(params[0]);
  if (!hash) return InvalidParams("argument 0 must be a 32-byte 0x transaction hash");
  Result<std::optional<DevnetTransaction>> transaction = devnet.Transaction(*hash);
  if (!transaction.ok()) return ChainFailure(transaction.status());
  return Ok(transaction->has_value() ? TransactionJson(**transaction) : json(nullptr));
}

Outcome GetTransactionReceipt(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 1); arity.error) return arity;
  std::optional<Hash32> hash = HashParam(params[0]);
  if (!hash) return InvalidParams("argument 0 must be a 32-byte 0x transaction hash");
  Result<std::optional<DevnetReceipt>> receipt = devnet.ReceiptWithContext(*hash);
  if (!receipt.ok()) return ChainFailure(receipt.status());
  return Ok(receipt->has_value() ? ReceiptJson(**receipt) : json(nullptr));
}

// One address or a list of them; one topic, null, or a list of alternatives, per position.
std::optional<std::string> ParseFilterTargets(const json& filter, DevnetLogFilter& out) {
  if (auto address = filter.find("address"); address != filter.end() && !address->is_null()) {
    const json list = address->is_array() ? *address : json::array({*address});
    if (list.size() > kMaxFilterAlternatives) return "filter.address lists more than 100";
    for (const json& entry : list) {
      std::optional<Address> parsed = AddressParam(entry);
      if (!parsed) return "filter.address must be an address or a list of addresses";
      out.addresses.push_back(*parsed);
    }
  }
  auto topics = filter.find("topics");
  if (topics == filter.end() || topics->is_null()) return std::nullopt;
  if (!topics->is_array() || topics->size() > 4) return "filter.topics must be a list of at most 4";
  for (const json& position : *topics) {
    std::vector<Hash32>& wanted = out.topics.emplace_back();
    if (position.is_null()) continue;
    const json list = position.is_array() ? position : json::array({position});
    if (list.size() > kMaxFilterAlternatives) return "a filter.topics entry lists more than 100";
    for (const json& entry : list) {
      std::optional<Hash32> topic = HashParam(entry);
      if (!topic) return "filter.topics entries must be null, a 32-byte topic or a list of them";
      wanted.push_back(*topic);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ParseFilterRange(const json& filter, uint64_t latest,
                                            DevnetLogFilter& out) {
  if (filter.contains("blockHash")) {
    return "filter.blockHash is not supported by the devnet: use fromBlock and toBlock";
  }
  for (auto [key, target] :
       {std::pair{"fromBlock", &out.from_block}, std::pair{"toBlock", &out.to_block}}) {
    auto value = filter.find(key);
    if (value == filter.end() || value->is_null()) {
      *target = latest;
      continue;
    }
    Result<BlockRef> ref = ParseBlockRef(*value, latest);
    if (!ref.ok()) return std::string(key) + ": " + ref.status().message();
    *target = ref->number;  // pending: the latest block, as geth does for logs
  }
  return std::nullopt;
}

Outcome GetLogs(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 1); arity.error) return arity;
  const json& filter = params[0];
  if (!filter.is_object()) return InvalidParams("the filter must be an object");
  Result<uint64_t> latest = devnet.BlockNumber();
  if (!latest.ok()) return ChainFailure(latest.status());
  DevnetLogFilter parsed;
  if (auto error = ParseFilterRange(filter, *latest, parsed)) return InvalidParams(*error);
  if (auto error = ParseFilterTargets(filter, parsed)) return InvalidParams(*error);
  Result<std::vector<DevnetPlacedLog>> logs = devnet.Logs(parsed);
  if (!logs.ok()) {
    switch (logs.status().error()) {
      case ErrorCode::kInvalidBlockRange:
        return InvalidParams(logs.status().message());
      case ErrorCode::kBlockRangeTooLarge:
      case ErrorCode::kTooManyResults:
        return Fail(kRpcLimitExceeded, logs.status().message());
      default:
        return ChainFailure(logs.status());
    }
  }
  json out = json::array();
  for (const DevnetPlacedLog& log : *logs) {
    out.push_back(LogJson(log.entry, log.block_number, log.block_hash, log.transaction_hash,
                          log.transaction_index, log.log_index));
  }
  return Ok(std::move(out));
}

// Accounts have no code; the token runs natively in the devnet, so it has no EVM bytecode to
// show, and answering "0x" for it would claim it is not a contract.
Outcome GetCode(const json& params, Devnet& devnet) {
  if (Outcome arity = CheckArity(params, 1, 2); arity.error) return arity;
  std::optional<Address> address = AddressParam(params[0]);
  if (!address) return InvalidParams("argument 0 must be an address");
  Result<uint64_t> latest = devnet.BlockNumber();
  if (!latest.ok()) return ChainFailure(latest.status());
  if (params.size() == 2) {
    if (Result<BlockRef> ref = ParseBlockRef(params[1], *latest); !ref.ok()) {
      return InvalidParams(ref.status().message());
    }
  }
  if (*address == devnet.token()) {
    return Fail(kRpcServerError,
                "the devnet's token is built into the devnet and has no EVM bytecode; call it "
                "with eth_call");
  }
  return Ok("0x");
}

bool IsWriteMethod(std::string_view method) {
  return method == "eth_sendRawTransaction" || method == "eth_sendTransaction" ||
         method == "eth_sign" || method == "eth_signTransaction" ||
         method.starts_with("eth_signTypedData") || method == "personal_sign" ||
         method.starts_with("anvil_") || method.starts_with("evm_") ||
         method.starts_with("hardhat_");
}

Outcome Dispatch(const std::string& method, const json& params, Devnet& devnet) {
  using Method = std::function<Outcome(const json&, Devnet&)>;
  static const std::map<std::string, Method, std::less<>> kMethods = {
      {"eth_chainId", [](const json& p, Devnet& d) { return ChainIdMethod(p, d, false); }},
      {"net_version", [](const json& p, Devnet& d) { return ChainIdMethod(p, d, true); }},
      {"eth_blockNumber", BlockNumberMethod},
      {"eth_gasPrice", [](const json& p, Devnet& d) { return FeeMethod(p, d, false); }},
      {"eth_maxPriorityFeePerGas", [](const json& p, Devnet& d) { return FeeMethod(p, d, true); }},
      {"eth_getBlockByNumber", GetBlockByNumber},
      {"eth_call", [](const json& p, Devnet& d) { return CallMethod(p, d, false); }},
      {"eth_estimateGas", [](const json& p, Devnet& d) { return CallMethod(p, d, true); }},
      {"eth_getTransactionCount", GetTransactionCount},
      {"eth_getTransactionByHash", GetTransactionByHash},
      {"eth_getTransactionReceipt", GetTransactionReceipt},
      {"eth_getLogs", GetLogs},
      {"eth_getCode", GetCode},
  };
  if (auto found = kMethods.find(method); found != kMethods.end()) {
    return found->second(params, devnet);
  }
  if (IsWriteMethod(method)) {
    return Fail(kRpcMethodNotSupported,
                "the method " + method +
                    " is not available: this endpoint only reads the devnet (the gateway's "
                    "relayer sends settlements; the devnet controls are /admin/v1/devnet)");
  }
  constexpr size_t kMaxEchoedName = 100;  // the name is echoed, but not a whole body of it
  return Fail(kRpcMethodNotFound, "the method " + method.substr(0, kMaxEchoedName) +
                                      " does not exist/is not available");
}

// ---- Envelope -----------------------------------------------------------------------------

json ErrorObject(const json& id, const RpcFailure& failure) {
  json error = {{"code", failure.code}, {"message", failure.message}};
  if (failure.data) error["data"] = *failure.data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

// Fractional ids (and integers past 64 bits, which the parser can only hold as doubles) are
// refused: they could not be echoed back exactly.
bool ValidId(const json& id) { return id.is_string() || id.is_number_integer() || id.is_null(); }

// One call's answer; nullopt for a notification (a valid call without "id").
std::optional<json> AnswerCall(const json& call, Devnet& devnet) {
  if (!call.is_object()) {
    return ErrorObject(nullptr, {kRpcInvalidRequest, "a call must be a JSON object", {}});
  }
  auto id = call.find("id");
  if (id != call.end() && !ValidId(*id)) {
    return ErrorObject(nullptr,
                       {kRpcInvalidRequest, "id must be a string, a 64-bit integer or null", {}});
  }
  const json id_value = id != call.end() ? *id : json(nullptr);
  auto version = call.find("jsonrpc");
  if (version == call.end() || *version != "2.0") {
    return ErrorObject(id_value, {kRpcInvalidRequest, "jsonrpc must be \"2.0\"", {}});
  }
  auto method = call.find("method");
  if (method == call.end() || !method->is_string()) {
    return ErrorObject(id_value, {kRpcInvalidRequest, "method must be a string", {}});
  }
  auto params = call.find("params");
  Outcome outcome;
  if (params != call.end() && !params->is_array() && !params->is_null()) {
    if (!params->is_object()) {
      // Not a call at all: answered even without an id, as any other invalid request.
      return ErrorObject(id_value, {kRpcInvalidRequest, "params must be an array", {}});
    }
    outcome = InvalidParams("params must be an array (by position)");
  } else {
    const json empty = json::array();
    outcome = Dispatch(method->get<std::string>(),
                       params != call.end() && params->is_array() ? *params : empty, devnet);
  }
  if (id == call.end()) return std::nullopt;
  if (outcome.error) return ErrorObject(id_value, *outcome.error);
  return json{{"jsonrpc", "2.0"}, {"id", id_value}, {"result", std::move(outcome.result)}};
}

std::string Single(int code, const std::string& message) {
  return ErrorObject(nullptr, {code, message, {}}).dump();
}

// The batch's answer; nullopt when every call was a notification (nothing to answer).
std::optional<std::string> AnswerBatch(const json& batch, Devnet& devnet) {
  std::string out = "[";
  size_t answered = 0;
  for (const json& call : batch) {
    std::optional<json> answer;
    if (out.size() > kDevnetRpcMaxResponseBytes) {
      if (call.is_object() && !call.contains("id")) continue;  // a notification gets no answer
      const json id = call.is_object() && call.contains("id") && ValidId(call["id"])
                          ? call["id"]
                          : json(nullptr);
      answer = ErrorObject(
          id, {kRpcLimitExceeded,
               "the batch's answer passed " + std::to_string(kDevnetRpcMaxResponseBytes) +
                   " bytes: send the rest of it again",
               {}});
    } else {
      answer = AnswerCall(call, devnet);
    }
    if (!answer) continue;
    if (answered++ > 0) out += ",";
    out += answer->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (answered == 0) return std::nullopt;
  return out + "]";
}

}  // namespace

std::optional<std::string> AnswerDevnetRpc(std::string_view body, Devnet& devnet) {
  if (!JsonNestingWithin(body, kDevnetRpcMaxJsonDepth)) {
    return Single(kRpcParseError, "parse error: JSON nested deeper than " +
                                      std::to_string(kDevnetRpcMaxJsonDepth) + " levels");
  }
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Single(kRpcParseError, "parse error: the body is not JSON");
  if (parsed.is_array()) {
    if (parsed.empty()) return Single(kRpcInvalidRequest, "empty batch");
    if (parsed.size() > kDevnetRpcMaxBatch) {
      return Single(kRpcInvalidRequest, "batch of " + std::to_string(parsed.size()) +
                                            " calls: at most " +
                                            std::to_string(kDevnetRpcMaxBatch) + " per request");
    }
    return AnswerBatch(parsed, devnet);
  }
  std::optional<json> answer = AnswerCall(parsed, devnet);
  if (!answer) return std::nullopt;
  std::string text = answer->dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kDevnetRpcMaxResponseBytes) {
    return ErrorObject((*answer)["id"],
                       {kRpcLimitExceeded,
                        "the answer passed " + std::to_string(kDevnetRpcMaxResponseBytes) +
                            " bytes: narrow the request",
                        {}})
        .dump();
  }
  return text;
}

std::optional<HttpResponse> HandleDevnetRpc(const HttpRequest& request, Devnet& devnet) {
  if (request.Path() != kDevnetRpcPath) return std::nullopt;
  if (request.method != "POST") {
    HttpResponse refused = ProblemResponse(405, ProblemCode::kMethodNotAllowed,
                                           "POST a JSON-RPC 2.0 request to /devnet/rpc");
    refused.SetHeader("Allow", "POST");
    return refused;
  }
  if (request.body.size() > kDevnetRpcMaxBodyBytes) {
    HttpResponse too_large =
        JsonResponse(413, Single(kRpcInvalidRequest,
                                 "the body is " + std::to_string(request.body.size()) +
                                     " bytes: at most " + std::to_string(kDevnetRpcMaxBodyBytes)));
    return too_large;
  }
  std::optional<std::string> answer = AnswerDevnetRpc(request.body, devnet);
  if (!answer) {
    HttpResponse empty;
    empty.status = 204;
    return empty;
  }
  return JsonResponse(200, std::move(*answer));
}

}  // namespace agentpay::chain
