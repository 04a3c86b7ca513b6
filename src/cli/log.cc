// See log.h.
#include "cli/log.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace agentpay {

std::string Rfc3339Ms(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return text;
}

namespace {

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "error";
}

}  // namespace

std::string Logger::JsonLine(int64_t now_ms, LogLevel level, std::string_view event,
                             std::string_view message, std::initializer_list<LogField> fields) {
  // ordered_json keeps time, level, event and message first, as a person scanning lines expects.
  nlohmann::ordered_json line = {{"time", Rfc3339Ms(now_ms)},
                                 {"level", LevelName(level)},
                                 {"event", event},
                                 {"message", message}};
  for (const LogField& field : fields) {
    if (field.is_number) {
      line[std::string(field.key)] = std::stoll(field.text);
    } else {
      line[std::string(field.key)] = field.text;
    }
  }
  // Invalid UTF-8 (from an upstream's text, say) is replaced, never a throw.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Logger::Log(LogLevel level, std::string_view event, std::string_view message,
                 std::initializer_list<LogField> fields) {
  std::string line = format_ == LogFormat::kJson
                         ? JsonLine(clock_.NowMs(), level, event, message, fields)
                         : prefix_ + ": " + std::string(message);
  line += '\n';
  std::lock_guard<std::mutex> lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace agentpay
