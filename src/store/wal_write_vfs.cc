// See wal_write_vfs.h. Every method of the wrapped file hands on to the default VFS's file; only
// xWrite on the WAL is held back, and everything that could observe the WAL writes it out first.
#include "store/wal_write_vfs.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace agentpay::sqlite {

struct WalWriteVfs::File {
  sqlite3_file base;  // first: SQLite knows the object by this
  WalWriteVfs* owner = nullptr;
  sqlite3_file* real = nullptr;  // the default VFS's file, in the same allocation after this
  bool is_wal = false;
  std::string pending;  // consecutive WAL bytes not yet written, starting at pending_offset
  sqlite3_int64 pending_offset = 0;
};

// The C callbacks, with access to WalWriteVfs's members.
struct WalWriteVfsAccess {
  using File = WalWriteVfs::File;
  // Past this many gathered bytes the gathered ones are written (bounds the memory held).
  static constexpr size_t kMaxPendingBytes = 1 << 20;
  // The unix VFS writes at most 128 KiB - 1 per call (it masks the length with 0x1ffff and
  // reports a short write as a full disk): larger runs go in pieces of this size.
  static constexpr size_t kMaxWriteBytes = 124 * 1024;

  static size_t FileHeaderSize() { return (sizeof(File) + 15) & ~size_t{15}; }
  static File* AsFile(sqlite3_file* file) { return reinterpret_cast<File*>(file); }
  static WalWriteVfs* Owner(sqlite3_vfs* vfs) { return static_cast<WalWriteVfs*>(vfs->pAppData); }
  static sqlite3_vfs* Real(sqlite3_vfs* vfs) { return Owner(vfs)->real_; }
  static const sqlite3_io_methods* RealMethods(File* file) { return file->real->pMethods; }

  static int WritePending(File* file) {
    int rc = SQLITE_OK;
    size_t done = 0;
    while (rc == SQLITE_OK && done < file->pending.size()) {
      const size_t chunk = std::min(kMaxWriteBytes, file->pending.size() - done);
      rc = RealMethods(file)->xWrite(file->real, file->pending.data() + done,
                                     static_cast<int>(chunk),
                                     file->pending_offset + static_cast<sqlite3_int64>(done));
      done += chunk;
    }
    file->pending.clear();
    return rc;
  }
  // Through the database file (the wal-index lives behind it): the WAL's gathered bytes.
  static int WriteOwnersWal(File* db_file) {
    File* wal = db_file->owner->wal_;
    return wal == nullptr ? SQLITE_OK : WritePending(wal);
  }

  // --- io methods ---
  static int Close(sqlite3_file* f) {
    File* file = AsFile(f);
    int rc = SQLITE_OK;
    if (file->is_wal) {
      rc = WritePending(file);
      if (file->owner->wal_ == file) file->owner->wal_ = nullptr;
    }
    int closed = RealMethods(file)->xClose(file->real);
    file->~File();
    return rc != SQLITE_OK ? rc : closed;
  }
  static int Read(sqlite3_file* f, void* out, int amount, sqlite3_int64 offset) {
    File* file = AsFile(f);
    if (file->is_wal) {
      if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    }
    return RealMethods(file)->xRead(file->real, out, amount, offset);
  }
  static int Write(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
    File* file = AsFile(f);
    if (!file->is_wal) return RealMethods(file)->xWrite(file->real, data, amount, offset);
    const auto size = static_cast<size_t>(amount);
    file->owner->wal_bytes_ += size;
    if (!file->pending.empty() &&
        offset == file->pending_offset + static_cast<sqlite3_int64>(file->pending.size()) &&
        file->pending.size() + size <= kMaxPendingBytes) {
      file->pending.append(static_cast<const char*>(data), size);
      return SQLITE_OK;
    }
    // Not right after the gathered bytes (a new commit, the WAL restarting, a frame rewritten):
    // those go first, so the file sees every write in SQLite's order.
    if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    if (size > kMaxWriteBytes) return RealMethods(file)->xWrite(file->real, data, amount, offset);
    file->pending.assign(static_cast<const char*>(data), size);
    file->pending_offset = offset;
    return SQLITE_OK;
  }
  static int Truncate(sqlite3_file* f, sqlite3_int64 size) {
    File* file = AsFile(f);
    if (file->is_wal) {
      if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    }
    return RealMethods(file)->xTruncate(file->real, size);
  }
  static int Sync(sqlite3_file* f, int flags) {
    File* file = AsFile(f);
    if (file->is_wal) {
      if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    }
    return RealMethods(file)->xSync(file->real, flags);
  }
  static int FileSize(sqlite3_file* f, sqlite3_int64* size) {
    File* file = AsFile(f);
    if (file->is_wal) {
      if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    }
    return RealMethods(file)->xFileSize(file->real, size);
  }
  static int Lock(sqlite3_file* f, int level) {
    return RealMethods(AsFile(f))->xLock(AsFile(f)->real, level);
  }
  static int Unlock(sqlite3_file* f, int level) {
    return RealMethods(AsFile(f))->xUnlock(AsFile(f)->real, level);
  }
  static int CheckReservedLock(sqlite3_file* f, int* out) {
    return RealMethods(AsFile(f))->xCheckReservedLock(AsFile(f)->real, out);
  }
  static int FileControl(sqlite3_file* f, int op, void* arg) {
    File* file = AsFile(f);
    if (file->is_wal) {
      if (int rc = WritePending(file); rc != SQLITE_OK) return rc;
    }
    return RealMethods(file)->xFileControl(file->real, op, arg);
  }
  static int SectorSize(sqlite3_file* f) {
    return RealMethods(AsFile(f))->xSectorSize(AsFile(f)->real);
  }
  static int DeviceCharacteristics(sqlite3_file* f) {
    return RealMethods(AsFile(f))->xDeviceCharacteristics(AsFile(f)->real);
  }
  // The wal-index: SQLite publishes a commit to readers by writing its header there, with a
  // barrier between the two copies; a reader trusts a header only when both copies agree. The
  // gathered frames are written before any of these returns.
  static int ShmMap(sqlite3_file* f, int page, int page_size, int extend, void volatile** out) {
    File* file = AsFile(f);
    if (int rc = WriteOwnersWal(file); rc != SQLITE_OK) return rc;
    return RealMethods(file)->xShmMap(file->real, page, page_size, extend, out);
  }
  static int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
    File* file = AsFile(f);
    if (int rc = WriteOwnersWal(file); rc != SQLITE_OK) return rc;
    return RealMethods(file)->xShmLock(file->real, offset, n, flags);
  }
  static void ShmBarrier(sqlite3_file* f) {
    File* file = AsFile(f);
    if (int rc = WriteOwnersWal(file); rc != SQLITE_OK) {
      // The commit is about to become visible without its frames in the file, and a barrier
      // cannot fail. Stop, as for a failed sync: recovery starts from what is on disk.
      std::fprintf(stderr, "agentpay store: writing the WAL failed (%s); stopping\n",
                   sqlite3_errstr(rc));
      std::abort();
    }
    RealMethods(file)->xShmBarrier(file->real);
  }
  static int ShmUnmap(sqlite3_file* f, int delete_flag) {
    File* file = AsFile(f);
    if (int rc = WriteOwnersWal(file); rc != SQLITE_OK) return rc;
    return RealMethods(file)->xShmUnmap(file->real, delete_flag);
  }
  static int Fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
    return RealMethods(AsFile(f))->xFetch(AsFile(f)->real, offset, amount, out);
  }
  static int Unfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
    return RealMethods(AsFile(f))->xUnfetch(AsFile(f)->real, offset, page);
  }

  static constexpr sqlite3_io_methods kMethods = {
      3,        Close,       Read,     Write,  Truncate,  Sync,
      FileSize, Lock,        Unlock,   CheckReservedLock, FileControl,
      SectorSize, DeviceCharacteristics, ShmMap, ShmLock, ShmBarrier,
      ShmUnmap, Fetch,       Unfetch};

  // --- vfs methods ---
  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
    File* file = new (f) File();
    file->base.pMethods = nullptr;
    file->owner = Owner(vfs);
    file->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + FileHeaderSize());
    file->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = Real(vfs)->xOpen(Real(vfs), name, file->real, flags, out_flags);
    // Every method above hands on to a version-3 file (the unix VFS's are).
    if (rc == SQLITE_OK && (file->real->pMethods == nullptr || file->real->pMethods->iVersion < 3)) {
      if (file->real->pMethods != nullptr) file->real->pMethods->xClose(file->real);
      rc = SQLITE_CANTOPEN;
    }
    if (rc != SQLITE_OK) {
      file->~File();
      f->pMethods = nullptr;
      return rc;
    }
    if (file->is_wal) file->owner->wal_ = file;
    file->base.pMethods = &kMethods;
    return SQLITE_OK;
  }
  static int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
    return Real(vfs)->xDelete(Real(vfs), name, sync_dir);
  }
  static int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
    return Real(vfs)->xAccess(Real(vfs), name, flags, out);
  }
  static int FullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
    return Real(vfs)->xFullPathname(Real(vfs), name, size, out);
  }
  static void* DlOpen(sqlite3_vfs* vfs, const char* name) {
    return Real(vfs)->xDlOpen(Real(vfs), name);
  }
  static void DlError(sqlite3_vfs* vfs, int size, char* out) {
    Real(vfs)->xDlError(Real(vfs), size, out);
  }
  static void (*DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
    return Real(vfs)->xDlSym(Real(vfs), handle, symbol);
  }
  static void DlClose(sqlite3_vfs* vfs, void* handle) { Real(vfs)->xDlClose(Real(vfs), handle); }
  static int Randomness(sqlite3_vfs* vfs, int size, char* out) {
    return Real(vfs)->xRandomness(Real(vfs), size, out);
  }
  static int Sleep(sqlite3_vfs* vfs, int micros) { return Real(vfs)->xSleep(Real(vfs), micros); }
  static int CurrentTime(sqlite3_vfs* vfs, double* out) {
    return Real(vfs)->xCurrentTime(Real(vfs), out);
  }
  static int GetLastError(sqlite3_vfs* vfs, int size, char* out) {
    return Real(vfs)->xGetLastError(Real(vfs), size, out);
  }
  static int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
    return Real(vfs)->xCurrentTimeInt64(Real(vfs), out);
  }
};

Result<std::unique_ptr<WalWriteVfs>> WalWriteVfs::Register() {
  static std::atomic<uint64_t> next_id{0};
  std::unique_ptr<WalWriteVfs> vfs(new WalWriteVfs());
  vfs->real_ = sqlite3_vfs_find(nullptr);
  if (vfs->real_ == nullptr || vfs->real_->iVersion < 2) {
    return Status::Error(ErrorCode::kStoreUnavailable, "no usable default SQLite VFS");
  }
  vfs->name_ = "agentpay-wal-" + std::to_string(next_id.fetch_add(1));
  using A = WalWriteVfsAccess;
  sqlite3_vfs& v = vfs->vfs_;
  v.iVersion = 2;
  v.szOsFile = static_cast<int>(A::FileHeaderSize()) + vfs->real_->szOsFile;
  v.mxPathname = vfs->real_->mxPathname;
  v.zName = vfs->name_.c_str();
  v.pAppData = vfs.get();
  v.xOpen = A::Open;
  v.xDelete = A::Delete;
  v.xAccess = A::Access;
  v.xFullPathname = A::FullPathname;
  v.xDlOpen = A::DlOpen;
  v.xDlError = A::DlError;
  v.xDlSym = A::DlSym;
  v.xDlClose = A::DlClose;
  v.xRandomness = A::Randomness;
  v.xSleep = A::Sleep;
  v.xCurrentTime = A::CurrentTime;
  v.xGetLastError = A::GetLastError;
  v.xCurrentTimeInt64 = A::CurrentTimeInt64;
  if (int rc = sqlite3_vfs_register(&v, /*makeDflt=*/0); rc != SQLITE_OK) {
    return Status::Error(ErrorCode::kStoreUnavailable,
                         std::string("cannot register the WAL VFS: ") + sqlite3_errstr(rc));
  }
  return vfs;
}

WalWriteVfs::~WalWriteVfs() { sqlite3_vfs_unregister(&vfs_); }

Status WalWriteVfs::Flush() {
  if (wal_ == nullptr) return Status::Ok();
  int rc = WalWriteVfsAccess::WritePending(wal_);
  if (rc != SQLITE_OK) {
    return Status::Error(ErrorCode::kStoreUnavailable,
                         std::string("WAL write failed: ") + sqlite3_errstr(rc));
  }
  return Status::Ok();
}

}  // namespace agentpay::sqlite
