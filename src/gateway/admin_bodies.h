// The JSON bodies of the admin API's writes (CONTRACT §3): accounts, deposits, resolve. Pure
// parsers, apart from the handlers that use them, so a fuzz target (fuzz/admin_body_fuzzer.cc) and
// unit tests reach exactly what the API runs. An error is kInvalidArgument with the message the
// API answers with (400 invalid_request).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/resolution.h"
#include "core/result.h"

namespace agentpay {

inline constexpr size_t kMaxAccountNameLength = 200;
inline constexpr size_t kMaxDepositReferenceLength = 255;
// Admin bodies are flat objects; a body nested deeper than this is refused before it is parsed.
inline constexpr int kMaxAdminJsonDepth = 8;

struct NewAccountBody {
  std::string name;  // 1..kMaxAccountNameLength bytes
};
struct DepositBody {
  int64_t amount = 0;     // > 0, atomic units
  std::string reference;  // 1..kMaxDepositReferenceLength bytes
};
struct ResolveBody {
  ResolutionOutcome outcome = ResolutionOutcome::kNoAction;
  std::string note;  // 1..kMaxResolutionNoteLength bytes
};

// POST /admin/v1/accounts: {"name": "..."}.
Result<NewAccountBody> ParseNewAccountBody(std::string_view body);
// POST /admin/v1/accounts/{id}/deposits: {"amount": "<decimal atomic units>", "reference": "..."}.
Result<DepositBody> ParseDepositBody(std::string_view body);
// POST /admin/v1/operations/{id}/resolve: {"outcome": "delivered|...", "note": "..."}.
Result<ResolveBody> ParseResolveBody(std::string_view body);

}  // namespace agentpay
