// AnvilProcess: fork/exec with PR_SET_PDEATHSIG so that a crashed test leaves no node behind.
#include "rpc_anvil_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "chain/json_rpc.h"
#include "test_util.h"

namespace agentpay::chain::test_util {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStartAttempts = 3;
constexpr auto kStartTimeout = std::chrono::seconds(15);
constexpr auto kStopTimeout = std::chrono::seconds(3);

bool WaitExited(pid_t pid, Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno == ECHILD)) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

Status AnvilProcess::Start(const std::string& binary, uint64_t chain_id) {
  if (::access(binary.c_str(), X_OK) != 0) {
    return Status::Error(ErrorCode::kIoError,
                         "Anvil binary not found at " + binary +
                             "; run `bash tests/chain_env/install.sh` to install it");
  }
  Status last;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    last = SpawnOnce(binary, chain_id);
    if (last.ok()) return last;
    Stop();
  }
  return last;
}

Status AnvilProcess::SpawnOnce(const std::string& binary, uint64_t chain_id) {
  port_ = FreeLoopbackPort();
  char log_template[] = "/tmp/agentpay-anvil-XXXXXX.log";
  int log_fd = ::mkstemps(log_template, 4);
  if (log_fd < 0) return Status::Error(ErrorCode::kIoError, "cannot create a log file");
  log_path_ = log_template;
  const std::string port = std::to_string(port_);
  const std::string chain = std::to_string(chain_id);
  const std::vector<std::string> args = {binary, "--host",     "127.0.0.1", "--port",
                                         port,   "--chain-id", chain};
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {  // child: only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int null_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid_ < 0) return Status::Error(ErrorCode::kIoError, "fork failed");
  JsonRpcClient client(endpoint(), 500);
  const auto deadline = Clock::now() + kStartTimeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Error(ErrorCode::kIoError, "anvil exited at start: " + LogTail());
    }
    Result<nlohmann::json> id = client.Call("eth_chainId", nlohmann::json::array());
    if (id.ok() && id->is_string()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::Error(ErrorCode::kIoError, "anvil did not answer eth_chainId: " + LogTail());
}

void AnvilProcess::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    if (!WaitExited(pid_, kStopTimeout)) {
      ::kill(pid_, SIGKILL);
      WaitExited(pid_, std::chrono::hours(1));
    }
    pid_ = -1;
  }
  if (!log_path_.empty()) {
    ::unlink(log_path_.c_str());
    log_path_.clear();
  }
}

void AnvilProcess::Pause() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGSTOP);
  // kill() returns before every thread of the node has stopped (on a loaded VM a thread running on
  // another CPU went on to answer the next request): wait until the kernel reports the stop.
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid_, &status, WUNTRACED)) == -1 && errno == EINTR) {
  }
  if (waited == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) pid_ = -1;  // it died
}

void AnvilProcess::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string AnvilProcess::LogTail() const {
  std::ifstream file(log_path_);
  std::stringstream text;
  text << file.rdbuf();
  std::string all = text.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

}  // namespace agentpay::chain::test_util
