// The x402 request's own wait for its settlement's receipt (CONTRACT §5; X3–X5 of
// core/settlement.h): after each look, and after the full look that follows a receipt or the
// deadline, what the request does next. Pure: the shell (gateway/x402_path.cc) makes the chain
// calls, learns the pauses between looks (core/receipt_polls.h) and writes what is decided.
#pragma once

#include <optional>
#include <string_view>

#include "core/settlement.h"

namespace agentpay {

// What one look for the receipt (Settler::LookForReceipt) saw.
enum class ReceiptSeen {
  kLookFailed,      // the node could not be asked
  kNone,            // no receipt yet
  kPaidUs,          // mined, with the Transfer to payTo
  kMinedOtherwise,  // mined without it (reverted, or a transaction that paid someone else)
};

enum class ReceiptStep {
  kObserve,    // the full look (Settler::Observe: the nonce, the depth), then Reconcile
  kLookAgain,  // the next look after a pause, within the deadline
  kSettled,    // X3: settled; the upstream is called (or its 2xx delivered, settle=after)
  kFailed,     // X5: the nonce is spent and the money did not move to payTo: 409 and an alert
  kUnknown,    // X4: 202 with Location; the reconciler decides it from the chain
};
std::string_view ReceiptStepName(ReceiptStep step);

// After a look (`deadline_passed`: the look was made at or after --receipt-timeout-ms):
//
//  row | look saw          | deadline | next
//  ----+-------------------+----------+-----------
//  RW1 | look failed       | before   | look again
//  RW2 | look failed       | passed   | unknown
//  RW3 | no receipt        | before   | look again
//  RW4 | no receipt        | passed   | observe   (a spent nonce tells failed from still pending)
//  RW5 | a receipt         | -        | observe   (its depth, and whether it paid us)
ReceiptStep AfterReceiptLook(ReceiptSeen seen, bool deadline_passed);

// After the full look; `reconciled`: Reconcile's action on it (nullopt: the full look failed).
//
//  row  | reconciled           | look saw        | deadline | next
//  -----+----------------------+-----------------+----------+-----------
//  RW6  | kMarkSettled         | -               | -        | settled
//  RW7  | kMarkFailed          | -               | -        | failed
//  RW8  | other, or none       | mined otherwise | -        | unknown (the reconciler's to explain)
//  RW9  | other, or none       | else            | before   | look again (pending, or short of
//       |                      |                 |          | --confirmations)
//  RW10 | other, or none       | else            | passed   | unknown
// Only these two functions decide the wait's end: nothing is settled, failed or released
// elsewhere during a request, and a receipt timeout is never a failure (RW2, RW10).
ReceiptStep AfterReceiptObservation(ReceiptSeen seen, std::optional<ReconcileAction> reconciled,
                                    bool deadline_passed);

}  // namespace agentpay
