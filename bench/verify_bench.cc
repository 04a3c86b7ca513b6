// x402 payment verification per second (decode PAYMENT-SIGNATURE, EIP-712 digest, signer recovery,
// the facilitator's checks) against raw libsecp256k1 recovery per second, measured interleaved in
// one run so that machine noise hits every side alike (issue 3: floor 0.8×, judged against the raw
// recovery of the same signatures). A measurement, not a test: it exits 0 whatever the ratio.
// Run: taskset -c 1 build/bench/verify_bench [--seconds N]
#include <secp256k1.h>
#include <secp256k1_recovery.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chain/bytes.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/secp256k1.h"
#include "x402/base64.h"
#include "x402/json_tape.h"
#include "x402/verify.h"
#include "x402/wire.h"

// Every heap allocation of the program goes through these (libstdc++'s array, nothrow and sized
// forms call them), so the step table can print allocations per operation. One thread: a plain
// counter suffices.
namespace {
uint64_t g_allocations = 0;
}  // namespace

// g++ sees free() applied to what `new` returned once these are inlined; here that is the point.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

namespace chain = agentpay::chain;
namespace x402 = agentpay::x402;
using Clock = std::chrono::steady_clock;

constexpr double kFloor = 0.8;
constexpr size_t kHeaderCount = 256;  // distinct signed headers, cycled through
// A fixed "now" inside every authorization's window, so that runs are repeatable.
constexpr int64_t kNowSeconds = 1'800'000'000;

struct Options {
  double seconds = 2.0;  // per timed round
  int rounds = 5;        // rounds of A, A' and B, interleaved
  bool breakdown = true;
  char only = 0;  // 'A' or 'B': run just that loop for `seconds` (for perf record), no table
};

void Usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--seconds N] [--rounds N] [--no-breakdown] [--only A|B]\n"
               "  --seconds N     length of each timed round, in seconds (default 2)\n"
               "  --rounds N      rounds of A, A' and B, interleaved in 0.1 s slices (default 5)\n"
               "  --no-breakdown  skip the per-step timings\n"
               "  --only A|B      run one loop for --seconds and print its rate (to profile it)\n",
               program);
}

bool ParseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--seconds" && has_value) {
      options.seconds = std::atof(argv[++i]);
      if (!(options.seconds > 0)) return false;
    } else if (arg == "--rounds" && has_value) {
      options.rounds = std::atoi(argv[++i]);
      if (options.rounds < 1) return false;
    } else if (arg == "--only" && has_value) {
      const std::string_view which = argv[++i];
      if (which != "A" && which != "B") return false;
      options.only = which[0];
    } else if (arg == "--no-breakdown") {
      options.breakdown = false;
    } else {
      return false;
    }
  }
  return true;
}

// The gateway's offer: Base Sepolia USDC as the official-client fixtures use it (0.01 USDC).
x402::Requirements BenchRequirements() {
  x402::Requirements requirements;
  requirements.chain_id = 84532;
  requirements.network = x402::V2Network(84532);
  requirements.amount = chain::U256(10000);
  requirements.asset = *chain::ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e");
  requirements.pay_to = *chain::ParseAddress("0x209693Bc6afc0C5328bA36FaF03C514EF312287C");
  requirements.max_timeout_seconds = 300;
  requirements.asset_name = "USDC";
  requirements.asset_version = "2";
  requirements.resource_url = "https://gateway.example/paid/report";
  requirements.description = "Paid report";
  requirements.mime_type = "application/json";
  return requirements;
}

// A v2 PAYMENT-SIGNATURE as @x402/fetch would send it: validAfter 0, validBefore = now + max
// timeout, a fresh 32-byte nonce, the chosen requirement echoed in `accepted`. Payer i's key is
// keccak("verify-bench-payer-" + i) and its nonce keccak of another label, so every header differs.
std::string SignedHeader(const x402::Requirements& requirements, size_t index) {
  const std::string label = std::to_string(index);
  const chain::PrivateKey key(chain::Keccak256("verify-bench-payer-" + label));
  x402::PaymentPayload payload;
  payload.version = x402::Version::kV2;
  payload.scheme = "exact";
  payload.network = x402::V2Network(requirements.chain_id);
  payload.chain_id = requirements.chain_id;
  payload.accepted = x402::AcceptedEntry(requirements);
  payload.authorization = chain::TransferAuthorization{
      chain::AddressOf(key),
      requirements.pay_to,
      requirements.amount,
      chain::U256(0),
      chain::U256(static_cast<uint64_t>(kNowSeconds + requirements.max_timeout_seconds)),
      chain::Keccak256("verify-bench-nonce-" + label)};
  payload.signature = *chain::SignDigest(x402::AuthorizationDigest(payload, requirements), key);
  return x402::EncodePaymentHeader(payload);
}

// The 256 headers and, for the baselines and the breakdown, what decoding them yields.
struct Corpus {
  x402::Requirements requirements;  // as the gateway builds them: no precomputed domain separator
  std::vector<std::string> headers;
  std::vector<std::string> json_texts;  // base64-decoded headers
  std::vector<x402::PaymentPayload> payloads;
  std::vector<chain::Hash32> digests;  // what each payer signed
};

Corpus MakeCorpus() {
  Corpus corpus;
  corpus.requirements = BenchRequirements();
  for (size_t i = 0; i < kHeaderCount; ++i) {
    corpus.headers.push_back(SignedHeader(corpus.requirements, i));
    corpus.json_texts.push_back(*x402::Base64Decode(corpus.headers.back()));
    corpus.payloads.push_back(
        *x402::DecodePaymentHeader(corpus.headers.back(), x402::Version::kV2));
    corpus.digests.push_back(
        x402::AuthorizationDigest(corpus.payloads.back(), corpus.requirements));
  }
  return corpus;
}

// Operations done, time spent and heap allocations made, summed over the slices of a round.
struct Tally {
  uint64_t count = 0;
  double seconds = 0;
  uint64_t allocations = 0;
  double Rate() const { return static_cast<double>(count) / seconds; }
  double AllocationsPerOp() const {
    return static_cast<double>(allocations) / static_cast<double>(count);
  }
};

// Runs `operation(i)` with i cycling through 0..kHeaderCount-1 for about `seconds`, reading the
// clock every 32 calls, and adds what it did to `tally`.
template <typename Operation>
void RunFor(double seconds, Operation&& operation, Tally& tally) {
  const auto budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const uint64_t allocations_before = g_allocations;
  const Clock::time_point start = Clock::now();
  Clock::time_point now = start;
  uint64_t count = 0;
  do {
    for (int i = 0; i < 32; ++i, ++count) operation(count % kHeaderCount);
    now = Clock::now();
  } while (now - start < budget);
  tally.count += count;
  tally.seconds += std::chrono::duration<double>(now - start).count();
  tally.allocations += g_allocations - allocations_before;
}

template <typename Operation>
Tally Measure(double seconds, Operation&& operation) {
  Tally tally;
  RunFor(seconds, operation, tally);
  return tally;
}

// The 1-, 5- and 15-minute load averages, to show whether other work shared the machine.
std::string LoadAverage() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(file >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Written by the measured loops so that the compiler cannot drop their work.
volatile uint64_t g_sink = 0;

// (A) The floor's reference: what any verifier must pay per signature, straight from libsecp256k1.
class RawRecovery {
 public:
  RawRecovery() : context_(secp256k1_context_create(SECP256K1_CONTEXT_NONE)) {
    // One fixed digest and a recoverable signature over it, made with libsecp256k1 itself.
    digest_ = chain::Keccak256(std::string_view("verify-bench-baseline-digest"));
    const chain::Hash32 secret = chain::Keccak256(std::string_view("verify-bench-baseline-key"));
    ok_ = context_ != nullptr &&
          secp256k1_ecdsa_sign_recoverable(context_, &signature_, digest_.data(), secret.data(),
                                           nullptr, nullptr) == 1;
  }
  ~RawRecovery() {
    if (context_ != nullptr) secp256k1_context_destroy(context_);
  }
  RawRecovery(const RawRecovery&) = delete;
  RawRecovery& operator=(const RawRecovery&) = delete;

  bool ok() const { return ok_; }
  // recover + serialize (uncompressed) of the fixed pair: the baseline (A).
  bool Once() { return Recover(signature_, digest_); }
  // The same over another digest and Ethereum signature (A'); parsing r, s, v into libsecp256k1's
  // form is a few hundred nanoseconds and is left inside, as RecoverSigner has it too.
  bool Once(const chain::Hash32& digest, const chain::Signature& signature) {
    secp256k1_ecdsa_recoverable_signature recoverable;
    if (secp256k1_ecdsa_recoverable_signature_parse_compact(
            context_, &recoverable, signature.bytes.data(), signature.v() - 27) != 1) {
      return false;
    }
    return Recover(recoverable, digest);
  }

 private:
  bool Recover(const secp256k1_ecdsa_recoverable_signature& signature,
               const chain::Hash32& digest) {
    secp256k1_pubkey public_key;
    if (secp256k1_ecdsa_recover(context_, &public_key, &signature, digest.data()) != 1) {
      return false;
    }
    unsigned char serialized[65];
    size_t size = sizeof(serialized);
    secp256k1_ec_pubkey_serialize(context_, serialized, &size, &public_key,
                                  SECP256K1_EC_UNCOMPRESSED);
    g_sink = g_sink + serialized[1] + size;
    return true;
  }

  secp256k1_context* context_;
  secp256k1_ecdsa_recoverable_signature signature_;
  chain::Hash32 digest_{};
  bool ok_ = false;
};

// (B) What the gateway does per paid x402 request before it touches the chain.
bool VerifyOnce(const std::string& header, const x402::Requirements& requirements) {
  const agentpay::Result<x402::PaymentPayload> payload =
      x402::DecodePaymentHeader(header, x402::Version::kV2);
  if (!payload.ok()) return false;
  const x402::Failure failure = x402::VerifyExact(*payload, requirements, kNowSeconds);
  g_sink = g_sink + payload->authorization.nonce[0];
  return failure == x402::Failure::kNone;
}

struct Step {
  const char* name;
  std::function<void(size_t)> run;
};

// Each step of (B) on its own over the same 256 headers: where the time goes.
std::vector<Step> BreakdownSteps(const Corpus& corpus, RawRecovery& raw) {
  const x402::Requirements& requirements = corpus.requirements;
  const chain::Hash32 domain =
      chain::DomainSeparator(requirements.asset_name, requirements.asset_version,
                             requirements.chain_id, requirements.asset);
  x402::Requirements precomputed = requirements;
  precomputed.domain_separator = x402::DomainSeparatorOf(requirements);
  const auto& c = corpus;
  return {
      {"decode: Base64Decode",
       [&c](size_t i) { g_sink = g_sink + x402::Base64Decode(c.headers[i])->size(); }},
      {"decode: JsonTape::Parse (validate, depth limit)",
       [&c](size_t i) {
         x402::JsonTape tape;
         g_sink = g_sink + static_cast<uint64_t>(tape.Parse(c.json_texts[i], 64)) + tape.size();
       }},
      {"decode: JsonTape::Parse + `accepted` as json",
       [&c](size_t i) {
         x402::JsonTape tape;
         g_sink = g_sink + static_cast<uint64_t>(tape.Parse(c.json_texts[i], 64));
         g_sink = g_sink + tape.ToJson(tape.Member(x402::JsonTape::root(), "accepted")).size();
       }},
      {"(old) nlohmann::json::parse + free",
       [&c](size_t i) {
         g_sink = g_sink + nlohmann::json::parse(c.json_texts[i], nullptr, false).size();
       }},
      {"DecodePaymentHeader (all of decode)",
       [&c](size_t i) {
         g_sink = g_sink +
                  x402::DecodePaymentHeader(c.headers[i], x402::Version::kV2)->signature.bytes[0];
       }},
      {"EIP-712: DomainSeparator (VerifyExact reuses it)",
       [&requirements](size_t) {
         g_sink =
             g_sink + chain::DomainSeparator(requirements.asset_name, requirements.asset_version,
                                             requirements.chain_id, requirements.asset)[0];
       }},
      {"EIP-712: Eip3009Digest (struct hash, digest)",
       [&c, domain](size_t i) {
         g_sink = g_sink + chain::Eip3009Digest(domain, c.payloads[i].authorization)[0];
       }},
      {"RecoverSigner (recover, serialize, keccak)",
       [&c](size_t i) {
         g_sink = g_sink + chain::RecoverSigner(c.digests[i], c.payloads[i].signature)->bytes[0];
       }},
      {"VerifyExact (digest, recover, checks)",
       [&c](size_t i) {
         g_sink = g_sink + static_cast<uint64_t>(
                               x402::VerifyExact(c.payloads[i], c.requirements, kNowSeconds));
       }},
      {"(A) raw recover + serialize, fixed input", [&raw](size_t) { raw.Once(); }},
      {"(A') raw recover + serialize, 256 signatures",
       [&c, &raw](size_t i) { raw.Once(c.digests[i], c.payloads[i].signature); }},
      {"(B) DecodePaymentHeader + VerifyExact",
       [&c](size_t i) { VerifyOnce(c.headers[i], c.requirements); }},
      {"(B) with Requirements::domain_separator set",
       [&c, precomputed](size_t i) { VerifyOnce(c.headers[i], precomputed); }},
  };
}

void PrintBreakdown(const Corpus& corpus, RawRecovery& raw, double seconds) {
  std::printf("\nwhere the time goes (each step alone, %.2f s, the same 256 headers)\n", seconds);
  std::printf("%-50s %10s %8s %8s\n", "step", "ops/s", "us/op", "allocs");
  for (const Step& step : BreakdownSteps(corpus, raw)) {
    const Tally tally = Measure(seconds, step.run);
    std::printf("%-50s %10.0f %8.2f %8.1f\n", step.name, tally.Rate(), 1e6 / tally.Rate(),
                tally.AllocationsPerOp());
  }
}

struct Rates {
  std::vector<double> a, a_varied, b;
};

// Length of one slice: a round interleaves A, A' and B in slices this long, so that a burst of
// other work on the machine (longer than a few slices) slows all three alike.
constexpr double kSliceSeconds = 0.1;

// One round: `seconds` of each of A, A' and B, interleaved slice by slice, the order rotating from
// slice to slice so that none always runs first.
void MeasureRound(double seconds, const Corpus& corpus, RawRecovery& raw, Rates& rates,
                  bool& all_verified) {
  std::array<Tally, 3> tallies;
  const std::array<std::function<void(double)>, 3> measures = {
      [&](double slice) {
        RunFor(
            slice, [&](size_t) { raw.Once(); }, tallies[0]);
      },
      [&](double slice) {
        RunFor(
            slice, [&](size_t i) { raw.Once(corpus.digests[i], corpus.payloads[i].signature); },
            tallies[1]);
      },
      [&](double slice) {
        RunFor(
            slice,
            [&](size_t i) {
              if (!VerifyOnce(corpus.headers[i], corpus.requirements)) all_verified = false;
            },
            tallies[2]);
      },
  };
  const int slices = std::max(1, static_cast<int>(seconds / kSliceSeconds + 0.5));
  for (int slice = 0; slice < slices; ++slice) {
    for (size_t k = 0; k < measures.size(); ++k) {
      measures[(slice + k) % measures.size()](seconds / slices);
    }
  }
  rates.a.push_back(tallies[0].Rate());
  rates.a_varied.push_back(tallies[1].Rate());
  rates.b.push_back(tallies[2].Rate());
}

// The floor is judged on B/A': A' recovers the very signatures B verifies, so B − A' is exactly
// what AgentPay adds. A repeats one input, which the branch predictor learns (recovery is
// variable-time): it is faster than any real mix of signatures, and B/A is printed beside it.
void PrintSummary(const Rates& rates, bool all_verified) {
  const double a = Median(rates.a), a_varied = Median(rates.a_varied), b = Median(rates.b);
  std::vector<double> ratios, ratios_fixed;
  for (size_t i = 0; i < rates.a.size(); ++i) {
    ratios.push_back(rates.b[i] / rates.a_varied[i]);
    ratios_fixed.push_back(rates.b[i] / rates.a[i]);
  }
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  const auto [low_fixed, high_fixed] =
      std::minmax_element(ratios_fixed.begin(), ratios_fixed.end());
  const double ratio = b / a_varied;
  std::printf("%-6s %12.0f %12.0f %12.0f %8.3f %8.3f\n", "median", a, a_varied, b, b / a, ratio);
  std::printf("\nper op: A %.2f us, A' %.2f us, B %.2f us\n", 1e6 / a, 1e6 / a_varied, 1e6 / b);
  std::printf("B spends %.2f us per request beyond A', %.2f us beyond A\n",
              1e6 / b - 1e6 / a_varied, 1e6 / b - 1e6 / a);
  std::printf("per-round B/A': median %.3f, range %.3f .. %.3f\n", Median(ratios), *low, *high);
  std::printf("per-round B/A:  median %.3f, range %.3f .. %.3f\n", Median(ratios_fixed), *low_fixed,
              *high_fixed);
  if (!all_verified) std::printf("WARNING: some verifications failed during the timed rounds\n");
  std::printf("\nB/A' = %.3f (floor %.2f): %s\n", ratio, kFloor,
              ratio >= kFloor ? "PASS" : "BELOW");
  std::printf("B/A  = %.3f (against one fixed input, recovered over and over: %s the floor)\n",
              b / a, b / a >= kFloor ? "also above" : "below");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, options)) {
    Usage(argv[0]);
    return 2;
  }
  const Corpus corpus = MakeCorpus();
  RawRecovery raw;
  // A fixture that does not verify would time a refusal path: that is a bug, not a figure.
  if (!raw.ok() || !raw.Once()) {
    std::fprintf(stderr, "verify_bench: the baseline signature does not recover\n");
    return 2;
  }
  for (const std::string& header : corpus.headers) {
    if (!VerifyOnce(header, corpus.requirements)) {
      std::fprintf(stderr, "verify_bench: a generated header does not verify\n");
      return 2;
    }
  }

  if (options.only != 0) {
    const Tally tally = options.only == 'A' ? Measure(options.seconds, [&](size_t) { raw.Once(); })
                                            : Measure(options.seconds, [&](size_t i) {
                                                VerifyOnce(corpus.headers[i], corpus.requirements);
                                              });
    std::printf("%c: %.0f ops/s, %.1f heap allocations per op\n", options.only, tally.Rate(),
                tally.AllocationsPerOp());
    return 0;
  }
  const std::string load_before = LoadAverage();

  std::printf(
      "x402 verification vs raw secp256k1 recovery: one thread, %d rounds of %.2f s per side,\n"
      "the sides interleaved in %.1f s slices\n"
      "(A)  secp256k1_ecdsa_recover + secp256k1_ec_pubkey_serialize, one fixed digest and "
      "signature\n"
      "(A') the same over the %zu digests and signatures of B's headers: the floor's baseline\n"
      "(B)  DecodePaymentHeader (PAYMENT-SIGNATURE v2, %zu bytes) + VerifyExact, %zu distinct "
      "signed headers\n"
      "load average before: %s\n\n",
      options.rounds, options.seconds, kSliceSeconds, kHeaderCount, corpus.headers.front().size(),
      kHeaderCount, load_before.c_str());
  std::printf("%-6s %12s %12s %12s %8s %8s\n", "round", "A ops/s", "A' ops/s", "B ops/s", "B/A",
              "B/A'");
  Rates rates;
  bool all_verified = true;
  for (int round = 0; round < options.rounds; ++round) {
    MeasureRound(options.seconds, corpus, raw, rates, all_verified);
    std::printf("%-6d %12.0f %12.0f %12.0f %8.3f %8.3f\n", round + 1, rates.a.back(),
                rates.a_varied.back(), rates.b.back(), rates.b.back() / rates.a.back(),
                rates.b.back() / rates.a_varied.back());
  }
  PrintSummary(rates, all_verified);
  std::printf("load average after the rounds: %s\n", LoadAverage().c_str());
  if (options.breakdown) PrintBreakdown(corpus, raw, std::min(options.seconds, 0.5));
  return 0;
}
