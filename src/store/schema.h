// Versioned schema migrations. Each entry is applied once, in order, in one transaction with the
// row that records it in schema_migrations; a database newer than this binary is refused. Every
// version is written in both dialects, side by side, so that the two backends cannot drift apart:
// the PostgreSQL text differs only where the dialects do (identity columns, BYTEA, and every TEXT
// column COLLATE "C", so that ids compare and sort byte by byte as in SQLite).
#pragma once

#include <string_view>
#include <vector>

namespace agentpay {

struct Migration {
  int version;
  std::string_view description;
  std::string_view sqlite;
  std::string_view postgres;
};

const std::vector<Migration>& Migrations();

}  // namespace agentpay
