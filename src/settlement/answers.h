// What a settlement that ends without serving the request leaves behind: the stored answer of the
// final x402 operation and the admin alert. The gateway's own attempts and the reconciler both end
// settlements this way, so both build them here.
#pragma once

#include <cstdint>
#include <string>

#include "core/operation.h"
#include "core/world.h"

namespace agentpay {

// The stored answers of final x402 operations that were never served: a failed settlement (409,
// never 402: the payer may have paid, CONTRACT §3) and a void one (402: nothing was charged).
StoredResponse SettlementFailedResponse(const std::string& operation_id);
StoredResponse SettlementVoidResponse(const std::string& operation_id);
// The stored answer of an operation closed unpaid because its authorization expired before it
// was ever submitted (402: nothing was charged).
StoredResponse ExpiredUnsubmittedResponse(const std::string& operation_id);
// The admin alert every failed settlement raises.
Alert SettlementFailedAlert(Random& random, const std::string& operation_id,
                            const std::string& reason, int64_t now_ms);
// The admin alert of an unpaid x402 operation closed after an upstream call that may have done the
// work (core/settlement.h (g): X16 by a retry, X19 by the sweeper).
Alert UnpaidAfterPossibleWorkAlert(Random& random, const std::string& operation_id,
                                   const std::string& reason, int64_t now_ms);
// The admin alert of a payment whose paid answer went out and whose settlement a reorganisation
// took away for good (core/settlement.h X18): the chain holds no payment for it.
Alert SettlementLostAfterDeliveryAlert(Random& random, const std::string& operation_id,
                                       const std::string& reason, int64_t now_ms);

}  // namespace agentpay
