// Idempotency decisions; see idempotency.h and docs/protocol.md.
#include "core/idempotency.h"

#include "core/check.h"

namespace agentpay {

bool ValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyLength) return false;
  for (unsigned char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string_view ArrivalOutcomeName(ArrivalOutcome outcome) {
  switch (outcome) {
    case ArrivalOutcome::kNew: return "new";
    case ArrivalOutcome::kReplay: return "replay";
    case ArrivalOutcome::kMismatch: return "mismatch";
    case ArrivalOutcome::kAttach: return "attach";
    case ArrivalOutcome::kResume: return "resume";
  }
  AGENTPAY_CHECK(false);
}

std::optional<TraceEvent> ArrivalEvent(const KeyRecord& record, const Operation& op,
                                       ArrivalOutcome outcome, int64_t now_ms) {
  if (record.arrivals_recorded >= kMaxRecordedArrivals) return std::nullopt;
  TraceEvent event{op.id, now_ms, TraceActor::kClient, "", ""};
  switch (outcome) {
    case ArrivalOutcome::kReplay:
      event.kind = "replayed";
      event.facts.http_status = op.response ? op.response->status : 0;
      event.detail = "the stored answer (" + std::to_string(event.facts.http_status) +
                     ") replayed; nothing executed or charged again";
      break;
    case ArrivalOutcome::kAttach:
      event.kind = "attached";
      event.facts.attempt = op.attempts;
      event.detail = "attached to attempt " + std::to_string(op.attempts) +
                     ", in flight; it gets that attempt's answer";
      break;
    case ArrivalOutcome::kMismatch:
      event.kind = "mismatch_refused";
      event.facts.http_status = 422;
      event.facts.reason = "idempotency_key_reused";
      event.detail = "the same key with another request, refused (422); nothing changed";
      break;
    case ArrivalOutcome::kNew:
    case ArrivalOutcome::kResume:
      return std::nullopt;
  }
  return event;
}

Arrival DecideArrival(const KeyRecord* record, const Operation* op, std::string_view fingerprint,
                      int64_t now_ms, ClaimView claim) {
  if (record == nullptr) return {ArrivalOutcome::kNew, false};
  AGENTPAY_CHECK(op != nullptr && op->id == record->operation_id);
  if (op->retained_until_ms && now_ms >= *op->retained_until_ms) {
    // Past retention the key is forgotten: whatever arrives is a new action.
    return {ArrivalOutcome::kNew, true};
  }
  if (record->fingerprint != fingerprint) return {ArrivalOutcome::kMismatch, false};
  if (IsFinal(*op)) return {ArrivalOutcome::kReplay, false};
  if (op->fulfillment == Fulfillment::kInProgress && op->lease_expires_ms > now_ms &&
      claim == ClaimView::kLease) {
    return {ArrivalOutcome::kAttach, false};
  }
  return {ArrivalOutcome::kResume, false};
}

int64_t RetainedUntil(int64_t final_ms, int64_t retention_ms) { return final_ms + retention_ms; }

bool ShouldPruneResult(const Operation& op, int64_t now_ms) {
  return IsFinal(op) && op.retained_until_ms.has_value() && now_ms >= *op.retained_until_ms;
}

std::string FingerprintMaterial(std::string_view method, std::string_view path,
                                std::string_view query, std::string_view content_type,
                                std::string_view body) {
  std::string material = "agentpay-fingerprint-v1";
  for (std::string_view field : {method, path, query, content_type, body}) {
    material += '\n';
    material += std::to_string(field.size());
    material += ':';
    material.append(field.data(), field.size());
  }
  return material;
}

}  // namespace agentpay
