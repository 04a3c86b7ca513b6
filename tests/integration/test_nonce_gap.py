#!/usr/bin/env python3
"""Relayer nonce gaps (issue 14, item 6) that must not stall the payments behind them.

A gap no stored transaction can fill: someone else uses the relayer's key, their transaction takes the
next nonce, the gateway signs its settlement after it, and the node then loses theirs. The gateway's
settlement cannot be mined before that nonce is used; the reconciler's gap check fills it with a no-op
(0 wei from the relayer to itself) within seconds, re-sends its own transaction after it, and the payment
settles once.

A transaction the node holds at the relayer's next nonce without ever mining it: Anvil's pool queues a
transaction that arrives ahead of the relayer's nonce and does not promote it once the chain reaches that
nonce other than through its pool (seen under load in bench/x402_vs_relayer.py; here made on purpose with
anvil_setNonce). Sending the same bytes again changes nothing; the gap check replaces it at once, same
nonce and calldata, a higher fee, and the payment settles once.

Anvil with automine off: blocks are mined by the test.

The money check (x402_harness.money_violations) runs after every test.

Run:  python3 tests/integration/test_nonce_gap.py --agentpay build/agentpay
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import x402_harness as X  # noqa: E402
from x402_harness import BUYER, RELAYER, X402TestCase, eq_addr  # noqa: E402

NONCE_REFRESH_S = 5.1  # the gateway reads the relayer's pending nonce at most every five seconds
FILL_WITHIN_S = 5.0    # the gap check runs once a second
REPLACE_WITHIN_S = 8.0  # a held transaction is replaced 5 s after it was sent, at the next check


class NonceGapTest(X402TestCase):
    automine = False
    gateway_args = ("--receipt-timeout-ms", "1000", "--sweep-interval-ms", "200")

    def relayer_txs_at(self, nonce):
        return [t for t in self.chain.pending_relayer_txs() if int(t["nonce"], 16) == nonce]

    def test_a_gap_nothing_stored_can_fill_gets_a_noop_and_the_payment_behind_it_settles(self):
        rpc = self.chain.rpc
        mined = self.chain.relayer_nonce("latest")
        transfers = len(self.chain.transfers(from_=BUYER.address))
        # Someone else sends with the relayer's key: their transaction takes nonce `mined`.
        rpc.call("anvil_impersonateAccount", RELAYER.address)
        try:
            foreign = rpc.call("eth_sendTransaction", {"from": RELAYER.address, "to": BUYER.address,
                                                       "value": "0x1"})
        finally:
            rpc.call("anvil_stopImpersonatingAccount", RELAYER.address)
        self.assertEqual(self.chain.relayer_nonce(), mined + 1)
        time.sleep(NONCE_REFRESH_S)  # the gateway's cached view of the relayer's nonce includes it

        _, required, _, _ = self.gw.challenge("/report")
        signed = X.official_sign_v2(self.chain, required)
        r = self.gw.pay("/report", v2=signed["value"], key="gap-noop")
        self.assertProblem(r, 202, "settlement_unknown")
        ours = self.gw.operation(r.operation_id)["tx_hash"]
        self.assertEqual(int(self.chain.tx(ours)["nonce"], 16), mined + 1, "signed after theirs")

        # The node loses theirs; a block is mined without ours (it cannot go before the gap).
        rpc.drop_transaction(foreign)
        rpc.mine()
        self.assertEqual(self.chain.relayer_nonce("latest"), mined)
        self.assertIsNone(rpc.receipt(ours))

        started = time.monotonic()
        noop = X.deadline_poll(lambda: self.relayer_txs_at(mined), FILL_WITHIN_S, interval=0.05,
                               what="a no-op at relayer nonce %d" % mined)[0]
        filled_after = time.monotonic() - started
        self.assertTrue(eq_addr(noop["to"], RELAYER.address), noop)
        self.assertEqual(int(noop["value"], 16), 0, noop)
        self.assertIn(noop["input"], ("0x", ""), noop)
        self.assertEqual(int(noop["gas"], 16), 21000, noop)
        # Ours goes out again behind it, the very same transaction.
        X.deadline_poll(lambda: self.chain.tx(ours), FILL_WITHIN_S, what="our transaction sent again")

        rpc.mine()
        self.assertEqual(self.chain.relayer_nonce("latest"), mined + 2)
        self.assertEqual(int(rpc.receipt(ours)["status"], 16), 1)
        self.gw.wait_settlement(r.operation_id, "settled")
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1, "one Transfer")
        paid = self.gw.pay("/report", v2=signed["value"], key="gap-noop")
        self.assertEqual(paid.status, 200, paid)
        metrics = self.gw.admin("GET", "/metrics").body.decode()
        self.assertIn('event="relayer_gap_noop"} 1', metrics)
        print("\n    no-op at relayer nonce %d sent %.2f s after the gap appeared" % (mined, filled_after),
              file=sys.stderr)

    def test_b_a_transaction_held_at_the_next_nonce_without_being_mined_is_replaced_at_once(self):
        rpc = self.chain.rpc
        if self.chain.relayer_nonce("latest") == 0:  # a nonce to step back from: one payment first
            _, required, _, _ = self.gw.challenge("/report")
            first = self.gw.pay("/report", v2=X.official_sign_v2(self.chain, required)["value"],
                                key="held-before")
            rpc.mine()
            self.gw.wait_settlement(first.operation_id, "settled")
        mined = self.chain.relayer_nonce("latest")
        self.assertEqual(self.chain.relayer_nonce("pending"), mined, "nothing of the relayer's pending")
        transfers = len(self.chain.transfers(from_=BUYER.address))

        # The node's relayer nonce one behind the gateway's: ours arrives ahead of it and is queued.
        rpc.call("anvil_setNonce", RELAYER.address, hex(mined - 1))
        _, required, _, _ = self.gw.challenge("/report")
        signed = X.official_sign_v2(self.chain, required)
        sent = time.monotonic()
        r = self.gw.pay("/report", v2=signed["value"], key="held-1")
        self.assertProblem(r, 202, "settlement_unknown")
        ours = self.gw.operation(r.operation_id)["tx_hash"]
        self.assertEqual(int(self.chain.tx(ours)["nonce"], 16), mined)
        # The chain reaches that nonce without the pool: the node knows ours, counts it nowhere.
        rpc.call("anvil_setNonce", RELAYER.address, hex(mined))
        rpc.mine()
        self.assertEqual(self.chain.relayer_nonce("latest"), mined)
        self.assertEqual(self.chain.relayer_nonce("pending"), mined, "held, not pending")
        self.assertIsNotNone(self.chain.tx(ours))
        self.assertIsNone(rpc.receipt(ours))

        started = time.monotonic()
        op = X.deadline_poll(lambda: (lambda o: o if o["tx_hash"] != ours else None)(
            self.gw.operation(r.operation_id)), REPLACE_WITHIN_S, what="the replacement")
        replaced_after, since_sent = time.monotonic() - started, time.monotonic() - sent
        replacement = self.chain.tx(op["tx_hash"])
        original = self.chain.tx(ours)
        self.assertIsNotNone(replacement, op)
        for field in ("from", "nonce", "to", "input"):
            self.assertEqual(replacement[field].lower(), original[field].lower(), field)
        self.assertGreater(int(replacement["maxFeePerGas"], 16), int(original["maxFeePerGas"], 16))
        self.assertEqual(self.chain.relayer_nonce("pending"), mined + 1, "the replacement is pending")

        rpc.mine()
        self.assertEqual(self.chain.relayer_nonce("latest"), mined + 1, "one relayer nonce used")
        self.assertEqual(int(rpc.receipt(op["tx_hash"])["status"], 16), 1)
        self.gw.wait_settlement(r.operation_id, "settled")
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1, "one Transfer")
        paid = self.gw.pay("/report", v2=signed["value"], key="held-1")
        self.assertEqual(paid.status, 200, paid)
        events = [e for e in self.gw.trace(r.operation_id)["events"] if e["kind"] == "tx_replaced"]
        self.assertEqual(len(events), 1, events)
        self.assertIn("held by the node at the relayer's next nonce", events[0]["detail"])
        print("\n    held transaction at relayer nonce %d replaced %.2f s after the chain reached it "
              "(%.2f s after it was sent)"
              % (mined, replaced_after, since_sent), file=sys.stderr)


if __name__ == "__main__":
    X.main(sys.argv)
