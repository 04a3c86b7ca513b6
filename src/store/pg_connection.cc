// libpq, as the PostgreSQL store uses it (see pg_connection.h).
#include "store/pg_connection.h"

#include <poll.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "core/check.h"

namespace agentpay::pg {
namespace {

// SQLSTATE classes that mean the server went away or refuses work for now, not that the statement
// was wrong: 08 connection exception, 53 insufficient resources, 57 operator intervention (a
// shutdown, a cancelled statement), 58 system error; and 40 (a serialization failure, a deadlock).
bool Unavailable(std::string_view sqlstate) {
  std::string_view cls = sqlstate.substr(0, 2);
  return cls == "08" || cls == "53" || cls == "57" || cls == "58" || cls == "40";
}

// How long a connection waiting for an answer polls its socket before it sleeps in poll(2). A
// round trip to a server on the same machine or network takes tens of microseconds; a thread that
// sleeps for it must then be woken, which on a virtual machine with idle CPUs costs as much again
// (bench/README.md, postgres_vs_sqlite). Bounded: a slow answer costs at most this much CPU.
constexpr auto kAnswerSpin = std::chrono::microseconds(150);
// After an answer that took longer than kAnswerSpin, this many round trips sleep at once: against
// a server whose answers take longer (across a network, or busy), polling would only burn CPU, and
// a spin now and then finds out whether answers are quick again.
constexpr int kSleepsAfterSlowAnswer = 7;
// The SQLSTATE agentpay_expect_changed (schema.cc, migration 11) fails a statement with when it
// changed another number of rows than expected.
constexpr std::string_view kExpectChangedState = "AP001";

std::string Trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

Params& Params::Add(int64_t value) {
  values_.push_back(std::to_string(value));
  null_.push_back(false);
  binary_.push_back(false);
  return *this;
}

Params& Params::Add(std::string_view value) {
  values_.emplace_back(value);
  null_.push_back(false);
  binary_.push_back(false);
  return *this;
}

Params& Params::Add(const std::optional<int64_t>& value) { return value ? Add(*value) : AddNull(); }

Params& Params::AddBytes(std::string_view value) {
  values_.emplace_back(value);
  null_.push_back(false);
  binary_.push_back(true);
  return *this;
}

Params& Params::AddArray(const std::vector<std::string>& values) {
  // An array literal: every element quoted, its quotes and backslashes escaped.
  std::string literal = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) literal += ',';
    literal += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  literal += '}';
  return Add(literal);
}

Params& Params::AddArray(const std::vector<int64_t>& values) {
  std::string literal = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) literal += ',';
    literal += std::to_string(values[i]);
  }
  literal += '}';
  return Add(literal);
}

Params& Params::AddNull() {
  values_.emplace_back();
  null_.push_back(true);
  binary_.push_back(false);
  return *this;
}

int64_t Rows::changed() const {
  const char* tuples = PQcmdTuples(result_.get());
  int64_t count = 0;
  std::from_chars(tuples, tuples + std::char_traits<char>::length(tuples), count);
  return count;
}

int64_t Rows::Int(int row, int column) const {
  const char* text = PQgetvalue(result_.get(), row, column);
  int64_t value = 0;
  std::from_chars(text, text + PQgetlength(result_.get(), row, column), value);
  return value;
}

std::optional<int64_t> Rows::OptionalInt(int row, int column) const {
  if (IsNull(row, column)) return std::nullopt;
  return Int(row, column);
}

std::string Rows::Text(int row, int column) const {
  return std::string(PQgetvalue(result_.get(), row, column),
                     static_cast<size_t>(PQgetlength(result_.get(), row, column)));
}

std::string Rows::Bytes(int row, int column) const {
  size_t length = 0;
  unsigned char* bytes = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(result_.get(), row, column)), &length);
  if (bytes == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(bytes), length);
  PQfreemem(bytes);
  return out;
}

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& url,
                                                     int connect_timeout_s) {
  const std::string timeout = std::to_string(connect_timeout_s);
  // libpq processes the keywords in order, a later value replacing an earlier one; "dbname" (the
  // URL, expanded) comes last, so whatever the URL sets wins over these defaults.
  const char* keywords[] = {"connect_timeout",  "keepalives", "keepalives_idle",
                            "application_name", "dbname",     nullptr};
  const char* values[] = {timeout.c_str(), "1", "10", "agentpay", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    return Status::Error(ErrorCode::kStoreUnavailable, "out of memory connecting to PostgreSQL");
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return Status::Error(ErrorCode::kStoreUnavailable, "cannot connect to PostgreSQL: " + message);
  }
  return std::unique_ptr<Connection>(new Connection(conn));
}

Connection::~Connection() { PQfinish(conn_); }

Status Connection::Failure(const PGresult* result, std::string_view context) const {
  std::string message = Trimmed(result ? PQresultErrorMessage(result) : PQerrorMessage(conn_));
  if (message.empty()) message = Trimmed(PQerrorMessage(conn_));
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string_view sqlstate = state ? state : "";
  std::string text = std::string(context) + ": " + message;
  if (!healthy() || sqlstate.empty() || Unavailable(sqlstate)) {
    return Status::Error(ErrorCode::kStoreUnavailable, text);
  }
  if (sqlstate.substr(0, 2) == "23") return Status::Error(ErrorCode::kStoreConstraint, text);
  return Status::Error(ErrorCode::kStoreError, text);
}

Result<std::string> Connection::PreparedName(std::string_view sql) {
  if (auto found = prepared_.find(sql); found != prepared_.end()) return found->second;
  std::string name = "s" + std::to_string(next_statement_++);
  if (pipeline_) {
    // Queued like any statement; kept by name once its result says the server has it (a Parse
    // behind a failed statement of the same pipeline is skipped, and must be sent again).
    if (PQsendPrepare(conn_, name.c_str(), std::string(sql).c_str(), 0, nullptr) != 1) {
      return Failure(nullptr, "PostgreSQL");
    }
    queued_.push_back({Queued::Kind::kPrepare, std::string(sql), name, std::nullopt, {}, tail_});
    return name;
  }
  PGresult* prepared = PQprepare(conn_, name.c_str(), std::string(sql).c_str(), 0, nullptr);
  if (prepared == nullptr || PQresultStatus(prepared) != PGRES_COMMAND_OK) {
    Status failure = Failure(prepared, "PostgreSQL");
    if (prepared) PQclear(prepared);
    return failure;
  }
  PQclear(prepared);
  prepared_.emplace(std::string(sql), name);
  return name;
}

Status Connection::SendPrepared(const std::string& name, const Params& params) {
  const size_t count = params.values_.size();
  std::vector<const char*> values(count);
  std::vector<int> lengths(count);
  std::vector<int> formats(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = params.null_[i] ? nullptr : params.values_[i].data();
    lengths[i] = static_cast<int>(params.values_[i].size());
    formats[i] = params.binary_[i] ? 1 : 0;
  }
  if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(count), values.data(),
                          lengths.data(), formats.data(), /*resultFormat=*/0) != 1) {
    return Failure(nullptr, "PostgreSQL");
  }
  return Status::Ok();
}

Result<Rows> Connection::Query(std::string_view sql, Params params) {
  auto name = PreparedName(sql);
  if (!name.ok()) return name.status();
  if (!pipeline_) {
    if (Status sent = SendPrepared(*name, params); !sent.ok()) return sent;
    ++round_trips_;
    PGresult* result = NextResult();
    const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      Status failure = Failure(result, "PostgreSQL");
      if (result) PQclear(result);
      return failure;
    }
    return Rows(result);
  }
  if (Status sent = SendQuery(*name, std::move(params)); !sent.ok()) return sent;
  auto rows = RoundTrip();
  if (!rows.ok()) return rows.status();
  AGENTPAY_CHECK(rows->has_value());
  return std::move(**rows);
}

Status Connection::SendQuery(const std::string& name, Params params) {
  if (Status sent = SendPrepared(name, params); !sent.ok()) return sent;
  queued_.push_back({Queued::Kind::kQuery, "", name, std::nullopt, std::move(params), tail_});
  return Status::Ok();
}

Status Connection::Defer(std::string_view sql, Params params, std::optional<Expect> expect) {
  if (!pipeline_) {
    auto rows = Query(sql, std::move(params));
    if (!rows.ok()) return rows.status();
    if (expect && rows->changed() != expect->rows) return expect->otherwise;
    return Status::Ok();
  }
  std::string checked;
  if (expect) {
    // The server fails the statement itself when the count differs (agentpay_expect_changed,
    // schema.cc), so that nothing queued after it runs, as after any failure.
    checked = "WITH changed AS (" + std::string(sql) +
              " RETURNING 1) SELECT agentpay_expect_changed(count(*), " +
              std::to_string(expect->rows) + ") FROM changed";
    sql = checked;
  }
  auto name = PreparedName(sql);
  if (!name.ok()) return name.status();
  if (Status sent = SendPrepared(*name, params); !sent.ok()) return sent;
  queued_.push_back(
      {Queued::Kind::kDeferred, "", *name, std::move(expect), std::move(params), tail_});
  return Status::Ok();
}

Status Connection::Sync() {
  if (!pipeline_ || queued_.empty()) return Status::Ok();
  return RoundTrip().status();
}

void Connection::UseImplicitTransactions() {
  AGENTPAY_CHECK(pipeline_ && held_.empty() && queued_.empty());
  implicit_ = true;
}

Status Connection::EndImplicitTransaction() {
  AGENTPAY_CHECK(implicit_);
  if (!open_ && queued_.empty()) return Status::Ok();
  DrainUnawaited();  // one Sync's worth at a time
  open_ = false;
  if (PQpipelineSync(conn_) != 1) {
    queued_.clear();
    return Failure(nullptr, "PostgreSQL");
  }
  unawaited_ = std::exchange(queued_, {});
  sync_unawaited_ = true;
  return Status::Ok();
}

void Connection::DrainUnawaited() {
  if (!sync_unawaited_) return;
  sync_unawaited_ = false;
  for (const Queued& entry : unawaited_) {
    PGresult* result = NextResult();
    if (result != nullptr && entry.kind == Queued::Kind::kPrepare &&
        PQresultStatus(result) == PGRES_COMMAND_OK) {
      prepared_.emplace(entry.sql, entry.name);
    }
    if (result) PQclear(result);
  }
  unawaited_.clear();
  SkipToSync();
}

PGresult* Connection::NextResult() {
  PGresult* result = PQgetResult(conn_);
  while (PGresult* extra = result ? PQgetResult(conn_) : nullptr) PQclear(extra);  // up to null
  return result;
}

void Connection::SkipToSync() {
  for (PGresult* result = PQgetResult(conn_); result != nullptr; result = PQgetResult(conn_)) {
    const bool sync = PQresultStatus(result) == PGRES_PIPELINE_SYNC;
    PQclear(result);
    if (sync) break;
  }
}

void Connection::StartTail() {
  AGENTPAY_CHECK(pipeline_);
  tail_ = true;
}

Result<std::optional<Rows>> Connection::RoundTrip() {
  tail_dropped_ = false;
  auto rows = Collect();
  tail_ = false;
  return rows;
}

Connection::CommitAndStart Connection::CommitThenStart(std::string_view commit,
                                                       const std::vector<std::string>& start,
                                                       std::string_view query, Params params) {
  AGENTPAY_CHECK(pipeline_ && !implicit_ && tail_);
  // A statement that cannot be sent leaves the commit's fate unknown: a failure, as a lost
  // answer to a Sync would be.
  watched_ok_ = false;
  if (Status sent = Defer(commit); !sent.ok()) return {sent, std::nullopt};
  queued_.back().watched = true;  // Defer queued the commit last (after its Parse, if any)
  for (const std::string& sql : start) {
    if (Status sent = Defer(sql); !sent.ok()) return {sent, std::nullopt};
  }
  auto name = PreparedName(query);
  if (!name.ok()) return {name.status(), std::nullopt};
  if (Status sent = SendQuery(*name, std::move(params)); !sent.ok()) return {sent, std::nullopt};
  auto rows = RoundTrip();
  // A held-over unit failed: the commit and the start were dropped with the tail, never run.
  if (tail_dropped_) return {rows.status(), std::nullopt};
  if (!watched_ok_ || !healthy()) {
    // Not answered, failed, or answered on a connection lost since (its held-over units were
    // told they failed): the batch fails, as a Sync after the commit would have said.
    if (rows.ok()) return {Failure(nullptr, "PostgreSQL"), std::nullopt};
    return {rows.status(), std::nullopt};
  }
  if (!rows.ok()) return {Status::Ok(), Result<Rows>(rows.status())};
  AGENTPAY_CHECK(rows->has_value());
  return {Status::Ok(), Result<Rows>(std::move(**rows))};
}

Status Connection::HoldOver(std::string_view end, std::vector<std::string> undo,
                            std::function<void(const Status&)> on_failure) {
  AGENTPAY_CHECK(pipeline_ && !implicit_);
  AGENTPAY_CHECK(held_.size() < kMaxHeldUnits);
  AGENTPAY_CHECK(!tail_);
  if (Status ended = Defer(end); !ended.ok()) return ended;
  held_.push_back({queued_.size(), std::move(undo), std::move(on_failure)});
  return Status::Ok();
}

Status Connection::ResendAfterHeldOverFailure(std::vector<HeldUnit> held, size_t failed,
                                              std::vector<Queued> after) {
  // The undo first, in a round trip of its own: a failure there is nobody's but the connection's,
  // and leaves nothing known of the units after it.
  Status undone;
  for (const std::string& sql : held[failed].undo) {
    if (undone = Defer(sql); !undone.ok()) break;
  }
  if (undone.ok()) undone = Collect().status();
  if (!undone.ok()) {
    for (size_t unit = failed + 1; unit < held.size(); ++unit) held[unit].on_failure(undone);
    return undone;
  }
  const size_t skipped_from = held[failed].end;
  for (size_t unit = failed + 1; unit < held.size(); ++unit) {
    held_.push_back({held[unit].end - skipped_from, std::move(held[unit].undo),
                     std::move(held[unit].on_failure)});
  }
  for (Queued& entry : after) {
    if (entry.tail) {
      // Written from what the failed unit left: the caller writes it again (StartTail).
      tail_dropped_ = true;
      continue;
    }
    if (entry.kind == Queued::Kind::kPrepare) {
      // Skipped with the rest: the server does not have it yet.
      if (PQsendPrepare(conn_, entry.name.c_str(), entry.sql.c_str(), 0, nullptr) != 1) {
        return Failure(nullptr, "PostgreSQL");
      }
    } else if (Status sent = SendPrepared(entry.name, entry.params); !sent.ok()) {
      return sent;
    }
    queued_.push_back(std::move(entry));
  }
  return Status::Ok();
}

Result<std::optional<Rows>> Connection::Collect() {
  DrainUnawaited();  // their answers come first
  std::vector<HeldUnit> held = std::exchange(held_, {});
  // Nothing is known of the held-over units from `from` on: each is told so.
  auto fail_held = [&held](size_t from, const Status& failure) {
    for (size_t unit = from; unit < held.size(); ++unit) held[unit].on_failure(failure);
  };
  // In an implicit transaction the answers are asked for without ending it (no Sync).
  const bool sent = implicit_ ? PQsendFlushRequest(conn_) == 1 && PQflush(conn_) == 0
                              : PQpipelineSync(conn_) == 1;
  if (implicit_) open_ = true;
  if (!sent) {
    queued_.clear();
    Status failure = Failure(nullptr, "PostgreSQL");
    fail_held(0, failure);
    return failure;
  }
  std::vector<Queued> queued = std::move(queued_);
  queued_.clear();
  ++round_trips_;
  AwaitAnswer();
  Status first_failure;
  size_t failed_at = queued.size();
  std::optional<Rows> last_rows;
  for (size_t i = 0; i < queued.size(); ++i) {
    Queued& entry = queued[i];
    PGresult* result = NextResult();
    const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok && first_failure.ok()) {
      failed_at = i;
      const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
      if (status == PGRES_PIPELINE_ABORTED) {
        first_failure = Status::Error(ErrorCode::kStoreError, "PostgreSQL: pipeline aborted");
      } else if (entry.expect && state != nullptr &&
                 std::string_view(state) == kExpectChangedState) {
        first_failure = entry.expect->otherwise;
      } else {
        first_failure = Failure(result, "PostgreSQL");
      }
    }
    if (ok && entry.kind == Queued::Kind::kPrepare) prepared_.emplace(entry.sql, entry.name);
    if (ok && entry.watched) watched_ok_ = true;
    if (ok && entry.kind == Queued::Kind::kQuery && result != nullptr) {
      last_rows.emplace(result);
      result = nullptr;
    }
    if (result) PQclear(result);
  }
  if (!implicit_) SkipToSync();  // the Sync's own result ends the pipeline
  if (!healthy() && first_failure.ok()) first_failure = Failure(nullptr, "PostgreSQL");
  if (!held.empty()) {
    if (!healthy()) {
      fail_held(0, first_failure);
      return first_failure;
    }
    // The held-over unit the failure is in, if any: those before it are confirmed.
    size_t failed = 0;
    while (failed < held.size() && held[failed].end <= failed_at) ++failed;
    if (failed < held.size()) {
      // It failed, and the server skipped all that followed it: undo it, and give what came
      // after it the round trip it was meant to have.
      held[failed].on_failure(first_failure);
      std::vector<Queued> after(std::make_move_iterator(queued.begin() + held[failed].end),
                                std::make_move_iterator(queued.end()));
      if (Status resent = ResendAfterHeldOverFailure(std::move(held), failed, std::move(after));
          !resent.ok()) {
        // The units after it are not held over any more: tell them.
        auto lost = std::exchange(held_, {});
        for (HeldUnit& unit : lost) unit.on_failure(resent);
        queued_.clear();
        return resent;
      }
      return Collect();
    }
  }
  if (!first_failure.ok()) return first_failure;
  return last_rows;
}

void Connection::AwaitAnswer() {
  if (sleeps_before_spin_ > 0) {
    --sleeps_before_spin_;
    return;
  }
  const auto until = std::chrono::steady_clock::now() + kAnswerSpin;
  // PQconsumeInput reads what has arrived without blocking (libpq's socket is non-blocking); a
  // failure is left to the PQgetResult that follows, which reports it.
  while (PQisBusy(conn_) == 1 && PQconsumeInput(conn_) == 1) {
    if (std::chrono::steady_clock::now() >= until) {
      sleeps_before_spin_ = kSleepsAfterSlowAnswer;
      return;
    }
  }
}

bool Connection::LooksAlive() {
  if (!healthy()) return false;
  if (!queued_.empty() || open_) return true;  // results still to read: not idle
  DrainUnawaited();                            // answers we know of come first
  if (!healthy()) return false;
  pollfd socket{PQsocket(conn_), POLLIN, 0};
  if (::poll(&socket, 1, 0) <= 0) return true;  // nothing arrived
  // Something arrived unasked: a notice, or the end of the session (an error, then EOF).
  if (PQconsumeInput(conn_) != 1) return false;
  while (PGnotify* notify = PQnotifies(conn_)) PQfreemem(notify);
  return healthy();
}

Status Connection::EnterPipelineMode() {
  if (PQenterPipelineMode(conn_) != 1) return Failure(nullptr, "PostgreSQL pipeline mode");
  pipeline_ = true;
  return Status::Ok();
}

Status Connection::Run(const std::string& sql) {
  AGENTPAY_CHECK(!pipeline_);
  ++round_trips_;
  PGresult* result = PQexec(conn_, sql.c_str());
  const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Status failure = Failure(result, "PostgreSQL");
    if (result) PQclear(result);
    return failure;
  }
  PQclear(result);
  return Status::Ok();
}

}  // namespace agentpay::pg
