// A thin RAII layer over one libpq connection for the PostgreSQL store: statements prepared once
// per connection and run with text parameters, typed access to result rows, and every failure as a
// Status whose code says whether the server is unreachable (store_unavailable) or the statement
// itself failed (store_error, store_constraint).
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <functional>
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

  // Runs `sql` (one statement) prepared once per connection, with `params`, and waits for its rows.
  // In pipeline mode everything deferred before it goes to the server in the same round trip, and
  // the first failure among those is returned instead of the rows.
  Result<Rows> Query(std::string_view sql, Params params = {});
  // A statement whose rows nobody reads. Outside pipeline mode it runs at once and its outcome is
  // returned. In pipeline mode it is only queued, and Ok returned: it goes with the next Query or
  // Sync, whose status is then its failure, or, when it changed a number of rows other than
  // `expect_changed`, store_not_found with `not_found` as the message.
  //
  // In pipeline mode a failed `expect_changed` is raised by the server itself (the statement is
  // wrapped to fail when the count differs), so that it aborts what follows it as any failure does:
  // HoldOver relies on that.
  Status Defer(std::string_view sql, Params params = {},
               std::optional<int64_t> expect_changed = std::nullopt, std::string not_found = "");
  // Sends what is deferred and waits for it: the first failure among it, or Ok.
  Status Sync();
  // Pipeline mode, for a caller that runs units of work one after another inside one transaction
  // (the store's writer: decisions, each in its own savepoint). Ends the current unit (everything
  // queued since the last round trip) with `end`, deferred, and without waiting: the unit goes to
  // the server with the next round trip, the next unit's first Query or a Sync. If one of its
  // statements fails there, the server has skipped everything after it: `undo` is run, what was
  // queued after the unit is sent again, and `on_failure` is called with the unit's failure
  // before that round trip returns, whose caller sees only the fate of its own statements. One
  // unit is held over at a time: a second confirms the first with a round trip first, and that
  // round trip's failure, one of the current unit's own, is returned.
  Status HoldOver(std::string_view end, std::vector<std::string> undo,
                  std::function<void(const Status&)> on_failure);
  // A unit is held over and not yet confirmed.
  bool holding_over() const { return held_ > 0; }
  // Runs SQL text without parameters (several statements allowed, as BEGIN; SELECT …). Not in
  // pipeline mode.
  Status Run(const std::string& sql);
  // From now on statements are pipelined (Defer): for a connection that runs many short
  // statements one after another, such as the store's writer.
  Status EnterPipelineMode();
  // False once the connection to the server is lost: it is closed and a new one must be opened.
  bool healthy() const { return PQstatus(conn_) == CONNECTION_OK; }
  // healthy(), and for an idle connection also nothing the server sent unasked: a server that
  // shuts down or restarts says so, or closes the socket, and the connection is then dead
  // although nothing was tried on it yet. Costs a poll(2), no round trip.
  bool LooksAlive();
  // The transaction state (PQTRANS_IDLE, PQTRANS_INTRANS, PQTRANS_INERROR, …).
  PGTransactionStatusType transaction_status() const { return PQtransactionStatus(conn_); }

 private:
  struct Queued {
    enum class Kind { kPrepare, kDeferred, kQuery } kind;
    std::string sql;  // kPrepare: the statement whose name is kept once this succeeds
    std::string name;
    std::optional<int64_t> expect_changed;
    std::string not_found;
    Params params;  // kDeferred, kQuery: sent again when a held-over unit before it failed
  };
  explicit Connection(PGconn* conn) : conn_(conn) {}
  // The Status of a failed result (null: the connection failed before a result).
  Status Failure(const PGresult* result, std::string_view context) const;
  // The name `sql` is prepared under, preparing it first if needed (in pipeline mode the Parse is
  // queued; the name is kept only once the server has taken it).
  Result<std::string> PreparedName(std::string_view sql);
  Status SendPrepared(const std::string& name, const Params& params);
  // The unit held over failed (see HoldOver): runs its undo, sends what followed it again.
  Status ResendAfterHeldOverFailure(std::vector<Queued> after);
  // Pipeline mode: sends a Sync and reads every queued result; returns the rows of the last one
  // when it is a query that wants them.
  Result<std::optional<Rows>> Collect();
  // Polls for the first answer of a sent pipeline for a short while before libpq sleeps for it,
  // unless recent answers were too slow for that to pay.
  void AwaitAnswer();
  PGconn* conn_;
  bool pipeline_ = false;
  std::vector<Queued> queued_;  // pipeline mode: sent, results not yet read, in order
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };
  std::unordered_map<std::string, std::string, SqlHash, std::equal_to<>> prepared_;  // sql → name
  uint64_t next_statement_ = 0;
  int sleeps_before_spin_ = 0;  // AwaitAnswer: round trips left that do not poll first
  // HoldOver: how many of queued_ (its first) are the unit held over, its undo and its callback.
  size_t held_ = 0;
  std::vector<std::string> held_undo_;
  std::function<void(const Status&)> held_on_failure_;
};

}  // namespace agentpay::pg
