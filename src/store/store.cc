// What store.h defines the same for every backend: the blocking Write over WriteAsync, the
// rollback status, and the settlement record the reconciler reads.
#include "store/store.h"

#include <future>

#include "core/check.h"

namespace agentpay {

Status Store::Write(TransactionFn fn) {
  std::promise<Status> result;
  auto future = result.get_future();
  WriteAsync(std::move(fn), [&result](Status status) { result.set_value(std::move(status)); });
  return future.get();
}

SettlementRecord ToSettlementRecord(const X402PaymentRecord& record) {
  AGENTPAY_CHECK(record.submitted());
  return SettlementRecord{record.operation_id, record.authorization, record.tx_hash,
                          record.raw_tx_hex,   record.submitted_ms,  record.broadcasts};
}

std::string FirstApiKeyId(std::string_view key_hash) {
  return "key_" + std::string(key_hash.substr(0, 16));
}

Status Rollback() { return Status::Error(ErrorCode::kRollback, "decision rolled back"); }
bool IsRollback(const Status& status) { return status.error() == ErrorCode::kRollback; }

}  // namespace agentpay
