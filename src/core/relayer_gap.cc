#include "core/relayer_gap.h"

namespace agentpay {

std::string_view GapStepName(GapStep step) {
  switch (step) {
    case GapStep::kReadPending:
      return "read_pending";
    case GapStep::kAskNode:
      return "ask_node";
    case GapStep::kSendNoop:
      return "send_noop";
    case GapStep::kResend:
      return "resend";
    case GapStep::kNext:
      return "next";
    case GapStep::kStop:
      return "stop";
    case GapStep::kHeldAtNextNonce:
      return "held_at_next_nonce";
  }
  return "?";
}

GapStep DecideGapStep(const GapFacts& f) {
  const uint64_t nonce = f.nonce < 0 ? 0 : static_cast<uint64_t>(f.nonce);
  if (!f.ours) {
    if (f.nonce >= f.taken) return GapStep::kStop;  // G1
    if (!f.pending) return GapStep::kReadPending;   // G2
    if (*f.pending > nonce) return GapStep::kStop;  // G3
    return GapStep::kSendNoop;                      // G4
  }
  if (!f.node_knows) return GapStep::kAskNode;                           // G5
  if (!*f.node_knows) return GapStep::kResend;                           // G6
  if (!f.stalled) return GapStep::kStop;                                 // G7
  if (!f.pending) return GapStep::kReadPending;                          // G8
  if (f.first && *f.pending <= nonce) return GapStep::kHeldAtNextNonce;  // G9
  if (f.taken >= 0 && *f.pending >= static_cast<uint64_t>(f.taken)) {
    return GapStep::kStop;  // G10
  }
  return GapStep::kNext;  // G11
}

}  // namespace agentpay
