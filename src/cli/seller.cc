// The demo seller; see seller.h.
#include "cli/seller.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/money.h"
#include "cli/signals.h"
#include "http/server.h"

namespace agentpay {
namespace {

std::optional<int64_t> SlowMs(std::string_view fault) {
  constexpr std::string_view kSlow = "slow:";
  if (!fault.starts_with(kSlow)) return std::nullopt;
  auto ms = ParseAmount(fault.substr(kSlow.size()));
  if (!ms || *ms > Seller::kMaxSlowMs) return std::nullopt;
  return ms;
}

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

bool Seller::ValidFault(std::string_view fault) {
  return fault == "ok" || fault == "4xx" || fault == "5xx" || fault == "hang" || fault == "drop" ||
         SlowMs(fault).has_value();
}

HttpResponse Seller::Execute(const HttpRequest& request) {
  uint64_t count = ++executed_;
  return JsonResponse(200, Dump({{"ok", true},
                                 {"executed", count},
                                 {"method", request.method},
                                 {"path", std::string(request.Path())},
                                 {"body", request.body}}));
}

HttpResponse Seller::Handle(const HttpRequest& request) {
  if (request.Path() == "/_seller/stats") {
    return JsonResponse(200, Dump({{"executed", executed()}}));
  }
  std::string fault(request.Header("X-Seller-Fault").value_or(default_fault_));
  if (fault == "ok") return Execute(request);
  if (fault == "4xx") {
    return JsonResponse(400, Dump({{"ok", false}, {"error", "the seller refused this input"}}));
  }
  if (fault == "5xx") {
    return JsonResponse(500, Dump({{"ok", false}, {"error", "the seller failed"}}));
  }
  if (auto ms = SlowMs(fault)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(*ms));
    return Execute(request);
  }
  if (fault == "hang") {
    HttpResponse response;
    response.disposition = Disposition::kHang;
    return response;
  }
  if (fault == "drop") {
    Execute(request);
    HttpResponse response;
    response.disposition = Disposition::kDropConnection;
    return response;
  }
  return JsonResponse(400, Dump({{"ok", false},
                                 {"error", "unknown X-Seller-Fault; use ok, 4xx, 5xx, slow:MS, "
                                           "hang or drop"}}));
}

int RunSeller(const std::string& listen, const std::string& fault) {
  if (!Seller::ValidFault(fault)) {
    std::fprintf(stderr, "agentpay seller: unknown --fault '%s' (ok, 4xx, 5xx, slow:MS, hang, drop)\n",
                 fault.c_str());
    return 2;
  }
  auto address = ParseListenAddress(listen);
  if (!address.ok()) {
    std::fprintf(stderr, "agentpay seller: %s\n", address.status().message().c_str());
    return 2;
  }
  TerminationSignals signals;  // before any thread starts: they inherit the mask

  Seller seller(fault);
  ServerLimits limits;
  limits.workers = 256;  // slow:MS occupies a worker while it sleeps
  limits.max_body_bytes = 8 * 1024 * 1024;
  // An upstream's one client is the gateway, from one address: no per-client share.
  limits.max_connections_per_client = limits.max_connections;
  auto server = HttpServer::Start(address->first, address->second, limits,
                                  [&seller](const HttpRequest& request) {
                                    return seller.Handle(request);
                                  });
  if (!server.ok()) {
    std::fprintf(stderr, "agentpay seller: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("agentpay seller listening on http://%s:%u (fault %s)\n", address->first.c_str(),
              (*server)->port(), fault.c_str());
  std::fflush(stdout);
  signals.Wait();
  (*server)->Stop();
  return 0;
}

}  // namespace agentpay
