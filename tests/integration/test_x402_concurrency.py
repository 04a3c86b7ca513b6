#!/usr/bin/env python3
"""x402 payments in flight are not bounded by the gateway's worker threads.

A fresh Anvil with automine off, the demo seller and `agentpay serve --workers 4`. 64 payers' worth of
x402 payments (64 authorizations, 64 keys) arrive at once. Every one of them is broadcast and then waits
for its receipt; with automine off, the relayer's 64 transactions must all be in Anvil's pool at the same
time before anything is mined, which a gateway that spent a thread per payment waiting on the chain (4
of them here) could not do. Then one block is mined and all 64 settle and are served (200). Throughout,
a probe asks /healthz every 20 ms and every answer must come within 50 ms. The on-chain money check of
x402_harness runs after the test: 64 transfers, each backing exactly one settled operation.

Run:  python3 tests/integration/test_x402_concurrency.py --agentpay build/agentpay
Needs tests/chain_env installed (bash tests/chain_env/install.sh).
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import BUYER, A, X402TestCase, auth_message, b64json, deadline_poll, v2_payload  # noqa: E402

PAYMENTS = 64
WORKERS = 4
# /healthz while every worker's payment waits on the chain: a blocked pool would answer after the
# 60 s receipt timeout. 95% of the probes within 50 ms, and none past 1 s (a scheduler hiccup on a
# loaded 2-core machine is not a blocked pool).
HEALTHZ_P95_MS = 50.0
HEALTHZ_WORST_MS = 1000.0
MIN_PROBES = 20  # /healthz answers while all the payments wait on the chain
BODY = b'{"task":"summarize"}'


class HealthProbe(threading.Thread):
    """Asks /healthz every 20 ms on one keep-alive connection; records each answer's latency."""

    def __init__(self, gw):
        super().__init__(daemon=True)
        self.gw = gw
        self.latencies_ms = []
        self.failures = []
        self.stopping = threading.Event()

    def run(self):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=5)
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                conn.request("GET", "/healthz")
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    self.failures.append("status %d" % resp.status)
            except (OSError, http.client.HTTPException) as e:
                self.failures.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=5)
            self.latencies_ms.append((time.monotonic() - started) * 1000.0)
            self.stopping.wait(0.02)
        conn.close()

    def stop(self):
        self.stopping.set()
        self.join(timeout=10)


class ConcurrentX402Test(X402TestCase):
    automine = False
    # A receipt timeout long enough that every payment is still waiting for its receipt when the test
    # mines; the lease and the upstream timeout stay as they are.
    gateway_args = ("--workers", str(WORKERS), "--receipt-timeout-ms", "60000")

    def test_64_payments_wait_on_the_chain_at_once_with_4_workers(self):
        chain, gw = self.chain, self.gw
        since = len(chain.transfers_to_pay_to())
        executed = self.seller.executed()
        _, _, pr, _ = gw.challenge("/jobs", "POST", BODY, "application/json")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain)} for _ in range(PAYMENTS)])
        self.assertEqual(len({s["message"]["nonce"] for s in signed}), PAYMENTS)
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]

        probe = HealthProbe(gw)
        probe.start()
        results = [None] * PAYMENTS
        barrier = threading.Barrier(PAYMENTS)

        def pay(i):
            try:
                barrier.wait(timeout=20)
                results[i] = gw.pay("/jobs", "POST", BODY, v2=headers[i], key="burst-%d" % i, timeout=120)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e

        threads = [threading.Thread(target=pay, args=(i,), daemon=True) for i in range(PAYMENTS)]
        try:
            for t in threads:
                t.start()
            # All 64 relayer transactions wait in the pool together: 64 payments in flight at once.
            pending = deadline_poll(lambda: (lambda n: n if n >= PAYMENTS else None)(len(chain.pending_relayer_txs())),
                                    60, interval=0.1, what="%d relayer transactions in Anvil's pool" % PAYMENTS)
            self.assertEqual(pending, PAYMENTS)
            self.assertTrue(all(r is None for r in results), "answered before anything was mined: %r" % [
                r for r in results if r is not None][:3])
            # /healthz is asked while all 64 wait, however fast the machine got them there.
            deadline_poll(lambda: len(probe.latencies_ms) >= MIN_PROBES, 30, interval=0.05,
                          what="%d /healthz probes while the payments wait" % MIN_PROBES)
            chain.rpc.mine()
            for t in threads:
                t.join(timeout=120)
        finally:
            probe.stop()
        self.assertFalse(any(t.is_alive() for t in threads), "some payments were never answered")
        errors = [r for r in results if not isinstance(r, harness.Response)]
        self.assertEqual(errors, [], "transport errors")
        summary = sorted({(r.status, r.header("Idempotent-Replayed")) for r in results})
        self.assertTrue(all(r.status == 200 for r in results), summary)
        ops = {r.operation_id for r in results}
        self.assertEqual(len(ops), PAYMENTS)
        for op_id in list(ops)[:8]:
            self.assertEqual(gw.operation(op_id)["settlement"], "settled")
        self.assertEqual(len(chain.transfers_to_pay_to()) - since, PAYMENTS)
        self.assertEqual(self.seller.executed() - executed, PAYMENTS)

        self.assertEqual(probe.failures, [])
        self.assertGreaterEqual(len(probe.latencies_ms), MIN_PROBES, "the probe hardly ran")
        worst = max(probe.latencies_ms)
        ordered = sorted(probe.latencies_ms)
        p95 = ordered[(len(ordered) * 95) // 100]
        print("\n    /healthz during %d x402 payments with --workers %d: %d probes, median %.1f ms, p95 %.1f ms, "
              "worst %.1f ms" % (PAYMENTS, WORKERS, len(ordered), ordered[len(ordered) // 2], p95, worst),
              file=sys.stderr)
        self.assertLess(p95, HEALTHZ_P95_MS, "95%% of /healthz answers took up to %.1f ms" % p95)
        self.assertLess(worst, HEALTHZ_WORST_MS, "a /healthz answer took %.1f ms" % worst)


if __name__ == "__main__":
    X.main(sys.argv)
