// The `agentpay pay` run; see pay.h. Order of a run: claim the key in the budget file (resume a
// reservation that may still land), else learn the price from the 402 and reserve it (signing the
// x402 authorization inside that transaction), then send and retry the very same request.
#include "client/pay.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "chain/rpc_chain.h"
#include "client/attempt.h"
#include "client/budget_db.h"
#include "client/chain_facts.h"
#include "client/challenge.h"
#include "client/keys.h"
#include "client/x402_signer.h"
#include "core/idempotency.h"
#include "core/retry_policy.h"
#include "http/client.h"
#include "x402/wire.h"

namespace agentpay::client {
namespace {

// Beyond the run's deadline, how long a reservation stays leased to it (one last exchange ends).
constexpr int64_t kLeaseMarginMs = 5000;
// The largest answer read; a bigger one is treated like a lost answer (retried, then unknown).
constexpr uint64_t kMaxResponseBytes = 64 * 1024 * 1024;

const BackoffPolicy kBackoff{200, 5000};

class PayRun {
 public:
  PayRun(const PayOptions& options, ClientWorld& world, const Progress& progress)
      : options_(options), world_(world), progress_(progress) {}
  PayResult Run();

 private:
  int64_t Now() { return world_.clock->NowMs(); }
  int64_t Remaining() { return deadline_ms_ - Now(); }
  void Say(const std::string& line) {
    if (progress_) progress_(line);
  }
  PayResult Finish(ExitCode code, PayOutcome outcome, std::string message);
  // Finish for the steps that return whether the run goes on.
  bool Stop(ExitCode code, PayOutcome outcome, std::string message) {
    Finish(code, outcome, std::move(message));
    return false;
  }
  bool Setup();
  bool ReadAllowance();
  bool ReadAddresses(const std::vector<std::string>& texts, const char* flag,
                     std::vector<chain::Address>& out);
  std::optional<Challenge> FetchPrice();
  bool LearnWhatIsFixed();
  BudgetAsset AssetOf(const Offer& offer);
  bool Refuse(ErrorCode code, const std::string& message);
  bool ReserveFor(const Challenge& challenge);
  Status SignInto(const Offer& offer, StoredReservation& row);
  PayResult SendUntilFinal();
  ClientResponse Send(const std::string& method, const std::string& target,
                      const std::vector<HttpHeader>& headers, const std::string& body);
  std::vector<HttpHeader> PaidHeaders() const;
  // What proves to the gateway that this client paid for the operation it asks about: the API key
  // (wallet), or the payer and the Idempotency-Key the payment was sent with (x402;
  // docs/protocol.md).
  std::vector<HttpHeader> ProofHeaders() const;
  void NoteEvidence(const ClientResponse& response);
  void KeepEvidence(const std::string& operation_id, const std::string& tx_hash);
  bool Backoff(int retry, const ClientResponse& response, const char* why);
  void PollOperation(const std::string& location);
  PayResult OnServed(const ClientResponse& response);
  PayResult OnRefused(const ClientResponse& response);
  PayResult OnRejected(const ClientResponse& response, bool money_may_have_moved);
  PayResult PaidNotDelivered(const std::string& reason);
  std::optional<OperationView> FetchOperation(const std::string& operation_id);
  PayResult Conclude(ReservationState learned, ExitCode code, PayOutcome outcome,
                     std::string message);
  void TakeResponse(const ClientResponse& response);

  const PayOptions& options_;
  ClientWorld& world_;
  const Progress& progress_;
  PayResult result_;
  Endpoint endpoint_;
  std::string target_;
  int64_t deadline_ms_ = 0;
  std::string fingerprint_;
  std::optional<chain::PrivateKey> buyer_;
  Allowance
      allowance_;  // the spend controls the options give, the budget's asset, --chain-rpc's chain
  std::optional<Endpoint> chain_rpc_;
  std::shared_ptr<const TlsTrust> trust_;  // for https: the system store and --ca-file
  std::unique_ptr<BudgetDb> budget_;
  StoredReservation reservation_;
  bool have_reservation_ = false;
  bool out_of_time_ = false;  // the deadline leaves no room for another exchange
};

// "http(s)://host:port/path?query" → the request target "/path?query" ("/" when empty).
std::string TargetOf(std::string_view url) {
  const size_t scheme_end = url.find("://");
  std::string_view rest = scheme_end == std::string_view::npos ? url : url.substr(scheme_end + 3);
  auto slash = rest.find('/');
  auto query = rest.find('?');
  if (slash == std::string_view::npos && query == std::string_view::npos) return "/";
  if (slash == std::string_view::npos || (query != std::string_view::npos && query < slash)) {
    return "/" + std::string(rest.substr(query));
  }
  return std::string(rest.substr(slash));
}

// The credential a task key is derived from, in one spelling per credential: the buyer key as
// 0x + lower-case hex (a file written in upper case must not make a new key for a step already
// paid), the API key as given.
std::string KeyCredential(const PayOptions& options,
                          const std::optional<chain::PrivateKey>& buyer) {
  if (buyer) return chain::Hex(buyer->bytes());
  return options.api_key;
}

std::string KeyFor(const PayOptions& options, const std::optional<chain::PrivateKey>& buyer,
                   Random& random) {
  if (!options.idempotency_key.empty()) return options.idempotency_key;
  if (options.task && options.step) {
    return DeriveKey(KeyCredential(options, buyer), *options.task, *options.step);
  }
  return "run:" + RandomHex(random, 16);  // good for this run's retries only
}

std::string Amount(int64_t amount) { return std::to_string(amount); }

}  // namespace

PayResult PayRun::Finish(ExitCode code, PayOutcome outcome, std::string message) {
  result_.exit_code = code;
  result_.outcome = outcome;
  result_.message = std::move(message);
  if (budget_) {
    if (auto figures = budget_->Figures(); figures.ok()) {
      result_.budget_total = figures->total;
      result_.budget_committed = figures->committed;
    }
  }
  if (have_reservation_) {
    result_.amount = reservation_.amount;
    result_.reservation_state = std::string(ReservationStateName(reservation_.state));
    result_.evidence.payer = reservation_.payer;
    result_.evidence.nonce = reservation_.nonce;
    if (result_.evidence.transaction.empty()) result_.evidence.transaction = reservation_.tx_hash;
    if (result_.operation_id.empty()) result_.operation_id = reservation_.operation_id;
  }
  return result_;
}

bool PayRun::Setup() {
  auto endpoint = ParseHttpUrl(options_.url);
  if (!endpoint.ok()) {
    return Stop(ExitCode::kError, PayOutcome::kError, endpoint.status().message());
  }
  auto trust = TlsTrust::Load(options_.ca_file);
  if (!trust.ok()) return Stop(ExitCode::kError, PayOutcome::kError, trust.status().message());
  trust_ = *trust;
  endpoint_ = *endpoint;
  target_ = TargetOf(options_.url);
  if (options_.task.has_value() != options_.step.has_value()) {
    return Stop(ExitCode::kError, PayOutcome::kError, "give --task and --step together");
  }
  if (options_.api_key.empty() == options_.buyer_key.empty()) {
    return Stop(ExitCode::kError, PayOutcome::kError,
                "pay with exactly one of an API key or a buyer key");
  }
  if (!options_.buyer_key.empty()) {
    auto key = chain::ParsePrivateKey(options_.buyer_key);
    if (!key.ok()) {
      return Stop(ExitCode::kError, PayOutcome::kError,
                  "the buyer key is not 0x + 64 hex digits of a valid key");
    }
    buyer_ = *key;
  }
  result_.key = KeyFor(options_, buyer_, *world_.random);
  if (!ValidIdempotencyKey(result_.key)) {
    return Stop(ExitCode::kError, PayOutcome::kError,
                "the idempotency key must be 1-255 visible ASCII characters");
  }
  if (!ReadAllowance()) return false;
  fingerprint_ = RequestFingerprint(options_.method, options_.url, ContentTypeOf(options_.headers),
                                    options_.body);
  auto budget = BudgetDb::Open(options_.budget_db, options_.budget, Now());
  if (!budget.ok()) {
    return Stop(ExitCode::kError, PayOutcome::kError, budget.status().message());
  }
  budget_ = std::move(*budget);
  return true;
}

// The spend controls, checked before anything is sent.
bool PayRun::ReadAllowance() {
  if (options_.x402_version < 0 || options_.x402_version > 2) {
    return Stop(ExitCode::kError, PayOutcome::kError,
                "the x402 version must be 1 or 2 (or 0: either)");
  }
  allowance_.x402_version = options_.x402_version;
  if (!ReadAddresses(options_.assets, "--asset", allowance_.assets)) return false;
  if (!ReadAddresses(options_.payees, "--payee", allowance_.payees)) return false;
  for (const std::string& network : options_.networks) {
    auto chain_id = x402::ChainIdForNetwork(network);
    if (!chain_id) {
      return Stop(ExitCode::kError, PayOutcome::kError,
                  "--network '" + network + "' is not a network: give eip155:<chain id>");
    }
    allowance_.chain_ids.push_back(*chain_id);
  }
  if (options_.max_amount <= 0) {
    return Stop(ExitCode::kError, PayOutcome::kError,
                "--max-amount must be a positive number of atomic units");
  }
  allowance_.max_amount = options_.max_amount;
  if (!options_.chain_rpc.empty()) {
    auto endpoint = ParseHttpUrl(options_.chain_rpc);
    if (!endpoint.ok()) {
      return Stop(ExitCode::kError, PayOutcome::kError,
                  "--chain-rpc: " + endpoint.status().message());
    }
    chain_rpc_ = *endpoint;
  }
  return true;
}

bool PayRun::ReadAddresses(const std::vector<std::string>& texts, const char* flag,
                           std::vector<chain::Address>& out) {
  for (const std::string& text : texts) {
    auto address = chain::ParseAddress(text);
    if (!address.ok()) {
      return Stop(ExitCode::kError, PayOutcome::kError,
                  std::string(flag) + " '" + text + "' is not an address (0x + 40 hex digits)");
    }
    out.push_back(*address);
  }
  return true;
}

PayResult PayRun::Run() {
  deadline_ms_ = Now() + options_.timeout_ms;
  if (!Setup()) return result_;
  const int64_t lease_until = deadline_ms_ + kLeaseMarginMs;
  auto claim = budget_->ClaimExisting(result_.key, fingerprint_, Now(), lease_until);
  if (!claim.ok()) return Finish(ExitCode::kError, PayOutcome::kError, claim.status().message());
  if (claim->kind == ClaimKind::kNeedsPrice && options_.idempotency_key.empty() && options_.task &&
      options_.step) {
    // A step an earlier version began (or finished) under the older key keeps it: under a new
    // key the gateway would take it for a new action and charge again.
    const std::string legacy = LegacyTaskKey(*options_.task, *options_.step);
    auto older = budget_->ClaimExisting(legacy, fingerprint_, Now(), lease_until);
    if (!older.ok()) return Finish(ExitCode::kError, PayOutcome::kError, older.status().message());
    if (older->kind != ClaimKind::kNeedsPrice) {
      Say("this step is in the budget file under the key an earlier version derived: " + legacy);
      result_.key = legacy;
      claim = std::move(older);
    }
  }
  if (claim->kind == ClaimKind::kMismatch) {
    return Finish(ExitCode::kRejected, PayOutcome::kRejected,
                  "the key " + result_.key + " was already used for a different request (" +
                      claim->reservation.method + " " + claim->reservation.url + ")");
  }
  if (claim->kind == ClaimKind::kResume) {
    reservation_ = claim->reservation;
    have_reservation_ = true;
    Say("resuming " + result_.key + ": " + Amount(reservation_.amount) + " already reserved (" +
        std::string(ReservationStateName(reservation_.state)) + "); " +
        (reservation_.scheme == "wallet"
             ? "sending with the same key"
             : "re-presenting the same signed payment, nothing new is signed"));
    if (reservation_.scheme == "wallet" && options_.api_key.empty()) {
      return Finish(ExitCode::kError, PayOutcome::kError,
                    "this step was reserved for a wallet payment: give --api-key to resume it");
    }
    return SendUntilFinal();
  }
  std::optional<Challenge> challenge = FetchPrice();
  if (!challenge) return result_;
  if (!LearnWhatIsFixed()) return result_;
  if (!ReserveFor(*challenge)) return result_;
  return SendUntilFinal();
}

ClientResponse PayRun::Send(const std::string& method, const std::string& target,
                            const std::vector<HttpHeader>& headers, const std::string& body) {
  ClientRequest request;
  request.method = method;
  request.target = target;
  request.headers = headers;
  request.body = body;
  ClientOptions http;
  http.timeout_ms = std::max<int64_t>(1, std::min(options_.attempt_timeout_ms, Remaining()));
  http.max_response_bytes = kMaxResponseBytes;
  http.trust = trust_;
  return SendHttp(endpoint_, request, http);
}

// Waits before retry number `retry`; false when the deadline leaves no time for another try.
bool PayRun::Backoff(int retry, const ClientResponse& response, const char* why) {
  uint32_t bits = 0;
  world_.random->Fill(reinterpret_cast<unsigned char*>(&bits), sizeof bits);
  const int64_t delay =
      RetryDelayMs(BackoffDelayMs(kBackoff, retry, bits), RetryAfterMs(response), Remaining());
  if (Remaining() - delay <= 0) return false;
  Say(std::string(why) + "; again in " + std::to_string(delay) + " ms");
  world_.sleep_ms(delay);
  return true;
}

// The unpaid first request: its 402 carries the price. Retries like a paid request.
// The server's challenge; nullopt when the run stopped instead (result_ says why).
std::optional<Challenge> PayRun::FetchPrice() {
  std::vector<HttpHeader> headers;
  for (const auto& [name, value] : options_.headers) headers.push_back({name, value});
  Say("asking " + options_.url + " for its price");
  for (int attempt = 1;; ++attempt) {
    ClientResponse response = Send(options_.method, target_, headers, options_.body);
    TakeResponse(response);
    if (response.error == ClientError::kTls) {
      // The server could not prove who it is: asking again changes nothing.
      Stop(ExitCode::kError, PayOutcome::kError,
           response.detail + "; nothing was paid or reserved");
      return std::nullopt;
    }
    if (response.error == ClientError::kNone && response.status == 402) {
      auto parsed = ParseChallenge(response);
      if (!parsed.ok()) {
        Stop(ExitCode::kError, PayOutcome::kError, parsed.status().message());
        return std::nullopt;
      }
      return std::move(*parsed);
    }
    AttemptVerdict verdict = ClassifyAttempt(response);
    if (verdict == AttemptVerdict::kServed) {
      Stop(ExitCode::kPaid, PayOutcome::kFree,
           "served without payment (HTTP " + std::to_string(response.status) +
               "); nothing reserved");
      return std::nullopt;
    }
    if (verdict != AttemptVerdict::kRetry && verdict != AttemptVerdict::kPoll) {
      Stop(ExitCode::kRejected, PayOutcome::kRejected,
           "the server refused the request before any payment (HTTP " +
               std::to_string(response.status) + "); nothing reserved");
      return std::nullopt;
    }
    const std::string why = DescribeAnswer(response);
    if (attempt >= options_.max_attempts || !Backoff(attempt, response, why.c_str())) {
      Stop(ExitCode::kError, PayOutcome::kError,
           "could not learn the price (" + why + "); nothing was paid or reserved");
      return std::nullopt;
    }
  }
}

Status PayRun::SignInto(const Offer& offer, StoredReservation& row) {
  auto signed_payment = SignPayment(offer, *buyer_, Now() / 1000, *world_.random);
  if (!signed_payment.ok()) return signed_payment.status();
  const chain::TransferAuthorization& a = signed_payment->authorization;
  row.payment_header = signed_payment->header_value;
  row.payer = chain::ToLowerHex(a.from);
  row.nonce = chain::Hex(a.nonce);
  row.valid_before_s = a.valid_before.ToInt64();
  return Status::Ok();
}

// What a new payment must match besides the flags: the budget file's asset and, with
// --chain-rpc, the chain that node serves (evidence read from another chain would be wrong).
bool PayRun::LearnWhatIsFixed() {
  auto binding = budget_->Asset();
  if (!binding.ok()) return Stop(ExitCode::kError, PayOutcome::kError, binding.status().message());
  allowance_.budget = *binding;
  if (!chain_rpc_) return true;
  chain::RpcChain chain(*chain_rpc_, std::max<int64_t>(1000, options_.attempt_timeout_ms), trust_);
  auto chain_id = chain.ChainId();
  if (!chain_id.ok()) {
    return Stop(ExitCode::kError, PayOutcome::kError,
                "could not ask --chain-rpc " + options_.chain_rpc + " which chain it serves (" +
                    chain_id.status().message() + "); nothing was reserved, signed or sent");
  }
  allowance_.rpc_chain_id = *chain_id;
  return true;
}

// The asset a reservation for `offer` counts in. Its decimals are asked of --chain-rpc only when
// this payment binds the budget file (x402 challenges do not carry them); unknown otherwise.
BudgetAsset PayRun::AssetOf(const Offer& offer) {
  BudgetAsset asset{offer.chain_id, chain::ToLowerHex(offer.asset), offer.asset_name, std::nullopt};
  if (allowance_.budget.state != BudgetAssetState::kUnbound || !chain_rpc_) return asset;
  chain::RpcChain chain(*chain_rpc_, std::max<int64_t>(1000, options_.attempt_timeout_ms), trust_);
  constexpr uint8_t kDecimalsSelector[] = {0x31, 0x3c, 0xe5, 0x67};  // decimals()
  auto word = chain.Call(offer.asset,
                         chain::Bytes(std::begin(kDecimalsSelector), std::end(kDecimalsSelector)));
  constexpr uint8_t kMaxDecimals = 77;  // 10^77 still fits a uint256
  if (word.ok() && word->size() == 32 &&
      std::all_of(word->begin(), word->end() - 1, [](uint8_t b) { return b == 0; }) &&
      word->back() <= kMaxDecimals) {
    asset.decimals = word->back();
  }
  return asset;
}

// The client's own refusal: nothing was reserved, signed or sent after the 402.
bool PayRun::Refuse(ErrorCode code, const std::string& message) {
  result_.reason = std::string(ErrorCodeName(code));
  return Stop(ExitCode::kRejected, PayOutcome::kRefused, message);
}

bool PayRun::ReserveFor(const Challenge& challenge) {
  StoredReservation wanted;
  wanted.key = result_.key;
  wanted.fingerprint = fingerprint_;
  wanted.method = options_.method;
  wanted.url = options_.url;
  // Refused here, before the budget file or the key is touched: an offer the spend controls
  // exclude, or one whose version cannot name its network, would be signed only to be refused.
  auto chosen = ChooseOffer(challenge, allowance_, /*signing=*/buyer_.has_value());
  if (!chosen.ok()) return Refuse(chosen.status().error(), chosen.status().message());
  std::optional<Offer> offer;
  if (buyer_) {
    offer = *chosen;
    wanted.scheme = "x402";
    wanted.x402_version = static_cast<int>(offer->version);
    wanted.asset = chain::ToLowerHex(offer->asset);
    wanted.pay_to = chain::ToLowerHex(offer->pay_to);
    wanted.chain_id = offer->chain_id;
  } else {
    wanted.scheme = "wallet";
  }
  wanted.amount = chosen->amount;
  Say("price: " + Amount(wanted.amount) +
      (offer ? " (x402 v" + std::to_string(wanted.x402_version) + ", asset " + wanted.asset +
                   ", pay to " + wanted.pay_to + ")"
             : " (wallet)"));
  auto sign = [&](StoredReservation& row) { return offer ? SignInto(*offer, row) : Status::Ok(); };
  auto claim =
      budget_->Reserve(wanted, AssetOf(*chosen), sign, Now(), deadline_ms_ + kLeaseMarginMs);
  if (!claim.ok()) return Stop(ExitCode::kError, PayOutcome::kError, claim.status().message());
  const BudgetFigures& f = claim->figures;
  switch (claim->kind) {
    case ClaimKind::kAssetMismatch:  // another run bound the file since its asset was read
      return Refuse(ErrorCode::kBudgetAssetMismatch,
                    "refused before paying: the price is in " + chain::ToLowerHex(chosen->asset) +
                        " on " + chosen->network + " but the budget file counts in " +
                        DescribeBinding(claim->binding) + "; nothing was reserved, signed or sent");
    case ClaimKind::kOverBudget:
      result_.amount = wanted.amount;
      return Stop(ExitCode::kOverBudget, PayOutcome::kOverBudget,
                  "over budget: the price is " + Amount(wanted.amount) + " but only " +
                      Amount(f.total - f.committed) + " of " + Amount(f.total) +
                      " is left; nothing was signed or sent");
    case ClaimKind::kMismatch:
      return Stop(ExitCode::kRejected, PayOutcome::kRejected,
                  "the key " + result_.key + " was already used for a different request");
    case ClaimKind::kResume:
      Say("another run reserved this key meanwhile; re-presenting its payment");
      break;
    case ClaimKind::kReserved:
      Say("reserved " + Amount(wanted.amount) + " (" + Amount(f.committed) + " of " +
          Amount(f.total) + " committed)" +
          (offer ? "; signed authorization nonce " + claim->reservation.nonce.substr(0, 10) + "…"
                 : ""));
      break;
    case ClaimKind::kNeedsPrice:
      AGENTPAY_CHECK(false);
  }
  reservation_ = claim->reservation;
  have_reservation_ = true;
  return true;
}

std::vector<HttpHeader> PayRun::PaidHeaders() const {
  std::vector<HttpHeader> headers;
  for (const auto& [name, value] : options_.headers) {
    if (HeaderNameEquals(name, "Idempotency-Key")) continue;  // ours names the action
    headers.push_back({name, value});
  }
  headers.push_back({"Idempotency-Key", result_.key});
  if (reservation_.scheme == "wallet") {
    headers.push_back({"Authorization", "Bearer " + options_.api_key});
  } else {
    headers.push_back({PaymentHeaderFor(reservation_.x402_version), reservation_.payment_header});
  }
  return headers;
}

std::vector<HttpHeader> PayRun::ProofHeaders() const {
  if (reservation_.scheme == "wallet") return {{"Authorization", "Bearer " + options_.api_key}};
  // x402: the gateway shows an operation to the payer it names with the key it was paid with
  // (docs/protocol.md §5a): another payer's equal key string reads nothing.
  return {{"AgentPay-Payer", reservation_.payer}, {"Idempotency-Key", result_.key}};
}

void PayRun::TakeResponse(const ClientResponse& response) {
  result_.http_status = response.error == ClientError::kNone ? response.status : 0;
  result_.body = response.body;
  result_.response_headers.clear();
  for (const auto& header : response.headers) {
    result_.response_headers.emplace_back(header.name, header.value);
  }
  result_.replayed = response.Header("Idempotent-Replayed").value_or("") == "true";
}

// Records the evidence in the budget file. It is also in the result and on chain, so a failure is
// a warning, not a reason to stop.
void PayRun::KeepEvidence(const std::string& operation_id, const std::string& tx_hash) {
  if (!budget_->RecordEvidence(result_.key, operation_id, tx_hash, Now()).ok()) {
    Say(operation_id.empty() ? "warning: could not record the transaction hash in the budget file"
                             : "warning: could not record the operation id in the budget file");
  }
}

void PayRun::NoteEvidence(const ClientResponse& response) {
  std::string operation_id(response.Header("AgentPay-Operation-Id").value_or(""));
  std::string tx_hash;
  if (auto settle = SettlementOf(response)) tx_hash = settle->transaction;
  if (operation_id.empty() && tx_hash.empty()) return;
  if (!operation_id.empty()) result_.operation_id = operation_id;
  if (!tx_hash.empty()) result_.evidence.transaction = tx_hash;
  KeepEvidence(operation_id, tx_hash);
  if (!operation_id.empty()) reservation_.operation_id = operation_id;
  if (!tx_hash.empty()) reservation_.tx_hash = tx_hash;
}

PayResult PayRun::Conclude(ReservationState learned, ExitCode code, PayOutcome outcome,
                           std::string message) {
  auto row = budget_->Finish(result_.key, learned, message, Now());
  if (row.ok()) {
    reservation_ = *row;
  } else {
    message += " (warning: the budget file could not be updated: " + row.status().message() +
               "; the reservation stays as it was)";
  }
  return Finish(code, outcome, std::move(message));
}

PayResult PayRun::SendUntilFinal() {
  // The payer's address, so that a user funding a new buyer key learns it from the first run.
  const std::string payer_words = reservation_.scheme == "wallet"
                                      ? "paying from the wallet"
                                      : "with a payment signed by " + reservation_.payer;
  int retries = 0;
  for (;;) {
    if (result_.attempts >= options_.max_attempts || Remaining() <= 0 || out_of_time_) {
      return Conclude(ReservationState::kUnknown, ExitCode::kUnknown, PayOutcome::kUnknown,
                      "no final answer after " + std::to_string(result_.attempts) +
                          " attempt(s); the payment may have gone through. The reservation is "
                          "kept: run the same step again to resume it, or `agentpay pay "
                          "reconcile` later");
    }
    if (Status s = budget_->RecordSend(result_.key, Now()); !s.ok()) {
      return Finish(ExitCode::kUnknown, PayOutcome::kUnknown,
                    "the budget file cannot be written (" + s.message() + "); nothing more sent");
    }
    ++reservation_.sends;
    ++result_.attempts;
    Say("attempt " + std::to_string(result_.attempts) + ": " + options_.method + " " +
        options_.url + " " + payer_words + " (key " + result_.key + ")");
    ClientResponse response = Send(options_.method, target_, PaidHeaders(), options_.body);
    TakeResponse(response);
    NoteEvidence(response);
    switch (ClassifyAttempt(response)) {
      case AttemptVerdict::kServed:
        return OnServed(response);
      case AttemptVerdict::kPaymentRefused:
        return OnRefused(response);
      case AttemptVerdict::kRejected:
        return OnRejected(response, false);
      case AttemptVerdict::kUnknownFinal:
        return OnRejected(response, true);
      case AttemptVerdict::kPoll: {
        const std::string location(*response.Header("Location"));
        Say("accepted but not final (202 " + ProblemCode(response) + "): following " + location);
        PollOperation(location);  // then the same request again, unless time ran out
        break;
      }
      case AttemptVerdict::kRetry: {
        const std::string why = "not served yet (" + DescribeAnswer(response) + ")";
        if (result_.attempts < options_.max_attempts &&
            !Backoff(++retries, response, why.c_str())) {
          out_of_time_ = true;
        }
        break;
      }
    }
  }
}

// Follows a 202's Location until the operation is neither settling nor being fulfilled.
void PayRun::PollOperation(const std::string& location) {
  const std::string target = location.rfind("http://", 0) == 0 ? TargetOf(location) : location;
  for (int poll = 1;; ++poll) {
    if (Remaining() <= 0) return;
    ClientResponse response = Send("GET", target, ProofHeaders(), "");
    std::string state = "no answer";
    if (response.error == ClientError::kNone && response.status == 200) {
      std::optional<OperationView> op = ReadOperation(response);
      if (!op) return;  // not an operation view: the request itself will tell
      if (!op->tx_hash.empty() && op->tx_hash != reservation_.tx_hash) {
        reservation_.tx_hash = op->tx_hash;
        result_.evidence.transaction = op->tx_hash;
        KeepEvidence("", op->tx_hash);
      }
      state = "settlement " +
              std::string(op->settlement ? SettlementName(*op->settlement) : "(unreadable)") +
              ", fulfillment " +
              std::string(op->fulfillment ? FulfillmentName(*op->fulfillment) : "(unreadable)");
      const bool settling =
          op->settlement == Settlement::kSubmitted || op->settlement == Settlement::kUnknown;
      if (!settling && op->fulfillment != Fulfillment::kInProgress) {
        Say("operation " + state + ": sending the same request again");
        return;
      }
    } else if (response.error == ClientError::kNone && response.status >= 400 &&
               response.status < 500) {
      return;  // no such operation here: the request itself will tell
    }
    if (!Backoff(poll, response, ("waiting: " + state).c_str())) {
      out_of_time_ = true;
      return;
    }
  }
}

PayResult PayRun::OnServed(const ClientResponse& response) {
  const bool again = reservation_.state == ReservationState::kSpent;
  std::string how = "paid and served (HTTP " + std::to_string(response.status) + ")";
  if (result_.replayed) how += "; the stored result was replayed, no new charge";
  if (!reservation_.tx_hash.empty()) how += "; transaction " + reservation_.tx_hash;
  if (again && !result_.replayed) how += "; this step had already been paid";
  return Conclude(ReservationState::kSpent, ExitCode::kPaid, PayOutcome::kPaid, how);
}

PayResult PayRun::OnRefused(const ClientResponse& response) {
  const std::string reason = RefusalReason(response);
  result_.reason = reason;
  const std::string said = "the server refused the payment (402 " + reason + ")";
  if (reservation_.scheme == "wallet") {
    // The gateway never answers 402 to a key whose charge is held or settled (CONTRACT §3).
    return Conclude(ReservationState::kReleased, ExitCode::kRejected, PayOutcome::kRejected,
                    said + "; nothing was charged and the reservation is released");
  }
  if (IsNonceUsedReason(reason)) return PaidNotDelivered(reason);
  const std::string kept =
      "; the signed authorization stays reserved until it expires (valid "
      "before " +
      std::to_string(reservation_.valid_before_s) +
      ") and the chain confirms it unused: `agentpay pay reconcile`";
  if (reason == "settlement_void" || (reservation_.sends == 1 && IsVerificationReason(reason))) {
    return Conclude(ReservationState::kUnknown, ExitCode::kRejected, PayOutcome::kRejected,
                    said + kept);
  }
  return Conclude(ReservationState::kUnknown, ExitCode::kUnknown, PayOutcome::kUnknown,
                  said +
                      " after an earlier attempt may have reached it, so the payment may "
                      "have moved" +
                      kept);
}

PayResult PayRun::PaidNotDelivered(const std::string& reason) {
  ReservationState learned = ReservationState::kUnknown;
  std::string chain_words = "not checked on chain (give --chain-rpc)";
  if (!options_.chain_rpc.empty()) {
    auto endpoint = ParseHttpUrl(options_.chain_rpc);
    if (endpoint.ok()) {
      chain::RpcChain chain(*endpoint, std::max<int64_t>(1000, options_.attempt_timeout_ms),
                            trust_);
      auto facts = ReadAuthorizationFacts(chain, reservation_.asset, reservation_.payer,
                                          reservation_.nonce, /*find_transaction=*/true);
      if (facts.ok()) {
        result_.evidence.authorization_used = facts->authorization_used;
        if (!facts->transaction.empty()) result_.evidence.transaction = facts->transaction;
        if (facts->authorization_used) learned = ReservationState::kSpent;
        chain_words = std::string("authorizationState on chain: ") +
                      (facts->authorization_used ? "used" : "NOT used");
      } else {
        chain_words = "the chain could not be asked (" + facts.status().message() + ")";
      }
    }
  }
  if (!result_.evidence.transaction.empty() && reservation_.tx_hash.empty()) {
    KeepEvidence("", result_.evidence.transaction);
  }
  std::string message =
      "paid, not delivered: the server says this authorization was already used (" + reason +
      "), so the payment went through but its answer was lost. Evidence: payer " +
      reservation_.payer + ", nonce " + reservation_.nonce + ", " + chain_words +
      (result_.evidence.transaction.empty() ? ""
                                            : ", transaction " + result_.evidence.transaction) +
      ". Nothing new was signed; ask the seller for the result of key " + result_.key;
  return Conclude(learned, ExitCode::kUnknown, PayOutcome::kPaidNotDelivered, message);
}

std::optional<OperationView> PayRun::FetchOperation(const std::string& operation_id) {
  return ReadOperation(Send("GET", "/v1/operations/" + operation_id, ProofHeaders(), ""));
}

// A final answer that is not 2xx or 402. What it cost: the gateway's operation (wallet), the
// settlement response (x402), or, when neither tells, unknown until reconciled.
PayResult PayRun::OnRejected(const ClientResponse& response, bool money_may_have_moved) {
  result_.reason = ProblemCode(response);
  const std::string said = DescribeAnswer(response);
  ReservationState learned = ReservationState::kUnknown;
  std::string cost = "it may have cost the reserved amount: kept for `agentpay pay reconcile`";
  if (reservation_.scheme == "wallet") {
    std::optional<OperationView> op;
    if (!reservation_.operation_id.empty()) op = FetchOperation(reservation_.operation_id);
    switch (ReconcileWalletSettlement(op ? op->settlement : std::nullopt)) {
      case ReconcileVerdict::kMarkSpent:
        learned = ReservationState::kSpent;
        cost = "the gateway charged it (operation settled)";
        break;
      case ReconcileVerdict::kMarkReleased:
        learned = ReservationState::kReleased;
        cost = "nothing was charged (operation released); the reservation is released";
        break;
      case ReconcileVerdict::kKeep:
        if (!op && reservation_.operation_id.empty() && reservation_.sends == 1) {
          learned = ReservationState::kReleased;  // refused before any operation existed
          cost = "nothing was charged; the reservation is released";
        }
        break;
    }
  } else if (auto settle = SettlementOf(response); settle && settle->success) {
    learned = ReservationState::kSpent;
    cost = "the payment settled before the refusal (transaction " + settle->transaction + ")";
  }
  const ExitCode exit_code = money_may_have_moved ? ExitCode::kUnknown : ExitCode::kRejected;
  return Conclude(learned, exit_code,
                  money_may_have_moved ? PayOutcome::kUnknown : PayOutcome::kRejected,
                  "the server answered " + said + "; " + cost);
}

}  // namespace agentpay::client

namespace agentpay::client {

PayResult RunPay(const PayOptions& options, ClientWorld& world, const Progress& progress) {
  return PayRun(options, world, progress).Run();
}

PayResult Pay(const PayOptions& options, const Progress& progress) {
  return RunPay(options, RealWorld(), progress);
}

}  // namespace agentpay::client
