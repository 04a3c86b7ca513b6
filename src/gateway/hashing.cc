// See hashing.h.
#include "gateway/hashing.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cctype>
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

std::string Base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string PayerKeyDigest(std::string_view payer, std::string_view secret) {
  std::string material(payer);
  for (char& c : material) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  material += '\n';  // never in an address nor in a key (visible ASCII): the split is unambiguous
  material += secret;
  return "payer-sha256:" + Sha256Hex(material);
}

std::string LegacyKeyDigest(std::string_view secret) { return "sha256:" + Sha256Hex(secret); }

bool KeyMatchesDigest(std::string_view payer, std::string_view secret, std::string_view digest) {
  if (digest.rfind("sha256:", 0) == 0) return SecretEquals(LegacyKeyDigest(secret), digest);
  return SecretEquals(PayerKeyDigest(payer, secret), digest);
}

}  // namespace agentpay
