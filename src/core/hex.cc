// The hex writer; see hex.h.
#include "core/hex.h"

namespace agentpay {

void AppendHex(std::string& out, const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out.reserve(out.size() + size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xf]);
  }
}

std::string ToHex(const unsigned char* data, size_t size) {
  std::string out;
  AppendHex(out, data, size);
  return out;
}

}  // namespace agentpay
