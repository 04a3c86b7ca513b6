// Every row of the payer-proof table in core/payer_proof.h.
#include "core/payer_proof.h"

#include <gtest/gtest.h>

namespace agentpay {
namespace {

using Chain = PayerProofFacts::Chain;
using Key = PayerProofFacts::Key;

struct Row {
  Key key;
  bool identical, transaction_public, valid;
  Chain chain;
  PayerProof expected;
};

void ExpectRows(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    PayerProofFacts facts{row.key, row.identical, row.transaction_public, row.valid, row.chain};
    EXPECT_EQ(DecidePayerProof(facts), row.expected)
        << "key " << static_cast<int>(row.key) << " identical " << row.identical << " public "
        << row.transaction_public << " valid " << row.valid << " chain "
        << static_cast<int>(row.chain);
  }
}

TEST(PayerProofTest, EveryRowOfTheTable) {
  ExpectRows({
      // default key (payer, nonce)
      {Key::kDefault, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kDefault, true, true, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kDefault, false, false, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kDefault, false, true, true, Chain::kUnused, PayerProof::kRefusePublic},
      // secret key
      {Key::kSecret, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kSecret, true, true, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kSecret, true, true, false, Chain::kNotAsked, PayerProof::kProven},  // expired retry
      {Key::kSecret, false, true, false, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kSecret, false, false, false, Chain::kUnused, PayerProof::kRefusePublic},
      {Key::kSecret, false, true, true, Chain::kNotAsked, PayerProof::kAskChain},
      {Key::kSecret, false, true, true, Chain::kUnused, PayerProof::kProven},
      {Key::kSecret, false, false, true, Chain::kUnused, PayerProof::kProven},
      {Key::kSecret, false, true, true, Chain::kUsed, PayerProof::kRefusePublic},
  });
}

// The facilitator's settles: the caller is the authenticated payee of the authorization.
TEST(PayerProofTest, EveryRowOfThePayee) {
  ExpectRows({
      {Key::kPayee, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kPayee, true, true, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kPayee, true, true, false, Chain::kNotAsked, PayerProof::kProven},  // after validBefore
      {Key::kPayee, false, false, true, Chain::kUnused, PayerProof::kRefusePublic},
      {Key::kPayee, false, true, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kPayee, false, true, true, Chain::kUsed, PayerProof::kRefusePublic},
  });
}

// Issue 36 item 6 (T25): a key below --min-idempotency-key-bits is no secret. With the public
// authorization it proves nothing once the transaction exists; a fresh unused one still proves.
TEST(PayerProofTest, EveryRowOfAWeakKey) {
  ExpectRows({
      {Key::kWeak, true, false, true, Chain::kNotAsked, PayerProof::kProven},
      {Key::kWeak, true, true, true, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kWeak, true, true, false, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kWeak, false, true, false, Chain::kNotAsked, PayerProof::kRefusePublic},
      {Key::kWeak, false, false, false, Chain::kUnused, PayerProof::kRefusePublic},
      {Key::kWeak, false, true, true, Chain::kNotAsked, PayerProof::kAskChain},
      {Key::kWeak, false, true, true, Chain::kUnused, PayerProof::kProven},
      {Key::kWeak, false, false, true, Chain::kUnused, PayerProof::kProven},
      {Key::kWeak, false, true, true, Chain::kUsed, PayerProof::kRefusePublic},
  });
}

TEST(PayerProofTest, NamesAreStable) {
  EXPECT_EQ(PayerProofName(PayerProof::kProven), "proven");
  EXPECT_EQ(PayerProofName(PayerProof::kAskChain), "ask_chain");
  EXPECT_EQ(PayerProofName(PayerProof::kRefusePublic), "refuse_public");
}

}  // namespace
}  // namespace agentpay
