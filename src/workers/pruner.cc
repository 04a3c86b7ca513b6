// See pruner.h.
#include "workers/pruner.h"

#include "core/check.h"
#include "core/idempotency.h"

namespace agentpay {
namespace {

// One decision over one batch of listed ids: each operation is re-read inside the transaction and
// pruned only if it is (still) final and past its retention, and the store prunes it only if its
// result is still kept (compare-and-set): a pruner in another process that committed first leaves
// this one nothing to do.
Status PruneBatch(Transaction& tx, const std::vector<std::string>& ids, int64_t now,
                  PruneReport& report) {
  for (const std::string& id : ids) {
    auto op = tx.FindOperation(id);
    if (!op.ok()) return op.status();
    if (!op->has_value() || !ShouldPruneResult(**op, now)) continue;
    auto outcome = tx.PruneResult(**op);
    if (!outcome.ok()) return outcome.status();
    report.pruned += outcome->pruned ? 1 : 0;
    report.keys_deleted += outcome->key_deleted ? 1 : 0;
  }
  return Status::Ok();
}

}  // namespace

Result<PruneReport> PruneExpiredResults(Store& store, Clock& clock, int batch, int max_batches) {
  AGENTPAY_CHECK(batch > 0 && max_batches > 0);
  PruneReport report;
  for (int round = 0; round < max_batches; ++round) {
    const int64_t now = clock.NowMs();
    std::vector<std::string> ids;
    Status listed = store.ReadUnsynced([&](Transaction& tx) {
      auto found = tx.ListExpiredResults(now, batch);
      if (!found.ok()) return found.status();
      ids = std::move(*found);
      return Status::Ok();
    });
    if (!listed.ok()) return listed;
    if (ids.empty()) break;
    PruneReport one;
    Status status = store.Write([&](Transaction& tx) {
      one = PruneReport{};
      return PruneBatch(tx, ids, now, one);
    });
    if (!status.ok()) return status;
    report.pruned += one.pruned;
    report.keys_deleted += one.keys_deleted;
    ++report.batches;
    if (one.pruned == 0 || static_cast<int>(ids.size()) < batch) break;
  }
  return report;
}

}  // namespace agentpay
