// Operating errors as values (DESIGN rule 3): Status carries a stable code and a human message;
// Result<T> is a value or a Status. No exception crosses a module boundary.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/check.h"

namespace agentpay {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string code, std::string message) {
    Status status;
    status.code_ = std::move(code);
    status.message_ = std::move(message);
    return status;
  }
  bool ok() const { return code_.empty(); }
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "ok" : code_ + ": " + message_; }

 private:
  std::string code_;
  std::string message_;
};

template <typename T>
class Result {
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
