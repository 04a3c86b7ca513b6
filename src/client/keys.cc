// Key derivation and fingerprints; see keys.h and DeriveKey in agentpay/client.h.
#include "client/keys.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/check.h"
#include "core/hex.h"
#include "http/message.h"
#include "http/sha256.h"

namespace agentpay::client {

std::string DeriveKey(std::string_view credential, std::string_view task, uint64_t step) {
  const std::string step_text = std::to_string(step);
  std::string message = std::to_string(task.size()) + ":";
  message += task;
  message += ":" + step_text;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  AGENTPAY_CHECK(HMAC(EVP_sha256(), credential.data(), static_cast<int>(credential.size()),
                      reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                      digest, &size) != nullptr);
  return "task:" + ToHex(digest, size).substr(0, 32) + ":step:" + step_text;
}

std::string LegacyTaskKey(std::string_view task, uint64_t step) {
  return "task:" + Sha256Hex(task).substr(0, 32) + ":step:" + std::to_string(step);
}

std::string RequestFingerprint(std::string_view method, std::string_view url,
                               std::string_view content_type, std::string_view body) {
  std::string material;
  for (std::string_view part : {method, url, content_type, body}) {
    material += std::to_string(part.size());
    material += ':';
    material += part;
  }
  return Sha256Hex(material);
}

std::string ContentTypeOf(const std::vector<Header>& headers) {
  for (const auto& [name, value] : headers) {
    if (HeaderNameEquals(name, "Content-Type")) return value;
  }
  return "";
}

}  // namespace agentpay::client
