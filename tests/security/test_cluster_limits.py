#!/usr/bin/env python3
"""Several gateways on one PostgreSQL database do not multiply a payer's allowance (issue 36 item 8).

Three gateways share one database (AGENTPAY_IT_DB=postgres, the ctest `postgres` fixture) and settle on a
real Anvil. Before the fix the payer reservations and the rate limits were each process's own: n gateways
allowed n broadcasts for a payer funded for one price (n - 1 of them reverting on the relayer's gas) and
n times the rate.

  - a payer funded for exactly one price sends 20 concurrent authorizations spread over the three gateways:
    at most one is broadcast (one relayer transaction, one Transfer from the payer), no relayer transaction
    reverts, every other request gets 402 invalid_exact_evm_insufficient_balance with its authorization
    unused, and the books audit is clean;
  - a client over its rate on gateway 1 gets 429 on gateways 2 and 3 once the usage was exchanged
    (--rate-limit-sync-ms, default 200 ms).

Run:  AGENTPAY_IT_DB=postgres AGENTPAY_TEST_POSTGRES_URL_FILE=DIR/url \\
      python3 tests/security/test_cluster_limits.py --agentpay build/agentpay
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import A, PRICE, X402TestCase, auth_message, b64json, v2_payload  # noqa: E402

ONE_PRICE = A.ACCOUNTS[8]   # funded for exactly one price
ATTEMPTS = 20
MAX_TIMEOUT_S = 25
BUFFER_S = 2
BALANCE_CODE = "invalid_exact_evm_insufficient_balance"


def concurrently(fns, timeout=120):
    """Runs every fn at once (a barrier), returns their results (or exceptions) in order."""
    results = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def run(i):
        try:
            barrier.wait(timeout=30)
            results[i] = fns[i]()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return results


def relayer_receipts(chain):
    """Every mined transaction the relayer sent, with its receipt status (1 success, 0 reverted)."""
    out = []
    for n in range(chain.rpc.block_number() + 1):
        for tx in chain.rpc.call("eth_getBlockByNumber", hex(n), True)["transactions"]:
            if X.eq_addr(tx["from"], X.RELAYER.address):
                out.append((tx["hash"], int(chain.rpc.receipt(tx["hash"])["status"], 16)))
    return out


class ThreeGateways(X402TestCase):
    """X402TestCase's gateway and two more on its database. Only the first is in cls.gateways: the
    money check reads the shared books once."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.others = []
        try:
            if not cls.gw.db_url.startswith("postgresql://"):
                raise AssertionError("run with AGENTPAY_IT_DB=postgres (the ctest postgres fixture)")
            for name in ("gateway-2", "gateway-3"):
                gw = X.X402Gateway(cls.workdir, cls.chain, cls.seller.url, routes=cls.routes,
                                   extra_args=cls.gateway_args, name=name,
                                   db=(cls.gw.db_url, cls.gw.db_path))
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

    @property
    def all(self):
        return [self.gw] + self.others


class ClusterReservationTest(ThreeGateways):
    gateway_args = ("--max-timeout-seconds", str(MAX_TIMEOUT_S), "--expiry-buffer-seconds", str(BUFFER_S),
                    "--sweep-interval-ms", "200", "--receipt-timeout-ms", "3000")

    def test_one_price_over_three_gateways_is_broadcast_at_most_once(self):
        chain = self.chain
        A.mint(chain.rpc, chain.token, ONE_PRICE.address, PRICE)
        chain.minted[ONE_PRICE.address.lower()] = chain.minted.get(ONE_PRICE.address.lower(), 0) + PRICE
        nonce_before = chain.relayer_nonce()
        pay_to_before = chain.balance(X.PAY_TO.address)
        _, _, pr, _ = self.gw.challenge("/jobs")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        valid_before = chain.now() + MAX_TIMEOUT_S
        signed = chain.sign([{"key": ONE_PRICE, "message": auth_message(chain, valid_before=valid_before)}
                             for _ in range(ATTEMPTS)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        gateways = self.all
        results = concurrently([
            (lambda i=i: gateways[i % 3].pay("/jobs", v2=headers[i], key="cluster-%d" % i, timeout=60))
            for i in range(ATTEMPTS)])
        self.assertEqual([r for r in results if not isinstance(r, harness.Response)], [], "transport errors")
        summary = sorted((r.status, (r.json() or {}).get("code") if r.status != 200 else "paid") for r in results)
        paid = [r for r in results if r.status == 200]
        # At most one relayer transaction, none reverted, and at most one Transfer from the payer.
        sent = chain.relayer_nonce() - nonce_before
        reverted = [h for h, status in relayer_receipts(chain) if status == 0]
        self.assertEqual((sent <= 1, len(reverted)), (True, 0),
                         "%d broadcasts, %d reverted: %s" % (sent, len(reverted), summary))
        self.assertEqual(chain.relayer_nonce("latest"), chain.relayer_nonce())
        self.assertLessEqual(len(paid), 1, summary)
        for r in results:
            if r.status != 200:
                self.assertProblem(r, 402, BALANCE_CODE)
        self.assertLessEqual(len(chain.transfers(from_=ONE_PRICE.address)), 1)
        self.assertEqual(chain.balance(X.PAY_TO.address) - pay_to_before, PRICE * len(paid))
        self.assertEqual(len(paid), 1, "the payer funded for one price is served once: %s" % summary)
        self.assertPaidResponse(paid[0], payer=ONE_PRICE)
        unused = [s for s in signed if not chain.used(ONE_PRICE.address, s["message"]["nonce"])]
        self.assertEqual(len(unused), ATTEMPTS - 1)
        # The books, as every gateway's audit reads them: clean.
        for gw in gateways:
            status, report = gw.audit()
            self.assertEqual(status, 0, report)
        # The paid one's reservation went with its settlement: nothing of the payer is left reserved.
        with harness.open_db(self.gw.db_path) as db:
            rows = list(db.execute("SELECT payer, amount FROM payer_reservations"))
        self.assertEqual(rows, [])


class ClusterRateTest(ThreeGateways):
    # 1 a second, burst 10, per client address only.
    gateway_args = ("--rate-limit-per-client", "1:10", "--rate-limit-per-account", "off",
                    "--rate-limit-per-payer", "off")

    def test_a_client_over_its_rate_on_one_gateway_is_over_it_on_all(self):
        first, second, third = self.all
        # The burst on gateway 1: ten 402 challenges, then 429.
        answers = [first.request("GET", "/jobs").status for _ in range(12)]
        self.assertEqual(answers[:10], [402] * 10, answers)
        self.assertEqual(answers[10:], [429, 429], answers)
        time.sleep(0.7)  # two exchanges of 200 ms and a margin: gateway 1's, then the others'
        for gw in (second, third):
            r = gw.request("GET", "/jobs")
            self.assertProblem(r, 429, "limit_exceeded", gw.name)
            self.assertIn("client address", r.json()["detail"])
            self.assertRegex(r.header("Retry-After") or "", r"^[1-9][0-9]*$", r)
        # The bucket refills at its rate, on every gateway alike.
        time.sleep(2.2)
        self.assertEqual(second.request("GET", "/jobs").status, 402)


if __name__ == "__main__":
    X.main(sys.argv)
