// The backends OpenStore (store.cc) chooses between by the URL's scheme. Each opens, creates and
// migrates its database as needed.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace agentpay {

// `path`: the database file (the URL after "sqlite:").
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const StoreOptions& options);
// `url`: a libpq connection URI (postgresql://… or postgres://…).
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const StoreOptions& options);

}  // namespace agentpay
