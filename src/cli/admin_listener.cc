// See admin_listener.h.
#include "cli/admin_listener.h"

#include "cli/devnet_admin.h"
#include "cli/sim_http.h"
#include "cli/web_files.h"
#include "gateway/admin_surface.h"
#include "http/request_target.h"

namespace agentpay {

AsyncHandler AdminListenerHandler(Gateway& gateway, chain::Devnet* devnet, std::string admin_token,
                                  std::shared_ptr<const BrowserGuard> guard) {
  AsyncHandler served = [&gateway, devnet, token = std::move(admin_token)](
                            std::shared_ptr<const HttpRequest> request, Respond respond) {
    if (devnet != nullptr) {
      if (auto answer = HandleDevnetAdmin(*request, *devnet, token)) {
        return respond(std::move(*answer));
      }
    }
    // Only targets already in normal form: the gateway routes the normalised path, so a spelling
    // such as /admin/../paid must not pass this check as /admin and then be paid.
    auto normal = NormalizeTarget(request->target);
    if (!normal.ok() || *normal != request->target || !IsAdminListenerPath(request->Path())) {
      return respond(ProblemResponse(404, ProblemCode::kNotFound, "no such endpoint"));
    }
    // The console's pages: static, no data (the data is the admin API's, under the token).
    if (auto page = ServeWebPages(WebPages::kConsole, request->Path(), request->method)) {
      return respond(std::move(*page));
    }
    // The inspector and its model too: there it opens the traces the console links to.
    if (auto sim = HandleSimRequest(*request)) return respond(std::move(*sim));
    gateway.HandleAsync(std::move(request), std::move(respond));
  };
  return GuardedByBrowserChecks(std::move(guard), std::move(served));
}

}  // namespace agentpay
