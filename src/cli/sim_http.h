// GET /v1/sim (CONTRACT §7): the request/effect model over HTTP, served by `agentpay sim --serve`
// and by `agentpay serve`. It lives in cli because the gateway may not include src/sim (DESIGN).
#pragma once

#include <optional>
#include <string>

#include "http/message.h"

namespace agentpay {

// The answer for GET /v1/sim, or nullopt when the request is for another path.
std::optional<HttpResponse> HandleSimRequest(const HttpRequest& request);

// `agentpay sim --serve --listen H:P`: serves /v1/sim until SIGINT/SIGTERM.
int RunSimServer(const std::string& listen);

}  // namespace agentpay
