// See books_audit.h.
#include "store/books_audit.h"

namespace agentpay {

Result<AuditReport> AuditStore(Store& store, const AuditOptions& options, ReadWait wait) {
  std::optional<AuditReport> report;
  auto read = [&](Transaction& tx) -> Status {
    BooksAudit audit(options);
    auto ledger = tx.Audit();
    if (!ledger.ok()) return ledger.status();
    audit.AddLedger(*ledger);
    std::string after;
    for (;;) {
      auto page = tx.ListOperationBooks(after, kAuditPageSize);
      if (!page.ok()) return page.status();
      for (const OperationBooks& op : *page) audit.AddOperation(op);
      if (page->size() < static_cast<size_t>(kAuditPageSize)) break;
      after = page->back().id;
    }
    // Counted exactly up to this many (each is also a listed violation up to max_listed).
    constexpr int listed = 10 * kAuditPageSize;
    auto repeats = tx.ListRepeatedCharges(listed);
    if (!repeats.ok()) return repeats.status();
    for (const RepeatedCharge& repeat : *repeats) audit.AddRepeatedCharge(repeat);
    auto shared = tx.ListSharedPayments(listed);
    if (!shared.ok()) return shared.status();
    for (const SharedPayment& payment : *shared) audit.AddSharedPayment(payment);
    report = std::move(audit).Finish();
    return Status::Ok();
  };
  Status status = wait == ReadWait::kDurable ? store.Read(read) : store.ReadUnsynced(read);
  if (!status.ok()) return status;
  return std::move(*report);
}

}  // namespace agentpay
