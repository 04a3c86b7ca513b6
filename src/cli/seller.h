// The demo seller upstream (CONTRACT §8): answers any path, with a fault chosen per request
// (X-Seller-Fault) or per process (--fault), and counts the work it actually executed.
#pragma once

#include <atomic>
#include <string>

#include "http/message.h"

namespace agentpay {

class Seller {
 public:
  explicit Seller(std::string default_fault) : default_fault_(std::move(default_fault)) {}
  HttpResponse Handle(const HttpRequest& request);
  uint64_t executed() const { return executed_.load(); }

  // ok, 4xx, 5xx, slow:MS (MS ≤ kMaxSlowMs), hang, drop.
  static bool ValidFault(std::string_view fault);
  static constexpr int64_t kMaxSlowMs = 600000;

 private:
  HttpResponse Execute(const HttpRequest& request);

  std::string default_fault_;
  std::atomic<uint64_t> executed_{0};
};

int RunSeller(const std::string& listen, const std::string& fault);

}  // namespace agentpay
