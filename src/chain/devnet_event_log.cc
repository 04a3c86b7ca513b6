// DevnetLog over the generic SQLite wrapper (its schema, the file's chain identity and genesis
// time, appends, replay), and how each kind of event replays through DevnetState.
#include "chain/devnet_event_log.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>
#include <vector>

#include "chain/devnet_decode.h"
#include "chain/devnet_state.h"
#include "chain/keccak.h"
#include "sqlite/sqlite_db.h"

namespace agentpay::chain {
namespace {

std::string_view AsText(std::span<const uint8_t> bytes) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Status StoreError(const Status& status) { return Status::Error(ErrorCode::kDevnetStore, status.message()); }

}  // namespace

DevnetLog::DevnetLog(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}

DevnetLog::~DevnetLog() = default;

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

}  // namespace

Status ReplayEvent(DevnetState& state, const LogEvent& event) {
  if (event.kind == kMint) return ReplayMint(state, event.data);
  if (event.kind == kSubmit) return ReplaySubmit(state, event);
  if (event.kind == kBlock) return ReplayBlock(state, event);
  if (event.kind == kReorg) {
    if (event.number <= 0 || static_cast<uint64_t>(event.number) > state.block_number()) {
      return Corrupt("reorganisation deeper than the chain");
    }
    state.Rollback(static_cast<uint64_t>(event.number), event.time);
    return Status::Ok();
  }
  if (event.kind == kDrop) {
    std::optional<Hash32> hash = HashFrom(event.data);
    if (!hash || !state.RemovePending(*hash)) return Corrupt("drop of a transaction not pending");
    return Status::Ok();
  }
  return Corrupt("unknown event kind " + event.kind);
}

}  // namespace agentpay::chain
