// What the gateway's parts (the wallet path, the x402 path, the admin API, the views) share: the
// configuration, the injected world, the counters and the attached duplicates. Owned by Gateway;
// every part holds a copy of these references and nothing else of the gateway.
#pragma once

#include <string>

#include "core/world.h"
#include "gateway/answer_cache.h"
#include "gateway/attachments.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/rate_limiter.h"
#include "gateway/upstream.h"
#include "store/store.h"

namespace agentpay {

struct GatewayContext {
  const GatewayConfig& config;
  Store& store;
  Clock& clock;  // wall-clock time: what is stored and compared with stored times
  Random& random;
  Timers& timers;  // durations, deadlines and waiting
  Upstream& upstream;
  Metrics& metrics;
  Attachments& attachments;
  const std::string& instance_id;  // stamped on every claim an attempt takes
  RateLimiters& rate_limiters;     // per account and per payer (the client's is the gateway's)
  Executor& readers;  // the paid path's reads (Store::ReadAsync): few threads, short reads
  AnswerCache& answer_cache;  // final answers for replays, without a read (wallet routes)
};

}  // namespace agentpay
