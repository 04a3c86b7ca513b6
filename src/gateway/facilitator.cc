// The facilitator's HTTP surface; see facilitator.h.
#include "gateway/facilitator.h"

#include <algorithm>
#include <set>

#include "gateway/answers.h"
#include "gateway/api_keys.h"
#include "gateway/hashing.h"
#include "x402/facilitator.h"

namespace agentpay {
namespace {

Status Invalid(size_t line, const std::string& why) {
  return Status::Error(ErrorCode::kInvalidConfig,
                       "sellers file, line " + std::to_string(line) + ": " + why);
}

bool NameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    const size_t start = at;
    while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
    if (at > start) fields.push_back(line.substr(start, at - start));
  }
  return fields;
}

constexpr std::string_view kSettlementsPrefix = "/settlements/";

HttpResponse NoSellerKey() {
  return ProblemResponse(401, ProblemCode::kUnauthorized,
                         "a seller's key is required: Authorization: Bearer <key>");
}

}  // namespace

Result<std::vector<FacilitatorSeller>> ParseSellers(std::string_view text) {
  std::vector<FacilitatorSeller> sellers;
  std::set<std::string, std::less<>> names, keys;
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto fields = Fields(line);
    if (fields.empty() || fields[0].starts_with('#')) continue;
    if (fields.size() != 3) return Invalid(number, "expected NAME KEY PAYEE[,PAYEE...]");
    const std::string_view name = fields[0], key = fields[1], payees = fields[2];
    if (name.size() > 64 || !std::all_of(name.begin(), name.end(), NameCharacter)) {
      return Invalid(number, "the name must be 1 to 64 of A-Z a-z 0-9 _ . -");
    }
    if (!names.insert(std::string(name)).second) {
      return Invalid(number, "the name " + std::string(name) + " is given twice");
    }
    if (key.size() < kMinSellerKeyLength || key.size() > kMaxSellerKeyLength ||
        !std::all_of(key.begin(), key.end(), [](char c) { return c > ' ' && c < 127; })) {
      return Invalid(number, "the key must be " + std::to_string(kMinSellerKeyLength) + " to " +
                                 std::to_string(kMaxSellerKeyLength) +
                                 " visible ASCII characters (e.g. openssl rand -hex 32)");
    }
    const std::string digest = Sha256Hex(key);
    if (!keys.insert(digest).second) return Invalid(number, "this key is another seller's too");
    FacilitatorSeller seller{std::string(name), digest, {}};
    for (std::string_view rest = payees; !rest.empty();) {
      const size_t comma = rest.find(',');
      const std::string_view payee = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      auto address = chain::ParseAddress(payee);
      if (!address.ok()) {
        return Invalid(number,
                       "payee " + std::string(payee) + " is not 0x followed by 40 hex digits");
      }
      seller.payees.push_back(*address);
    }
    if (seller.payees.empty() || seller.payees.size() > kMaxPayeesPerSeller) {
      return Invalid(number, "1 to " + std::to_string(kMaxPayeesPerSeller) + " payees");
    }
    if (sellers.size() == kMaxSellers) {
      return Invalid(number, "at most " + std::to_string(kMaxSellers) + " sellers");
    }
    sellers.push_back(std::move(seller));
  }
  return sellers;
}

Facilitator::Facilitator(X402Path& x402, std::function<Respond(Respond)> track,
                         std::vector<FacilitatorSeller> sellers, uint64_t chain_id,
                         const chain::Address& relayer, Metrics& metrics)
    : x402_(x402),
      track_(std::move(track)),
      metrics_(metrics),
      sellers_(std::move(sellers)),
      supported_(x402::SupportedBody(chain_id, relayer)) {
  for (size_t i = 0; i < sellers_.size(); ++i) by_key_sha256_.emplace(sellers_[i].key_sha256, i);
}

// GET /settlements/{payer}/{nonce}: a settle's answer as it is now, for the payee's seller.
void Facilitator::SettlementStatus(const HttpRequest& request, Respond respond) const {
  if (request.method != "GET" && request.method != "HEAD") {
    return respond(ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET"));
  }
  const FacilitatorSeller* seller = Caller(request);
  if (seller == nullptr) return respond(NoSellerKey());
  const std::string_view rest = request.Path().substr(kSettlementsPrefix.size());
  const size_t slash = rest.find('/');
  auto payer = chain::ParseAddress(rest.substr(0, slash));
  auto nonce = slash == std::string_view::npos
                   ? Result<chain::Hash32>(Status::Error(ErrorCode::kInvalidHex, "no nonce"))
                   : chain::ParseHash32(rest.substr(slash + 1));
  if (!payer.ok() || !nonce.ok()) {
    return respond(ProblemResponse(400, ProblemCode::kInvalidRequest,
                                   "expected /settlements/{payer}/{nonce}: the authorization's "
                                   "from (0x + 40 hex digits) and nonce (0x + 64 hex digits)"));
  }
  x402_.SettlementForSeller(chain::ToLowerHex(*payer), chain::Hex(*nonce), seller->payees,
                            track_(std::move(respond)));
}

const FacilitatorSeller* Facilitator::Caller(const HttpRequest& request) const {
  auto credential = BearerCredential(request);
  if (!credential) return nullptr;
  // Looked up by the key's digest, not the key: how long the lookup takes can at most tell how
  // much of the caller's own key's digest another key's digest shares, which tells nothing of
  // that key (SHA-256 is not invertible).
  auto found = by_key_sha256_.find(Sha256Hex(*credential));
  return found == by_key_sha256_.end() ? nullptr : &sellers_[found->second];
}

void Facilitator::Handle(std::shared_ptr<const HttpRequest> request, Respond respond) {
  const std::string_view path = request->Path();
  const FacilitatorCall asked = path == "/supported"                   ? FacilitatorCall::kSupported
                                : path == "/verify"                    ? FacilitatorCall::kVerify
                                : path == "/settle"                    ? FacilitatorCall::kSettle
                                : path.starts_with(kSettlementsPrefix) ? FacilitatorCall::kStatus
                                                                       : FacilitatorCall::kOther;
  respond = [this, asked, respond = std::move(respond)](HttpResponse response) {
    metrics_.CountFacilitator(asked, response.status);
    respond(std::move(response));
  };
  switch (asked) {
    case FacilitatorCall::kSupported:
      if (request->method != "GET" && request->method != "HEAD") {
        return respond(ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use GET"));
      }
      return respond(JsonResponse(200, supported_));
    case FacilitatorCall::kStatus:
      return SettlementStatus(*request, std::move(respond));
    case FacilitatorCall::kOther:
      return respond(ProblemResponse(404, ProblemCode::kNotFound,
                                     "the facilitator serves GET /supported, POST /verify and POST "
                                     "/settle"));
    case FacilitatorCall::kVerify:
    case FacilitatorCall::kSettle:
      break;
  }
  if (request->method != "POST") {
    return respond(ProblemResponse(405, ProblemCode::kMethodNotAllowed, "use POST"));
  }
  const FacilitatorSeller* seller = Caller(*request);
  if (seller == nullptr) return respond(NoSellerKey());
  auto call = x402::ParseFacilitatorRequest(request->body);
  if (!call.ok()) {
    return respond(ProblemResponse(400, ProblemCode::kMalformedPayment, call.status().message()));
  }
  const chain::Address& payee = call->payload.authorization.to;
  if (std::find(seller->payees.begin(), seller->payees.end(), payee) == seller->payees.end() ||
      call->requirements.pay_to != payee) {
    return respond(ProblemResponse(
        403, ProblemCode::kPayeeNotAllowed,
        "seller " + seller->name + " is not allowed payments to " + chain::ToChecksumHex(payee)));
  }
  if (asked == FacilitatorCall::kSettle) {
    return x402_.SettleForSeller(std::move(*call), track_(std::move(respond)));
  }
  x402_.VerifyForSeller(std::move(*call), track_(std::move(respond)));
}

}  // namespace agentpay
