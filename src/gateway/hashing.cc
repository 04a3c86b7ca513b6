// See hashing.h.
#include "gateway/hashing.h"

#include <openssl/crypto.h>

#include <cctype>

namespace agentpay {

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
