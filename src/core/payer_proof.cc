// Who may have an x402 operation's result; see payer_proof.h.
#include "core/payer_proof.h"

#include "core/check.h"

namespace agentpay {

PayerProof DecidePayerProof(const PayerProofFacts& facts) {
  using Key = PayerProofFacts::Key;
  if (facts.identical_authorization) {
    if (facts.key == Key::kSecret || facts.key == Key::kPayee || !facts.transaction_public) {
      return PayerProof::kProven;
    }
    return PayerProof::kRefusePublic;
  }
  // The payee knows its payments by their authorizations: another one under the same nonce is
  // not one it was paid with.
  if (facts.key == Key::kPayee) return PayerProof::kRefusePublic;
  // Another authorization: only a fresh one that the chain never saw, which only the payer's key
  // can sign, proves the payer; the key is only what found the operation.
  if (facts.key == Key::kDefault || !facts.authorization_valid) return PayerProof::kRefusePublic;
  switch (facts.chain) {
    case PayerProofFacts::Chain::kNotAsked:
      return PayerProof::kAskChain;
    case PayerProofFacts::Chain::kUnused:
      return PayerProof::kProven;
    case PayerProofFacts::Chain::kUsed:
      return PayerProof::kRefusePublic;
  }
  AGENTPAY_CHECK(false);
}

std::string_view PayerProofName(PayerProof proof) {
  switch (proof) {
    case PayerProof::kProven:
      return "proven";
    case PayerProof::kAskChain:
      return "ask_chain";
    case PayerProof::kRefusePublic:
      return "refuse_public";
  }
  AGENTPAY_CHECK(false);
}

}  // namespace agentpay
