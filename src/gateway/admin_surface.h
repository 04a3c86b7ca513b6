// Which listener serves what (issue 13): the admin listener (--admin-listen) serves the admin API,
// the devnet controls, /metrics and /console/; the public listener (--listen) serves none of them.
// Pure predicates over the request target, so the split is unit-tested without sockets.
#pragma once

#include <string_view>

namespace agentpay {

// Whether the public listener must refuse `path` (404 not_found, as for an unknown endpoint):
// anything that is, or could be read by some later normalisation as, /admin, /metrics or
// /console. The path is checked after percent-decoding, collapsing repeated slashes, removing
// dot segments and lower-casing, so `//ADMIN/./v1/accounts` or `/%61dmin/...` are refused too.
bool IsAdminSurfacePath(std::string_view path);

// Whether the admin listener serves `path` (exactly, as the admin API and the pages match it):
// /healthz, /metrics, /admin/..., /console, /console/..., the inspector (/inspector,
// /inspector/...) and its model (/v1/sim). Anything else there is 404.
bool IsAdminListenerPath(std::string_view path);

}  // namespace agentpay
