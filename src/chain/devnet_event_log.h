// Internal to the devnet (its interface is devnet.h): DevnetLog, the append-only SQLite event log
// of a persisted devnet (mints, submissions, drops, blocks, reorganisations), and the replay of its
// events through DevnetState that rebuilds the chain when the file is opened again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "chain/bytes.h"
#include "chain/devnet.h"
#include "core/result.h"

namespace agentpay::sqlite {
class Database;
}  // namespace agentpay::sqlite

namespace agentpay::chain {

constexpr std::string_view kMint = "mint";      // data: address ‖ amount (32 bytes)
constexpr std::string_view kSubmit = "submit";  // data: raw transaction; time: due
constexpr std::string_view kDrop = "drop";      // data: transaction hash
constexpr std::string_view kBlock = "block";    // data: transaction hashes; time: timestamp (s)
constexpr std::string_view kReorg = "reorg";    // number: blocks removed; time: due again (ms)

struct LogEvent {
  std::string kind;
  Bytes data;
  int64_t time = 0;
  int64_t number = 0;  // block number for kBlock
};

class DevnetLog {
 public:
  static Result<std::unique_ptr<DevnetLog>> Open(const std::string& path);
  ~DevnetLog();
  // The genesis time of the chain in the file; a new file records config and now_ms.
  Result<int64_t> Bind(const DevnetConfig& config, int64_t now_ms);
  Status Append(std::string_view kind, std::span<const uint8_t> data, int64_t time,
                int64_t number = 0);
  Status Replay(const std::function<Status(const LogEvent&)>& apply);

 private:
  explicit DevnetLog(std::unique_ptr<sqlite::Database> db);
  Result<std::optional<std::string>> Meta(const std::string& key);
  Status PutMeta(const std::string& key, const std::string& value);

  std::unique_ptr<sqlite::Database> db_;
};

// Applies one event of the log to `state`. Errors: "devnet_store" (the log does not replay).
Status ReplayEvent(DevnetState& state, const LogEvent& event);

}  // namespace agentpay::chain
