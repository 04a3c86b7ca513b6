#!/usr/bin/env python3
"""x402 with three gateways on one PostgreSQL database and one relayer key, settling on a real Anvil.

The gateways share the database (a fresh one on the test cluster: AGENTPAY_IT_DB=postgres) and the
relayer's key, so its transaction nonces are taken in the database. 48 payments (each its own
EIP-3009 authorization) arrive at once, spread over the three gateways; then every one is retried with
the same signature and key through another gateway, and each authorization is presented once more
under a new key. Every payment settles once (one Transfer), every retry replays, no authorization
pays twice, and the relayer's nonces are contiguous: 0..47 in the database, 48 on chain. The on-chain
money check of x402_harness and the shared invariant checker run after the test.

Run:  AGENTPAY_IT_DB=postgres AGENTPAY_TEST_POSTGRES_URL_FILE=DIR/url \\
      python3 tests/integration/test_postgres_x402.py --agentpay build/agentpay
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import BUYER, X402TestCase, auth_message, b64json, v2_payload  # noqa: E402

PAYMENTS = 48
BODY = b'{"task":"translate"}'


class ThreeGatewaysOneRelayerTest(X402TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Two more gateways on the first one's database, with the same relayer key. Only the first
        # is in cls.gateways: the money check reads the shared books once.
        cls.others = []
        try:
            for name in ("gateway-2", "gateway-3"):
                gw = X.X402Gateway(cls.workdir, cls.chain, cls.seller.url, routes=cls.routes,
                                   extra_args=cls.gateway_args, name=name, db=(cls.gw.db_url, cls.gw.db_path))
                cls.others.append(gw)
                gw.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for gw in getattr(cls, "others", []):
            gw.stop()
        super().tearDownClass()

    def test_every_payment_settles_once_and_relayer_nonces_are_contiguous(self):
        self.assertTrue(self.gw.db_url.startswith("postgresql://"), "run with AGENTPAY_IT_DB=postgres")
        gateways = [self.gw] + self.others
        chain = self.chain
        since = len(chain.transfers_to_pay_to())
        nonce_before = chain.relayer_nonce("latest")
        _, _, pr, _ = self.gw.challenge("/jobs", "POST", BODY, "application/json")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain)} for _ in range(PAYMENTS)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]

        def at_once(send):
            results = [None] * PAYMENTS
            barrier = threading.Barrier(PAYMENTS)

            def run(i):
                try:
                    barrier.wait(timeout=20)
                    results[i] = send(i)
                except Exception as e:  # noqa: BLE001 - reported below
                    results[i] = e

            threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(PAYMENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=180)
            self.assertEqual([r for r in results if not isinstance(r, harness.Response)], [])
            return results

        def pay_until_answered(gw_index, i):
            # A well-behaved client: a 503 with Retry-After (its payer's other payments were settling
            # while the gateway read its balance) is retried with the same key and signature.
            for _ in range(50):
                r = gateways[gw_index % 3].pay("/jobs", "POST", BODY, v2=headers[i], key="job-%d" % i,
                                               timeout=120)
                if r.status != 503:
                    return r
                self.assertIsNotNone(r.header("Retry-After"), r)
                time.sleep(0.1)
            return r

        first = at_once(lambda i: pay_until_answered(i, i))
        for r in first:
            self.assertPaidResponse(r, replayed="false")
        ops = [r.operation_id for r in first]
        self.assertEqual(len(set(ops)), PAYMENTS)

        # The same payment again (same key, same signature) through another gateway: the stored answer.
        again = at_once(lambda i: pay_until_answered(i + 1, i))
        for i, r in enumerate(again):
            self.assertEqual((r.status, r.replayed, r.operation_id, r.body),
                             (200, "true", ops[i], first[i].body), r)

        # A settled authorization under a new key, on yet another gateway: it pays for nothing more.
        for i in range(0, PAYMENTS, 8):
            r = gateways[(i + 2) % 3].pay("/jobs", "POST", BODY, v2=headers[i], key="thief-%d" % i)
            self.assertNotEqual(r.status, 200, r)
            self.assertNotEqual(r.operation_id, ops[i], r)

        self.assertEqual(len(chain.transfers_to_pay_to()) - since, PAYMENTS, "one Transfer per payment")
        self.assertEqual(chain.relayer_nonce("latest") - nonce_before, PAYMENTS)
        with harness.open_db(self.gw.db_path) as db:
            nonces = [n for (n,) in db.execute(
                "SELECT relayer_nonce FROM x402_payments WHERE tx_hash <> '' ORDER BY relayer_nonce")]
        self.assertEqual(nonces, list(range(nonce_before, nonce_before + PAYMENTS)),
                         "relayer nonces taken once each, none skipped")
        self.assertEqual(harness.collect_invariant_violations(db_path=self.gw.db_path), [])


if __name__ == "__main__":
    X.main(sys.argv)
