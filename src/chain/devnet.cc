// The devnet in three parts: decoding of raw transactions and calldata, DevnetState (the token's
// ledger, the pool and the blocks, all in memory and free of I/O), and DevnetLog, an append-only
// SQLite event log (mints, submissions, drops, blocks) that is replayed through DevnetState.
#include "chain/devnet.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/json_rpc.h"
#include "chain/keccak.h"
#include "chain/rlp.h"
#include "chain/secp256k1.h"
#include "chain/transaction.h"
#include "sqlite/sqlite_db.h"

namespace agentpay::chain {
namespace {

constexpr uint8_t kEip1559Type = 0x02;
constexpr size_t kEip1559Fields = 12;
constexpr uint64_t kIntrinsicGas = 21'000;
constexpr uint64_t kBaseFeePerGas = kDevnetBaseFeePerGas;
constexpr uint64_t kPriorityFeePerGas = 1'000'000;  // 0.001 gwei, what Base asks
constexpr size_t kWord = 32;

Status RpcError(std::string message) { return Status::Error(ErrorCode::kRpcError, message); }

Status Reverted(const std::string& reason) {
  return RpcError(reason.empty() ? "execution reverted" : "execution reverted: " + reason);
}

int64_t FloorDiv(int64_t value, int64_t divisor) {
  return value / divisor - ((value % divisor != 0 && value < 0) ? 1 : 0);
}

void AppendBigEndian(Bytes& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

U256 TimestampWord(int64_t timestamp_s) {
  return U256(static_cast<uint64_t>(std::max<int64_t>(timestamp_s, 0)));
}

Hash32 AddressTopic(const Address& address) {
  Hash32 topic{};
  std::copy(address.bytes.begin(), address.bytes.end(), topic.begin() + 12);
  return topic;
}

Bytes WordBytes(const U256& value) {
  const std::array<uint8_t, 32> word = value.ToBigEndian();
  return Bytes(word.begin(), word.end());
}

// A Solidity `string` return value: offset word, length word, data padded to a word boundary.
Bytes AbiString(std::string_view text) {
  Bytes out = WordBytes(U256(kWord));
  const Bytes length = WordBytes(U256(text.size()));
  out.insert(out.end(), length.begin(), length.end());
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), (kWord - text.size() % kWord) % kWord, 0);
  return out;
}

struct Selectors {
  Selector transfer_vrs = FunctionSelector(kTransferWithAuthorizationVrsSignature);
  Selector transfer_bytes = FunctionSelector(kTransferWithAuthorizationBytesSignature);
  Selector authorization_state = FunctionSelector(kAuthorizationStateSignature);
  Selector balance_of = FunctionSelector(kBalanceOfSignature);
  Selector total_supply = FunctionSelector("totalSupply()");
  Selector name = FunctionSelector("name()");
  Selector version = FunctionSelector("version()");
};

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

// Dirty upper bytes in an address argument make the ABI decoder revert.
std::optional<Address> AddressAt(std::span<const uint8_t> args, size_t at) {
  auto word = WordAt(args, at);
  if (!word || !std::all_of(word->begin(), word->begin() + 12, [](uint8_t b) { return b == 0; })) {
    return std::nullopt;
  }
  Address address;
  std::copy(word->begin() + 12, word->end(), address.bytes.begin());
  return address;
}

struct AuthorizationCall {
  TransferAuthorization authorization;
  std::optional<Signature> signature;  // nullopt: not 65 bytes, which fails as a bad signature
};

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

// Both transferWithAuthorization overloads; nullopt for calldata the ABI decoder rejects.
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

// ---- Raw transactions --------------------------------------------------------------------

struct DecodedTransaction {
  uint64_t chain_id = 0;
  uint64_t nonce = 0;
  U256 max_priority_fee_per_gas;
  U256 max_fee_per_gas;
  uint64_t gas_limit = 0;
  std::optional<Address> to;
  U256 value;
  Bytes data;
  Address from;  // recovered from the signature
  uint8_t y_parity = 0;
  U256 r, s;
};

// Reads the fields of a decoded RLP list; the first bad field sticks, later reads give zeros.
class FieldReader {
 public:
  explicit FieldReader(const std::vector<RlpItem>& items) : items_(items) {}
  const Status& status() const { return status_; }

  U256 Uint(size_t index, const char* name) {
    if (!status_.ok()) return U256();
    Result<U256> value = RlpDecodeUint(items_[index]);
    if (!value.ok()) Fail(name, value.status().message());
    return value.ok() ? *value : U256();
  }
  uint64_t Uint64(size_t index, const char* name) {
    const U256 value = Uint(index, name);
    if (value > U256(UINT64_MAX)) Fail(name, "does not fit in 64 bits");
    return value.Limb(0);
  }
  std::span<const uint8_t> String(size_t index, const char* name) {
    if (status_.ok() && items_[index].is_list) Fail(name, "expected a string, got a list");
    return status_.ok() ? items_[index].payload : std::span<const uint8_t>();
  }
  void List(size_t index, const char* name) {
    if (status_.ok() && !items_[index].is_list) Fail(name, "expected a list");
  }

 private:
  void Fail(const char* name, const std::string& what) {
    if (status_.ok()) status_ = RpcError(std::string("rlp: field ") + name + ": " + what);
  }
  const std::vector<RlpItem>& items_;
  Status status_;
};

// keccak256(0x02 ‖ rlp(first nine fields)), re-using the encoded fields as they arrived.
Hash32 SigningHash(const std::vector<RlpItem>& items) {
  const uint8_t* begin = items[0].encoded.data();
  const uint8_t* end = items[8].encoded.data() + items[8].encoded.size();
  Bytes typed = {kEip1559Type};
  const Bytes list = RlpEncodeList({Bytes(begin, end)});
  typed.insert(typed.end(), list.begin(), list.end());
  return Keccak256(typed);
}

Result<Address> RecoverSender(const std::vector<RlpItem>& items, FieldReader& reader) {
  const U256 y_parity = reader.Uint(9, "yParity");
  const U256 r = reader.Uint(10, "r");
  const U256 s = reader.Uint(11, "s");
  if (!reader.status().ok()) return reader.status();
  if (y_parity > U256(1)) return RpcError("invalid sender: yParity is neither 0 nor 1");
  Signature signature;
  const std::array<uint8_t, 32> r_bytes = r.ToBigEndian();
  const std::array<uint8_t, 32> s_bytes = s.ToBigEndian();
  std::copy(r_bytes.begin(), r_bytes.end(), signature.bytes.begin());
  std::copy(s_bytes.begin(), s_bytes.end(), signature.bytes.begin() + 32);
  signature.bytes[64] = static_cast<uint8_t>(27 + y_parity.Limb(0));
  Result<Address> sender = RecoverSigner(SigningHash(items), signature);
  if (!sender.ok()) return RpcError("invalid sender: " + sender.status().message());
  return sender;
}

// 0x02 ‖ rlp([chainId, nonce, tip, maxFee, gas, to, value, data, accessList, yParity, r, s]).
// Errors are rpc_error with geth-like messages.
Result<DecodedTransaction> DecodeRawTransaction(std::span<const uint8_t> raw) {
  if (raw.empty()) return RpcError("typed transaction too short");
  if (raw[0] != kEip1559Type) return RpcError("transaction type not supported");
  Result<RlpItem> list = RlpDecode(raw.subspan(1));
  if (!list.ok()) return RpcError("rlp: " + list.status().message());
  Result<std::vector<RlpItem>> items = RlpListItems(*list, kEip1559Fields);
  if (!items.ok()) return RpcError("rlp: " + items.status().message());
  if (items->size() != kEip1559Fields) {
    return RpcError("rlp: expected 12 fields, got " + std::to_string(items->size()));
  }
  FieldReader reader(*items);
  DecodedTransaction transaction;
  transaction.chain_id = reader.Uint64(0, "chainId");
  transaction.nonce = reader.Uint64(1, "nonce");
  transaction.max_priority_fee_per_gas = reader.Uint(2, "maxPriorityFeePerGas");
  transaction.max_fee_per_gas = reader.Uint(3, "maxFeePerGas");
  transaction.gas_limit = reader.Uint64(4, "gas");
  const std::span<const uint8_t> to = reader.String(5, "to");
  transaction.value = reader.Uint(6, "value");
  const std::span<const uint8_t> data = reader.String(7, "data");
  reader.List(8, "accessList");
  if (!reader.status().ok()) return reader.status();
  if (to.size() == 20) {
    transaction.to = Address{};
    std::copy(to.begin(), to.end(), transaction.to->bytes.begin());
  } else if (!to.empty()) {
    return RpcError("rlp: field to: expected 20 bytes, got " + std::to_string(to.size()));
  }
  transaction.data.assign(data.begin(), data.end());
  Result<Address> sender = RecoverSender(*items, reader);
  if (!sender.ok()) return sender.status();
  transaction.from = *sender;
  transaction.y_parity = static_cast<uint8_t>(reader.Uint(9, "yParity").Limb(0));  // checked ≤ 1
  transaction.r = reader.Uint(10, "r");
  transaction.s = reader.Uint(11, "s");
  return transaction;
}

// What geth and the token check before a transaction enters the pool, nonce aside.
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
  if (transaction.to != config.token) {
    return RpcError("unsupported call: the devnet runs only its token at " +
                    ToChecksumHex(config.token));
  }
  if (!IsSettlementSelector(SelectorOf(transaction.data))) {
    return RpcError("unsupported call: the devnet accepts only transferWithAuthorization");
  }
  return Status::Ok();
}

// ---- State -------------------------------------------------------------------------------

struct PendingTransaction {
  DecodedTransaction transaction;
  int64_t due_ms = 0;
  uint64_t sequence = 0;  // submission order, to break ties between equal due times
};

struct MinedTransaction {
  TxInfo info;
  Receipt receipt;
  std::optional<std::string> revert_reason;  // nullopt: succeeded
  DecodedTransaction transaction;
  uint64_t index = 0;  // position in its block
};

// A mined block as the state remembers it (block 0 is the genesis).
struct BlockRecord {
  Hash32 hash{};
  Hash32 parent_hash{};
  int64_t timestamp_s = 0;
  std::vector<Hash32> transactions;
};

// The outcome of running a settlement: a revert reason, or the authorization to apply.
struct Execution {
  std::optional<std::string> revert_reason;
  TransferAuthorization authorization;
};

}  // namespace

class DevnetState {
 public:
  DevnetState(const DevnetConfig& config, int64_t genesis_ms);

  uint64_t block_number() const { return block_number_; }
  int64_t block_timestamp_s() const { return block_timestamp_s_; }
  const U256& total_supply() const { return total_supply_; }
  size_t pending_count() const { return pending_.size(); }
  U256 Balance(const Address& owner) const;
  bool AuthorizationUsed(const Address& authorizer, const Hash32& nonce) const {
    return used_authorizations_.count({authorizer, nonce}) > 0;
  }
  uint64_t AccountNonce(const Address& account) const;
  uint64_t PendingNonce(const Address& account) const;
  bool Knows(const Hash32& hash) const { return pending_.count(hash) || mined_.count(hash); }
  const PendingTransaction* FindPending(const Hash32& hash) const;
  const MinedTransaction* FindMined(const Hash32& hash) const;
  // Precondition: number <= block_number().
  const BlockRecord& BlockAt(uint64_t number) const { return blocks_.at(number); }

  // rpc_error when transaction's nonce is not its sender's next one.
  Status CheckNonce(const DecodedTransaction& transaction) const;
  // transferWithAuthorization(data) at a block with this timestamp, against the current state.
  Execution Simulate(std::span<const uint8_t> data, int64_t timestamp_s) const;

  Status Mint(const Address& owner, const U256& amount);
  // Precondition: !Knows(hash).
  void AddPending(const Hash32& hash, DecodedTransaction transaction, int64_t due_ms);
  bool RemovePending(const Hash32& hash);
  struct BlockPlan {
    std::vector<Hash32> transactions;
    int64_t first_due_ms = 0;  // the due time of the first transaction (0 when there is none)
  };
  // The pending transactions that can run in the next block, in order: due by limit_ms, and
  // each its sender's next nonce. With one_second, only those due in the same second as the
  // first.
  BlockPlan PlanBlock(int64_t limit_ms, bool one_second) const;
  // Mines a block. Errors ("devnet_store") when the transactions are not a plan of this state,
  // which only a corrupt event log can cause.
  Status ApplyBlock(int64_t timestamp_s, const std::vector<Hash32>& hashes);

 private:
  Execution Run(const DecodedTransaction& transaction, int64_t timestamp_s) const;
  std::vector<LogEntry> Settle(const TransferAuthorization& authorization);
  void MineOne(const Hash32& hash, uint64_t index);

  Address token_;
  Hash32 domain_separator_;
  uint64_t block_number_ = 0;
  int64_t block_timestamp_s_;
  Hash32 block_hash_;
  U256 total_supply_;
  std::map<Address, U256> balances_;
  std::set<std::pair<Address, Hash32>> used_authorizations_;
  std::map<Address, uint64_t> account_nonces_;
  std::map<Hash32, PendingTransaction> pending_;
  std::map<std::pair<Address, uint64_t>, Hash32> pending_by_sender_;
  std::set<std::tuple<int64_t, uint64_t, Hash32>> pending_by_due_;
  uint64_t next_sequence_ = 0;
  std::map<Hash32, MinedTransaction> mined_;
  std::vector<BlockRecord> blocks_;  // index: block number
};

namespace {

Hash32 AuthorizationUsedTopic() {
  static const Hash32 topic = Keccak256(std::string_view("AuthorizationUsed(address,bytes32)"));
  return topic;
}

Status Corrupt(const std::string& what) {
  return Status::Error(ErrorCode::kDevnetStore, "event log does not replay: " + what);
}

}  // namespace

DevnetState::DevnetState(const DevnetConfig& config, int64_t genesis_ms)
    : token_(config.token),
      domain_separator_(
          DomainSeparator(config.token_name, config.token_version, config.chain_id, config.token)),
      block_timestamp_s_(FloorDiv(genesis_ms, 1000)) {
  Bytes genesis;
  AppendBigEndian(genesis, config.chain_id);
  genesis.insert(genesis.end(), config.token.bytes.begin(), config.token.bytes.end());
  AppendBigEndian(genesis, static_cast<uint64_t>(genesis_ms));
  block_hash_ = Keccak256(genesis);
  blocks_.push_back({block_hash_, Hash32{}, block_timestamp_s_, {}});
}

U256 DevnetState::Balance(const Address& owner) const {
  auto found = balances_.find(owner);
  return found == balances_.end() ? U256() : found->second;
}

uint64_t DevnetState::AccountNonce(const Address& account) const {
  auto found = account_nonces_.find(account);
  return found == account_nonces_.end() ? 0 : found->second;
}

uint64_t DevnetState::PendingNonce(const Address& account) const {
  uint64_t nonce = AccountNonce(account);
  while (pending_by_sender_.count({account, nonce}) > 0) ++nonce;
  return nonce;
}

const PendingTransaction* DevnetState::FindPending(const Hash32& hash) const {
  auto found = pending_.find(hash);
  return found == pending_.end() ? nullptr : &found->second;
}

const MinedTransaction* DevnetState::FindMined(const Hash32& hash) const {
  auto found = mined_.find(hash);
  return found == mined_.end() ? nullptr : &found->second;
}

Status DevnetState::CheckNonce(const DecodedTransaction& transaction) const {
  const uint64_t next = PendingNonce(transaction.from);
  if (transaction.nonce < AccountNonce(transaction.from)) return RpcError("nonce too low");
  if (transaction.nonce < next) return RpcError("replacement transaction underpriced");
  if (transaction.nonce > next) return RpcError("nonce too high");
  return Status::Ok();
}

// Circle FiatTokenV2 order: validity window, unused nonce, signature, then the transfer.
Execution DevnetState::Simulate(std::span<const uint8_t> data, int64_t timestamp_s) const {
  std::optional<AuthorizationCall> call = DecodeAuthorizationCall(data);
  if (!call) return {std::string(), {}};
  const TransferAuthorization& authorization = call->authorization;
  const U256 now = TimestampWord(timestamp_s);
  if (!(now > authorization.valid_after)) {
    return {"FiatTokenV2: authorization is not yet valid", authorization};
  }
  if (!(now < authorization.valid_before)) {
    return {"FiatTokenV2: authorization is expired", authorization};
  }
  if (AuthorizationUsed(authorization.from, authorization.nonce)) {
    return {"FiatTokenV2: authorization is used or canceled", authorization};
  }
  Result<Address> signer =
      call->signature
          ? RecoverSigner(Eip3009Digest(domain_separator_, authorization), *call->signature)
          : Result<Address>(Status::Error(ErrorCode::kInvalidSignature, "not 65 bytes"));
  if (!signer.ok() || *signer != authorization.from) {
    return {"FiatTokenV2: invalid signature", authorization};
  }
  if (authorization.to == Address{}) return {"ERC20: transfer to the zero address", authorization};
  if (Balance(authorization.from) < authorization.value) {
    return {"ERC20: transfer amount exceeds balance", authorization};
  }
  return {std::nullopt, authorization};
}

Execution DevnetState::Run(const DecodedTransaction& transaction, int64_t timestamp_s) const {
  if (transaction.gas_limit < kDevnetSettlementGas) return {"out of gas", {}};
  // transferWithAuthorization is not payable: the ABI dispatcher reverts without a reason.
  if (!transaction.value.IsZero()) return {std::string(), {}};
  return Simulate(transaction.data, timestamp_s);
}

Status DevnetState::Mint(const Address& owner, const U256& amount) {
  std::optional<U256> supply = U256::CheckedAdd(total_supply_, amount);
  if (!supply) {
    return Status::Error(ErrorCode::kInvalidAmount, "the total supply would pass 2^256 - 1");
  }
  total_supply_ = *supply;
  balances_[owner] = *U256::CheckedAdd(Balance(owner), amount);  // ≤ the supply
  return Status::Ok();
}

void DevnetState::AddPending(const Hash32& hash, DecodedTransaction transaction, int64_t due_ms) {
  AGENTPAY_CHECK(!Knows(hash));
  const uint64_t sequence = next_sequence_++;
  pending_by_sender_[{transaction.from, transaction.nonce}] = hash;
  pending_by_due_.insert({due_ms, sequence, hash});
  pending_.emplace(hash, PendingTransaction{std::move(transaction), due_ms, sequence});
}

bool DevnetState::RemovePending(const Hash32& hash) {
  auto found = pending_.find(hash);
  if (found == pending_.end()) return false;
  const PendingTransaction& pending = found->second;
  pending_by_sender_.erase({pending.transaction.from, pending.transaction.nonce});
  pending_by_due_.erase({pending.due_ms, pending.sequence, hash});
  pending_.erase(found);
  return true;
}

DevnetState::BlockPlan DevnetState::PlanBlock(int64_t limit_ms, bool one_second) const {
  BlockPlan plan;
  std::vector<Hash32>& chosen = plan.transactions;
  std::set<Hash32> taken;
  std::map<Address, uint64_t> next_nonces;  // senders whose nonce this block already advanced
  // A sender's later transaction may be due first: keep passing until nothing more can run.
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& [due_ms, sequence, hash] : pending_by_due_) {
      if (due_ms > limit_ms) break;
      if (taken.count(hash) > 0) continue;
      const DecodedTransaction& transaction = pending_.at(hash).transaction;
      auto advanced = next_nonces.find(transaction.from);
      const uint64_t expected =
          advanced != next_nonces.end() ? advanced->second : AccountNonce(transaction.from);
      if (transaction.nonce != expected) continue;
      if (chosen.empty()) {
        plan.first_due_ms = due_ms;
        if (one_second) limit_ms = std::min(limit_ms, FloorDiv(due_ms, 1000) * 1000 + 999);
      }
      chosen.push_back(hash);
      taken.insert(hash);
      next_nonces[transaction.from] = transaction.nonce + 1;
      progress = true;
    }
  }
  return plan;
}

Status DevnetState::ApplyBlock(int64_t timestamp_s, const std::vector<Hash32>& hashes) {
  std::map<Address, uint64_t> next_nonces;
  for (const Hash32& hash : hashes) {
    const PendingTransaction* pending = FindPending(hash);
    if (pending == nullptr) return Corrupt("block includes unknown transaction " + Hex(hash));
    const Address& from = pending->transaction.from;
    const uint64_t expected = next_nonces.count(from) > 0 ? next_nonces[from] : AccountNonce(from);
    if (pending->transaction.nonce != expected) return Corrupt("nonce gap at " + Hex(hash));
    next_nonces[from] = expected + 1;
  }
  const Hash32 parent_hash = block_hash_;
  Bytes header(block_hash_.begin(), block_hash_.end());
  AppendBigEndian(header, ++block_number_);
  block_timestamp_s_ = std::max(block_timestamp_s_, timestamp_s);
  AppendBigEndian(header, static_cast<uint64_t>(block_timestamp_s_));
  for (const Hash32& hash : hashes) header.insert(header.end(), hash.begin(), hash.end());
  block_hash_ = Keccak256(header);
  blocks_.push_back({block_hash_, parent_hash, block_timestamp_s_, hashes});
  for (uint64_t index = 0; index < hashes.size(); ++index) MineOne(hashes[index], index);
  return Status::Ok();
}

void DevnetState::MineOne(const Hash32& hash, uint64_t index) {
  const DecodedTransaction transaction = pending_.at(hash).transaction;
  RemovePending(hash);
  ++account_nonces_[transaction.from];
  const Execution execution = Run(transaction, block_timestamp_s_);
  MinedTransaction mined;
  mined.info = {hash, transaction.nonce, transaction.from, block_number_};
  mined.receipt.transaction_hash = hash;
  mined.receipt.block_number = block_number_;
  mined.receipt.block_hash = block_hash_;
  mined.receipt.gas_used = std::min(transaction.gas_limit, kDevnetSettlementGas);
  mined.revert_reason = execution.revert_reason;
  mined.transaction = transaction;
  mined.index = index;
  if (!execution.revert_reason) {
    mined.receipt.status = 1;
    mined.receipt.logs = Settle(execution.authorization);
  }
  mined_.emplace(hash, std::move(mined));
}

std::vector<LogEntry> DevnetState::Settle(const TransferAuthorization& authorization) {
  used_authorizations_.insert({authorization.from, authorization.nonce});
  // Simulate checked the balance; from == to leaves it as it was.
  balances_[authorization.from] =
      *U256::CheckedSub(Balance(authorization.from), authorization.value);
  balances_[authorization.to] = *U256::CheckedAdd(Balance(authorization.to), authorization.value);
  std::vector<LogEntry> logs;
  logs.push_back({token_,
                  {AuthorizationUsedTopic(), AddressTopic(authorization.from), authorization.nonce},
                  {}});
  logs.push_back(
      {token_,
       {TransferEventTopic(), AddressTopic(authorization.from), AddressTopic(authorization.to)},
       WordBytes(authorization.value)});
  return logs;
}

// ---- Event log ---------------------------------------------------------------------------

namespace {

constexpr std::string_view kMint = "mint";      // data: address ‖ amount (32 bytes)
constexpr std::string_view kSubmit = "submit";  // data: raw transaction; time: due
constexpr std::string_view kDrop = "drop";      // data: transaction hash
constexpr std::string_view kBlock = "block";    // data: transaction hashes; time: timestamp (s)

struct LogEvent {
  std::string kind;
  Bytes data;
  int64_t time = 0;
  int64_t number = 0;  // block number for kBlock
};

std::string_view AsText(std::span<const uint8_t> bytes) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Status StoreError(const Status& status) {
  return Status::Error(ErrorCode::kDevnetStore, status.message());
}

}  // namespace

class DevnetLog {
 public:
  static Result<std::unique_ptr<DevnetLog>> Open(const std::string& path);
  // The genesis time of the chain in the file; a new file records config and now_ms.
  Result<int64_t> Bind(const DevnetConfig& config, int64_t now_ms);
  Status Append(std::string_view kind, std::span<const uint8_t> data, int64_t time,
                int64_t number = 0);
  Status Replay(const std::function<Status(const LogEvent&)>& apply);

 private:
  explicit DevnetLog(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  Result<std::optional<std::string>> Meta(const std::string& key);
  Status PutMeta(const std::string& key, const std::string& value);

  std::unique_ptr<sqlite::Database> db_;
};

Result<std::unique_ptr<DevnetLog>> DevnetLog::Open(const std::string& path) {
  Result<std::unique_ptr<sqlite::Database>> db = sqlite::Database::Open(path, false);
  if (!db.ok()) return StoreError(db.status());
  Status schema = (*db)->Exec(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
      "CREATE TABLE IF NOT EXISTS devnet_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS devnet_events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
      " data BLOB NOT NULL, time INTEGER NOT NULL, number INTEGER NOT NULL);");
  if (!schema.ok()) return StoreError(schema);
  return std::unique_ptr<DevnetLog>(new DevnetLog(std::move(*db)));
}

Result<std::optional<std::string>> DevnetLog::Meta(const std::string& key) {
  Result<sqlite::Statement> select = db_->Prepare("SELECT value FROM devnet_meta WHERE key = ?");
  if (!select.ok()) return StoreError(select.status());
  select->Bind(1, key);
  Status status;
  if (select->Step(&status)) return std::optional<std::string>(select->Text(0));
  if (!status.ok()) return StoreError(status);
  return std::optional<std::string>();
}

Status DevnetLog::PutMeta(const std::string& key, const std::string& value) {
  Result<sqlite::Statement> insert =
      db_->Prepare("INSERT INTO devnet_meta (key, value) VALUES (?, ?)");
  if (!insert.ok()) return insert.status();
  return insert->Bind(1, key).Bind(2, value).Run();
}

Result<int64_t> DevnetLog::Bind(const DevnetConfig& config, int64_t now_ms) {
  const std::map<std::string, std::string> identity = {
      {"chain_id", std::to_string(config.chain_id)},
      {"token", ToLowerHex(config.token)},
      {"token_name", config.token_name},
      {"token_version", config.token_version}};
  Result<std::optional<std::string>> genesis = Meta("genesis_ms");
  if (!genesis.ok()) return genesis.status();
  if (genesis->has_value()) {
    for (const auto& [key, value] : identity) {
      Result<std::optional<std::string>> stored = Meta(key);
      if (!stored.ok()) return stored.status();
      if (*stored != value) {
        return Status::Error(ErrorCode::kDevnetConfigMismatch, "the devnet file has " + key + " " +
                                                                   stored->value_or("(none)") +
                                                                   ", the configuration " + value);
      }
    }
    int64_t genesis_ms = 0;
    const std::string& text = **genesis;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), genesis_ms);
    if (error != std::errc() || end != text.data() + text.size()) {
      return Corrupt("genesis_ms is " + text);
    }
    return genesis_ms;
  }
  Status status = db_->Run("BEGIN IMMEDIATE");
  for (const auto& [key, value] : identity) {
    if (status.ok()) status = PutMeta(key, value);
  }
  if (status.ok()) status = PutMeta("genesis_ms", std::to_string(now_ms));
  if (status.ok()) status = db_->Run("COMMIT");
  if (!status.ok()) {
    (void)db_->Run("ROLLBACK");
    return StoreError(status);
  }
  return now_ms;
}

Status DevnetLog::Append(std::string_view kind, std::span<const uint8_t> data, int64_t time,
                         int64_t number) {
  Result<sqlite::Statement> insert =
      db_->Prepare("INSERT INTO devnet_events (kind, data, time, number) VALUES (?, ?, ?, ?)");
  if (!insert.ok()) return StoreError(insert.status());
  Status status =
      insert->Bind(1, kind).BindBlob(2, AsText(data)).Bind(3, time).Bind(4, number).Run();
  return status.ok() ? status : StoreError(status);
}

Status DevnetLog::Replay(const std::function<Status(const LogEvent&)>& apply) {
  Result<sqlite::Statement> select =
      db_->Prepare("SELECT kind, data, time, number FROM devnet_events ORDER BY seq");
  if (!select.ok()) return StoreError(select.status());
  Status status;
  while (select->Step(&status)) {
    const std::string data = select->Text(1);
    LogEvent event{select->Text(0), Bytes(data.begin(), data.end()), select->Int(2),
                   select->Int(3)};
    Status applied = apply(event);
    if (!applied.ok()) return applied;
  }
  return status.ok() ? status : StoreError(status);
}

namespace {

std::optional<Hash32> HashFrom(std::span<const uint8_t> bytes) {
  if (bytes.size() != 32) return std::nullopt;
  Hash32 hash;
  std::copy(bytes.begin(), bytes.end(), hash.begin());
  return hash;
}

Status ReplayMint(DevnetState& state, const Bytes& data) {
  if (data.size() != 20 + 32) return Corrupt("mint of " + std::to_string(data.size()) + " bytes");
  Address owner;
  std::copy_n(data.begin(), 20, owner.bytes.begin());
  const U256 amount = U256::FromBigEndian(std::span<const uint8_t>(data).subspan<20, 32>());
  return state.Mint(owner, amount);
}

Status ReplaySubmit(DevnetState& state, const LogEvent& event) {
  Result<DecodedTransaction> transaction = DecodeRawTransaction(event.data);
  if (!transaction.ok()) return Corrupt(transaction.status().message());
  const Hash32 hash = Keccak256(event.data);
  if (state.Knows(hash)) return Corrupt("transaction submitted twice: " + Hex(hash));
  state.AddPending(hash, std::move(*transaction), event.time);
  return Status::Ok();
}

Status ReplayBlock(DevnetState& state, const LogEvent& event) {
  if (event.number != static_cast<int64_t>(state.block_number() + 1) ||
      event.data.size() % 32 != 0) {
    return Corrupt("block " + std::to_string(event.number) + " out of sequence or malformed");
  }
  std::vector<Hash32> hashes;
  for (size_t at = 0; at < event.data.size(); at += 32) {
    hashes.push_back(*HashFrom(std::span<const uint8_t>(event.data).subspan(at, 32)));
  }
  return state.ApplyBlock(event.time, hashes);
}

Status ReplayEvent(DevnetState& state, const LogEvent& event) {
  if (event.kind == kMint) return ReplayMint(state, event.data);
  if (event.kind == kSubmit) return ReplaySubmit(state, event);
  if (event.kind == kBlock) return ReplayBlock(state, event);
  if (event.kind == kDrop) {
    std::optional<Hash32> hash = HashFrom(event.data);
    if (!hash || !state.RemovePending(*hash)) return Corrupt("drop of a transaction not pending");
    return Status::Ok();
  }
  return Corrupt("unknown event kind " + event.kind);
}

Status Unreachable(const Status& status) {
  return Status::Error(ErrorCode::kRpcUnreachable, "devnet: " + status.message());
}

}  // namespace

// ---- Devnet ------------------------------------------------------------------------------

Result<std::unique_ptr<Devnet>> Devnet::Open(DevnetConfig config, Clock& clock) {
  AGENTPAY_CHECK(config.mine_delay_ms >= 0);
  AGENTPAY_CHECK(config.max_pending_transactions > 0);
  int64_t genesis_ms = clock.NowMs();
  std::unique_ptr<DevnetLog> log;
  if (!config.persistence_path.empty()) {
    Result<std::unique_ptr<DevnetLog>> opened = DevnetLog::Open(config.persistence_path);
    if (!opened.ok()) return opened.status();
    Result<int64_t> genesis = (*opened)->Bind(config, genesis_ms);
    if (!genesis.ok()) return genesis.status();
    genesis_ms = *genesis;
    log = std::move(*opened);
  }
  auto state = std::make_unique<DevnetState>(config, genesis_ms);
  if (log) {
    Status replayed =
        log->Replay([&state](const LogEvent& event) { return ReplayEvent(*state, event); });
    if (!replayed.ok()) return replayed;
  }
  return std::unique_ptr<Devnet>(
      new Devnet(std::move(config), clock, std::move(state), std::move(log)));
}

Devnet::Devnet(DevnetConfig config, Clock& clock, std::unique_ptr<DevnetState> state,
               std::unique_ptr<DevnetLog> log)
    : config_(std::move(config)),
      clock_(clock),
      state_(std::move(state)),
      log_(std::move(log)),
      mine_delay_ms_(config_.mine_delay_ms) {}

Devnet::~Devnet() = default;

Status Devnet::Enter() {
  if (unavailable_) {
    return Status::Error(ErrorCode::kRpcUnreachable, "devnet: the node is down (SetUnavailable)");
  }
  Status mined = MineDue();
  return mined.ok() ? mined : Unreachable(mined);
}

Status Devnet::MineDue() {
  if (!automine_) return Status::Ok();
  const int64_t now_ms = clock_.NowMs();
  while (true) {
    const DevnetState::BlockPlan plan = state_->PlanBlock(now_ms, true);
    if (plan.transactions.empty()) break;
    const int64_t stamp_ms = std::max(plan.first_due_ms, automine_since_ms_);
    Status committed = CommitBlock(FloorDiv(stamp_ms, 1000), plan.transactions);
    if (!committed.ok()) return committed;
  }
  const int64_t interval_ms = config_.empty_block_interval_ms;
  if (interval_ms > 0 && now_ms - state_->block_timestamp_s() * 1000 >= interval_ms) {
    return CommitBlock(FloorDiv(now_ms, 1000), {});
  }
  return Status::Ok();
}

Status Devnet::CommitBlock(int64_t timestamp_s, const std::vector<Hash32>& transactions) {
  timestamp_s = std::max(timestamp_s, state_->block_timestamp_s());
  if (log_) {
    Bytes data;
    for (const Hash32& hash : transactions) data.insert(data.end(), hash.begin(), hash.end());
    Status logged =
        log_->Append(kBlock, data, timestamp_s, static_cast<int64_t>(state_->block_number() + 1));
    if (!logged.ok()) return logged;
  }
  Status applied = state_->ApplyBlock(timestamp_s, transactions);
  AGENTPAY_CHECK(applied.ok());  // the block was planned from this very state
  return applied;
}

Result<uint64_t> Devnet::ChainId() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return config_.chain_id;
}

Result<bool> Devnet::AuthorizationState(const Address& token, const Address& from,
                                        const Hash32& nonce) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  Result<Bytes> answer = CallLocked(token, EncodeAuthorizationState(from, nonce));
  if (!answer.ok()) return answer.status();
  return DecodeBool(*answer);
}

Result<U256> Devnet::BalanceOf(const Address& token, const Address& owner) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  Result<Bytes> answer = CallLocked(token, EncodeBalanceOf(owner));
  if (!answer.ok()) return answer.status();
  return DecodeUint256(*answer);
}

Result<Bytes> Devnet::Call(const Address& to, const Bytes& data) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return CallLocked(to, data);
}

Result<Bytes> Devnet::CallLocked(const Address& to, const Bytes& data) {
  if (to != config_.token) return Bytes();  // no code there
  const std::optional<Selector> selector = SelectorOf(data);
  const std::span<const uint8_t> args = std::span<const uint8_t>(data).subspan(selector ? 4 : 0);
  const Selectors& known = KnownSelectors();
  if (selector == known.authorization_state) {
    std::optional<Address> authorizer = AddressAt(args, 0);
    std::optional<Hash32> nonce =
        args.size() >= 2 * kWord ? HashFrom(args.subspan(kWord, kWord)) : std::nullopt;
    if (!authorizer || !nonce) return Reverted("");
    return WordBytes(U256(state_->AuthorizationUsed(*authorizer, *nonce) ? 1 : 0));
  }
  if (selector == known.balance_of) {
    std::optional<Address> owner = AddressAt(args, 0);
    if (!owner) return Reverted("");
    return WordBytes(state_->Balance(*owner));
  }
  if (selector == known.total_supply) return WordBytes(state_->total_supply());
  if (selector == known.name) return AbiString(config_.token_name);
  if (selector == known.version) return AbiString(config_.token_version);
  if (IsSettlementSelector(selector)) {
    const int64_t next_block_s =
        std::max(state_->block_timestamp_s(), FloorDiv(clock_.NowMs(), 1000));
    const Execution execution = state_->Simulate(data, next_block_s);
    if (execution.revert_reason) return Reverted(*execution.revert_reason);
    return Bytes();
  }
  return Reverted("");
}

Result<uint64_t> Devnet::EstimateGas(const Address& from, const Address& to, const Bytes& data) {
  (void)from;  // transferWithAuthorization does not depend on the caller
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (to != config_.token || !IsSettlementSelector(SelectorOf(data))) {
    return RpcError("unsupported call: the devnet estimates only transferWithAuthorization");
  }
  Result<Bytes> simulated = CallLocked(to, data);
  if (!simulated.ok()) return simulated.status();
  return kDevnetSettlementGas;
}

Result<FeeData> Devnet::Fees() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return FeeData{U256(kBaseFeePerGas), U256(kPriorityFeePerGas),
                 U256(2 * kBaseFeePerGas + kPriorityFeePerGas)};
}

Result<uint64_t> Devnet::PendingNonce(const Address& account) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->PendingNonce(account);
}

Result<Hash32> Devnet::SendRawTransaction(const Bytes& raw) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (raw.size() > kDevnetMaxRawTransactionBytes) return RpcError("oversized data");
  const Hash32 hash = Keccak256(raw);
  if (state_->Knows(hash)) {
    return Status::Error(ErrorCode::kTxAlreadyKnown, "already known: " + Hex(hash));
  }
  Result<DecodedTransaction> transaction = DecodeRawTransaction(raw);
  if (!transaction.ok()) return transaction.status();
  if (Status admissible = CheckAdmissible(*transaction, config_); !admissible.ok()) {
    return admissible;
  }
  if (Status nonce = state_->CheckNonce(*transaction); !nonce.ok()) return nonce;
  if (state_->pending_count() >= config_.max_pending_transactions) {
    return RpcError("txpool is full");
  }
  const int64_t due_ms = clock_.NowMs() + mine_delay_ms_;
  if (log_) {
    Status logged = log_->Append(kSubmit, raw, due_ms);
    if (!logged.ok()) {
      return Status::Error(ErrorCode::kRpcTimeout, "devnet: " + logged.message());
    }
  }
  state_->AddPending(hash, std::move(*transaction), due_ms);
  (void)MineDue();  // accepted either way; a failed write here is retried by the next call
  return hash;
}

Result<std::optional<Receipt>> Devnet::GetReceipt(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  if (mined == nullptr) return std::optional<Receipt>();
  return std::optional<Receipt>(mined->receipt);
}

Result<std::optional<TxInfo>> Devnet::GetTransaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (const MinedTransaction* mined = state_->FindMined(transaction_hash)) {
    return std::optional<TxInfo>(mined->info);
  }
  const PendingTransaction* pending = state_->FindPending(transaction_hash);
  if (pending == nullptr) return std::optional<TxInfo>();
  return std::optional<TxInfo>(
      TxInfo{transaction_hash, pending->transaction.nonce, pending->transaction.from, {}});
}

Result<uint64_t> Devnet::BlockNumber() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->block_number();
}

Result<int64_t> Devnet::LatestBlockTimestamp() {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->block_timestamp_s();
}

Status Devnet::Mint(const Address& owner, const U256& amount) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (!U256::CheckedAdd(state_->total_supply(), amount)) {
    return Status::Error(ErrorCode::kInvalidAmount, "the total supply would pass 2^256 - 1");
  }
  if (log_) {
    Bytes data(owner.bytes.begin(), owner.bytes.end());
    const Bytes amount_bytes = WordBytes(amount);
    data.insert(data.end(), amount_bytes.begin(), amount_bytes.end());
    if (Status logged = log_->Append(kMint, data, clock_.NowMs()); !logged.ok()) return logged;
  }
  return state_->Mint(owner, amount);
}

void Devnet::SetMineDelayMs(int64_t delay_ms) {
  AGENTPAY_CHECK(delay_ms >= 0);
  std::lock_guard lock(mutex_);
  mine_delay_ms_ = delay_ms;
}

Result<bool> Devnet::DropTransaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (state_->FindPending(transaction_hash) == nullptr) return false;
  if (log_) {
    if (Status logged = log_->Append(kDrop, transaction_hash, clock_.NowMs()); !logged.ok()) {
      return logged;
    }
  }
  return state_->RemovePending(transaction_hash);
}

Status Devnet::SetAutomine(bool enabled) {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  if (enabled && !automine_) automine_since_ms_ = clock_.NowMs();
  automine_ = enabled;
  return Status::Ok();
}

Result<uint64_t> Devnet::Mine() {
  std::lock_guard lock(mutex_);
  if (Status mined = MineDue(); !mined.ok()) return mined;
  const DevnetState::BlockPlan plan = state_->PlanBlock(INT64_MAX, false);
  Status committed = CommitBlock(FloorDiv(clock_.NowMs(), 1000), plan.transactions);
  if (!committed.ok()) return committed;
  return state_->block_number();
}

Devnet::Controls Devnet::CurrentControls() {
  std::lock_guard lock(mutex_);
  (void)MineDue();  // the pool as the next read would see it
  return Controls{automine_, mine_delay_ms_, state_->pending_count()};
}

void Devnet::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mutex_);
  unavailable_ = unavailable;
}

std::optional<std::string> Devnet::RevertReason(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  (void)MineDue();  // report what is known even if a block could not be recorded
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  return mined == nullptr ? std::nullopt : mined->revert_reason;
}

// ---- Reads for the JSON-RPC endpoint -----------------------------------------------------

namespace {

DevnetTransaction TransactionView(const Hash32& hash, const DecodedTransaction& transaction) {
  DevnetTransaction view;
  view.hash = hash;
  view.from = transaction.from;
  view.to = transaction.to;
  view.chain_id = transaction.chain_id;
  view.nonce = transaction.nonce;
  view.gas_limit = transaction.gas_limit;
  view.max_priority_fee_per_gas = transaction.max_priority_fee_per_gas;
  view.max_fee_per_gas = transaction.max_fee_per_gas;
  view.value = transaction.value;
  view.data = transaction.data;
  view.y_parity = transaction.y_parity;
  view.r = transaction.r;
  view.s = transaction.s;
  return view;
}

DevnetTransaction MinedView(const MinedTransaction& mined) {
  DevnetTransaction view = TransactionView(mined.info.hash, mined.transaction);
  view.block_number = mined.receipt.block_number;
  view.block_hash = mined.receipt.block_hash;
  view.index = mined.index;
  return view;
}

// geth's rule: a filter with more topic positions than the log has topics never matches it.
bool LogMatches(const LogEntry& log, const DevnetLogFilter& filter) {
  if (!filter.addresses.empty() && std::find(filter.addresses.begin(), filter.addresses.end(),
                                             log.address) == filter.addresses.end()) {
    return false;
  }
  if (filter.topics.size() > log.topics.size()) return false;
  for (size_t position = 0; position < filter.topics.size(); ++position) {
    const std::vector<Hash32>& wanted = filter.topics[position];
    if (!wanted.empty() &&
        std::find(wanted.begin(), wanted.end(), log.topics[position]) == wanted.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::optional<DevnetBlock>> Devnet::Block(std::optional<uint64_t> number) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const uint64_t wanted = number.value_or(state_->block_number());
  if (wanted > state_->block_number()) return std::optional<DevnetBlock>();
  const BlockRecord& record = state_->BlockAt(wanted);
  DevnetBlock block;
  block.number = wanted;
  block.hash = record.hash;
  block.parent_hash = record.parent_hash;
  block.timestamp_s = record.timestamp_s;
  block.transactions = record.transactions;
  for (const Hash32& hash : record.transactions) {
    const MinedTransaction* mined = state_->FindMined(hash);
    AGENTPAY_CHECK(mined != nullptr);  // a block's transactions stay mined
    block.gas_used += mined->receipt.gas_used;
    block.logs.insert(block.logs.end(), mined->receipt.logs.begin(), mined->receipt.logs.end());
  }
  return std::optional<DevnetBlock>(std::move(block));
}

Result<std::optional<DevnetTransaction>> Devnet::Transaction(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (const MinedTransaction* mined = state_->FindMined(transaction_hash)) {
    return std::optional<DevnetTransaction>(MinedView(*mined));
  }
  if (const PendingTransaction* pending = state_->FindPending(transaction_hash)) {
    return std::optional<DevnetTransaction>(
        TransactionView(transaction_hash, pending->transaction));
  }
  return std::optional<DevnetTransaction>();
}

Result<std::optional<DevnetReceipt>> Devnet::ReceiptWithContext(const Hash32& transaction_hash) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  const MinedTransaction* mined = state_->FindMined(transaction_hash);
  if (mined == nullptr) return std::optional<DevnetReceipt>();
  DevnetReceipt answer;
  answer.receipt = mined->receipt;
  answer.transaction = MinedView(*mined);
  const BlockRecord& block = state_->BlockAt(mined->receipt.block_number);
  for (uint64_t index = 0; index <= mined->index; ++index) {
    const MinedTransaction* earlier = state_->FindMined(block.transactions.at(index));
    AGENTPAY_CHECK(earlier != nullptr);
    answer.cumulative_gas_used += earlier->receipt.gas_used;
    if (index < mined->index) answer.first_log_index += earlier->receipt.logs.size();
  }
  return std::optional<DevnetReceipt>(std::move(answer));
}

Result<uint64_t> Devnet::TransactionCount(const Address& account) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  return state_->AccountNonce(account);
}

Result<std::vector<DevnetPlacedLog>> Devnet::Logs(const DevnetLogFilter& filter) {
  std::lock_guard lock(mutex_);
  if (Status entered = Enter(); !entered.ok()) return entered;
  if (filter.from_block > filter.to_block) {
    return Status::Error(ErrorCode::kInvalidBlockRange,
                         "fromBlock " + std::to_string(filter.from_block) + " is after toBlock " +
                             std::to_string(filter.to_block));
  }
  std::vector<DevnetPlacedLog> found;
  const uint64_t latest = state_->block_number();
  if (filter.from_block > latest) return found;
  const uint64_t to_block = std::min(filter.to_block, latest);
  if (to_block - filter.from_block >= kDevnetMaxLogBlockRange) {
    return Status::Error(ErrorCode::kBlockRangeTooLarge,
                         "the range spans " + std::to_string(to_block - filter.from_block + 1) +
                             " blocks; at most " + std::to_string(kDevnetMaxLogBlockRange) +
                             " per call");
  }
  for (uint64_t number = filter.from_block; number <= to_block; ++number) {
    const BlockRecord& block = state_->BlockAt(number);
    uint64_t log_index = 0;
    for (uint64_t index = 0; index < block.transactions.size(); ++index) {
      const MinedTransaction* mined = state_->FindMined(block.transactions[index]);
      AGENTPAY_CHECK(mined != nullptr);
      for (const LogEntry& log : mined->receipt.logs) {
        if (LogMatches(log, filter)) {
          if (found.size() == kDevnetMaxLogResults) {
            return Status::Error(ErrorCode::kTooManyResults,
                                 "more than " + std::to_string(kDevnetMaxLogResults) +
                                     " logs match; narrow the block range or the filter");
          }
          found.push_back({log, number, block.hash, mined->info.hash, index, log_index});
        }
        ++log_index;
      }
    }
  }
  return found;
}

}  // namespace agentpay::chain
