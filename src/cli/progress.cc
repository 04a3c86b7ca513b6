// See progress.h.
#include "cli/progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace agentpay {

void DrawProgress(uint64_t done, uint64_t total, std::string_view unit) {
  constexpr uint64_t kWidth = 40;
  const uint64_t filled = total == 0 ? kWidth : std::min(done, total) * kWidth / total;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %3d%%  %llu/%llu %.*s", bar.c_str(),
               total == 0 ? 100 : static_cast<int>(std::min(done, total) * 100 / total),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
               static_cast<int>(unit.size()), unit.data());
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace agentpay
