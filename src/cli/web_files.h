// The static page sets `serve` hands out: the inspector (/inspector/, on both listeners and
// `sim --serve`) and the operator console (/console/, admin listener). Each is a fixed whitelist of
// files read from the web directory ($AGENTPAY_WEB_DIR, else <exe dir>/../web, <exe dir>/web,
// ./web): no request path ever reaches the filesystem. The pages carry no data; the console's
// data comes from the admin API under the admin token.
#pragma once

#include <optional>
#include <string_view>

#include "http/message.h"

namespace agentpay {

enum class WebPages { kInspector, kConsole };

// GET of one of the set's files (its prefix alone redirects to prefix + "/"), 405 for another
// method, 404 for another name; nullopt when `path` is not under the set's prefix.
std::optional<HttpResponse> ServeWebPages(WebPages pages, std::string_view path,
                                          std::string_view method);

}  // namespace agentpay
