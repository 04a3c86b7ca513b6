// SQLite connection and statement helpers; see sqlite_db.h.
#include "sqlite/sqlite_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace agentpay::sqlite {

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, std::string_view value) {
  const char* data = value.data() != nullptr ? value.data() : "";  // "" is text, null is NULL
  sqlite3_bind_text(stmt_, index, data, static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlob(int index, std::string_view value) {
  // A null pointer would bind SQL NULL; an empty blob is still a (zero-length) value.
  const char* data = value.data() != nullptr ? value.data() : "";
  sqlite3_bind_blob(stmt_, index, data, static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}
Statement& Statement::Bind(int index, const std::optional<int64_t>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}

bool Statement::Step(Status* status) {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    sqlite3* db = sqlite3_db_handle(stmt_);
    ErrorCode code =
        (rc & 0xff) == SQLITE_CONSTRAINT ? ErrorCode::kStoreConstraint : ErrorCode::kStoreError;
    *status = Status::Error(code, sqlite3_errmsg(db));
  }
  return false;
}

Status Statement::Run() {
  Status status;
  while (Step(&status)) {
  }
  return status;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
std::optional<int64_t> Statement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}
std::string Statement::Text(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) return {};
  return std::string(static_cast<const char*>(data), static_cast<size_t>(size));
}
bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

namespace {

// A database file and the files SQLite keeps beside it hold the books or keys: readable by their
// owner only (issue 13). A missing database is created 0600 (never through a symbolic link), so
// that SQLite, which gives its -wal, -shm and -journal files the database's mode, makes them 0600
// too; files an older version left readable by others are narrowed to 0600 here. A symbolic link
// the operator put at the path is followed by SQLite as before but left unchanged here.
Status MakePrivate(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.starts_with("file:")) return Status::Ok();
  int created = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (created >= 0) {
    ::close(created);
  } else if (errno != EEXIST) {
    return Status::Error(ErrorCode::kStoreUnavailable,
                         "cannot create " + path + ": " + std::strerror(errno));
  }
  // No descriptor of these files is opened here: closing one drops every POSIX lock this process
  // holds on the file, SQLite's included (a second connection's open once released the first's
  // lock on the -shm, and another process then reset the shared memory under it: SIGBUS).
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    struct stat info {};
    if (::lstat(file.c_str(), &info) != 0) continue;                    // absent
    if (!S_ISREG(info.st_mode) || (info.st_mode & 077) == 0) continue;  // a link, or private
    // AT_SYMLINK_NOFOLLOW: a link swapped in since lstat is refused, never followed.
    (void)::fchmodat(AT_FDCWD, file.c_str(), info.st_mode & 0700, AT_SYMLINK_NOFOLLOW);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const std::string& path, bool read_only,
                                                 const char* vfs) {
  if (!read_only) {
    if (Status status = MakePrivate(path); !status.ok()) return status;
  }
  return OpenWith(
      path, read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);
}

Result<std::unique_ptr<Database>> Database::OpenOnSimulatedDisk(const std::string& path,
                                                                const char* vfs) {
  return OpenWith(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);
}

Result<std::unique_ptr<Database>> Database::OpenWith(const std::string& path, int flags,
                                                     const char* vfs) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::Error(ErrorCode::kStoreUnavailable, "cannot open " + path + ": " + message);
  }
  std::unique_ptr<Database> database(new Database(db));
  sqlite3_busy_timeout(db, 5000);
  sqlite3_extended_result_codes(db, 1);
  return database;
}

Database::~Database() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Database::Exec(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    return Status::Error(ErrorCode::kStoreError, message);
  }
  return Status::Ok();
}

// How often EnterWalMode tries again after waiting: each failure means that another connection
// held the write lock of a file still in rollback mode; once one of them has converted it, the next
// try is a no-op. More failures than this say that something else keeps writing in rollback mode.
constexpr int kWalModeAttempts = 8;

// Why the busy timeout is not enough here. On a file that is not in WAL mode yet (a new, empty
// budget file), PRAGMA journal_mode=WAL reads the header under a SHARED lock and then upgrades to
// a write lock to set the version bytes. SQLite calls the busy handler only for a transaction that
// starts from nothing, never for a read transaction that upgrades (a connection that waited while
// holding SHARED could deadlock with the writer, which waits for SHARED locks to go), so when two
// processes open a new file at once, the one that reads second fails at once with SQLITE_BUSY
// whatever the timeout. Its failed statement ended the read, so nothing is held: it waits for the
// other connection's write lock with BEGIN IMMEDIATE (which starts from nothing, so the busy
// handler applies), lets go, and asks again; the file is then in WAL mode and the pragma a no-op.
Status Database::EnterWalMode() {
  for (int attempt = 1;; ++attempt) {
    const int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return Status::Ok();
    if ((rc & 0xff) != SQLITE_BUSY || attempt == kWalModeAttempts) {
      return Status::Error(ErrorCode::kStoreError, sqlite3_errmsg(db_));
    }
    if (Status waited = Run("BEGIN IMMEDIATE"); !waited.ok()) return waited;
    if (Status ended = Run("ROLLBACK"); !ended.ok()) return ended;
  }
}

Status Database::Run(std::string_view sql) {
  auto stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Run();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  auto found = cache_.find(sql);
  if (found != cache_.end()) return Statement(found->second);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt, nullptr) != SQLITE_OK) {
    return LastError("prepare");
  }
  cache_.emplace(std::string(sql), stmt);
  return Statement(stmt);
}

int64_t Database::Changes() const { return sqlite3_changes(db_); }

Status Database::LastError(std::string_view context) const {
  return Status::Error(ErrorCode::kStoreError, std::string(context) + ": " + sqlite3_errmsg(db_));
}

}  // namespace agentpay::sqlite
