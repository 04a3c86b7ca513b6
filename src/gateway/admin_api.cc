// The admin API; see admin_api.h.
#include "gateway/admin_api.h"

#include <cctype>

#include "core/money.h"
#include "core/resolution.h"
#include "gateway/admin_bodies.h"
#include "gateway/answers.h"
#include "gateway/api_keys.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"
#include "gateway/views.h"
#include "settlement/relayer_watch.h"
#include "store/books_audit.h"

namespace agentpay {
namespace {

constexpr int kMaxListLimit = 1000;
// Keys an account may hold unrevoked at once: enough to rotate (old and new) with room to spare,
// few enough that a leaked admin token cannot grow the key table without bound.
constexpr size_t kMaxActiveApiKeys = 10;
constexpr std::string_view kApiKeys = "/api-keys";

nlohmann::json ApiKeyJson(const ApiKeyRecord& key) {
  nlohmann::json json = {{"key_id", key.id},
                         {"account_id", key.account_id},
                         {"created_ms", key.created_ms},
                         {"revoked", key.revoked_ms.has_value()}};
  if (key.revoked_ms) json["revoked_ms"] = *key.revoked_ms;
  return json;
}

// Text filters and cursors of the listings are at most this long.
constexpr size_t kMaxFilterBytes = 255;

std::string ToLowerAscii(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

HttpResponse BadJson(std::string_view what) {
  return ProblemResponse(400, ProblemCode::kInvalidRequest, std::string(what));
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

// What one resolve decision found and did (see DecideResolution).
struct ResolveResult {
  bool found = false;
  ResolveDecision decision = ResolveDecision::kNoAlerts;
  std::vector<Alert> alerts;   // the operation's alerts, as they are after the decision
  int64_t resolved_now = 0;    // alerts this decision closed
  int64_t refunded_now = 0;    // atomic units this decision returned to the wallet
  int64_t refunded_total = 0;  // all refunds of the operation, this one included
};

int64_t RefundedTotal(const std::vector<PostingRecord>& postings) {
  int64_t total = 0;
  for (const PostingRecord& posting : postings) {
    if (posting.kind == MoveKind::kRefund) total += posting.amount;
  }
  return total;
}

// One decision: resolves every open alert of the operation with (outcome, note), applies the
// outcome's money move (only `refunded` of a wallet operation moves money: its net capture goes
// back through the ledger), and records an event on the operation's trace, actor "admin".
Status DecideResolution(Transaction& tx, std::string_view operation_id, ResolutionOutcome outcome,
                        const std::string& note, int64_t now, ResolveResult& result) {
  result = ResolveResult{};
  auto op = tx.FindOperation(operation_id);
  if (!op.ok()) return op.status();
  if (!op->has_value()) return Status::Ok();
  result.found = true;
  auto alerts = tx.ListAlertsOf(operation_id);
  if (!alerts.ok()) return alerts.status();
  auto postings = tx.ListPostings(operation_id);
  if (!postings.ok()) return postings.status();
  result.alerts = std::move(*alerts);
  result.refunded_total = RefundedTotal(*postings);
  result.decision = DecideResolve(result.alerts, outcome, note);
  if (result.decision != ResolveDecision::kResolve) return Status::Ok();
  for (Alert& alert : result.alerts) {
    if (alert.resolved_ms) continue;
    alert = ResolveAlert(alert, outcome, note, now);
    auto written = tx.ResolveAlert(alert);
    if (!written.ok()) return written.status();
    AGENTPAY_CHECK(*written);  // it was open in this very transaction
    ++result.resolved_now;
  }
  auto account = WalletAccountOf((*op)->principal);
  std::string money = "money unchanged";
  if (outcome == ResolutionOutcome::kRefunded && account) {
    const int64_t refundable = RefundableAmount(*postings);
    if (refundable > 0) {
      auto moved = tx.Move(*account, MoveKind::kRefund, refundable, operation_id, now);
      if (!moved.ok()) return moved.status();
      if (*moved != MoveOutcome::kOk) {
        return Status::Error(
            ErrorCode::kStoreCorrupt,
            "the capture of " + std::string(operation_id) + " is not on its account");
      }
      result.refunded_now = refundable;
      result.refunded_total += refundable;
      money = "refunded " + std::to_string(refundable) + " to wallet:" + *account;
    } else {
      money = "nothing captured, nothing refunded";
    }
  } else if (outcome == ResolutionOutcome::kRefunded) {
    money = "x402: the refund is made on chain outside the gateway; recorded only";
  }
  return tx.AppendEvent({std::string(operation_id), now, TraceActor::kAdmin, "resolved",
                         std::string(ResolutionOutcomeName(outcome)) + ": " + note + " (" +
                             std::to_string(result.resolved_now) + " alert(s) resolved; " + money +
                             ")",
                         TraceFacts()
                             .Amount(result.refunded_now)
                             .Reason(std::string(ResolutionOutcomeName(outcome)))});
}

HttpResponse ResolutionAnswer(std::string_view operation_id, const ResolveResult& result,
                              bool replayed) {
  const Alert* latest = LatestResolution(result.alerts);
  AGENTPAY_CHECK(latest != nullptr);
  nlohmann::json alerts = nlohmann::json::array();
  for (const Alert& alert : result.alerts) alerts.push_back(AlertJson(alert));
  nlohmann::json json = {{"operation_id", std::string(operation_id)},
                         {"outcome", latest->resolution},
                         {"note", latest->note},
                         {"resolved_ms", *latest->resolved_ms},
                         {"refunded", FormatAmount(result.refunded_total)},
                         {"alerts", alerts}};
  HttpResponse response = JsonResponse(200, DumpJson(json));
  response.SetHeader("Idempotent-Replayed", replayed ? "true" : "false");
  return response;
}

}  // namespace

HttpResponse AdminApi::Handle(const HttpRequest& request) {
  if (ctx_.config.admin_token.empty()) {
    return ProblemResponse(403, ProblemCode::kAdminDisabled,
                           "start the gateway with --admin-token-file");
  }
  if (!IsAdmin(request, ctx_.config.admin_token)) {
    return ProblemResponse(401, ProblemCode::kUnauthorized,
                           "the admin API needs the admin bearer token");
  }
  std::string_view path = request.Path();
  constexpr std::string_view kAccounts = "/admin/v1/accounts";
  if (path == kAccounts) {
    if (request.method == "GET") return ListAccounts(request);
    if (request.method != "POST") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET or POST");
    }
    return CreateAccount(request);
  }
  if (path == "/admin/v1/overview") {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return Overview();
  }
  if (path.starts_with(std::string(kAccounts) + "/")) {
    std::string_view rest = path.substr(kAccounts.size() + 1);
    if (auto keys = rest.find(kApiKeys); keys != std::string_view::npos) {
      return ApiKeys(request, rest.substr(0, keys), rest.substr(keys + kApiKeys.size()));
    }
    constexpr std::string_view kDeposits = "/deposits";
    if (rest.ends_with(kDeposits)) {
      if (request.method != "POST") {
        return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use POST");
      }
      return Deposit(request, rest.substr(0, rest.size() - kDeposits.size()));
    }
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return AccountAnswer(ctx_.store, rest);
  }
  constexpr std::string_view kOperationsPrefix = "/admin/v1/operations/";
  constexpr std::string_view kResolve = "/resolve";
  if (path.starts_with(kOperationsPrefix) && path.ends_with(kResolve) &&
      path.size() > kOperationsPrefix.size() + kResolve.size()) {
    if (request.method != "POST") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use POST");
    }
    std::string_view id = path.substr(kOperationsPrefix.size());
    return ResolveOperation(request, id.substr(0, id.size() - kResolve.size()));
  }
  if (path.starts_with(kOperationsPrefix) && path.size() > kOperationsPrefix.size()) {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    std::string_view id = path.substr(kOperationsPrefix.size());
    constexpr std::string_view kTrace = "/trace";
    const bool trace = id.ends_with(kTrace);
    if (trace) id.remove_suffix(kTrace.size());
    return OperationDetail(id, trace);
  }
  if (path == "/admin/v1/operations") {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return ListOperations(request);
  }
  if (path == "/admin/v1/alerts") {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return ListAlerts(request);
  }
  if (path == "/admin/v1/audit" || path == "/admin/v1/audit/payments") {
    if (request.method != "GET") {
      return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET");
    }
    return path == "/admin/v1/audit" ? Audit() : AuditPayments(request);
  }
  return ProblemResponse(404, ProblemCode::kNotFound, "no such admin endpoint");
}

HttpResponse AdminApi::CreateAccount(const HttpRequest& request) {
  auto body = ParseNewAccountBody(request.body);
  if (!body.ok()) return BadJson(body.status().message());
  AccountRecord account;
  account.id = NewAccountId(ctx_.random);
  account.name = std::move(body->name);
  std::string api_key = NewApiKey(ctx_.random);
  account.api_key_hash = Sha256Hex(api_key);
  account.created_ms = ctx_.clock.NowMs();
  Status status = ctx_.store.Write([&](Transaction& tx) -> Status {
    auto inserted = tx.InsertAccount(account);
    if (!inserted.ok()) return inserted.status();
    if (!*inserted) return Status::Error(ErrorCode::kStoreConflict, "account id collision");
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json json = AccountJson(account);
  json["api_key"] = api_key;
  json["key_id"] = FirstApiKeyId(account.api_key_hash);
  return JsonResponse(201, DumpJson(json));
}

HttpResponse AdminApi::ApiKeys(const HttpRequest& request, std::string_view account_id,
                               std::string_view rest) {
  if (rest.empty() || rest == "/") {
    if (request.method == "POST") return CreateApiKey(account_id);
    if (request.method == "GET") return ListApiKeys(account_id);
    return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use POST (new key) or GET");
  }
  if (rest.front() != '/' || rest.find('/', 1) != std::string_view::npos) {
    return ProblemResponse(404, ProblemCode::kNotFound, "no such admin endpoint");
  }
  if (request.method != "DELETE") {
    return ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use DELETE to revoke a key");
  }
  return RevokeApiKey(account_id, rest.substr(1));
}

// Rotation's first half: a new key beside the ones the account has. The old keys keep working
// until they are revoked, so clients move over without an outage; there is no timed grace period.
HttpResponse AdminApi::CreateApiKey(std::string_view account_id) {
  const std::string api_key = NewApiKey(ctx_.random);
  ApiKeyRecord key{"key_" + RandomHex(ctx_.random, 8), std::string(account_id),
                   Sha256Hex(api_key), 0, std::nullopt};
  enum class Outcome { kCreated, kNoAccount, kTooMany } outcome{};
  Status status = ctx_.store.Write([&](Transaction& tx) -> Status {
    key.created_ms = ctx_.clock.NowMs();
    auto account = tx.FindAccount(account_id);
    if (!account.ok()) return account.status();
    if (!account->has_value()) {
      outcome = Outcome::kNoAccount;
      return Status::Ok();
    }
    auto keys = tx.ListApiKeys(account_id);
    if (!keys.ok()) return keys.status();
    size_t active = 0;
    for (const ApiKeyRecord& existing : *keys) active += existing.revoked_ms ? 0 : 1;
    if (active >= kMaxActiveApiKeys) {
      outcome = Outcome::kTooMany;
      return Status::Ok();
    }
    auto inserted = tx.InsertApiKey(key);
    if (!inserted.ok()) return inserted.status();
    if (!*inserted) return Status::Error(ErrorCode::kStoreConflict, "API key id collision");
    outcome = Outcome::kCreated;
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  switch (outcome) {
    case Outcome::kNoAccount:
      return ProblemResponse(404, ProblemCode::kNotFound, "no account " + std::string(account_id));
    case Outcome::kTooMany:
      return ProblemResponse(409, ProblemCode::kTooManyApiKeys,
                             "the account already has " + std::to_string(kMaxActiveApiKeys) +
                                 " keys in force; revoke one first");
    case Outcome::kCreated: {
      nlohmann::json json = ApiKeyJson(key);
      json["api_key"] = api_key;  // shown once: the store keeps its hash only
      return JsonResponse(201, DumpJson(json));
    }
  }
  AGENTPAY_CHECK(false);
}

HttpResponse AdminApi::ListApiKeys(std::string_view account_id) {
  bool found = false;
  std::vector<ApiKeyRecord> keys;
  Status status = ctx_.store.Read([&](Transaction& tx) -> Status {
    auto account = tx.FindAccount(account_id);
    if (!account.ok()) return account.status();
    found = account->has_value();
    auto listed = tx.ListApiKeys(account_id);
    if (!listed.ok()) return listed.status();
    keys = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  if (!found) {
    return ProblemResponse(404, ProblemCode::kNotFound, "no account " + std::string(account_id));
  }
  nlohmann::json list = nlohmann::json::array();
  for (const ApiKeyRecord& key : keys) list.push_back(ApiKeyJson(key));
  return JsonResponse(200,
                      DumpJson({{"account_id", std::string(account_id)}, {"api_keys", list}}));
}

// Revocation: at once in this process's store, and within ApiKeys::kMaxKeyStalenessMs in every
// process sharing it. Idempotent: revoking a revoked key answers its record again, replayed.
HttpResponse AdminApi::RevokeApiKey(std::string_view account_id, std::string_view key_id) {
  std::optional<ApiKeyRecord> key;
  bool revoked_now = false;
  Status status = ctx_.store.Write([&](Transaction& tx) -> Status {
    auto revoked = tx.RevokeApiKey(account_id, key_id, ctx_.clock.NowMs());
    if (!revoked.ok()) return revoked.status();
    revoked_now = *revoked;
    auto keys = tx.ListApiKeys(account_id);
    if (!keys.ok()) return keys.status();
    for (const ApiKeyRecord& listed : *keys) {
      if (listed.id == key_id) key = listed;
    }
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  if (!key) {
    return ProblemResponse(404, ProblemCode::kNotFound,
                           "no key " + std::string(key_id) + " on account " +
                               std::string(account_id));
  }
  HttpResponse response = JsonResponse(200, DumpJson(ApiKeyJson(*key)));
  response.SetHeader("Idempotent-Replayed", revoked_now ? "false" : "true");
  return response;
}

HttpResponse AdminApi::Deposit(const HttpRequest& request, std::string_view account_id) {
  auto body = ParseDepositBody(request.body);
  if (!body.ok()) return BadJson(body.status().message());
  const std::optional<int64_t> amount = body->amount;
  const std::string reference = body->reference;
  enum class Outcome { kDeposited, kReplayed, kMismatch, kNoAccount, kOverflow } outcome{};
  std::optional<AccountRecord> account;
  Status status = ctx_.store.Write([&](Transaction& tx) -> Status {
    const int64_t now = ctx_.clock.NowMs();
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
      return ProblemResponse(404, ProblemCode::kNotFound, "no account " + std::string(account_id));
    case Outcome::kMismatch:
      return ProblemResponse(422, ProblemCode::kDepositReferenceMismatch,
                             "this reference was used for a deposit of a different amount");
    case Outcome::kOverflow:
      return ProblemResponse(422, ProblemCode::kAmountOverflow,
                             "the deposit would overflow the balance");
    case Outcome::kDeposited:
    case Outcome::kReplayed: {
      HttpResponse response =
          JsonResponse(outcome == Outcome::kDeposited ? 201 : 200, DumpJson(AccountJson(*account)));
      response.SetHeader("Idempotent-Replayed", outcome == Outcome::kReplayed ? "true" : "false");
      return response;
    }
  }
  AGENTPAY_CHECK(false);
}

// The `limit` query parameter: default 100, 1..kMaxListLimit.
static std::optional<int> ListLimit(std::string_view query) {
  auto value = QueryParam(query, "limit");
  if (!value || value->empty()) return 100;
  auto limit = ParseAmount(*value);
  if (!limit || *limit < 1 || *limit > kMaxListLimit) return std::nullopt;
  return static_cast<int>(*limit);
}

HttpResponse AdminApi::ListAlerts(const HttpRequest& request) {
  auto limit = ListLimit(request.Query());
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  std::vector<Alert> alerts;
  Status status = ctx_.store.Read([&](Transaction& tx) {
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

HttpResponse AdminApi::ListOperations(const HttpRequest& request) {
  OperationFilter filter;
  std::string_view query = request.Query();
  if (auto value = QueryParam(query, "intent"); value && !value->empty()) {
    filter.intent = ParseIntent(*value);
    if (!filter.intent) return BadJson("unknown intent");
  }
  if (auto value = QueryParam(query, "settlement"); value && !value->empty()) {
    filter.settlement = ParseSettlement(*value);
    if (!filter.settlement) return BadJson("unknown settlement state");
  }
  if (auto value = QueryParam(query, "fulfillment"); value && !value->empty()) {
    filter.fulfillment = ParseFulfillment(*value);
    if (!filter.fulfillment) return BadJson("unknown fulfillment state");
  }
  // Text filters, percent-decoded; each at most 255 bytes (ids, keys, routes and hashes are
  // shorter).
  std::optional<std::string> account, payer;
  const std::pair<const char*, std::optional<std::string>*> texts[] = {
      {"account", &account},        {"payer", &payer},
      {"route", &filter.route},     {"key", &filter.idempotency_key},
      {"tx_hash", &filter.tx_hash}, {"before", &filter.before_id}};
  for (const auto& [name, target] : texts) {
    auto raw = QueryParam(query, name);
    if (!raw || raw->empty()) continue;
    auto value = DecodeQueryComponent(*raw);
    if (!value || value->size() > kMaxFilterBytes) {
      return BadJson(std::string(name) + " must be 1-255 bytes, percent-encoded");
    }
    *target = std::move(*value);
  }
  if (account && payer) return BadJson("give account or payer, not both");
  if (account) filter.principal = "account:" + *account;
  if (payer) filter.principal = "payer:" + ToLowerAscii(*payer);
  if (filter.tx_hash) filter.tx_hash = ToLowerAscii(*filter.tx_hash);
  if (auto value = QueryParam(query, "older_than_ms"); value && !value->empty()) {
    auto age = ParseAmount(*value);
    if (!age) return BadJson("older_than_ms must be a non-negative integer");
    filter.created_before_ms = ctx_.clock.NowMs() - *age;
  }
  auto limit = ListLimit(query);
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  filter.limit = *limit;
  std::vector<Operation> ops;
  Status status = ctx_.store.Read([&](Transaction& tx) {
    auto listed = tx.ListOperations(filter);
    if (!listed.ok()) return listed.status();
    ops = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& op : ops) list.push_back(OperationJson(op));
  nlohmann::json next = ops.size() == static_cast<size_t>(filter.limit)
                            ? nlohmann::json(ops.back().id)
                            : nlohmann::json(nullptr);
  return JsonResponse(200, DumpJson({{"operations", list}, {"next_before", next}}));
}

HttpResponse AdminApi::ListAccounts(const HttpRequest& request) {
  std::string_view query = request.Query();
  auto limit = ListLimit(query);
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  std::string after = std::string(QueryParam(query, "after").value_or(""));
  if (after.size() > kMaxFilterBytes) return BadJson("after must be an account id");
  std::vector<AccountRecord> accounts;
  Status status = ctx_.store.Read([&](Transaction& tx) {
    auto listed = tx.ListAccountsPage(after, *limit);
    if (!listed.ok()) return listed.status();
    accounts = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& account : accounts) list.push_back(AccountJson(account));
  nlohmann::json next = accounts.size() == static_cast<size_t>(*limit)
                            ? nlohmann::json(accounts.back().id)
                            : nlohmann::json(nullptr);
  return JsonResponse(200, DumpJson({{"accounts", list}, {"next_after", next}}));
}

HttpResponse AdminApi::Overview() {
  const int64_t now = ctx_.clock.NowMs();
  constexpr int64_t kDayMs = 86400000;
  const int64_t midnight = now - now % kDayMs;  // UTC
  std::optional<StoreOverview> overview;
  std::optional<RelayerReading> relayer;
  if (relayer_watch_ != nullptr) relayer = relayer_watch_->Latest();
  int64_t relayer_nonces_taken = 0;
  Status status = ctx_.store.Read([&](Transaction& tx) {
    auto read = tx.ReadOverview(midnight);
    if (!read.ok()) return read.status();
    overview = *read;
    if (!relayer) return Status::Ok();
    auto taken = tx.NextRelayerNonce(relayer->relayer);
    if (!taken.ok()) return taken.status();
    relayer_nonces_taken = *taken;
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json json = OverviewJson(*overview, now, midnight);
  if (relayer) json["relayer"] = RelayerJson(*relayer, relayer_nonces_taken, now);
  // The facilitator's sellers (names and payees; never anything of their keys), or null.
  if (!ctx_.config.facilitator_sellers.empty()) {
    nlohmann::json sellers = nlohmann::json::array();
    for (const FacilitatorSeller& seller : ctx_.config.facilitator_sellers) {
      nlohmann::json payees = nlohmann::json::array();
      for (const chain::Address& payee : seller.payees)
        payees.push_back(chain::ToChecksumHex(payee));
      sellers.push_back({{"name", seller.name}, {"payees", std::move(payees)}});
    }
    json["facilitator"] = {{"sellers", std::move(sellers)}};
  } else {
    json["facilitator"] = nullptr;
  }
  {
    std::lock_guard lock(last_audit_mutex_);
    json["last_audit"] = last_audit_;
  }
  return JsonResponse(200, DumpJson(json));
}

HttpResponse AdminApi::OperationDetail(std::string_view id, bool trace) {
  auto records = ReadOperationRecords(ctx_.store, id, {/*trace=*/trace, /*alerts=*/!trace});
  if (!records.ok()) return StoreProblem(records.status());
  if (!records->has_value())
    return ProblemResponse(404, ProblemCode::kNotFound, "no such operation");
  const OperationRecords& found = **records;
  // The same trace as GET /v1/operations/{id}/trace: the events with the ledger's postings.
  if (trace) return JsonResponse(200, DumpJson(TraceJson(found.Trace())));
  return JsonResponse(
      200, DumpJson(OperationDetailJson(found.op, found.alerts, found.postings, found.payment)));
}

HttpResponse AdminApi::Audit() {
  const int64_t now = ctx_.clock.NowMs();
  AuditOptions options;
  options.now_ms = now;
  options.hold_slack_ms = 2 * ctx_.config.sweep_interval_ms + kAuditHoldSlackMs;
  auto report = AuditStore(ctx_.store, options);
  if (!report.ok()) return StoreProblem(report.status());
  nlohmann::json answer = AuditJson(*report, ctx_.config.chain, now);
  {
    std::lock_guard lock(last_audit_mutex_);
    last_audit_ = answer;
  }
  return JsonResponse(200, DumpJson(answer));
}

HttpResponse AdminApi::AuditPayments(const HttpRequest& request) {
  std::string_view query = request.Query();
  auto limit = ListLimit(query);
  if (!limit) return BadJson("limit must be an integer from 1 to 1000");
  std::string after = std::string(QueryParam(query, "after").value_or(""));
  if (after.size() > 255) return BadJson("after must be an operation id");
  std::vector<SettledPayment> payments;
  Status status = ctx_.store.Read([&](Transaction& tx) {
    auto listed = tx.ListSettledPayments(after, *limit);
    if (!listed.ok()) return listed.status();
    payments = std::move(*listed);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& payment : payments) list.push_back(SettledPaymentJson(payment));
  nlohmann::json next = payments.size() == static_cast<size_t>(*limit)
                            ? nlohmann::json(payments.back().operation_id)
                            : nlohmann::json(nullptr);
  return JsonResponse(200, DumpJson({{"payments", list}, {"next_after", next}}));
}

HttpResponse AdminApi::ResolveOperation(const HttpRequest& request, std::string_view operation_id) {
  auto body = ParseResolveBody(request.body);
  if (!body.ok()) return BadJson(body.status().message());
  const std::optional<ResolutionOutcome> outcome = body->outcome;
  const std::string note = body->note;
  ResolveResult result;
  Status status = ctx_.store.Write([&](Transaction& tx) {
    return DecideResolution(tx, operation_id, *outcome, note, ctx_.clock.NowMs(), result);
  });
  if (!status.ok()) return StoreProblem(status);
  if (!result.found) {
    return ProblemResponse(404, ProblemCode::kNotFound,
                           "no operation " + std::string(operation_id));
  }
  switch (result.decision) {
    case ResolveDecision::kResolve:
      ctx_.metrics.CountResolved(static_cast<uint64_t>(result.resolved_now),
                                 static_cast<uint64_t>(result.refunded_now));
      return ResolutionAnswer(operation_id, result, false);
    case ResolveDecision::kReplay:
      return ResolutionAnswer(operation_id, result, true);
    case ResolveDecision::kConflict: {
      const Alert* latest = LatestResolution(result.alerts);
      return ProblemResponse(409, ProblemCode::kAlreadyResolved,
                             "the operation's alerts were resolved as " + latest->resolution +
                                 " with another note or outcome; a resolution is final",
                             std::string(operation_id));
    }
    case ResolveDecision::kNoAlerts:
      return ProblemResponse(409, ProblemCode::kNoAlerts, "the operation has no alert to resolve",
                             std::string(operation_id));
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
