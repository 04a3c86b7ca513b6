// A real Anvil node for the RPC tests: started on a free loopback port, killed with its parent,
// paused and resumed with SIGSTOP/SIGCONT to play a hung node.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/result.h"
#include "http/client.h"

namespace agentpay::chain::test_util {

class AnvilProcess {
 public:
  AnvilProcess() = default;
  AnvilProcess(const AnvilProcess&) = delete;
  AnvilProcess& operator=(const AnvilProcess&) = delete;
  ~AnvilProcess() { Stop(); }

  // Starts `binary --chain-id chain_id` and waits until eth_chainId answers. Errors name the
  // cause; a missing binary says how to install it.
  Status Start(const std::string& binary, uint64_t chain_id);
  // SIGCONT, SIGTERM, wait up to 3 s, then SIGKILL and wait: the port is free on return.
  void Stop();
  void Pause();   // SIGSTOP: the kernel still accepts connections, nothing answers
  void Resume();  // SIGCONT

  Endpoint endpoint() const { return Endpoint{"127.0.0.1", port_, ""}; }
  uint16_t port() const { return port_; }
  std::string LogTail() const;

 private:
  Status SpawnOnce(const std::string& binary, uint64_t chain_id);

  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
};

}  // namespace agentpay::chain::test_util
