// libFuzzer target for the admin API's JSON bodies (src/gateway/admin_bodies.cc: the parsers the
// handlers of accounts, deposits and resolve call). Each input is tried as all three bodies; what
// is accepted keeps the documented bounds, and a refusal is kInvalidArgument with a message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/money.h"
#include "gateway/admin_bodies.h"

namespace {

using namespace agentpay;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "admin_body_fuzzer: property failed: %s\n", what);
    std::abort();
  }
}

void CheckRefusal(const Status& status) {
  Require(status.error() == ErrorCode::kInvalidArgument, "a refusal is kInvalidArgument");
  Require(!status.message().empty(), "a refusal says why");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  auto account = ParseNewAccountBody(body);
  if (account.ok()) {
    Require(!account->name.empty() && account->name.size() <= kMaxAccountNameLength,
            "name within 1..200 bytes");
    // The name is echoed in JSON answers: it must serialize whatever its bytes.
    nlohmann::json echo = {{"name", account->name}};
    Require(!echo.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).empty(),
            "the name serializes");
  } else {
    CheckRefusal(account.status());
  }

  auto deposit = ParseDepositBody(body);
  if (deposit.ok()) {
    Require(deposit->amount > 0, "a positive amount");
    Require(ParseAmount(FormatAmount(deposit->amount)) == deposit->amount, "amount round-trips");
    Require(!deposit->reference.empty() && deposit->reference.size() <= kMaxDepositReferenceLength,
            "reference within 1..255 bytes");
  } else {
    CheckRefusal(deposit.status());
  }

  auto resolve = ParseResolveBody(body);
  if (resolve.ok()) {
    Require(ParseResolutionOutcome(ResolutionOutcomeName(resolve->outcome)) == resolve->outcome,
            "the outcome round-trips");
    Require(!resolve->note.empty() && resolve->note.size() <= kMaxResolutionNoteLength,
            "note within 1..1000 bytes");
  } else {
    CheckRefusal(resolve.status());
  }
  return 0;
}
