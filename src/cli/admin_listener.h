// Everything the admin listener (--admin-listen) answers, as one handler behind the browser checks
// (http/browser_guard.h): the devnet controls, the console's and the inspector's pages, the model,
// and the gateway's admin API, /metrics and /healthz. Built here, not inline in serve.cc, so that
// the tests run the very handler `serve` runs, and no path of the listener can bypass the guard.
#pragma once

#include <memory>
#include <string>

#include "chain/devnet.h"
#include "gateway/gateway.h"
#include "http/browser_guard.h"
#include "http/server.h"

namespace agentpay {

// `gateway`, `devnet` (null without the built-in devnet) and `guard` outlive the handler. A
// request the guard refuses reaches nothing else: not the devnet, not the admin API, not a page.
AsyncHandler AdminListenerHandler(Gateway& gateway, chain::Devnet* devnet, std::string admin_token,
                                  std::shared_ptr<const BrowserGuard> guard);

}  // namespace agentpay
