// The buyer's side of x402 `exact` on EVM: an EIP-3009 TransferWithAuthorization signed in-process
// for one offer, encoded as the PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1) header the official
// clients send (@x402/fetch 2.27, x402-fetch 1.2.0).
#pragma once

#include <cstdint>
#include <string>

#include "chain/eip712.h"
#include "chain/secp256k1.h"
#include "client/challenge.h"
#include "core/result.h"
#include "core/world.h"

namespace agentpay::client {

struct SignedPayment {
  std::string header_name;   // PAYMENT-SIGNATURE or X-PAYMENT
  std::string header_value;  // padded base64 of the payload JSON
  chain::TransferAuthorization authorization;
};

// validAfter = 0 (v2) or now − 600 (v1, as x402-fetch signs), validBefore = now +
// maxTimeoutSeconds, a random 32-byte nonce from `random`, value = the offer's exact amount, to =
// payTo, under the domain (extra.name, extra.version, chain id, asset). Precondition: now_s > 600.
Result<SignedPayment> SignPayment(const Offer& offer, const chain::PrivateKey& key, int64_t now_s,
                                  Random& random);

// The header name a payment of this version travels in.
std::string PaymentHeaderFor(int x402_version);

}  // namespace agentpay::client
