// Process liveness for the SQLite backend (Store::RegisterInstance, Store::InstanceAlive): one
// exclusive flock(2) per registered gateway instance, on a file in a directory beside the database.
// The kernel drops the lock when the process dies, however it dies, so "the lock can be taken"
// means "its owner is gone". Single host only, as SQLite itself.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "core/result.h"
#include "store/store.h"

namespace agentpay {

class InstanceLocks {
 public:
  // `directory` is created on the first registration (mode 0700).
  explicit InstanceLocks(std::string directory);
  // Releases every registration still held.
  ~InstanceLocks();
  InstanceLocks(const InstanceLocks&) = delete;
  InstanceLocks& operator=(const InstanceLocks&) = delete;

  // Creates `<directory>/<id>.lock` and holds an exclusive flock on it through one descriptor
  // (O_CLOEXEC: no child process inherits it) until Release or destruction; writes the pid into it
  // for operators. "instance_taken" if a live owner holds it. Also removes the files of dead
  // instances (at most kMaxSweptPerRegistration), so the directory does not grow with restarts.
  Status Register(const std::string& id);
  // Removes the file, then closes the descriptor (dropping the lock). Unknown ids: no-op.
  Status Release(const std::string& id);
  // True if this object or any live process holds the lock. Otherwise false, and the file of the
  // dead owner is removed. Invalid ids are never registered: false.
  Result<bool> Alive(const std::string& id);

  static constexpr int kMaxSweptPerRegistration = 1000;

 private:
  std::string PathOf(const std::string& id) const;
  // Tries the lock through a descriptor of its own (flock locks belong to the open file
  // description, so even a lock held by this very process is seen). Caller holds mutex_.
  Result<bool> Probe(const std::string& id);
  void SweepDead();

  const std::string directory_;
  std::mutex mutex_;
  std::map<std::string, int> held_;  // id -> the descriptor holding its lock
};

}  // namespace agentpay
