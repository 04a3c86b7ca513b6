// chain::ShowsAuthorizationSettled: a receipt shows an authorization executed only by its own
// AuthorizationUsed log and the Transfer beside it, never by a look-alike Transfer.
#include "chain/settlement_tx.h"

#include <gtest/gtest.h>

#include "chain/keccak.h"

namespace agentpay::chain {
namespace {

Address Addr(uint8_t last) {
  Address a;
  a.bytes[19] = last;
  return a;
}

Hash32 Topic(const Address& address) {
  Hash32 topic{};
  std::copy(address.bytes.begin(), address.bytes.end(), topic.begin() + 12);
  return topic;
}

Hash32 Nonce(uint8_t last) {
  Hash32 nonce{};
  nonce[31] = last;
  return nonce;
}

const Address kToken = Addr(0x70);

LogEntry Used(const Address& from, const Hash32& nonce, const Address& emitter = kToken) {
  return {emitter,
          {Keccak256(std::string_view("AuthorizationUsed(address,bytes32)")), Topic(from), nonce},
          {}};
}

LogEntry Transfer(const Address& from, const Address& to, uint64_t value,
                  const Address& emitter = kToken) {
  Bytes data(32, 0);
  for (int i = 0; i < 8; ++i) data[31 - i] = static_cast<uint8_t>(value >> (8 * i));
  return {emitter, {TransferEventTopic(), Topic(from), Topic(to)}, data};
}

TransferAuthorization Authorization(uint8_t nonce, uint64_t value = 1000) {
  TransferAuthorization a;
  a.from = Addr(0x01);
  a.to = Addr(0x02);
  a.value = U256(value);
  a.nonce = Nonce(nonce);
  return a;
}

Receipt With(std::vector<LogEntry> logs) {
  Receipt receipt;
  receipt.status = 1;
  receipt.logs = std::move(logs);
  return receipt;
}

TEST(ShowsAuthorizationSettled, ItsOwnLogsInEitherOrder) {
  const TransferAuthorization a = Authorization(1);
  EXPECT_TRUE(ShowsAuthorizationSettled(With({Used(a.from, a.nonce), Transfer(a.from, a.to, 1000)}),
                                        kToken, a));
  EXPECT_TRUE(ShowsAuthorizationSettled(With({Transfer(a.from, a.to, 1000), Used(a.from, a.nonce)}),
                                        kToken, a));
}

TEST(ShowsAuthorizationSettled, ALookAlikeTransferIsNotIt) {
  const TransferAuthorization a = Authorization(1);
  const TransferAuthorization b = Authorization(2);  // same payer, payee and value
  // A transaction that settled a (or anything else paying the same) does not show b.
  const Receipt only_a = With({Used(a.from, a.nonce), Transfer(a.from, a.to, 1000)});
  EXPECT_FALSE(ShowsAuthorizationSettled(only_a, kToken, b));
  EXPECT_FALSE(ShowsAuthorizationSettled(With({Transfer(b.from, b.to, 1000)}), kToken, b));
  // Both in one transaction (a batch): each by its own pair.
  const Receipt both = With({Used(a.from, a.nonce), Transfer(a.from, a.to, 1000),
                             Used(b.from, b.nonce), Transfer(b.from, b.to, 1000)});
  EXPECT_TRUE(ShowsAuthorizationSettled(both, kToken, a));
  EXPECT_TRUE(ShowsAuthorizationSettled(both, kToken, b));
}

TEST(ShowsAuthorizationSettled, EveryFieldMustBeIts) {
  const TransferAuthorization a = Authorization(1);
  EXPECT_FALSE(ShowsAuthorizationSettled(With({Used(a.from, a.nonce), Transfer(a.from, a.to, 999)}),
                                         kToken, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(
      With({Used(a.from, a.nonce), Transfer(a.from, Addr(0x03), 1000)}), kToken, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(
      With({Used(a.from, a.nonce, Addr(0x71)), Transfer(a.from, a.to, 1000)}), kToken, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(
      With({Used(a.from, a.nonce), Transfer(a.from, a.to, 1000, Addr(0x71))}), kToken, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(
      With({Used(Addr(0x09), a.nonce), Transfer(a.from, a.to, 1000)}), kToken, a));
  // An address topic with dirty padding is not the address.
  LogEntry dirty = Used(a.from, a.nonce);
  dirty.topics[1][0] = 0xff;
  EXPECT_FALSE(ShowsAuthorizationSettled(With({dirty, Transfer(a.from, a.to, 1000)}), kToken, a));
  // Not beside it: another log between them.
  EXPECT_FALSE(
      ShowsAuthorizationSettled(With({Used(a.from, a.nonce), Transfer(Addr(0x05), Addr(0x06), 1),
                                      Transfer(a.from, a.to, 1000)}),
                                kToken, a));
  EXPECT_FALSE(ShowsAuthorizationSettled(With({}), kToken, a));
}

}  // namespace
}  // namespace agentpay::chain
