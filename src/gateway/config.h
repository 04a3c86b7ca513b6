// The gateway's configuration, as validated values (the CLI builds it from flags and TOML).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chain/bytes.h"
#include "core/rate_limit.h"
#include "http/client.h"

namespace agentpay {

enum class SettleTiming { kBefore, kAfter };

struct RouteConfig {
  std::string prefix = "/";  // matches a path equal to it or below it ("/api" matches "/api/x")
  std::string upstream_url;
  Endpoint upstream;
  int64_t price = 0;  // atomic units, > 0
  int64_t timeout_ms = 10000;
  bool require_idempotency_key = false;
  SettleTiming settle = SettleTiming::kBefore;
};

// The asset and payee advertised in the 402 challenge (CONTRACT §3).
struct ChainConfig {
  int64_t chain_id = 1337;
  std::string asset = "0xa6e0000000000000000000000000000000000402";
  std::string asset_name = "USD Coin";
  std::string asset_version = "2";
  std::string pay_to = "0x9a7e000000000000000000000000000000000402";
  int64_t max_timeout_seconds = 120;
  // The relayer's caps in wei per gas (--max-fee-per-gas, --max-priority-fee-per-gas); zero: none.
  chain::U256 max_fee_per_gas, max_priority_fee_per_gas;
  // Blocks deep a settlement's receipt must be before it counts (--confirmations; 1: included).
  int64_t confirmations = 1;
  std::string Network() const { return "eip155:" + std::to_string(chain_id); }
};

// The token buckets of issue 13 item 5 (docs/protocol.md, "Limits"): a request takes one token
// from its client address's bucket before anything else, and one from its account's (wallet, once
// the API key is known) or its payer's (x402, once the signature is verified). The defaults sit
// above what one gateway process serves on a small machine (about 46k replays a second from one
// client on 2 cores), so they only stop a client that would otherwise take the whole gateway.
inline constexpr RateLimit kDefaultRateLimit{100000, 200000};
struct RateLimitConfig {
  RateLimit per_client = kDefaultRateLimit;
  RateLimit per_account = kDefaultRateLimit;
  RateLimit per_payer = kDefaultRateLimit;
  size_t max_buckets = 100000;  // per kind; past it the least recently used bucket is forgotten
};

// A seller who may call the facilitator (gateway/facilitator.h, the sellers file).
struct FacilitatorSeller {
  std::string name;
  std::string key_sha256;  // hex SHA-256 of the key: the key itself is not kept in memory
  std::vector<chain::Address> payees;
};

struct GatewayConfig {
  std::vector<RouteConfig> routes;
  // The facilitator's callers (serve --facilitator-sellers-file); the admin overview lists them
  // (names and payees, never the keys' digests). Empty without a facilitator.
  std::vector<FacilitatorSeller> facilitator_sellers;
  ChainConfig chain;
  // The base URL the 402 challenge names resources under (--public-url, normalised by
  // http/origin.h ParsePublicUrl: no trailing '/'); `serve` derives it from --listen and TLS when
  // it is not given. Never taken from a request.
  std::string public_url = "http://127.0.0.1:8402";
  std::string admin_token;  // empty: the admin API answers 403
  int64_t hold_ttl_ms = 600000;
  int64_t retention_ms = 86400000;
  int64_t sweep_interval_ms = 1000;
  int64_t rate_limit_sync_ms = 200;  // --rate-limit-sync-ms (gateway/rate_sync.h)
  int64_t receipt_timeout_ms = 5000;
  // x402: an unknown settlement whose authorization is past validBefore plus this many seconds,
  // with its nonce unused on chain, is void (CONTRACT §5).
  int64_t expiry_buffer_seconds = 30;
  // x402: payments of one payer between the chain preflight and the settlement's decision (its
  // reservation against the payer's balance); past it 429 + Retry-After.
  int64_t max_in_flight_per_payer = 128;
  // x402: the reconciler's chain calls per second (all its passes together).
  int64_t reconcile_rpc_per_second = 20;
  // x402: a settlement transaction left unmined this long is replaced at its relayer nonce with a
  // higher fee, within the caps (--replace-after-ms).
  int64_t replace_after_ms = 30000;
  // x402: how long after it was seen settled a settlement is watched for reorganisations
  // (--reorg-watch-ms; 0: not watched).
  int64_t reorg_watch_ms = 900000;
  int64_t attach_wait_ms = 5000;
  // The answer cache's bound in bytes (gateway/answer_cache.h; --answer-cache-mb); 0: off.
  uint64_t answer_cache_bytes = 64ull << 20;
  // How long before a final answer's retention ends the cache stops answering it: more than the
  // clock difference between the gateways of one database can be.
  int64_t answer_cache_margin_ms = 60000;
  // x402: an Idempotency-Key or payment-identifier id proves the payer (with the payment's public
  // authorization) only if EstimateKeyBits gives it at least this many bits; a weaker one still
  // deduplicates (core/payer_proof.h, T25). --min-idempotency-key-bits.
  int64_t min_idempotency_key_bits = 96;
  uint64_t max_body_bytes = 1048576;
  RateLimitConfig rate_limits;
  uint64_t max_upstream_response_bytes = 8 * 1024 * 1024;
  size_t blocking_threads = 16;  // admin, views and attached duplicates' re-reads run on these
  // x402 calls to the chain node run one call at a time on these threads (a payment waiting for
  // its receipt holds none of them between polls).
  size_t chain_threads = 8;
  // x402 settlements signed together share one relayer transaction, up to this many (Multicall3
  // aggregate3 with allowFailure: each authorization settles or fails on its own); 1: one
  // transaction per payment. The first settlement signed waits settle_batch_window_ms for others:
  // they go to the node together, in relayer nonce order, whether batched or not.
  size_t settle_batch_max = 1;
  int64_t settle_batch_window_ms = 10;
};

// Extra time an in-progress attempt keeps its claim beyond the upstream timeout before another
// request for the same key may presume it dead and take over.
inline constexpr int64_t kLeaseMarginMs = 5000;

}  // namespace agentpay
