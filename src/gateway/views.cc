// The read-only answers; see views.h.
#include "gateway/views.h"

#include <cctype>

#include "gateway/answers.h"
#include "gateway/hashing.h"
#include "gateway/json_views.h"

namespace agentpay {

HttpResponse Views::Health() {
  // Whether the store answers; nothing read is reported, so no need to wait for durability
  // (which, under a burst of payments, would make the probe wait for their commits).
  Status status = ctx_.store.ReadUnsynced([](Transaction&) { return Status::Ok(); });
  if (!status.ok()) {
    // The store's own text stays out of public answers (a database's errors name hosts, ports).
    return ProblemResponse(503, ProblemCode::kStoreUnavailable,
                           "the store does not answer (" + std::string(status.code()) + ")");
  }
  return JsonResponse(200, R"({"status":"ok"})");
}

HttpResponse Views::Metrics(const HttpServer* server) {
  std::optional<ServerStats> server_stats;
  if (server != nullptr) server_stats = server->Stats();
  HttpResponse response;
  response.body = ctx_.metrics.Render(ctx_.store.Stats(), server_stats ? &*server_stats : nullptr,
                                      ctx_.answer_cache.stats());
  response.SetHeader("Content-Type", "text/plain; version=0.0.4");
  return response;
}

namespace {
// One answer for an id that does not exist and for one the caller may not read.
HttpResponse NoSuchOperation() {
  return ProblemResponse(404, ProblemCode::kNotFound,
                         "no operation with this id is visible with these credentials");
}

// The payer an x402 view is asked for: AgentPay-Payer, 0x and 40 hex digits (any case), in
// lowercase; none if absent or malformed (which reads like a wrong payer: 404).
std::optional<std::string> NamedPayer(const HttpRequest& request) {
  auto named = request.Header("AgentPay-Payer");
  if (!named || named->size() != 42 || (*named)[0] != '0' ||
      ((*named)[1] != 'x' && (*named)[1] != 'X')) {
    return std::nullopt;
  }
  std::string payer = "0x";
  for (char c : named->substr(2)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    payer += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return payer;
}
}  // namespace

Result<bool> Views::MayRead(const HttpRequest& request, const ::agentpay::Operation& op) {
  if (IsAdmin(request, ctx_.config.admin_token)) return true;
  if (auto account = WalletAccountOf(op.principal)) {
    auto caller = api_keys_.Authenticate(request);
    if (!caller.ok()) return caller.status();
    return caller->has_value() && **caller == *account;
  }
  // x402: the payer named (AgentPay-Payer) and its secret, whose digest over both is the
  // operation's key (a default key has none). Naming the payer keeps another payer's equal key
  // string out (T25); an operation stored before keys named their payer has the key's digest
  // alone, which the named payer must still match.
  auto payer = NamedPayer(request);
  auto key = request.Header("Idempotency-Key");
  if (!payer || !key || op.principal != "payer:" + *payer) return false;
  return KeyMatchesDigest(*payer, *key, op.idempotency_key);
}

Result<std::optional<OperationRecords>> ReadOperationRecords(Store& store, std::string_view id,
                                                             OperationReads reads) {
  std::optional<OperationRecords> records;
  Status status = store.Read([&](Transaction& tx) -> Status {
    auto found = tx.FindOperation(id);
    if (!found.ok()) return found.status();
    if (!found->has_value()) return Status::Ok();
    records.emplace();
    records->op = std::move(**found);
    if (!WalletAccountOf(records->op.principal)) {
      auto paid = tx.FindX402Payment(id);
      if (!paid.ok()) return paid.status();
      records->payment = std::move(*paid);
    }
    if (reads.trace || reads.alerts) {
      auto posted = tx.ListPostings(id);
      if (!posted.ok()) return posted.status();
      records->postings = std::move(*posted);
    }
    if (reads.trace) {
      auto listed = tx.ListEvents(id);
      if (!listed.ok()) return listed.status();
      records->events = std::move(*listed);
    }
    if (reads.alerts) {
      auto raised = tx.ListAlertsOf(id);
      if (!raised.ok()) return raised.status();
      records->alerts = std::move(*raised);
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return records;
}

HttpResponse Views::Operation(const HttpRequest& request, std::string_view id, bool trace) {
  auto records = ReadOperationRecords(ctx_.store, id, {/*trace=*/trace, /*alerts=*/false});
  if (!records.ok()) return StoreProblem(records.status());
  if (!records->has_value()) return NoSuchOperation();
  const OperationRecords& found = **records;
  auto may_read = MayRead(request, found.op);
  if (!may_read.ok()) return StoreProblem(may_read.status());
  if (!*may_read) return NoSuchOperation();
  if (!trace) return JsonResponse(200, DumpJson(OperationViewJson(found.op, found.payment)));
  return JsonResponse(200, DumpJson(TraceJson(found.Trace())));
}

HttpResponse Views::Account(const HttpRequest& request) {
  auto account_id = api_keys_.Authenticate(request);
  if (!account_id.ok()) return StoreProblem(account_id.status());
  if (!account_id->has_value()) {
    return ProblemResponse(401, ProblemCode::kUnauthorized, "unknown or missing API key");
  }
  return AccountAnswer(ctx_.store, **account_id);
}

HttpResponse AccountAnswer(Store& store, std::string_view account_id) {
  std::optional<AccountRecord> account;
  Status status = store.Read([&](Transaction& tx) {
    auto found = tx.FindAccount(account_id);
    if (!found.ok()) return found.status();
    account = std::move(*found);
    return Status::Ok();
  });
  if (!status.ok()) return StoreProblem(status);
  if (!account) {
    return ProblemResponse(404, ProblemCode::kNotFound, "no account " + std::string(account_id));
  }
  return JsonResponse(200, DumpJson(AccountJson(*account)));
}

}  // namespace agentpay
