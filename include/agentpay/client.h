// The AgentPay agent client, the library behind `agentpay pay`: pays for one HTTP
// request with a wallet API key or an x402 buyer key, against a local budget file, retrying with
// the same idempotency key and the same signed payment so that one business action is paid at most
// once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentpay::client {

// The process exit codes of `agentpay pay` (see docs/agent-client.md).
enum class ExitCode : int {
  kPaid = 0,   // paid (or free) and served: the body is in PayResult::body
  kError = 1,  // could not run (bad setup, budget file, no price): nothing was reserved or paid
  // Refused for good: by the server (4xx, a payment it will not take), or by this client before
  // paying (PayOutcome::kRefused: the offer is outside the spend controls or the budget's asset;
  // nothing was reserved, signed or sent).
  kRejected = 2,
  kUnknown = 3,     // the outcome is not known after the attempt budget; state kept for reconcile
  kOverBudget = 4,  // the budget cannot cover the price: no payment was signed or sent
};

// How a run of Pay() ended, finer than its exit code (which it determines: shown on each line).
enum class PayOutcome {
  kPaid,              // kPaid: paid and served
  kFree,              // kPaid: served without payment (the server asked for none)
  kRejected,          // kRejected: refused for good by the server (4xx, a payment it will not take)
  kUnknown,           // kUnknown: whether money moved is not known after the attempt budget
  kPaidNotDelivered,  // kUnknown: paid (the evidence says so), the answer never came
  kOverBudget,        // kOverBudget: the budget cannot cover the price; nothing was signed or sent
  kRefused,           // kRejected: refused by this client before paying (spend controls, the
                      // budget's asset); nothing was reserved, signed or sent
  kError,             // kError: could not run; nothing was reserved or paid
};
inline constexpr std::array<PayOutcome, 8> kPayOutcomes{PayOutcome::kPaid,
                                                        PayOutcome::kFree,
                                                        PayOutcome::kRejected,
                                                        PayOutcome::kUnknown,
                                                        PayOutcome::kPaidNotDelivered,
                                                        PayOutcome::kOverBudget,
                                                        PayOutcome::kRefused,
                                                        PayOutcome::kError};
// The outcome's name in `agentpay pay --json` ("outcome") and docs/agent-client.md: "paid",
// "free", "rejected", "unknown", "paid_not_delivered", "over_budget", "refused", "error".
std::string_view PayOutcomeName(PayOutcome outcome);
// The outcome of one of those names; nullopt for any other text (e.g. when reading --json output).
std::optional<PayOutcome> ParsePayOutcome(std::string_view text);

// The budget file used when none is given: in the current directory.
inline constexpr std::string_view kDefaultBudgetDb = "agentpay-budget.db";
// How long after validBefore an unused authorization still counts as "may land" (clock skew
// between nodes, shallow reorgs): the same 30 s the gateway uses.
inline constexpr int64_t kDefaultExpiryBufferSeconds = 30;
// The most one payment may cost unless PayOptions::max_amount says otherwise, in atomic units:
// 1.00 of a 6-decimal token such as USDC, the official x402 client's default cap per payment. For
// a token with more decimals it is less, never more.
inline constexpr int64_t kDefaultMaxAmount = 1'000'000;

using Header = std::pair<std::string, std::string>;

struct PayOptions {
  std::string url;  // http(s)://HOST[:PORT]/PATH[?QUERY]
  std::string method = "GET";
  std::string body;
  std::vector<Header> headers;  // extra request headers (e.g. Content-Type)
  // Exactly one way to pay: a wallet API key (Authorization: Bearer), or an x402 buyer key
  // (0x + 64 hex digits, the content of --buyer-key-file).
  std::string api_key;
  std::string buyer_key;
  // The idempotency key: derived from task, step and the credential (DeriveKey), or given; with
  // neither, a random key good for this run only.
  std::optional<std::string> task;
  std::optional<uint64_t> step;
  std::string idempotency_key;
  std::string budget_db = std::string(kDefaultBudgetDb);
  std::optional<int64_t> budget;       // required when the file is created; must match afterwards
  int max_attempts = 5;                // paid sends of the request, the first included
  int64_t timeout_ms = 60000;          // deadline of the whole run, polling included
  int64_t attempt_timeout_ms = 15000;  // one HTTP exchange
  // Spend controls, checked against the 402 before anything is reserved or signed; an offer
  // outside them ends the run with ExitCode::kRejected, PayOutcome::kRefused.
  int x402_version = 0;             // 0: v2 when usable, else v1; or 1 / 2
  std::vector<std::string> assets;  // when set, only an offer in one of these tokens (0x + 40 hex)
  std::vector<std::string> networks;       // when set, only an offer on one of these (eip155:<id>)
  std::vector<std::string> payees;         // when set, x402 pays only these addresses (payTo)
  int64_t max_amount = kDefaultMaxAmount;  // the most one payment may cost (> 0)
  // Optional: evidence for "paid, not delivered"; when given, also a spend control: only an offer
  // on the chain this node serves (eth_chainId) is paid.
  std::string chain_rpc;
  // A PEM file of CA certificates trusted for https URLs besides the system's store; a server
  // whose certificate does not verify is never paid.
  std::string ca_file;
};

// What the chain and the server say about a payment whose response was lost.
struct Evidence {
  std::string payer;
  std::string nonce;
  std::string transaction;                 // tx hash, when found
  std::optional<bool> authorization_used;  // authorizationState(payer, nonce), when asked
};

struct PayResult {
  ExitCode exit_code = ExitCode::kError;
  PayOutcome outcome = PayOutcome::kError;
  std::string message;  // one sentence in plain words
  std::string key;
  int64_t amount = 0;             // reserved for this key (0 when nothing was reserved)
  std::string reservation_state;  // reserved, spent, released, unknown, or "" (none)
  int http_status = 0;            // of the last answer (0: none)
  std::vector<Header> response_headers;
  std::string body;          // of the last answer
  int attempts = 0;          // paid sends made in this run
  bool replayed = false;     // Idempotent-Replayed: true
  std::string operation_id;  // AgentPay-Operation-Id, when seen
  // Problem code or x402 reason of the server's refusal; for PayOutcome::kRefused this client's own
  // code: x402_version_not_usable, network_not_allowed, chain_rpc_mismatch, asset_not_allowed,
  // budget_asset_mismatch, payee_not_allowed or amount_above_max.
  std::string reason;
  Evidence evidence;
  int64_t budget_total = 0;
  int64_t budget_committed = 0;  // reserved + spent + unknown, after this run
};

// One line of progress in plain words, for a person at a terminal.
using Progress = std::function<void(std::string_view line)>;

// Pays for one request. Never throws.
PayResult Pay(const PayOptions& options, const Progress& progress = {});

// The idempotency key of step `step` of task `task` for the payer holding `credential` (the API
// key, or the buyer key as 0x + 64 lower-case hex digits):
//   "task:" + the first 32 hex digits of HMAC-SHA256(credential, len(task) ":" task ":" step)
//   + ":step:" + step (decimal; len(task) is the task's length in bytes, decimal)
// e.g. DeriveKey(key, "q3-report", 2) is "task:<32 hex>:step:2" with the HMAC of "9:q3-report:2".
// The same task and step with the same credential give the same key on every run; whoever lacks
// the credential cannot compute it, and the x402 gateway answers a stored result only to a request
// that carries its key (a plain hash of the task would let anyone who guesses the task text read
// the paid response with the payer's public authorization from the chain). The digest also keeps
// any task text within the 255 visible ASCII characters an Idempotency-Key allows.
std::string DeriveKey(std::string_view credential, std::string_view task, uint64_t step);

struct Reservation {
  std::string key;
  std::string state;  // reserved, spent, released, unknown
  int64_t amount = 0;
  std::string method, url;
  std::string scheme;  // "wallet" or "x402"
  int x402_version = 0;
  std::string payer, nonce, asset, pay_to;
  uint64_t chain_id = 0;
  int64_t valid_before_s = 0;
  std::string operation_id, transaction, note;
  int64_t sends = 0;
  int64_t created_ms = 0, updated_ms = 0;
};

// The asset a budget file counts in (its total and every amount are atomic units of it).
struct BudgetAssetView {
  std::string state;  // "bound", "unbound" (no payment yet: the next one binds it), "mixed"
  uint64_t chain_id = 0;
  std::string address;          // lower-case 0x hex, "" unless bound
  std::string name;             // the token's EIP-712 name as offered, "" when unknown
  std::optional<int> decimals;  // when --chain-rpc could tell at binding
};

struct BudgetReport {
  std::string error;  // non-empty: the file could not be read
  BudgetAssetView asset;
  int64_t total = 0;
  int64_t committed = 0;  // reserved + spent + unknown
  int64_t spent = 0;
  std::vector<Reservation> reservations;  // oldest first
};
BudgetReport ReadBudget(const std::string& budget_db);

struct ReconcileOptions {
  std::string budget_db = std::string(kDefaultBudgetDb);
  std::string chain_rpc;  // needed for x402 reservations
  std::string ca_file;    // as PayOptions::ca_file, for the gateway and the node
  // Needed for wallet reservations: the gateway shows an operation only to its account's key.
  std::string api_key;
  int64_t expiry_buffer_seconds = kDefaultExpiryBufferSeconds;
  int64_t timeout_ms = 10000;  // per call to a gateway or node
};

struct ReconcileChange {
  std::string key;
  std::string from, to;  // states
  std::string why;
};

struct ReconcileReport {
  std::string error;  // non-empty: could not run at all
  std::vector<ReconcileChange> changes;
  std::vector<ReconcileChange> kept;  // looked at, left as they were (to == from), with why
  int64_t committed = 0;
  int64_t total = 0;
};
// Settles the reservations whose outcome is not known: wallet ones by the gateway's operation,
// x402 ones by the chain (released only once the authorization has expired, plus the buffer, and
// the chain says it was never used). Reservations a running `pay` holds are skipped.
ReconcileReport Reconcile(const ReconcileOptions& options, const Progress& progress = {});

}  // namespace agentpay::client
