// A thin RAII layer over one SQLite connection: cached prepared statements, typed binding and
// column access, and errors as Status values. Used by src/store, and by the devnet (src/chain) and
// the agent client's budget file (src/client), which keep SQLite files of their own.
// A leaf library (agentpay_sqlite): it includes nothing from src/ but core/result.h, so that the
// chain and the client can keep SQLite files without depending on the store. Its error codes keep
// the names they had when it lived in src/store (store_error, store_constraint, store_unavailable):
// the devnet, the budget file and their tests report them as they are.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/result.h"

namespace agentpay::sqlite {

class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  Statement(Statement&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Statement(const Statement&) = delete;
  ~Statement();  // resets the cached statement so it can be reused

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindBlob(int index, std::string_view value);
  Statement& BindNull(int index);
  Statement& Bind(int index, const std::optional<int64_t>& value);

  // Advances: true while a row is available, false when done; errors via *status.
  bool Step(Status* status);
  // Runs a statement that returns no rows.
  Status Run();

  int64_t Int(int column) const;
  std::optional<int64_t> OptionalInt(int column) const;
  std::string Text(int column) const;
  std::string Bytes(int column) const { return Text(column); }  // a BLOB column
  bool IsNull(int column) const;

 private:
  sqlite3_stmt* stmt_;
};

class Database {
 public:
  // `vfs`: the name of a registered SQLite VFS, or null for the default one.
  static Result<std::unique_ptr<Database>> Open(const std::string& path, bool read_only,
                                                const char* vfs = nullptr);
  // A database on a disk that is not the machine's (the simulator's VFS): nothing is created or
  // narrowed on the real file system.
  static Result<std::unique_ptr<Database>> OpenOnSimulatedDisk(const std::string& path,
                                                               const char* vfs);
  ~Database();

  Status Exec(const std::string& sql);
  // Puts the file in WAL mode (a no-op when it is already), waiting for another connection that
  // is converting it at the same moment instead of failing with "database is locked" (see the
  // comment at the definition). Call it outside any transaction.
  Status EnterWalMode();
  // Runs one cached statement (BEGIN, COMMIT, SAVEPOINT…): parsed once per connection.
  Status Run(std::string_view sql);
  // A prepared statement from this connection's cache (looked up without copying `sql`).
  Result<Statement> Prepare(std::string_view sql);
  int64_t Changes() const;
  sqlite3* handle() const { return db_; }
  Status LastError(std::string_view context) const;

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  static Result<std::unique_ptr<Database>> OpenWith(const std::string& path, int flags,
                                                    const char* vfs);
  sqlite3* db_;
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };
  std::unordered_map<std::string, sqlite3_stmt*, SqlHash, std::equal_to<>> cache_;
};

}  // namespace agentpay::sqlite
