// Arrival decisions for a key: new, replay, mismatch, attach, resume, forget after retention.
#include <string_view>
using namespace std::string_view_literals;
#include "core/idempotency.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

struct Fixture {
  Operation op =
      NewWalletOperation({"op_1", "account:a", "k", "fp", "/", 10, 60000, 15000, ""}, 1000);
  KeyRecord record{"account:a", "k", "op_1", "fp", 1000};
};

TEST(Idempotency, KeyValidation) {
  EXPECT_TRUE(ValidIdempotencyKey("a"));
  EXPECT_TRUE(ValidIdempotencyKey("task-7/step:3_!~"));
  EXPECT_TRUE(ValidIdempotencyKey(std::string(255, 'x')));
  EXPECT_FALSE(ValidIdempotencyKey(""));
  EXPECT_FALSE(ValidIdempotencyKey(std::string(256, 'x')));
  EXPECT_FALSE(ValidIdempotencyKey("has space"));
  EXPECT_FALSE(ValidIdempotencyKey("tab\t"));
  EXPECT_FALSE(ValidIdempotencyKey("nul\0x"sv));
  EXPECT_FALSE(ValidIdempotencyKey("caf\xc3\xa9"));
  EXPECT_FALSE(ValidIdempotencyKey("del\x7f"));
}

TEST(Idempotency, NoRecordIsNew) {
  Arrival arrival = DecideArrival(nullptr, nullptr, "fp", 5, ClaimView::kLease);
  EXPECT_EQ(arrival.outcome, ArrivalOutcome::kNew);
  EXPECT_FALSE(arrival.forget_existing);
}

TEST(Idempotency, InFlightWithLiveLeaseAttaches) {
  Fixture f;
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kAttach);
  // At the lease's expiry the attempt is presumed dead and the next request resumes.
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 16000, ClaimView::kLease).outcome,
            ArrivalOutcome::kResume);
}

TEST(Idempotency, InFlightClaimEndedHereResumesBeforeItsLease) {
  Fixture f;
  // This process's attempt ended without recording its outcome: nobody runs it, so a retry takes
  // it over now rather than attaching to it until the lease runs out.
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 2000, ClaimView::kEndedHere).outcome,
            ArrivalOutcome::kResume);
  // What it knows changes nothing else: another request is refused, a final answer replayed.
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "other", 2000, ClaimView::kEndedHere).outcome,
            ArrivalOutcome::kMismatch);
  f.op.fulfillment = Fulfillment::kSucceeded;
  f.op.response = StoredResponse{200, "", ""};
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 2000, ClaimView::kEndedHere).outcome,
            ArrivalOutcome::kReplay);
}

TEST(Idempotency, DifferentRequestIsAMismatchWhateverTheState) {
  Fixture f;
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "other", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kMismatch);
  f.op.fulfillment = Fulfillment::kSucceeded;
  f.op.response = StoredResponse{200, "", ""};
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "other", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kMismatch);
}

TEST(Idempotency, FinalReplaysUntilRetentionThenForgets) {
  Fixture f;
  f.op.fulfillment = Fulfillment::kRejected;
  f.op.response = StoredResponse{400, "", ""};
  f.op.retained_until_ms = RetainedUntil(3000, 500);
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 3499, ClaimView::kLease).outcome,
            ArrivalOutcome::kReplay);
  Arrival late = DecideArrival(&f.record, &f.op, "fp", 3500, ClaimView::kLease);
  EXPECT_EQ(late.outcome, ArrivalOutcome::kNew);
  EXPECT_TRUE(late.forget_existing);
  // Forgotten means forgotten: a different request with the old key is new too, not a mismatch.
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "other", 3500, ClaimView::kLease).outcome,
            ArrivalOutcome::kNew);
}

TEST(Idempotency, KeptOperationResumes) {
  Fixture f;
  f.op.fulfillment = Fulfillment::kPendingRetry;
  EXPECT_EQ(DecideArrival(&f.record, &f.op, "fp", 2000, ClaimView::kLease).outcome,
            ArrivalOutcome::kResume);
}

TEST(Idempotency, RepeatedArrivalsBecomeTraceEventsUpToTheCap) {
  Fixture f;
  f.op.response = StoredResponse{201, "text/plain", "ok"};
  auto replayed = ArrivalEvent(f.record, f.op, ArrivalOutcome::kReplay, 5000);
  ASSERT_TRUE(replayed.has_value());
  EXPECT_EQ(replayed->kind, "replayed");
  EXPECT_EQ(replayed->actor, TraceActor::kClient);
  EXPECT_EQ(replayed->at_ms, 5000);
  EXPECT_EQ(replayed->facts.http_status, 201);
  auto attached = ArrivalEvent(f.record, f.op, ArrivalOutcome::kAttach, 5000);
  ASSERT_TRUE(attached.has_value());
  EXPECT_EQ(attached->kind, "attached");
  EXPECT_EQ(attached->facts.attempt, f.op.attempts);
  auto refused = ArrivalEvent(f.record, f.op, ArrivalOutcome::kMismatch, 5000);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->kind, "mismatch_refused");
  EXPECT_EQ(refused->facts.http_status, 422);
  EXPECT_EQ(refused->facts.reason, "idempotency_key_reused");
  // New and resumed arrivals write their own events; a full key records no more.
  EXPECT_FALSE(ArrivalEvent(f.record, f.op, ArrivalOutcome::kNew, 5000).has_value());
  EXPECT_FALSE(ArrivalEvent(f.record, f.op, ArrivalOutcome::kResume, 5000).has_value());
  f.record.arrivals_recorded = kMaxRecordedArrivals - 1;
  EXPECT_TRUE(ArrivalEvent(f.record, f.op, ArrivalOutcome::kReplay, 5000).has_value());
  f.record.arrivals_recorded = kMaxRecordedArrivals;
  EXPECT_FALSE(ArrivalEvent(f.record, f.op, ArrivalOutcome::kReplay, 5000).has_value());
}

TEST(Idempotency, FingerprintMaterialSeparatesFields) {
  // Moving bytes between fields must change the material.
  EXPECT_NE(FingerprintMaterial("POST", "/a", "b=1", "", "x"),
            FingerprintMaterial("POST", "/a?b=1", "", "", "x"));
  EXPECT_NE(FingerprintMaterial("POST", "/a", "", "text/plain", ""),
            FingerprintMaterial("POST", "/a", "", "", "text/plain"));
  EXPECT_EQ(FingerprintMaterial("GET", "/", "", "", ""), FingerprintMaterial("GET", "/", "", "", ""));
}

}  // namespace
}  // namespace agentpay
