// Identifier formats; see world.h.
#include "core/world.h"

#include <vector>

namespace agentpay {

std::string ToHex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

std::string RandomHex(Random& random, size_t size) {
  std::vector<unsigned char> bytes(size);
  random.Fill(bytes.data(), bytes.size());
  return ToHex(bytes.data(), bytes.size());
}

std::string NewOperationId(Random& random, int64_t now_ms) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string time(12, '0');
  uint64_t value = now_ms < 0 ? 0 : static_cast<uint64_t>(now_ms);
  for (int i = 11; i >= 0; --i, value >>= 4) time[static_cast<size_t>(i)] = kDigits[value & 0xf];
  return "op_" + time + RandomHex(random, 16);
}
std::string NewAccountId(Random& random) { return "acct_" + RandomHex(random, 12); }
std::string NewApiKey(Random& random) { return "ak_" + RandomHex(random, 32); }

}  // namespace agentpay
