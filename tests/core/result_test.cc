// Status and its codes: the code is the enum, its name comes from the one table (ErrorCodeName),
// and every name is distinct, so a code read back from a log names exactly one enumerator.
#include "core/result.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace agentpay {
namespace {

TEST(Status, OkHasNoCode) {
  Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.error(), ErrorCode::kOk);
  EXPECT_EQ(ok.code(), "");
  EXPECT_EQ(ok.ToString(), "ok");
}

TEST(Status, ErrorCarriesTheEnumAndItsName) {
  Status status = Status::Error(ErrorCode::kStoreOverloaded, "queue full");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.error(), ErrorCode::kStoreOverloaded);
  EXPECT_EQ(status.code(), "store_overloaded");
  EXPECT_EQ(status.message(), "queue full");
  EXPECT_EQ(status.ToString(), "store_overloaded: queue full");
}

TEST(Status, ResultCarriesTheStatus) {
  Result<int> failed = Status::Error(ErrorCode::kRpcTimeout, "late");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().error(), ErrorCode::kRpcTimeout);
  Result<int> value = 7;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
}

TEST(ErrorCode, NamesAreDistinctSnakeCase) {
  // The enumerators run from kOk to kChainRpcMismatch, the last.
  std::set<std::string> seen;
  for (int i = 1; i <= static_cast<int>(ErrorCode::kChainRpcMismatch); ++i) {
    std::string name(ErrorCodeName(static_cast<ErrorCode>(i)));
    EXPECT_FALSE(name.empty()) << "enumerator " << i;
    EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos)
        << name;
  }
}

}  // namespace
}  // namespace agentpay
