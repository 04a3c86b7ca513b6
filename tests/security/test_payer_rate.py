"""Issue 13 item 5, x402 side: the per-payer token bucket, on a real Anvil chain.

The bucket is keyed by the authorization's `from` only after its signature is verified, so a stranger who
sends junk in a victim's name (signed by someone else, or not signed at all) drains nothing: the victim's
payments still go through; the victim's own payments past the bucket get 429 + Retry-After and move
nothing on chain; another payer is unaffected; the bucket refills. The money check of the x402 harness runs
after the test (every settled operation backed by exactly one Transfer, no relayer transaction wasted).

Run:  python3 tests/security/test_payer_rate.py --agentpay build/agentpay
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import (BUYER, BUYER2, STRANGER, X402TestCase, auth_message, b64json,  # noqa: E402
                          v2_payload)

BODY = b'{"task":"rate"}'


class PayerRateTest(X402TestCase):
    # 1 a second, burst 2, per payer only.
    gateway_args = ("--rate-limit-per-payer", "1:2", "--rate-limit-per-client", "off",
                    "--rate-limit-per-account", "off")
    routes = ({"prefix": "/", "price": 1000, "settle": "before"},)

    def signed(self, n, key=BUYER, **msg):
        _, _, pr, _ = self.gw.challenge("/r", "POST", BODY, "application/json")
        accepted = pr["accepts"][0]
        signed = self.chain.sign([{"key": key, "message": auth_message(self.chain, **msg)} for _ in range(n)])
        return [v2_payload(accepted, s, resource=pr.get("resource")) for s in signed]

    def pay(self, payload):
        return self.gw.pay("/r", "POST", BODY, v2=b64json(payload))

    def test_payer_bucket_after_signature_only(self):
        # A stranger's junk in BUYER's name: signed by STRANGER with from = BUYER, and an unsigned one.
        junk = self.signed(8, key=STRANGER, from_=BUYER.address)
        for payload in junk:
            r = self.pay(payload)
            self.assertProblem(r, 402, "invalid_exact_evm_signature")
        before = self.chain.state()
        # BUYER's bucket is intact: its burst of 2 goes through.
        mine = self.signed(4)
        for payload in mine[:2]:
            r = self.pay(payload)
            self.assertEqual(r.status, 200, r)
        after_two = self.chain.state()
        self.assertEqual(after_two["transfers_to_pay_to"], before["transfers_to_pay_to"] + 2)
        # The third within the second: 429, nothing on chain.
        r = self.pay(mine[2])
        self.assertProblem(r, 429, "limit_exceeded")
        self.assertIn("payer", r.json()["detail"])
        retry = r.header("Retry-After")
        self.assertRegex(retry or "", r"^[1-9][0-9]*$", r)
        self.assertEqual(self.chain.state(), after_two, "a 429 moved money or sent a transaction")
        self.assertFalse(self.chain.used(BUYER.address, mine[2]["payload"]["authorization"]["nonce"]))
        # Another payer is not affected.
        other = self.signed(1, key=BUYER2)[0]
        self.assertEqual(self.pay(other).status, 200)
        # After Retry-After the same, unused authorization pays.
        time.sleep(int(retry) + 0.1)
        r = self.pay(mine[2])
        self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    X.main(sys.argv)
