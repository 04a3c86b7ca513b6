// Wallet API keys: which account a request's bearer key belongs to. Keys can be revoked (issue
// 13), by this process or another one sharing the store, so what is remembered of a key is
// trusted for at most kMaxKeyStalenessMs of the injected clock: a revoked key is refused by
// every process within that bound, while a busy key still costs one store read per period.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "core/world.h"
#include "http/message.h"
#include "store/store.h"

namespace agentpay {

class ApiKeys {
 public:
  // How long a key's account, once read, is believed without reading the store again. Below one
  // second: the promise made to operators is "revoked means refused everywhere within 1 s".
  static constexpr int64_t kMaxKeyStalenessMs = 500;

  // The account id behind a key; nullopt without one, or for an unknown or revoked key.
  using Lookup = Result<std::optional<std::string>>;
  using LookupDone = std::function<void(Lookup)>;

  ApiKeys(Store& store, Clock& clock) : store_(store), clock_(clock) {}
  // The account behind `Authorization: Bearer <key>`. Reads the store (and may wait for it) when
  // the key is not remembered: call it only where blocking is allowed.
  Lookup Authenticate(const HttpRequest& request);
  // The same without blocking the caller: the answer when no store read is needed; otherwise
  // nullopt, and `later` gets the answer of a Store::ReadAsync on `executor` (store_overloaded,
  // from within this call, when the executor takes no more tasks).
  std::optional<Lookup> AuthenticateOrDefer(const HttpRequest& request, Executor& executor,
                                            LookupDone later);
  // The answer to a request whose lookup found no account (401), or failed (503); nullopt for a
  // known account.
  static std::optional<HttpResponse> Refusal(const Lookup& account);

 private:
  // The account remembered for this key hash, if read less than kMaxKeyStalenessMs ago.
  std::optional<std::string> Remembered(const std::string& hash, int64_t now_ms);
  Lookup ReadAndRemember(const std::string& hash, int64_t now_ms);
  Lookup Remember(const std::string& hash, std::optional<std::string> account_id, int64_t now_ms);

  static constexpr size_t kMaxCachedKeys = 100000;
  struct Known {
    std::string account_id;
    int64_t read_ms;  // when the store said so
  };
  Store& store_;
  Clock& clock_;
  std::mutex mutex_;
  std::unordered_map<std::string, Known> account_by_key_hash_;  // guarded by mutex_
};

// The credential of `Authorization: Bearer <credential>`, if the request has one.
std::optional<std::string_view> BearerCredential(const HttpRequest& request);

// Whether `request` carries `Authorization: Bearer <admin_token>` (compared in constant time);
// never when the token is empty (the admin API is off).
bool IsAdmin(const HttpRequest& request, std::string_view admin_token);

}  // namespace agentpay
