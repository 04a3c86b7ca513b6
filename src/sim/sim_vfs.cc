// See sim_vfs.h.
#include "sim/sim_vfs.h"

#include <algorithm>
#include <cstring>

namespace agentpay::sim {

struct SimVfs::File {
  sqlite3_file base;  // first: SQLite hands this struct back as an sqlite3_file*
  SimVfs* vfs;
  std::string* path;  // owned: the key of its Data in files_
  bool delete_on_close;
};

namespace {
uint64_t next_vfs = 0;  // names of VFSes registered so far (the simulator runs on one thread)
}  // namespace

SimVfs::SimVfs() : name_("agentpay-sim-" + std::to_string(next_vfs++)) {}

Result<std::unique_ptr<SimVfs>> SimVfs::Register() {
  std::unique_ptr<SimVfs> vfs(new SimVfs());
  sqlite3_io_methods& io = vfs->io_;
  io.iVersion = 1;  // no shared memory: WAL only with locking_mode=EXCLUSIVE
  io.xClose = Close;
  io.xRead = Read;
  io.xWrite = Write;
  io.xTruncate = Truncate;
  io.xSync = Sync;
  io.xFileSize = FileSize;
  io.xLock = Lock;
  io.xUnlock = Lock;
  io.xCheckReservedLock = CheckReservedLock;
  io.xFileControl = FileControl;
  io.xSectorSize = SectorSize;
  io.xDeviceCharacteristics = DeviceCharacteristics;
  sqlite3_vfs& v = vfs->vfs_;
  v.iVersion = 1;
  v.szOsFile = sizeof(File);
  v.mxPathname = 512;
  v.zName = vfs->name_.c_str();
  v.pAppData = vfs.get();
  v.xOpen = Open;
  v.xDelete = Delete;
  v.xAccess = Access;
  v.xFullPathname = FullPathname;
  v.xRandomness = Randomness;
  v.xSleep = Sleep;
  v.xCurrentTime = CurrentTime;
  v.xGetLastError = GetLastError;
  if (int rc = sqlite3_vfs_register(&v, 0); rc != SQLITE_OK) {
    return Status::Error(ErrorCode::kStoreUnavailable,
                         std::string("cannot register the simulated disk: ") + sqlite3_errstr(rc));
  }
  return vfs;
}

SimVfs::~SimVfs() { sqlite3_vfs_unregister(&vfs_); }

void SimVfs::Crash() {
  for (auto it = files_.begin(); it != files_.end();) {
    Data& data = it->second;
    if (!data.synced_exists) {
      it = files_.erase(it);
      continue;
    }
    data.current = data.synced;
    data.dirty_from = SIZE_MAX;
    data.dirty_to = 0;
    ++it;
  }
}

SimVfs& SimVfs::Of(sqlite3_vfs* vfs) { return *static_cast<SimVfs*>(vfs->pAppData); }
SimVfs::File& SimVfs::Of(sqlite3_file* file) { return *reinterpret_cast<File*>(file); }

int SimVfs::Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
                 int* out_flags) {
  SimVfs& self = Of(vfs);
  File& f = Of(file);
  f.base.pMethods = nullptr;
  const std::string path =
      name != nullptr ? std::string(name) : "temp-" + std::to_string(self.next_temp_++);
  if (self.files_.count(path) == 0 && (flags & SQLITE_OPEN_CREATE) == 0) {
    return SQLITE_CANTOPEN;
  }
  self.files_.try_emplace(path);
  f.vfs = &self;
  f.path = new std::string(path);
  f.delete_on_close = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
  f.base.pMethods = &self.io_;
  if (out_flags != nullptr) *out_flags = flags;
  return SQLITE_OK;
}

int SimVfs::Delete(sqlite3_vfs* vfs, const char* name, int) {
  Of(vfs).files_.erase(name);  // a deletion is durable at once (as with a synced directory)
  return SQLITE_OK;
}

int SimVfs::Access(sqlite3_vfs* vfs, const char* name, int, int* out) {
  auto it = Of(vfs).files_.find(name);
  *out = it != Of(vfs).files_.end() && !it->second.current.empty();
  return SQLITE_OK;
}

int SimVfs::FullPathname(sqlite3_vfs*, const char* name, int size, char* out) {
  if (static_cast<int>(std::strlen(name)) + 1 > size) return SQLITE_CANTOPEN;
  std::strcpy(out, name);
  return SQLITE_OK;
}

int SimVfs::Randomness(sqlite3_vfs*, int size, char* out) {
  std::memset(out, 0, static_cast<size_t>(size));  // deterministic
  return size;
}

int SimVfs::Sleep(sqlite3_vfs*, int microseconds) { return microseconds; }

int SimVfs::CurrentTime(sqlite3_vfs*, double* out) {
  *out = 2461041.5;  // a fixed Julian day: the store's SQL keeps its own times
  return SQLITE_OK;
}

int SimVfs::GetLastError(sqlite3_vfs*, int, char*) { return 0; }

int SimVfs::Close(sqlite3_file* file) {
  File& f = Of(file);
  if (f.delete_on_close) f.vfs->files_.erase(*f.path);
  delete f.path;
  f.path = nullptr;
  return SQLITE_OK;
}

int SimVfs::Read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset) {
  File& f = Of(file);
  const std::vector<unsigned char>& bytes = f.vfs->files_[*f.path].current;
  const size_t at = static_cast<size_t>(offset), n = static_cast<size_t>(amount);
  const size_t have = at < bytes.size() ? std::min(n, bytes.size() - at) : 0;
  if (have > 0) std::memcpy(out, bytes.data() + at, have);
  if (have < n) {
    std::memset(static_cast<unsigned char*>(out) + have, 0, n - have);
    return SQLITE_IOERR_SHORT_READ;
  }
  return SQLITE_OK;
}

int SimVfs::Write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  File& f = Of(file);
  Data& d = f.vfs->files_[*f.path];
  const size_t at = static_cast<size_t>(offset), n = static_cast<size_t>(amount);
  if (d.current.size() < at + n) d.current.resize(at + n);
  std::memcpy(d.current.data() + at, data, n);
  d.dirty_from = std::min(d.dirty_from, at);
  d.dirty_to = std::max(d.dirty_to, at + n);
  return SQLITE_OK;
}

int SimVfs::Truncate(sqlite3_file* file, sqlite3_int64 size) {
  File& f = Of(file);
  Data& d = f.vfs->files_[*f.path];
  d.current.resize(static_cast<size_t>(size));
  d.dirty_from = std::min(d.dirty_from, static_cast<size_t>(size));
  d.dirty_to = std::max(d.dirty_to, static_cast<size_t>(size));
  return SQLITE_OK;
}

void SimVfs::SyncAll() {
  for (auto& [path, data] : files_) SyncData(data);
}

int SimVfs::Sync(sqlite3_file* file, int) {
  File& f = Of(file);
  f.vfs->SyncData(f.vfs->files_[*f.path]);
  return SQLITE_OK;
}

void SimVfs::SyncData(Data& d) {
  // Only what changed since the last sync is copied: the WAL grows by appends.
  d.synced.resize(d.current.size());
  if (d.dirty_from < d.dirty_to) {
    const size_t to = std::min(d.dirty_to, d.current.size());
    if (d.dirty_from < to) {
      std::memcpy(d.synced.data() + d.dirty_from, d.current.data() + d.dirty_from,
                  to - d.dirty_from);
    }
  }
  d.synced_exists = true;
  d.dirty_from = SIZE_MAX;
  d.dirty_to = 0;
  ++syncs_;
}

int SimVfs::FileSize(sqlite3_file* file, sqlite3_int64* out) {
  File& f = Of(file);
  *out = static_cast<sqlite3_int64>(f.vfs->files_[*f.path].current.size());
  return SQLITE_OK;
}

int SimVfs::Lock(sqlite3_file*, int) { return SQLITE_OK; }

int SimVfs::CheckReservedLock(sqlite3_file*, int* out) {
  *out = 0;
  return SQLITE_OK;
}

int SimVfs::FileControl(sqlite3_file*, int, void*) { return SQLITE_NOTFOUND; }

int SimVfs::SectorSize(sqlite3_file*) { return 512; }

int SimVfs::DeviceCharacteristics(sqlite3_file*) { return 0; }

}  // namespace agentpay::sim
