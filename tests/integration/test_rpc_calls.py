#!/usr/bin/env python3
"""What a settled payment costs the RPC node (issue 14, item 6). Hosted providers bill and rate-limit
per JSON-RPC call; before this a settled payment cost 11.3 calls on average (six reads before the
decision, the send, about three per receipt check), against 2.5 for a bare relayer.

A logging proxy (x402_harness.CountingProxy) stands between `agentpay serve` and Anvil and records
every call the gateway makes, its workers included. Payments are sent one after another on a
`settle=before` and a `settle=after` route; every call from just before the first payment to just
after the last is counted against the payments settled: at most 4 each (`settle=after` simulates the
transfer once more after the upstream answered, before it signs: one more). Apart from them: the
reconciler's watch for reorganisations, which asks once for each block holding new settlements (and
once a second for the newest), whenever its pass falls; it is not part of a payment's path, and has
a bound of its own (one a block, here one a payment, plus one a pass). The happy path never reads
`authorizationState` or `balanceOf` (they only explain a refusal), and each payment is one
simulation, one send and its receipt. The money check (x402_harness.money_violations) runs after
every test.

Run:  python3 tests/integration/test_rpc_calls.py --agentpay build/agentpay
"""

import collections
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import x402_harness as X  # noqa: E402
from x402_harness import BUYER, POOR, ProxiedX402TestCase, auth_message, b64json, v2_payload  # noqa: E402

PAYMENTS = 20
MAX_CALLS_PER_PAYMENT = 4.0
# The 4-byte selectors of the reads that only explain a refusal.
AUTHORIZATION_STATE = "0xe94a0102"
BALANCE_OF = "0x70a08231"
# The simulation of the transfer itself: eth_call between two gas estimates (at most one a minute).
TRANSFER_WITH_AUTHORIZATION = "0xe3ee160e"


def rlp_item(data, at):
    """The bytes of the RLP string at `at`, and where the next item starts."""
    first = data[at]
    if first < 0x80:
        return data[at:at + 1], at + 1
    if first <= 0xb7:
        return data[at + 1:at + 1 + first - 0x80], at + 1 + first - 0x80
    width = first - 0xb7
    length = int.from_bytes(data[at + 1:at + 1 + width], "big")
    return data[at + 1 + width:at + 1 + width + length], at + 1 + width + length


def nonce_of(raw_hex):
    """The nonce of a signed EIP-1559 transaction: 0x02 || rlp([chainId, nonce, ...])."""
    data = bytes.fromhex(raw_hex[2:])
    assert data[0] == 2, "not an EIP-1559 transaction"
    at = 2 + (data[1] - 0xf7 if data[1] > 0xf7 else 0)  # past the list's header
    _, at = rlp_item(data, at)  # the chain id
    nonce, _ = rlp_item(data, at)
    return int.from_bytes(nonce, "big")


def call_name(method, params):
    if method == "eth_call" and params and isinstance(params[0], dict):
        data = (params[0].get("data") or params[0].get("input") or "")[:10].lower()
        return {AUTHORIZATION_STATE: "eth_call authorizationState",
                BALANCE_OF: "eth_call balanceOf",
                TRANSFER_WITH_AUTHORIZATION: "eth_call transferWithAuthorization"}.get(data, "eth_call " + data)
    return method


class RpcCallsTest(ProxiedX402TestCase):
    def pay_in_a_row(self, path, prefix):
        """PAYMENTS payments one after another; returns (calls by name, calls in total, seconds)."""
        gw, chain = self.gw, self.chain
        _, _, required, _ = gw.challenge(path)
        accepted, resource = required["accepts"][0], required.get("resource")
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain, value=int(accepted["amount"]))}
                             for _ in range(PAYMENTS)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        transfers = len(chain.transfers(from_=BUYER.address))
        t0 = time.monotonic()
        for i, header in enumerate(headers):
            r = gw.pay(path, v2=header, key="%s-%d" % (prefix, i))
            self.assertPaidResponse(r)
        seconds = time.monotonic() - t0
        calls = self.proxy.since(t0)
        self.assertEqual(len(chain.transfers(from_=BUYER.address)) - transfers, PAYMENTS,
                         "each payment settled once")
        by_name = collections.Counter(call_name(method, params) for _, method, params in calls)
        # The signed transactions sent: one per payment. The reconciler may send one of them again
        # (the same bytes) when a loaded machine slows the request's own look at its receipt; that
        # counts against the budget below like any call, but is not a second transaction.
        by_name["distinct transactions sent"] = len(
            {params[0] for _, method, params in calls if method == "eth_sendRawTransaction"})
        # The watch for reorganisations reads blocks by number (a payment's own calls read only the
        # latest block, for fees): it looks once at each block holding new settlements, in a pass
        # that may or may not fall between the first payment and the last.
        watch = [c for c in calls if c[1] == "eth_getBlockByNumber" and c[2] and c[2][0] != "latest"]
        self.assertLessEqual(len(watch), PAYMENTS + int(seconds) + 2,
                             "the watch asks once a block with new settlements, and once a pass")
        by_name["eth_getBlockByNumber"] -= len(watch)
        by_name = +by_name  # without the names counted zero times
        per_payment = (len(calls) - len(watch)) / PAYMENTS
        print("\n    %s: %d settled payments in %.1f s, %d RPC calls = %.2f per payment: %s; "
              "apart, the reorganisation watch read %d blocks"
              % (path, PAYMENTS, seconds, len(calls) - len(watch), per_payment,
                 ", ".join("%s %d" % kv for kv in sorted(by_name.items())), len(watch)), file=sys.stderr)
        return by_name, per_payment

    def check_happy_path(self, by_name, per_payment, simulations=1):
        self.assertLessEqual(per_payment, MAX_CALLS_PER_PAYMENT + simulations - 1, by_name)
        # Each payment simulated `simulations` times: the gas estimate at most once a minute (so at
        # most once in this test), a plain eth_call of the transfer otherwise.
        self.assertEqual(by_name["eth_estimateGas"] + by_name["eth_call transferWithAuthorization"],
                         simulations * PAYMENTS, by_name)
        self.assertLessEqual(by_name["eth_estimateGas"], 1, by_name)
        self.assertEqual(by_name["distinct transactions sent"], PAYMENTS, "one transaction each")
        self.assertGreaterEqual(by_name["eth_getTransactionReceipt"], PAYMENTS)
        self.assertEqual(by_name["eth_call authorizationState"], 0, "only to explain a refusal")
        self.assertEqual(by_name["eth_call balanceOf"], 0, "only with other payments in flight")
        # Fees (a block and the tip) at most once a second, whatever the rate of payments.
        self.assertLessEqual(by_name["eth_maxPriorityFeePerGas"], PAYMENTS // 2, by_name)

    def test_a_settle_before_payment_costs_at_most_four_calls(self):
        self.check_happy_path(*self.pay_in_a_row("/report", "before"))

    def test_a_settle_after_payment_costs_one_simulation_more(self):
        """settle=after simulates the transfer again once the upstream has answered, before it
        signs: the payer may have spent its balance meanwhile, and a transfer that reverts burns the
        relayer's gas. That check is kept; it is the one call above the four."""
        self.check_happy_path(*self.pay_in_a_row("/after/report", "after"), simulations=2)

    def test_a_refusal_is_explained_by_the_reads_it_needs(self):
        """A payer short of the price is refused with the reason: the simulation fails first, then
        the token is asked why. Nothing is sent."""
        gw, chain = self.gw, self.chain
        _, _, required, _ = gw.challenge("/report")
        (signed,) = chain.sign([{"key": POOR, "message": auth_message(chain)}])
        t0 = time.monotonic()
        r = gw.pay("/report", v2=v2_payload(required["accepts"][0], signed, required.get("resource")),
                   key="poor-1")
        self.assertProblem(r, 402, "invalid_exact_evm_insufficient_balance")
        names = [call_name(m, p) for _, m, p in self.proxy.since(t0)]
        self.assertTrue({"eth_estimateGas", "eth_call transferWithAuthorization"} & set(names), names)
        self.assertNotIn("eth_sendRawTransaction", names)

class GatheredBroadcastsTest(ProxiedX402TestCase):
    def test_transactions_signed_together_reach_the_node_together_in_nonce_order(self):
        """Payments arriving at once: the transactions signed within a few milliseconds of each
        other go to the node in one JSON-RPC batch, in relayer nonce order (a node queues a
        transaction whose nonce is past one it has not seen, and mines on demand only what is
        ready). Each batch's nonces ascend; at least one batch carried more than one."""
        gw, chain = self.gw, self.chain
        _, _, required, _ = gw.challenge("/report")
        accepted, resource = required["accepts"][0], required.get("resource")
        count = 16
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain, value=int(accepted["amount"]))}
                             for _ in range(count)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        answers = [None] * count
        start = threading.Barrier(count)

        def pay(i):
            start.wait()
            answers[i] = gw.pay("/report", v2=headers[i], key="together-%d" % i)
            # One payer's sixteen payments at once: its balance may keep changing under a read
            # (the others' reservations), which is 503 with Retry-After, nothing submitted. A
            # client sends the same payment again; so does this one.
            for _ in range(5):
                if answers[i].status != 503:
                    break
                time.sleep(0.2)
                answers[i] = gw.pay("/report", v2=headers[i], key="together-%d" % i)

        t0 = time.monotonic()
        workers = [threading.Thread(target=pay, args=(i,)) for i in range(count)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        for answer in answers:
            self.assertPaidResponse(answer)
        sends = [[nonce_of(params[0]) for method, params in calls if method == "eth_sendRawTransaction"]
                 for calls in self.proxy.requests_since(t0)]
        sends = [nonces for nonces in sends if nonces]
        print("\n    %d payments at once: their transactions went to the node in %d requests: %s"
              % (count, len(sends), sends), file=sys.stderr)
        for nonces in sends:
            self.assertEqual(nonces, sorted(set(nonces)), "a batch in nonce order, each once")
        self.assertEqual(len({n for nonces in sends for n in nonces}), count, "one transaction each")
        self.assertGreater(max(len(nonces) for nonces in sends), 1, "no two went to the node together")


class SlowChainRpcCallsTest(ProxiedX402TestCase):
    """A chain that mines a block a second, as hosted L2 nodes do (Base: two): the receipt is not
    there at once, and the looks for it follow the chain's rhythm (core/receipt_polls.h) instead of
    a fixed schedule, which cost 7.5 looks a payment here. After a warm-up, at most 3 looks a
    payment (about 2 expected). The calls the gateway makes once a second whatever the load (the
    watch for reorganisations, fees, the relayer-nonce gap check) are counted apart: with one
    payment a second they would count against each payment."""

    block_time = 1

    def test_receipt_looks_follow_the_block_time(self):
        gw, chain = self.gw, self.chain
        _, _, required, _ = gw.challenge("/report")
        accepted, resource = required["accepts"][0], required.get("resource")
        warm_up, measured = 5, 10
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain, value=int(accepted["amount"]))}
                             for _ in range(warm_up + measured)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        for i, header in enumerate(headers[:warm_up]):
            self.assertPaidResponse(gw.pay("/report", v2=header, key="warm-%d" % i))
        transfers = len(chain.transfers(from_=BUYER.address))
        t0 = time.monotonic()
        for i, header in enumerate(headers[warm_up:]):
            self.assertPaidResponse(gw.pay("/report", v2=header, key="slow-%d" % i))
        seconds = time.monotonic() - t0
        calls = self.proxy.since(t0)
        by_name = collections.Counter(call_name(m, p) for _, m, p in calls)
        # One transaction a payment; the reconciler's relayer-nonce gap check may send one of them
        # again (the same bytes) while it waits in the node's pool for the next block.
        sent = {p[0] for _, m, p in calls if m == "eth_sendRawTransaction"}
        looks = by_name["eth_getTransactionReceipt"] / measured
        print("\n    1 s blocks: %d payments in %.1f s, %.2f receipt looks a payment; all calls: %s"
              % (measured, seconds, looks, ", ".join("%s %d" % kv for kv in sorted(by_name.items()))),
              file=sys.stderr)
        self.assertGreater(seconds, measured * 0.3, "the chain did not make the payments wait: the test is void")
        self.assertLessEqual(looks, 3.0, by_name)
        self.assertEqual(len(sent), measured, by_name)
        self.assertEqual(len(chain.transfers(from_=BUYER.address)) - transfers, measured,
                         "each payment settled once")
        self.assertEqual(by_name["eth_call transferWithAuthorization"] + by_name["eth_estimateGas"], measured,
                         by_name)


if __name__ == "__main__":
    X.main(sys.argv)
