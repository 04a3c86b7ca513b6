// A thin RAII layer over one libpq connection for the PostgreSQL store: statements prepared once
// per connection and run with text parameters, typed access to result rows, and every failure as a
// Status whose code says whether the server is unreachable (store_unavailable) or the statement
// itself failed (store_error, store_constraint).
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace agentpay::pg {

// The parameters of one statement, in order ($1, $2, …), all sent as text except byte strings.
class Params {
 public:
  Params& Add(int64_t value);
  Params& Add(std::string_view value);
  Params& Add(const std::optional<int64_t>& value);
  Params& AddBytes(std::string_view value);  // a bytea parameter, sent in binary
  Params& AddNull();

 private:
  friend class Connection;
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<bool> binary_;
};

// The rows a statement returned (text format), or how many it changed.
class Rows {
 public:
  explicit Rows(PGresult* result) : result_(result, &PQclear) {}
  int size() const { return PQntuples(result_.get()); }
  bool empty() const { return size() == 0; }
  // Rows an INSERT, UPDATE or DELETE changed.
  int64_t changed() const;
  bool IsNull(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
  int64_t Int(int row, int column) const;
  std::optional<int64_t> OptionalInt(int row, int column) const;
  std::string Text(int row, int column) const;
  std::string Bytes(int row, int column) const;  // a bytea column, decoded

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> result_;
};

class Connection {
 public:
  // Connects to `url` (a libpq connection URI, postgresql://…). Fails with store_unavailable
  // when the server cannot be reached within connect_timeout_s, store_error on a refused login.
  static Result<std::unique_ptr<Connection>> Open(const std::string& url, int connect_timeout_s);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` (one statement) prepared once per connection, with `params`.
  Result<Rows> Query(std::string_view sql, const Params& params = {});
  // Runs SQL text without parameters (may hold several statements, as BEGIN; SELECT …).
  Status Run(const std::string& sql);
  // False once the connection to the server is lost: it is closed and a new one must be opened.
  bool healthy() const { return PQstatus(conn_) == CONNECTION_OK; }
  // The transaction state (PQTRANS_IDLE, PQTRANS_INTRANS, PQTRANS_INERROR, …).
  PGTransactionStatusType transaction_status() const { return PQtransactionStatus(conn_); }

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  // The Status of a failed result (null: the connection failed before a result).
  Status Failure(const PGresult* result, std::string_view context) const;
  PGconn* conn_;
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };
  std::unordered_map<std::string, std::string, SqlHash, std::equal_to<>> prepared_;  // sql → name
};

}  // namespace agentpay::pg
