// Every row of the payer-proof table in core/payer_proof.h.
#include "core/payer_proof.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

using Chain = PayerProofFacts::Chain;

struct Row {
  bool secret_key, identical, transaction_public, valid;
  Chain chain;
  PayerProof expected;
};

TEST(PayerProofTest, EveryRowOfTheTable) {
  const Row rows[] = {
      // default key (payer, nonce)
      {false, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {false, true, true, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {false, false, false, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {false, false, true, true, Chain::kUnused, PayerProof::kRefusePublic},
      // secret key
      {true, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {true, true, true, true, Chain::kNotAsked, PayerProof::kProven},
      {true, true, true, false, Chain::kNotAsked, PayerProof::kProven},  // expired retry: still it
      {true, false, true, false, Chain::kNotAsked, PayerProof::kRefusePublic},
      {true, false, false, false, Chain::kUnused, PayerProof::kRefusePublic},
      {true, false, true, true, Chain::kNotAsked, PayerProof::kAskChain},
      {true, false, true, true, Chain::kUnused, PayerProof::kProven},
      {true, false, false, true, Chain::kUnused, PayerProof::kProven},
      {true, false, true, true, Chain::kUsed, PayerProof::kRefusePublic},
  };
  for (const Row& row : rows) {
    PayerProofFacts facts{row.secret_key, row.identical, row.transaction_public, row.valid,
                          row.chain};
    EXPECT_EQ(DecidePayerProof(facts), row.expected)
        << "secret " << row.secret_key << " identical " << row.identical << " public "
        << row.transaction_public << " valid " << row.valid << " chain "
        << static_cast<int>(row.chain);
  }
}

TEST(PayerProofTest, NamesAreStable) {
  EXPECT_EQ(PayerProofName(PayerProof::kProven), "proven");
  EXPECT_EQ(PayerProofName(PayerProof::kAskChain), "ask_chain");
  EXPECT_EQ(PayerProofName(PayerProof::kRefusePublic), "refuse_public");
}

}  // namespace
}  // namespace agentpay
