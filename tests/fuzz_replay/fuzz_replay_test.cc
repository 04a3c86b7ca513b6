// The libFuzzer targets of fuzz/ replayed on their committed seeds (fuzz/seeds/TARGET: hand-made
// inputs and every crash a campaign found, fixed) with the project's own compiler and flags, so the
// C++ suites (and their ASan + UBSan build, scripts/test-asan.sh) check each target's properties on
// every input that ever broke one. Each target file is compiled here with its entry point renamed
// (tests/CMakeLists.txt); a property that fails aborts, as it does under libFuzzer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int HttpRequestFuzzOne(const uint8_t* data, size_t size);
extern "C" int HttpResponseFuzzOne(const uint8_t* data, size_t size);
extern "C" int ServeConfigFuzzOne(const uint8_t* data, size_t size);
extern "C" int AdminBodyFuzzOne(const uint8_t* data, size_t size);
extern "C" int HttpRequestDiffFuzzOne(const uint8_t* data, size_t size);
extern "C" int FacilitatorBodyFuzzOne(const uint8_t* data, size_t size);

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t* data, size_t size);
};

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, EverySeedKeepsTheTargetsProperties) {
  const std::filesystem::path dir = std::filesystem::path(AGENTPAY_FUZZ_SEEDS) / GetParam().name;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 3u) << "the seeds of " << GetParam().name << " are missing: " << dir;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(GetParam().run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, FuzzReplay,
                         ::testing::Values(Target{"http_request", HttpRequestFuzzOne},
                                           Target{"http_response", HttpResponseFuzzOne},
                                           Target{"serve_config", ServeConfigFuzzOne},
                                           Target{"admin_body", AdminBodyFuzzOne},
                                           Target{"http_request_diff", HttpRequestDiffFuzzOne},
                                           Target{"facilitator_body", FacilitatorBodyFuzzOne}),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
