// What store.h defines the same for every backend: the choice of backend by URL, the blocking
// Write over WriteAsync, the rollback status, and the settlement record the reconciler reads.
#include "store/store.h"

#include <future>

#include "core/check.h"
#include "core/event_threads.h"
#include "core/payer_reservations.h"
#include "store/backends.h"

namespace agentpay {

Result<std::unique_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& options) {
  const std::string sqlite = "sqlite:";
  if (url.starts_with(sqlite)) {
    std::string path = url.substr(sqlite.size());
    if (path.empty()) return Status::Error(ErrorCode::kInvalidConfig, "--db sqlite: needs a path");
    return OpenSqliteStore(path, options);
  }
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    return OpenPostgresStore(url, options);
  }
  return Status::Error(ErrorCode::kInvalidConfig,
                       "unsupported --db (expected sqlite:PATH or postgresql://…)");
}

std::string RedactedStoreUrl(std::string_view url) {
  std::string out(url);
  if (!out.starts_with("postgresql://") && !out.starts_with("postgres://")) return out;
  const size_t authority = out.find("://") + 3;
  const size_t at = out.find('@', authority);
  const size_t slash = out.find('/', authority);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    const size_t colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  for (size_t at_param = out.find("password="); at_param != std::string::npos;
       at_param = out.find("password=", at_param + 1)) {
    const size_t start = at_param + 9;
    const size_t end = out.find('&', start);
    out.replace(start, (end == std::string::npos ? out.size() : end) - start, "***");
  }
  return out;
}

Status InsertFirstApiKey(Transaction& tx, const AccountRecord& account) {
  auto first_key = tx.InsertApiKey({FirstApiKeyId(account.api_key_hash), account.id,
                                    account.api_key_hash, account.created_ms, std::nullopt});
  if (!first_key.ok()) return first_key.status();
  if (!*first_key) {
    // Only a key of another account can hold this hash: the account is refused as a whole.
    return Status::Error(ErrorCode::kStoreConflict, "the API key hash belongs to another key");
  }
  return Status::Ok();
}

Status RecordRepeatedArrival(Transaction& tx, const KeyRecord& record, const Operation& op,
                             ArrivalOutcome outcome, int64_t now_ms) {
  auto event = ArrivalEvent(record, op, outcome, now_ms);
  if (!event) return Status::Ok();
  return tx.RecordArrival(record, *event).status();
}

bool ValidInstanceId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status Store::Write(TransactionFn fn) {
  AssertMayBlock("Store::Write");
  std::promise<Status> result;
  auto future = result.get_future();
  WriteAsync(std::move(fn), [&result](Status status) { result.set_value(std::move(status)); });
  return future.get();
}

void Store::ReadAsync(Executor& readers, TransactionFn fn, ReadDone done, ReadWait wait) {
  // Shared: the task owns a copy, and a task the executor refuses is dropped with it.
  auto answer = std::make_shared<ReadDone>(std::move(done));
  const bool queued = readers.TrySubmit([this, fn = std::move(fn), answer, wait] {
    Status status = ReadUnsynced(fn);
    if (wait == ReadWait::kUnsynced || !status.ok()) return (*answer)(std::move(status));
    WhenDurable([answer, status = std::move(status)]() mutable { (*answer)(std::move(status)); });
  });
  if (!queued) {
    (*answer)(Status::Error(ErrorCode::kStoreOverloaded, "too many reads queued; retry later"));
  }
}

SettlementRecord ToSettlementRecord(const X402PaymentRecord& record) {
  return SettlementRecord{record.operation_id, record.authorization, record.tx_hash,
                          record.raw_tx_hex,   record.submitted_ms,  record.broadcasts};
}

std::string FirstApiKeyId(std::string_view key_hash) {
  return "key_" + std::string(key_hash.substr(0, 16));
}

Status Rollback() { return Status::Error(ErrorCode::kRollback, "decision rolled back"); }
bool IsRollback(const Status& status) { return status.error() == ErrorCode::kRollback; }

Status Transaction::ReserveNewKey(const KeyRecord& record) {
  auto inserted = InsertKey(record);
  if (!inserted.ok()) return inserted.status();
  if (!*inserted) {
    return Status::Error(ErrorCode::kStoreKeyTaken, "the idempotency key exists already");
  }
  return Status::Ok();
}

Status Transaction::UpdateClaimedOperationOrFail(const Operation& op, int32_t expected_attempts) {
  auto updated = UpdateClaimedOperation(op, expected_attempts);
  if (!updated.ok()) return updated.status();
  if (!*updated) {
    return Status::Error(ErrorCode::kStoreClaimLost,
                         "operation " + op.id + " is no longer claimed by this attempt");
  }
  return Status::Ok();
}

bool ReleasesPayerReservation(const Operation& op) {
  return op.principal.starts_with("payer:") && !PaymentMayStillMove(op);
}

}  // namespace agentpay
