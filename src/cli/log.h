// The gateway process's log: one line per event on stderr, as plain text for a person at a
// terminal (`--log-format text`) or as one JSON object per line for a log collector (`json`):
// {"time": RFC 3339 UTC, "level", "event", "message", "operation_id"?, other fields}.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include "core/world.h"

namespace agentpay {

enum class LogLevel { kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// A field beside the message. Numbers are written as JSON numbers, everything else as strings.
struct LogField {
  std::string_view key;
  std::string text;
  bool is_number = false;
  LogField(std::string_view k, std::string v) : key(k), text(std::move(v)) {}
  LogField(std::string_view k, const char* v) : key(k), text(v) {}
  LogField(std::string_view k, std::string_view v) : key(k), text(v) {}
  LogField(std::string_view k, long long v) : key(k), text(std::to_string(v)), is_number(true) {}
  LogField(std::string_view k, int v) : key(k), text(std::to_string(v)), is_number(true) {}
};

class Logger {
 public:
  // `prefix` starts every text line ("agentpay serve"); `out` is where lines go (stderr).
  Logger(LogFormat format, Clock& clock, std::string prefix, std::FILE* out = stderr)
      : format_(format), clock_(clock), prefix_(std::move(prefix)), out_(out) {}

  // One line, written whole (lines of concurrent callers never interleave). In text the line is
  // "PREFIX: MESSAGE"; its fields are for machines and appear only in JSON.
  void Log(LogLevel level, std::string_view event, std::string_view message,
           std::initializer_list<LogField> fields = {});
  void Info(std::string_view event, std::string_view message,
            std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kInfo, event, message, fields);
  }
  void Warn(std::string_view event, std::string_view message,
            std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kWarning, event, message, fields);
  }
  void Error(std::string_view event, std::string_view message,
             std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kError, event, message, fields);
  }
  LogFormat format() const { return format_; }

  // The JSON line Log writes, without the newline; exposed for tests.
  static std::string JsonLine(int64_t now_ms, LogLevel level, std::string_view event,
                              std::string_view message, std::initializer_list<LogField> fields);

 private:
  const LogFormat format_;
  Clock& clock_;
  const std::string prefix_;
  std::FILE* const out_;
  std::mutex mutex_;
};

// "2026-12-01T15:04:05.123Z".
std::string Rfc3339Ms(int64_t unix_ms);

}  // namespace agentpay
