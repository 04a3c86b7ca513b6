// See sha256.h.
#include "http/sha256.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <memory>

#include "core/check.h"
#include "core/hex.h"

namespace agentpay {

std::string Sha256Hex(std::string_view data) {
  // OpenSSL 3's one-shot SHA256() fetches the algorithm and builds a context on every call, which
  // cost several times the hashing itself on the paid path: fetch once, reuse a context per thread.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  AGENTPAY_CHECK(kSha256 != nullptr);
  thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                               &EVP_MD_CTX_free);
  AGENTPAY_CHECK(context != nullptr);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  unsigned int size = 0;
  AGENTPAY_CHECK(EVP_DigestInit_ex2(context.get(), kSha256, nullptr) == 1 &&
                 EVP_DigestUpdate(context.get(), data.data(), data.size()) == 1 &&
                 EVP_DigestFinal_ex(context.get(), digest, &size) == 1);
  return ToHex(digest, size);
}

}  // namespace agentpay
