// A SQLite VFS for the store's writer connection that gathers a commit's WAL writes into one.
// SQLite's unix VFS writes every WAL frame with two pwrite calls (a 24-byte frame header, then the
// page): about 46 system calls for a commit of 23 pages, where one call of the same bytes costs a
// sixth of the time. This VFS wraps the default one and keeps consecutive WAL writes in memory
// until SQLite does anything that could let someone see or depend on them: it reads, syncs,
// truncates or sizes the WAL, or touches the wal-index (shared memory) through the database file,
// which is how a commit is published to readers. So no reader, in this process or another, can
// find a frame in the wal-index before the frame is in the file.
// It stays in src/store, not in the shared SQLite leaf (src/sqlite): it is the store's write path,
// whose durability needs the store to Flush before it fdatasyncs the WAL itself, and nothing else
// uses it. (Its namespace is agentpay::sqlite because it is a SQLite VFS.)
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"

namespace agentpay::sqlite {

class WalWriteVfs {
 public:
  // Registers a VFS of a name of its own over the default VFS (not as the default).
  static Result<std::unique_ptr<WalWriteVfs>> Register();
  // Unregisters. Precondition: no connection opened through this VFS is still open.
  ~WalWriteVfs();
  WalWriteVfs(const WalWriteVfs&) = delete;
  WalWriteVfs& operator=(const WalWriteVfs&) = delete;

  // The name to pass to sqlite3_open_v2 (Database::Open's `vfs`).
  const char* name() const { return name_.c_str(); }
  // Writes what is gathered. The store calls it before it syncs the WAL through a descriptor of
  // its own. Must be called from the thread that uses the connection.
  Status Flush();
  // The bytes SQLite has written to the WAL through this VFS (frames and headers), gathered or
  // not. Read it from the thread that uses the connection.
  uint64_t wal_bytes() const { return wal_bytes_; }

 private:
  struct File;  // the wrapped file (in the .cc, with the C callbacks)

  WalWriteVfs() = default;

  std::string name_;
  sqlite3_vfs vfs_{};
  sqlite3_vfs* real_ = nullptr;
  File* wal_ = nullptr;  // the open WAL file, if any (one writer connection per VFS)
  uint64_t wal_bytes_ = 0;

  friend struct WalWriteVfsAccess;
};

}  // namespace agentpay::sqlite
