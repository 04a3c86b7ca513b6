// Wallet API keys; see api_keys.h.
#include "gateway/api_keys.h"

#include "gateway/hashing.h"

namespace agentpay {

namespace {
// The credential of `Authorization: Bearer <credential>`, if the request has one.
std::optional<std::string_view> BearerCredential(const HttpRequest& request) {
  auto header = request.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (!header || !header->starts_with(kBearer)) return std::nullopt;
  return header->substr(kBearer.size());
}
}  // namespace

Result<std::optional<std::string>> ApiKeys::Authenticate(const HttpRequest& request) {
  auto credential = BearerCredential(request);
  if (!credential) return std::optional<std::string>();
  std::string hash = Sha256Hex(*credential);
  const int64_t now = clock_.NowMs();
  {
    std::lock_guard lock(mutex_);
    auto cached = account_by_key_hash_.find(hash);
    // A clock that stepped back makes the entry's age unknown: it is read again.
    if (cached != account_by_key_hash_.end() && now >= cached->second.read_ms &&
        now - cached->second.read_ms < kMaxKeyStalenessMs) {
      return std::optional<std::string>(cached->second.account_id);
    }
  }
  std::optional<std::string> account_id;
  Status status = store_.Read([&](Transaction& tx) {
    auto found = tx.FindAccountByKeyHash(hash);
    if (!found.ok()) return found.status();
    if (found->has_value()) account_id = (*found)->id;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  std::lock_guard lock(mutex_);
  if (!account_id) {
    account_by_key_hash_.erase(hash);  // revoked: forgotten at once
    return account_id;
  }
  if (account_by_key_hash_.size() >= kMaxCachedKeys) account_by_key_hash_.clear();
  account_by_key_hash_.insert_or_assign(hash, Known{*account_id, now});
  return account_id;
}

bool IsAdmin(const HttpRequest& request, std::string_view admin_token) {
  auto credential = BearerCredential(request);
  return !admin_token.empty() && credential && SecretEquals(*credential, admin_token);
}

}  // namespace agentpay
