// Versioned schema migrations. Each entry is applied once, in order, in one transaction with the
// row that records it in schema_migrations; a database newer than this binary is refused.
#pragma once

#include <string_view>
#include <vector>

namespace agentpay {

struct Migration {
  int version;
  std::string_view description;
  std::string_view sql;
};

const std::vector<Migration>& Migrations();

}  // namespace agentpay
