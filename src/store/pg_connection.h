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
#include <utility>
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
  // Array parameters (text[], bigint[] in the SQL), for one statement over many rows (unnest).
  Params& AddArray(const std::vector<std::string>& values);
  Params& AddArray(const std::vector<int64_t>& values);
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
  // What a deferred write must change: exactly `rows` rows, or the statement fails with
  // `otherwise`.
  struct Expect {
    int64_t rows;
    Status otherwise;
  };
  // A statement whose rows nobody reads. Outside pipeline mode it runs at once and its outcome is
  // returned. In pipeline mode it is only queued, and Ok returned: it goes with the next Query or
  // Sync, whose status is then its failure, or, when it changed another number of rows than
  // `expect` says, expect->otherwise.
  //
  // In pipeline mode a failed `expect` is raised by the server itself (the statement is wrapped to
  // fail when the count differs), so that it aborts what follows it as any failure does: HoldOver
  // relies on that.
  Status Defer(std::string_view sql, Params params = {}, std::optional<Expect> expect = {});
  // Sends what is deferred and waits for it: the first failure among it, or Ok.
  Status Sync();
  // Pipeline mode, for a caller that runs units of work one after another inside one transaction
  // (the store's writer: decisions, each in its own savepoint). Ends the current unit (everything
  // queued since the unit before it) with `end`, deferred, and without waiting: the unit is held
  // over, and goes to the server with the next round trip (a later unit's first Query, or a
  // Sync). Up to kMaxHeldUnits units are held over at once; the caller confirms them (Sync) before
  // holding over one more.
  //
  // When a held-over unit fails there, the server has skipped everything after it: the connection
  // calls its `on_failure` with its failure, undoes it (`undo`, a round trip of its own), sends
  // again everything that followed it (the later held-over units stay held over), and goes on
  // with the round trip, whose caller sees only the fate of its own statements. A held-over unit
  // must therefore be valid whether or not any unit before it is undone (the store's writer sees
  // to that for the money it moves: BalanceCache).
  static constexpr size_t kMaxHeldUnits = 64;
  Status HoldOver(std::string_view end, std::vector<std::string> undo,
                  std::function<void(const Status&)> on_failure);
  // Pipeline mode: the statements deferred from now until the end of the next round trip (Sync or
  // Query) are the tail of the transaction, written from what the held-over units left (the
  // store's writer: the balances, then COMMIT). Should a held-over unit fail in that round trip,
  // the tail is dropped instead of sent again, and tail_dropped() says so until the next round
  // trip: the caller writes it again from what is left. No unit is held over within a tail.
  void StartTail();
  bool tail_dropped() const { return tail_dropped_; }
  // Pipeline mode, ending a tail: `commit` deferred and, behind it in the same round trip, the
  // start of the next transaction (`start` deferred, then `query`), for a writer that has more
  // work waiting and need not spend a round trip on beginning it. The statements after the commit
  // cannot undo it: `committed` is Ok when the server answered `commit` itself with success and
  // the connection still stands (lost after that answer, the held-over units were told they
  // failed: a failure then, as Sync would have said), and whatever became of the start shows
  // only in `next` (present when committed and the tail was not dropped).
  struct CommitAndStart {
    Status committed;
    std::optional<Result<Rows>> next;
  };
  CommitAndStart CommitThenStart(std::string_view commit, const std::vector<std::string>& start,
                                 std::string_view query, Params params = {});
  // Units are held over and not yet confirmed.
  bool holding_over() const { return !held_.empty(); }
  size_t held_units() const { return held_.size(); }
  // Statements were sent whose answers were not read yet.
  bool pending() const { return !queued_.empty(); }
  // The round trips (waits for the server's answers) since the last call: for /metrics.
  uint64_t TakeRoundTrips() { return std::exchange(round_trips_, 0); }
  // Pipeline mode, for a read-only connection whose session defaults are the transaction it wants
  // (the store's readers: repeatable read, read only): from now on a round trip asks the server
  // to flush its answers (PQsendFlushRequest) instead of ending the pipeline with a Sync, so every
  // statement until EndImplicitTransaction() runs in one implicit transaction and one snapshot,
  // without a BEGIN or a COMMIT of its own. No unit is held over on such a connection.
  void UseImplicitTransactions();
  // Ends the implicit transaction the statements since the last end opened (a Sync) without
  // waiting for it: the reads were answered already, and a read-only transaction's end changes
  // nothing for them. Its answer is read, and dropped, before the next round trip's, or by
  // LooksAlive. Only a lost connection shows in what follows.
  Status EndImplicitTransaction();
  // Statements ran since the last EndImplicitTransaction (a transaction is open).
  bool in_implicit_transaction() const { return implicit_ && (open_ || !queued_.empty()); }
  // EndImplicitTransaction sent a Sync whose answer was not read yet (and nothing since).
  bool ending() const { return sync_unawaited_ && queued_.empty() && !open_; }
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
    std::optional<Expect> expect;
    Params params;  // kDeferred, kQuery: sent again when a held-over unit before it failed
    bool tail = false;  // deferred after StartTail: dropped, not sent again, after such a failure
    bool watched = false;  // CommitThenStart's commit: its own answer is kept in watched_ok_
  };
  // A unit held over (HoldOver): where it ends in queued_ (one past its `end` statement), its
  // undo and its callback.
  struct HeldUnit {
    size_t end;
    std::vector<std::string> undo;
    std::function<void(const Status&)> on_failure;
  };
  explicit Connection(PGconn* conn) : conn_(conn) {}
  // The Status of a failed result (null: the connection failed before a result).
  Status Failure(const PGresult* result, std::string_view context) const;
  // The name `sql` is prepared under, preparing it first if needed (in pipeline mode the Parse is
  // queued; the name is kept only once the server has taken it).
  Result<std::string> PreparedName(std::string_view sql);
  Status SendPrepared(const std::string& name, const Params& params);
  // Pipeline mode: sends prepared statement `name` as a query whose rows the next round trip
  // returns (Query, CommitThenStart).
  Status SendQuery(const std::string& name, Params params);
  // Held-over unit `failed` of `held` failed (see HoldOver), and the server skipped `after`, all
  // that was queued after it: undoes it, and sends `after` again with the units after it still
  // held over.
  Status ResendAfterHeldOverFailure(std::vector<HeldUnit> held, size_t failed,
                                    std::vector<Queued> after);
  // Pipeline mode: sends a Sync (a flush request in an implicit transaction) and reads every
  // queued result; returns the rows of the last one when it is a query that wants them.
  Result<std::optional<Rows>> Collect();
  // Reads, and drops, the answers EndImplicitTransaction left (a prepared name still kept).
  void DrainUnawaited();
  // The next statement's result (null if none came: a lost connection), read on past the null
  // that ends it. The caller owns it.
  PGresult* NextResult();
  // Reads, and drops, everything up to and including the next Sync's own result.
  void SkipToSync();
  // Collect for Query and Sync: a round trip of the caller's (see StartTail).
  Result<std::optional<Rows>> RoundTrip();
  // Polls for the first answer of a sent pipeline for a short while before libpq sleeps for it,
  // unless recent answers were too slow for that to pay.
  void AwaitAnswer();
  PGconn* conn_;
  bool pipeline_ = false;
  std::vector<Queued> queued_;  // pipeline mode: sent, results not yet read, in order
  bool implicit_ = false;       // UseImplicitTransactions
  bool open_ = false;           // implicit_: statements answered since the last Sync
  bool sync_unawaited_ = false;    // EndImplicitTransaction's Sync, its answer not yet read
  std::vector<Queued> unawaited_;  // sent before that Sync, their answers not yet read
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };
  std::unordered_map<std::string, std::string, SqlHash, std::equal_to<>> prepared_;  // sql → name
  uint64_t next_statement_ = 0;
  int sleeps_before_spin_ = 0;  // AwaitAnswer: round trips left that do not poll first
  std::vector<HeldUnit> held_;  // oldest first; their statements are the first of queued_
  bool tail_ = false;           // StartTail until the round trip ends
  uint64_t round_trips_ = 0;    // TakeRoundTrips
  bool tail_dropped_ = false;
  // Collect: the server answered the watched statement with success (CommitThenStart, which must
  // tell a failed commit from a failed start after it).
  bool watched_ok_ = false;
};

}  // namespace agentpay::pg
