// Chain reads for the agent client; see chain_facts.h.
#include "client/chain_facts.h"

#include "chain/keccak.h"

namespace agentpay::client {
namespace {

// keccak256("AuthorizationUsed(address,bytes32)"), the EIP-3009 event; topics: authorizer, nonce.
std::string AuthorizationUsedTopic() {
  return chain::Hex(chain::Keccak256(std::string_view("AuthorizationUsed(address,bytes32)")));
}

std::string AddressTopic(const chain::Address& address) {
  chain::Hash32 word{};
  std::copy(address.bytes.begin(), address.bytes.end(), word.begin() + 12);
  return chain::Hex(word);
}

std::string FindUsedTransaction(chain::RpcChain& chain, const chain::Address& asset,
                                const chain::Address& payer, const chain::Hash32& nonce) {
  nlohmann::json filter = {
      {"address", chain::ToLowerHex(asset)},
      {"fromBlock", "0x0"},
      {"toBlock", "latest"},
      {"topics", {AuthorizationUsedTopic(), AddressTopic(payer), chain::Hex(nonce)}}};
  auto logs = chain.rpc().Call("eth_getLogs", nlohmann::json::array({filter}));
  if (!logs.ok() || !logs->is_array() || logs->empty()) return "";
  const nlohmann::json& first = (*logs)[0];
  auto hash = first.find("transactionHash");
  if (hash == first.end() || !hash->is_string()) return "";
  auto parsed = chain::ParseHash32(hash->get<std::string>());
  return parsed.ok() ? chain::Hex(*parsed) : "";
}

}  // namespace

Result<AuthorizationFacts> ReadAuthorizationFacts(chain::RpcChain& chain, const std::string& asset,
                                                  const std::string& payer,
                                                  const std::string& nonce, bool find_transaction) {
  auto token = chain::ParseAddress(asset);
  auto from = chain::ParseAddress(payer);
  auto nonce_bytes = chain::ParseHash32(nonce);
  if (!token.ok() || !from.ok() || !nonce_bytes.ok()) {
    return Status::Error(ErrorCode::kInvalidReservation, "asset, payer or nonce is malformed");
  }
  AuthorizationFacts facts;
  auto time = chain.LatestBlockTimestamp();
  if (!time.ok()) return time.status();
  facts.chain_time_s = *time;
  auto used = chain.AuthorizationState(*token, *from, *nonce_bytes);
  if (!used.ok()) return used.status();
  facts.authorization_used = *used;
  if (facts.authorization_used && find_transaction) {
    facts.transaction = FindUsedTransaction(chain, *token, *from, *nonce_bytes);
  }
  return facts;
}

}  // namespace agentpay::client
