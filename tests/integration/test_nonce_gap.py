#!/usr/bin/env python3
"""A relayer nonce gap no stored transaction can fill (issue 14, item 6): someone else uses the relayer's key,
their transaction takes the next nonce, the gateway signs its settlement after it, and the node then loses
theirs. The gateway's settlement cannot be mined before that nonce is used; the reconciler's gap check
fills it with a no-op (0 wei from the relayer to itself) within seconds, re-sends its own transaction
after it, and the payment settles once. Anvil with automine off: blocks are mined by the test.

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


if __name__ == "__main__":
    X.main(sys.argv)
