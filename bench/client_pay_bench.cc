// client_pay_bench: payments/s through the C++ agent client as a library call (client::Pay), the
// baseline of bench/python_overhead.py. Pays --payments requests to --url from --threads threads,
// each with its own task and step (each a new business action: a real payment), sharing one
// budget file. Prints one JSON line: {"payments", "paid", "seconds", "per_second"}.
//
// Usage: client_pay_bench --url URL --api-key-file F --budget-db DB --payments N --threads T
//        [--task NAME] [--budget TOTAL]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agentpay/client.h"

namespace {

std::string Arg(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = Arg(argc, argv, "--url");
  const std::string key_file = Arg(argc, argv, "--api-key-file");
  const std::string budget_db = Arg(argc, argv, "--budget-db");
  const int payments = std::atoi(Arg(argc, argv, "--payments", "200").c_str());
  const int threads = std::atoi(Arg(argc, argv, "--threads", "4").c_str());
  const std::string task = Arg(argc, argv, "--task", "bench");
  const int64_t budget = std::atoll(Arg(argc, argv, "--budget", "1000000000000").c_str());
  std::string api_key;
  std::ifstream(key_file) >> api_key;
  if (url.empty() || api_key.empty() || budget_db.empty() || payments < 1 || threads < 1) {
    std::fprintf(stderr,
                 "usage: client_pay_bench --url URL --api-key-file F --budget-db DB "
                 "--payments N --threads T [--task NAME]\n");
    return 64;
  }
  std::atomic<int> next{0}, paid{0};
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i = next++; i < payments; i = next++) {
        agentpay::client::PayOptions options;
        options.url = url;
        options.method = "POST";
        options.body = "{\"n\":" + std::to_string(i) + "}";
        options.headers = {{"Content-Type", "application/json"}};
        options.api_key = api_key;
        options.task = task;
        options.step = static_cast<uint64_t>(i);
        options.budget_db = budget_db;
        options.budget = budget;  // the file's total when this run creates it
        agentpay::client::PayResult result = agentpay::client::Pay(options);
        if (result.exit_code == agentpay::client::ExitCode::kPaid) ++paid;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("{\"payments\": %d, \"paid\": %d, \"seconds\": %.3f, \"per_second\": %.1f}\n",
              payments, paid.load(), seconds, paid.load() / seconds);
  return paid.load() == payments ? 0 : 1;
}
