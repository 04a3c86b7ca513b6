// libpq, as the PostgreSQL store uses it (see pg_connection.h).
#include "store/pg_connection.h"

#include <charconv>
#include <cstdlib>

namespace agentpay::pg {
namespace {

// SQLSTATE classes that mean the server went away or refuses work for now, not that the statement
// was wrong: 08 connection exception, 53 insufficient resources, 57 operator intervention (a
// shutdown, a cancelled statement), 58 system error; and 40 (a serialization failure, a deadlock).
bool Unavailable(std::string_view sqlstate) {
  std::string_view cls = sqlstate.substr(0, 2);
  return cls == "08" || cls == "53" || cls == "57" || cls == "58" || cls == "40";
}

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

Result<Rows> Connection::Query(std::string_view sql, const Params& params) {
  auto found = prepared_.find(sql);
  if (found == prepared_.end()) {
    std::string name = "s" + std::to_string(prepared_.size());
    PGresult* prepared = PQprepare(conn_, name.c_str(), std::string(sql).c_str(), 0, nullptr);
    if (prepared == nullptr || PQresultStatus(prepared) != PGRES_COMMAND_OK) {
      Status failure = Failure(prepared, "PostgreSQL");
      if (prepared) PQclear(prepared);
      return failure;
    }
    PQclear(prepared);  // kept by name once the server has it
    found = prepared_.emplace(std::string(sql), std::move(name)).first;
  }
  const size_t count = params.values_.size();
  std::vector<const char*> values(count);
  std::vector<int> lengths(count);
  std::vector<int> formats(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = params.null_[i] ? nullptr : params.values_[i].data();
    lengths[i] = static_cast<int>(params.values_[i].size());
    formats[i] = params.binary_[i] ? 1 : 0;
  }
  PGresult* result =
      PQexecPrepared(conn_, found->second.c_str(), static_cast<int>(count), values.data(),
                     lengths.data(), formats.data(), /*resultFormat=*/0);
  const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Status failure = Failure(result, "PostgreSQL");
    if (result) PQclear(result);
    return failure;
  }
  return Rows(result);
}

Status Connection::Run(const std::string& sql) {
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
