// The process log: one JSON object per line in json format, whatever the message holds; the text
// format keeps the plain "agentpay serve: ..." lines.
#include "cli/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

namespace agentpay {
namespace {

class FixedClock final : public Clock {
 public:
  int64_t NowMs() override { return 1764601445123; }  // 2025-12-01T15:04:05.123Z
};

std::string Captured(LogFormat format, const std::function<void(Logger&)>& write) {
  std::FILE* file = std::tmpfile();
  FixedClock clock;
  {
    Logger log(format, clock, "agentpay serve", file);
    write(log);
  }
  std::rewind(file);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, file)) out.append(buffer, n);
  std::fclose(file);
  return out;
}

TEST(LoggerTest, JsonIsOneObjectPerLineWithTimeLevelEventAndFields) {
  std::string out = Captured(LogFormat::kJson, [](Logger& log) {
    log.Warn("hold_expired", "released \"op_1\"\nand raised an alert",
             {{"operation_id", "op_1"}, {"amount", 10000}});
    log.Info("stopping", "stopping");
  });
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    lines.push_back(nlohmann::json::parse(out.substr(start, end - start)));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["time"], "2025-12-01T15:04:05.123Z");
  EXPECT_EQ(lines[0]["level"], "warning");
  EXPECT_EQ(lines[0]["event"], "hold_expired");
  EXPECT_EQ(lines[0]["message"], "released \"op_1\"\nand raised an alert");
  EXPECT_EQ(lines[0]["operation_id"], "op_1");
  EXPECT_EQ(lines[0]["amount"], 10000);
  EXPECT_EQ(lines[1]["level"], "info");
  EXPECT_EQ(lines[1]["event"], "stopping");
}

TEST(LoggerTest, InvalidUtf8IsReplacedNotThrown) {
  std::string out = Captured(LogFormat::kJson, [](Logger& log) {
    log.Error("x", std::string("bad \xff byte"), {{"detail", std::string("\xc3")}});
  });
  auto line = nlohmann::json::parse(out);
  EXPECT_EQ(line["level"], "error");
}

TEST(LoggerTest, TextKeepsThePlainLine) {
  std::string out = Captured(LogFormat::kText, [](Logger& log) {
    log.Info("stopping", "stopping", {{"ignored", 1}});
  });
  EXPECT_EQ(out, "agentpay serve: stopping\n");
}

}  // namespace
}  // namespace agentpay
