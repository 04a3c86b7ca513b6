// A simulated disk for the SQLite store code under the simulator: an SQLite VFS whose files live
// in memory and remember what was last synced. Crash() puts every file back to its last sync, as a
// power loss or kill -9 with the page cache lost does to writes no fsync covered.
//
// Single-threaded (the simulator's thread), one connection at a time, no shared memory: the
// database runs in WAL mode with locking_mode=EXCLUSIVE, which keeps the WAL index in the
// connection's heap.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace agentpay::sim {

class SimVfs {
 public:
  // Registers a VFS of a name of its own (not the default one). Unregistered on destruction,
  // which must come after every connection using it is closed.
  static Result<std::unique_ptr<SimVfs>> Register();
  ~SimVfs();
  SimVfs(const SimVfs&) = delete;
  SimVfs& operator=(const SimVfs&) = delete;

  const char* name() const { return name_.c_str(); }
  // Every file back to what its last sync made durable (a file never synced: gone). Close the
  // connections first: a new process opens the files afresh.
  void Crash();
  // Syncs every file, as the store's writer's fdatasync of its WAL does.
  void SyncAll();
  uint64_t syncs() const { return syncs_; }

 private:
  struct Data {
    std::vector<unsigned char> current;
    std::vector<unsigned char> synced;
    bool synced_exists = false;
    size_t dirty_from = SIZE_MAX;  // bytes [dirty_from, dirty_to) written since the last sync
    size_t dirty_to = 0;
  };
  struct File;
  SimVfs();
  static SimVfs& Of(sqlite3_vfs* vfs);
  static File& Of(sqlite3_file* file);

  // The VFS's methods (sqlite3_vfs) and the files' (sqlite3_io_methods).
  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
                  int* out_flags);
  static int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir);
  static int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out);
  static int FullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out);
  static int Randomness(sqlite3_vfs* vfs, int size, char* out);
  static int Sleep(sqlite3_vfs* vfs, int microseconds);
  static int CurrentTime(sqlite3_vfs* vfs, double* out);
  static int GetLastError(sqlite3_vfs* vfs, int size, char* out);
  static int Close(sqlite3_file* file);
  static int Read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset);
  static int Write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset);
  static int Truncate(sqlite3_file* file, sqlite3_int64 size);
  static int Sync(sqlite3_file* file, int flags);
  static int FileSize(sqlite3_file* file, sqlite3_int64* out);
  static int Lock(sqlite3_file* file, int level);
  static int CheckReservedLock(sqlite3_file* file, int* out);
  static int FileControl(sqlite3_file* file, int op, void* arg);
  static int SectorSize(sqlite3_file* file);
  static int DeviceCharacteristics(sqlite3_file* file);
  void SyncData(Data& data);

  std::string name_;
  sqlite3_vfs vfs_{};
  sqlite3_io_methods io_{};
  std::map<std::string, Data> files_;
  uint64_t next_temp_ = 0;
  uint64_t syncs_ = 0;
};

}  // namespace agentpay::sim
