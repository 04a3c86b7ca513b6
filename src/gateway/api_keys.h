// Wallet API keys: which account a request's bearer key belongs to. Remembered per key hash (an
// account's id and key never change), so only the first request of a key reads the store.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "http/message.h"
#include "store/store.h"

namespace agentpay {

class ApiKeys {
 public:
  explicit ApiKeys(Store& store) : store_(store) {}
  // The account id behind `Authorization: Bearer <key>`; nullopt without one or for an unknown key.
  Result<std::optional<std::string>> Authenticate(const HttpRequest& request);

 private:
  static constexpr size_t kMaxCachedKeys = 100000;
  Store& store_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::string> account_by_key_hash_;
};

// Whether `request` carries `Authorization: Bearer <admin_token>` (compared in constant time);
// never when the token is empty (the admin API is off).
bool IsAdmin(const HttpRequest& request, std::string_view admin_token);

}  // namespace agentpay
