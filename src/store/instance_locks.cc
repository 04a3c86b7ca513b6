// See instance_locks.h. Why flock(2) and not fcntl(2) locks: an fcntl lock belongs to the process,
// so closing any descriptor of the file drops it and a probe from the owning process always
// succeeds; a flock belongs to the open file description, which is exactly one registration here.
#include "store/instance_locks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace agentpay {
namespace {

constexpr std::string_view kSuffix = ".lock";
constexpr int kMaxRegisterRounds = 3;

Status SystemError(const std::string& what) {
  return Status::Error(ErrorCode::kStoreUnavailable, what + ": " + std::strerror(errno));
}

// flock, retried when a signal interrupts it. Returns 0 or the errno.
int TryLock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// Whether `path` still names the file open as `fd` (a prober may have removed it meanwhile).
bool StillNamed(int fd, const std::string& path) {
  struct stat open_file = {};
  struct stat named = {};
  if (::fstat(fd, &open_file) != 0 || ::stat(path.c_str(), &named) != 0) return false;
  return open_file.st_dev == named.st_dev && open_file.st_ino == named.st_ino;
}

}  // namespace

InstanceLocks::InstanceLocks(std::string directory) : directory_(std::move(directory)) {}

InstanceLocks::~InstanceLocks() {
  std::lock_guard lock(mutex_);
  for (const auto& [id, fd] : held_) {
    ::unlink(PathOf(id).c_str());
    ::close(fd);
  }
  held_.clear();
}

std::string InstanceLocks::PathOf(const std::string& id) const {
  return directory_ + "/" + id + std::string(kSuffix);
}

Status InstanceLocks::Register(const std::string& id) {
  if (!ValidInstanceId(id)) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "instance id must be 1-64 characters of [A-Za-z0-9_-]");
  }
  std::lock_guard lock(mutex_);
  if (held_.contains(id)) {
    return Status::Error(ErrorCode::kInstanceTaken, "instance " + id + " is alive");
  }
  if (::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
    return SystemError("cannot create " + directory_);
  }
  SweepDead();
  const std::string path = PathOf(id);
  for (int round = 0; round < kMaxRegisterRounds; ++round) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return SystemError("cannot open " + path);
    if (int error = TryLock(fd); error != 0) {
      ::close(fd);
      if (error == EWOULDBLOCK) {
        return Status::Error(ErrorCode::kInstanceTaken, "instance " + id + " is alive");
      }
      errno = error;
      return SystemError("cannot lock " + path);
    }
    // A probe that found an earlier file of this name unlocked removes it; if that happened
    // between our open and our lock, we hold a lock nobody can find: start again.
    if (!StillNamed(fd, path)) {
      ::close(fd);
      continue;
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) {
      [[maybe_unused]] ssize_t written = ::pwrite(fd, pid.data(), pid.size(), 0);
    }
    held_.emplace(id, fd);
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kStoreUnavailable, "cannot register instance " + id +
                                                         ": its lock file "
                                                         "kept disappearing");
}

Status InstanceLocks::Release(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto held = held_.find(id);
  if (held == held_.end()) return Status::Ok();
  // Removed while still locked, so that no probe can mistake the file for a dead instance's
  // leftovers and a later probe finds no file: dead.
  ::unlink(PathOf(id).c_str());
  ::close(held->second);
  held_.erase(held);
  return Status::Ok();
}

Result<bool> InstanceLocks::Alive(const std::string& id) {
  if (!ValidInstanceId(id)) return false;
  std::lock_guard lock(mutex_);
  if (held_.contains(id)) return true;
  return Probe(id);
}

Result<bool> InstanceLocks::Probe(const std::string& id) {
  const std::string path = PathOf(id);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;  // released, or removed by an earlier probe
    return SystemError("cannot open " + path);
  }
  int error = TryLock(fd);
  if (error == EWOULDBLOCK) {
    ::close(fd);
    return true;
  }
  if (error != 0) {
    ::close(fd);
    errno = error;
    return SystemError("cannot lock " + path);
  }
  // Nobody holds it: its owner died without releasing it. Forget the file.
  if (StillNamed(fd, path)) ::unlink(path.c_str());
  ::close(fd);
  return false;
}

void InstanceLocks::SweepDead() {
  DIR* dir = ::opendir(directory_.c_str());
  if (dir == nullptr) return;
  int examined = 0;
  while (const struct dirent* entry = ::readdir(dir)) {
    if (examined >= kMaxSweptPerRegistration) break;
    std::string_view name = entry->d_name;
    if (!name.ends_with(kSuffix)) continue;
    std::string id(name.substr(0, name.size() - kSuffix.size()));
    if (!ValidInstanceId(id) || held_.contains(id)) continue;
    ++examined;
    (void)Probe(id);  // best effort: a file it cannot examine now is examined next time
  }
  ::closedir(dir);
}

}  // namespace agentpay
