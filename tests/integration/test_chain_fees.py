#!/usr/bin/env python3
"""Fee caps on a real chain (issue 14, item 4): while the chain's base fee is above --max-fee-per-gas the
gateway broadcasts nothing and answers 503 chain_fees_too_high with Retry-After; the payer's authorization
is left unused, and the very same signed payment settles once, when fees are back under the cap.

Anvil's `anvil_setNextBlockBaseFeePerGas` makes the spike: the next block mined carries that base fee, and
the gateway reads fees from the latest block. The money check (x402_harness.money_violations) runs after
every test.

Run:  python3 tests/integration/test_chain_fees.py --agentpay build/agentpay
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import BUYER, PRICE, X402TestCase  # noqa: E402

GWEI = 10 ** 9
CAP = 5 * GWEI
FEE_REFRESH_S = 1.1


class ChainFeesTest(X402TestCase):
    gateway_args = ("--max-fee-per-gas", str(CAP), "--sweep-interval-ms", "200")

    def set_base_fee(self, wei):
        """The next block's base fee, then that block: the latest block now carries it."""
        self.chain.rpc.call("anvil_setNextBlockBaseFeePerGas", hex(wei))
        self.chain.rpc.mine()
        self.assertEqual(int(self.chain.rpc.block()["baseFeePerGas"], 16), wei)
        time.sleep(FEE_REFRESH_S)  # the gateway reads fees at most once a second

    def tearDown(self):
        self.set_base_fee(GWEI // 10)
        super().tearDown()

    def test_above_the_cap_nothing_is_broadcast_and_the_same_payment_settles_later(self):
        self.set_base_fee(GWEI // 10)
        _, required, _, _ = self.gw.challenge("/report")
        signed = X.official_sign_v2(self.chain, required)
        nonce = signed["payload"]["payload"]["authorization"]["nonce"]
        relayer_nonce = self.chain.relayer_nonce()
        transfers = len(self.chain.transfers(from_=BUYER.address))

        self.set_base_fee(50 * GWEI)
        for _ in range(3):
            r = self.gw.pay("/report", v2=signed["value"], key="fees-spike-1")
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.json()["code"], "chain_fees_too_high", r)
            self.assertEqual(r.header("Retry-After"), "5", r)
            self.assertIn("above --max-fee-per-gas %d" % CAP, r.json()["detail"])
            self.assertIsNone(r.operation_id, r)
        self.assertEqual(self.chain.relayer_nonce(), relayer_nonce, "nothing was broadcast")
        self.assertEqual(self.chain.pending_relayer_txs(), [])
        self.assertFalse(self.chain.used(BUYER.address, nonce), "the authorization is unused")

        self.set_base_fee(GWEI)
        r = self.gw.pay("/report", v2=signed["value"], key="fees-spike-1")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(self.chain.used(BUYER.address, nonce))
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1)
        again = self.gw.pay("/report", v2=signed["value"], key="fees-spike-1")
        self.assertEqual((again.status, again.replayed), (200, "true"), again)
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1)

    def test_agentpay_pay_waits_out_a_fee_spike_with_the_same_signature(self):
        self.set_base_fee(50 * GWEI)
        transfers = len(self.chain.transfers(from_=BUYER.address))
        key_file = os.path.join(self.workdir, "buyer.key")
        harness.write_secret(key_file, BUYER.private_key + "\n")
        budget = os.path.join(self.workdir, "budget-fees.db")
        log_path = os.path.join(self.workdir, "pay-fees.log")
        with open(log_path, "w") as log:
            run = subprocess.Popen([harness.binary(), "pay", self.gw.url("/agent"), "--buyer-key-file", key_file,
                                    "--budget-db", budget, "--budget", str(10 * PRICE), "--json",
                                    "--max-attempts", "10", "--timeout-ms", "60000"],
                                   stdout=subprocess.PIPE, stderr=log, text=True)

        def progress():
            with open(log_path) as f:
                return f.read()

        X.deadline_poll(lambda: "chain_fees_too_high" in progress(), 30, what="the client's first 503")
        self.set_base_fee(GWEI)
        out, _ = run.communicate(timeout=90)
        self.assertEqual(run.returncode, 0, (out, progress()))
        result = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(result["outcome"], "paid", result)
        self.assertGreaterEqual(result["attempts"], 2, result)
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1, "one payment, once")


if __name__ == "__main__":
    X.main(sys.argv)
