// AgentPay as an x402 facilitator (docs/facilitator.md): the HTTP surface a seller's x402
// middleware (@x402/express with @x402/core's HTTPFacilitatorClient, x402-express 1.x) calls to
// verify and settle the payments it receives, on its own listener (serve --facilitator-listen).
//
//   GET  /supported   anyone: the kinds settled here (exact, this chain) and the relayer
//   POST /verify      a seller: the payment's checks and the chain's simulation; nothing stored
//   POST /settle      a seller: X402Path::SettleForSeller, once per authorization
//   GET  /settlements/{payer}/{nonce}
//                     a seller: that settle's answer as it is now (X402Path::SettlementForSeller)
//
// Who may call: a seller named in the sellers file (--facilitator-sellers-file), with its key as
// `Authorization: Bearer <key>`, for a payment to one of the payees listed for it. Anyone else:
// 401 `unauthorized`; a payee that is not the caller's: 403 `payee_not_allowed`. Nothing is read
// or stored before both pass, so a stranger who read an authorization from a 402, a seller's
// logs or the mempool can neither settle it nor learn its state.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chain/bytes.h"
#include "core/result.h"
#include "gateway/metrics.h"
#include "gateway/x402_path.h"
#include "http/server.h"

namespace agentpay {

// A key shorter than this is refused when the file is read: a seller's key is a bearer secret.
inline constexpr size_t kMinSellerKeyLength = 32;
inline constexpr size_t kMaxSellerKeyLength = 256;
inline constexpr size_t kMaxSellers = 10000;
inline constexpr size_t kMaxPayeesPerSeller = 64;

// The sellers file: one seller a line, `NAME KEY PAYEE[,PAYEE...]` separated by spaces or tabs;
// blank lines and lines starting with '#' ignored. NAME: 1 to 64 of [A-Za-z0-9_.-], unique. KEY:
// kMinSellerKeyLength to kMaxSellerKeyLength visible ASCII characters, unique. PAYEE: 0x + 40
// hex digits, at most kMaxPayeesPerSeller. Errors ("invalid_config") name the line and the rule.
Result<std::vector<FacilitatorSeller>> ParseSellers(std::string_view text);

class Facilitator {
 public:
  // `x402` outlives the facilitator; `track` wraps each settle's and verify's answer (the
  // gateway's Gateway::TrackPaid: shutdown waits for them); `sellers` are the callers
  // (GatewayConfig::facilitator_sellers); `chain_id` and `relayer` are what /supported announces.
  Facilitator(X402Path& x402, std::function<Respond(Respond)> track,
              std::vector<FacilitatorSeller> sellers, uint64_t chain_id,
              const chain::Address& relayer, Metrics& metrics);

  // The listener's handler: answers every request through `respond`, once, from any thread.
  void Handle(std::shared_ptr<const HttpRequest> request, Respond respond);

  const std::vector<FacilitatorSeller>& sellers() const { return sellers_; }

 private:
  void SettlementStatus(const HttpRequest& request, Respond respond) const;
  // The seller whose key the request carries, or nullptr.
  const FacilitatorSeller* Caller(const HttpRequest& request) const;

  X402Path& x402_;
  std::function<Respond(Respond)> track_;
  Metrics& metrics_;  // the gateway's: each answer by call and status class
  std::vector<FacilitatorSeller> sellers_;
  // Each seller's index by the SHA-256 of its key (the file's keys are distinct): a request's key
  // costs one digest and one lookup, however many sellers there are.
  std::unordered_map<std::string, size_t> by_key_sha256_;
  std::string supported_;  // GET /supported's body, built once
};

}  // namespace agentpay
