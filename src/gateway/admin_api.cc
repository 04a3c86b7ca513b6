// The admin API (CONTRACT §3): accounts, deposits idempotent by reference, operation listing.
// Every call needs `Authorization: Bearer <admin token>`.
#include "core/money.h"
#include "gateway/gateway_internal.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"

namespace agentpay {
namespace {

constexpr size_t kMaxNameLength = 200;
constexpr size_t kMaxReferenceLength = 255;
constexpr int kMaxListLimit = 1000;

std::optional<nlohmann::json> ParseObject(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return parsed;
}

HttpResponse BadJson(std::string_view what) {
  return ProblemResponse(400, "invalid_request", std::string(what));
}

// The value of `name` in a query string such as "a=1&b=2" (no percent-decoding: values are names).
std::optional<std::string_view> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

}  // namespace

HttpResponse Gateway::HandleAdmin(const HttpRequest& request) {
  if (config_.admin_token.empty()) {
    return ProblemResponse(403, "admin_disabled", "start the gateway with --admin-token-file");
  }
  auto header = request.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (!header || !header->starts_with(kBearer) ||
      !SecretEquals(header->substr(kBearer.size()), config_.admin_token)) {
    return ProblemResponse(401, "unauthorized", "the admin API needs the admin bearer token");
  }
  std::string_view path = request.Path();
  constexpr std::string_view kAccounts = "/admin/v1/accounts";
  if (path == kAccounts) {
    if (request.method != "POST") return ProblemResponse(405, "method_not_allowed", "use POST");
    return CreateAccount(request);
  }
  if (path.starts_with(std::string(kAccounts) + "/")) {
    std::string_view rest = path.substr(kAccounts.size() + 1);
    constexpr std::string_view kDeposits = "/deposits";
    if (rest.ends_with(kDeposits)) {
      if (request.method != "POST") return ProblemResponse(405, "method_not_allowed", "use POST");
      return Deposit(request, rest.substr(0, rest.size() - kDeposits.size()));
    }
    if (request.method != "GET") return ProblemResponse(405, "method_not_allowed", "use GET");
    return AdminGetAccount(rest);
  }
  if (path == "/admin/v1/operations") {
    if (request.method != "GET") return ProblemResponse(405, "method_not_allowed", "use GET");
    return ListOperations(request);
  }
  if (path == "/admin/v1/alerts") {
    if (request.method != "GET") return ProblemResponse(405, "method_not_allowed", "use GET");
    return ListAlerts(request);
  }
  return ProblemResponse(404, "not_found", "no such admin endpoint");
}

HttpResponse Gateway::CreateAccount(const HttpRequest& request) {
  auto body = ParseObject(request.body);
  if (!body) return BadJson("the body must be a JSON object {\"name\": ...}");
  auto name = body->find("name");
  if (name == body->end() || !name->is_string() || name->get<std::string>().empty() ||
      name->get<std::string>().size() > kMaxNameLength) {
    return BadJson("\"name\" must be a string of 1-200 characters");
  }
  AccountRecord account;
  account.id = NewAccountId(random_);
  account.name = name->get<std::string>();
  std::string api_key = NewApiKey(random_);
  account.api_key_hash = Sha256Hex(api_key);
  account.created_ms = clock_.NowMs();
  Status status = store_.Write([&](Transaction& tx) -> Status {
    auto inserted = tx.InsertAccount(account);
    if (!inserted.ok()) return inserted.status();
    if (!*inserted) return Status::Error("store_conflict", "account id collision");
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json json = AccountJson(account);
  json["api_key"] = api_key;
  return JsonResponse(201, DumpJson(json));
}

HttpResponse Gateway::Deposit(const HttpRequest& request, std::string_view account_id) {
  auto body = ParseObject(request.body);
  if (!body) return BadJson("the body must be a JSON object {\"amount\": \"...\", \"reference\": ...}");
  auto amount_field = body->find("amount");
  auto reference_field = body->find("reference");
  std::optional<int64_t> amount;
  if (amount_field != body->end() && amount_field->is_string()) {
    amount = ParseAmount(amount_field->get<std::string>());
  }
  if (!amount || *amount == 0) {
    return BadJson("\"amount\" must be a positive integer of atomic units, as a decimal string");
  }
  if (reference_field == body->end() || !reference_field->is_string() ||
      reference_field->get<std::string>().empty() ||
      reference_field->get<std::string>().size() > kMaxReferenceLength) {
    return BadJson("\"reference\" must be a string of 1-255 characters");
  }
  const std::string reference = reference_field->get<std::string>();
  enum class Outcome { kDeposited, kReplayed, kMismatch, kNoAccount, kOverflow } outcome{};
  std::optional<AccountRecord> account;
  Status status = store_.Write([&](Transaction& tx) -> Status {
    const int64_t now = clock_.NowMs();
    auto found = tx.FindAccount(account_id);
    if (!found.ok()) return found.status();
    if (!found->has_value()) {
      outcome = Outcome::kNoAccount;
      return Status::Ok();
    }
    auto inserted = tx.InsertDeposit({std::string(account_id), reference, *amount, now});
    if (!inserted.ok()) return inserted.status();
    if (!*inserted) {
      auto existing = tx.FindDeposit(account_id, reference);
      if (!existing.ok()) return existing.status();
      outcome = (*existing)->amount == *amount ? Outcome::kReplayed : Outcome::kMismatch;
    } else {
      auto moved = tx.Move(account_id, MoveKind::kDeposit, *amount, "", now);
      if (!moved.ok()) return moved.status();
      if (*moved != MoveOutcome::kOk) {
        outcome = Outcome::kOverflow;
        return Rollback();
      }
      outcome = Outcome::kDeposited;
    }
    auto after = tx.FindAccount(account_id);
    if (!after.ok()) return after.status();
    account = **after;
    return Status::Ok();
  });
  if (!status.ok() && !IsRollback(status)) return StoreProblem(status);
  switch (outcome) {
    case Outcome::kNoAccount:
      return ProblemResponse(404, "not_found", "no account " + std::string(account_id));
    case Outcome::kMismatch:
      return ProblemResponse(422, "deposit_reference_mismatch",
                             "this reference was used for a deposit of a different amount");
    case Outcome::kOverflow:
      return ProblemResponse(422, "amount_overflow", "the deposit would overflow the balance");
    case Outcome::kDeposited:
    case Outcome::kReplayed: {
      HttpResponse response =
          JsonResponse(outcome == Outcome::kDeposited ? 201 : 200, DumpJson(AccountJson(*account)));
      response.SetHeader("Idempotent-Replayed", outcome == Outcome::kReplayed ? "true" : "false");
      return response;
    }
  }
  return ProblemResponse(500, "internal_error", "unreachable");
}

HttpResponse Gateway::AdminGetAccount(std::string_view account_id) {
  std::optional<AccountRecord> account;
  Status status = store_.Read([&](Transaction& tx) {
    auto found = tx.FindAccount(account_id);
    if (!found.ok()) return found.status();
    account = std::move(*found);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  if (!account) return ProblemResponse(404, "not_found", "no account " + std::string(account_id));
  return JsonResponse(200, DumpJson(AccountJson(*account)));
}

// The `limit` query parameter: default 100, 1..kMaxListLimit.
static std::optional<int> ListLimit(std::string_view query) {
  auto value = QueryParam(query, "limit");
  if (!value || value->empty()) return 100;
  auto limit = ParseAmount(*value);
  if (!limit || *limit < 1 || *limit > kMaxListLimit) return std::nullopt;
  return static_cast<int>(*limit);
}

HttpResponse Gateway::ListAlerts(const HttpRequest& request) {
  auto limit = ListLimit(request.Query());
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  std::vector<Alert> alerts;
  Status status = store_.Read([&](Transaction& tx) {
    auto listed = tx.ListAlerts(*limit);
    if (!listed.ok()) return listed.status();
    alerts = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& alert : alerts) list.push_back(AlertJson(alert));
  return JsonResponse(200, DumpJson({{"alerts", list}}));
}

HttpResponse Gateway::ListOperations(const HttpRequest& request) {
  OperationFilter filter;
  std::string_view query = request.Query();
  if (auto value = QueryParam(query, "settlement"); value && !value->empty()) {
    filter.settlement = ParseSettlement(*value);
    if (!filter.settlement) return BadJson("unknown settlement state");
  }
  if (auto value = QueryParam(query, "fulfillment"); value && !value->empty()) {
    filter.fulfillment = ParseFulfillment(*value);
    if (!filter.fulfillment) return BadJson("unknown fulfillment state");
  }
  auto limit = ListLimit(query);
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  filter.limit = *limit;
  std::vector<Operation> ops;
  Status status = store_.Read([&](Transaction& tx) {
    auto listed = tx.ListOperations(filter);
    if (!listed.ok()) return listed.status();
    ops = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& op : ops) list.push_back(OperationJson(op));
  return JsonResponse(200, DumpJson({{"operations", list}}));
}

}  // namespace agentpay
