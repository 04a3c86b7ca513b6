// Operating errors as values (DESIGN rule 3): Status carries a stable code and a human message;
// Result<T> is a value or a Status. No exception crosses a module boundary. Both are [[nodiscard]]:
// a result dropped on the floor is a compile error (-Werror); where ignoring one is right, the call
// is cast to (void) with a comment saying why.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/error_code.h"

namespace agentpay {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  // Precondition: code is not ErrorCode::kOk.
  static Status Error(ErrorCode code, std::string message) {
    AGENTPAY_CHECK(code != ErrorCode::kOk);
    Status status;
    status.code_ = code;
    status.message_ = std::move(message);
    return status;
  }
  bool ok() const { return code_ == ErrorCode::kOk; }
  // The code, for decisions: compare it, switch on it.
  ErrorCode error() const { return code_; }
  // The code's stable name (ErrorCodeName), for logs and output; "" when ok.
  std::string_view code() const { return ErrorCodeName(code_); }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "ok" : std::string(code()) + ": " + message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    AGENTPAY_CHECK(!status_.ok());
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() {
    AGENTPAY_CHECK(ok());
    return *value_;
  }
  const T& value() const {
    AGENTPAY_CHECK(ok());
    return *value_;
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace agentpay
