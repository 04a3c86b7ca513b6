// Wallet API keys; see api_keys.h.
#include "gateway/api_keys.h"

#include "gateway/answers.h"
#include "gateway/hashing.h"

namespace agentpay {

// The credential of `Authorization: Bearer <credential>`, if the request has one.
std::optional<std::string_view> BearerCredential(const HttpRequest& request) {
  auto header = request.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (!header || !header->starts_with(kBearer)) return std::nullopt;
  return header->substr(kBearer.size());
}

std::optional<std::string> ApiKeys::Remembered(const std::string& hash, int64_t now_ms) {
  std::lock_guard lock(mutex_);
  auto cached = account_by_key_hash_.find(hash);
  // A clock that stepped back makes the entry's age unknown: it is read again.
  if (cached != account_by_key_hash_.end() && now_ms >= cached->second.read_ms &&
      now_ms - cached->second.read_ms < kMaxKeyStalenessMs) {
    return cached->second.account_id;
  }
  return std::nullopt;
}

namespace {
// The read of a key's account, into `account_id`.
TransactionFn FindAccountOf(const std::string& hash, std::optional<std::string>& account_id) {
  return [&hash, &account_id](Transaction& tx) {
    auto found = tx.FindAccountByKeyHash(hash);
    if (!found.ok()) return found.status();
    if (found->has_value()) account_id = (*found)->id;
    return Status::Ok();
  };
}
}  // namespace

ApiKeys::Lookup ApiKeys::ReadAndRemember(const std::string& hash, int64_t now_ms) {
  std::optional<std::string> account_id;
  Status status = store_.Read(FindAccountOf(hash, account_id));
  if (!status.ok()) return status;
  return Remember(hash, std::move(account_id), now_ms);
}

ApiKeys::Lookup ApiKeys::Remember(const std::string& hash, std::optional<std::string> account_id,
                                  int64_t now_ms) {
  std::lock_guard lock(mutex_);
  if (!account_id) {
    account_by_key_hash_.erase(hash);  // revoked: forgotten at once
    return account_id;
  }
  if (account_by_key_hash_.size() >= kMaxCachedKeys) account_by_key_hash_.clear();
  account_by_key_hash_.insert_or_assign(hash, Known{*account_id, now_ms});
  return account_id;
}

ApiKeys::Lookup ApiKeys::Authenticate(const HttpRequest& request) {
  auto credential = BearerCredential(request);
  if (!credential) return std::optional<std::string>();
  std::string hash = Sha256Hex(*credential);
  const int64_t now = clock_.NowMs();
  if (auto known = Remembered(hash, now)) return known;
  return ReadAndRemember(hash, now);
}

std::optional<ApiKeys::Lookup> ApiKeys::AuthenticateOrDefer(const HttpRequest& request,
                                                            Executor& executor, LookupDone later) {
  auto credential = BearerCredential(request);
  if (!credential) return Lookup(std::optional<std::string>());
  std::string hash = Sha256Hex(*credential);
  const int64_t now = clock_.NowMs();
  if (auto known = Remembered(hash, now)) return Lookup(std::move(known));
  struct Pending {
    std::string hash;
    std::optional<std::string> account_id;
  };
  auto pending = std::make_shared<Pending>(Pending{std::move(hash), std::nullopt});
  // `later` runs from here, at once, when the executor takes no more reads: answered 503.
  store_.ReadAsync(executor, FindAccountOf(pending->hash, pending->account_id),
                   [this, pending, now, later = std::move(later)](Status status) {
                     if (!status.ok()) return later(Lookup(std::move(status)));
                     later(Remember(pending->hash, std::move(pending->account_id), now));
                   });
  return std::nullopt;
}

std::optional<HttpResponse> ApiKeys::Refusal(const Lookup& account) {
  if (!account.ok()) return StoreProblem(account.status());
  if (!account->has_value()) {
    return ProblemResponse(401, ProblemCode::kUnauthorized, "unknown or malformed API key");
  }
  return std::nullopt;
}

bool IsAdmin(const HttpRequest& request, std::string_view admin_token) {
  auto credential = BearerCredential(request);
  return !admin_token.empty() && credential && SecretEquals(*credential, admin_token);
}
}  // namespace agentpay
