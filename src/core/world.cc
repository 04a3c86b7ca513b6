// Identifier formats; see world.h.
#include "core/world.h"

#include <vector>

#include "core/hex.h"

namespace agentpay {

std::string RandomHex(Random& random, size_t size) {
  std::vector<unsigned char> bytes(size);
  random.Fill(bytes.data(), bytes.size());
  return ToHex(bytes.data(), bytes.size());
}

std::string NewOperationId(Random& random, int64_t now_ms) {
  unsigned char big_endian[8];
  uint64_t value = now_ms < 0 ? 0 : static_cast<uint64_t>(now_ms);
  for (int i = 7; i >= 0; --i, value >>= 8) big_endian[i] = static_cast<unsigned char>(value & 0xff);
  // The low 48 bits, 12 digits: milliseconds until the year 10889.
  return "op_" + ToHex(big_endian + 2, 6) + RandomHex(random, 16);
}
std::string NewAccountId(Random& random) { return "acct_" + RandomHex(random, 12); }
std::string NewApiKey(Random& random) { return "ak_" + RandomHex(random, 32); }

}  // namespace agentpay
