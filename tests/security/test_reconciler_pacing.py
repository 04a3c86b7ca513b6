#!/usr/bin/env python3
"""The reconciler's chain calls stay under --reconcile-rpc-per-second, and it visits every
unresolved operation (paging with a cursor, oldest first), with a per-operation backoff (issue 13
item 4). Before the fix it polled the first 200 stuck operations on every pass (hundreds of RPC calls
per second against a hosted node's quota) and never reached the rest.

A counting JSON-RPC proxy stands between `agentpay serve` and Anvil and records every call. With
automine off, 30 payments are broadcast and left `unknown` (their transactions wait in the pool). Then,
with no payment traffic, for 15 s: the calls per second stay under the bound, every operation's
receipt is asked for (each was visited), and no operation is asked about on every pass (backoff).
Finally a block is mined and the reconciler settles all 30 within the same bound.

Run:  python3 tests/security/test_reconciler_pacing.py --agentpay build/agentpay
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import A, BUYER, ProxiedX402TestCase, auth_message, b64json, deadline_poll, v2_payload  # noqa: E402

PAYMENTS = 30
RPC_PER_SECOND = 20
SWEEP_MS = 100
WINDOW_S = 15.0


def max_in_window(times, width):
    """The most calls in any `width`-second window."""
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] < t - width:
            j += 1
        best = max(best, i - j + 1)
    return best


class ReconcilerPacingTest(ProxiedX402TestCase):
    automine = False
    gateway_args = ("--receipt-timeout-ms", "300", "--sweep-interval-ms", str(SWEEP_MS),
                    "--reconcile-rpc-per-second", str(RPC_PER_SECOND), "--max-timeout-seconds", "600")
    quiesce_timeout = 60.0

    def test_rpc_rate_is_bounded_and_every_unresolved_operation_is_visited(self):
        chain, gw, proxy = self.chain, self.gw, self.proxy
        _, _, pr, _ = gw.challenge("/jobs")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain, valid_before=chain.now() + 600)}
                             for _ in range(PAYMENTS)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        tx_of_op = {}
        for i, h in enumerate(headers):
            r = gw.pay("/jobs", v2=h, key="pace-%d" % i, timeout=60)
            self.assertEqual(r.status, 202, r)
            settle = X.unb64json(r.header("PAYMENT-RESPONSE"))
            tx_of_op[r.operation_id] = settle["transaction"].lower()
        self.assertEqual(len(chain.pending_relayer_txs()), PAYMENTS)
        unknown = {op["id"] for op in gw.operations("unknown")}
        self.assertEqual(unknown, set(tx_of_op))

        time.sleep(0.5)
        t0 = time.monotonic()
        time.sleep(WINDOW_S)
        calls = proxy.since(t0)
        times = [c[0] for c in calls]
        per_second = len(calls) / WINDOW_S
        worst_second = max_in_window(times, 1.0)
        asked = {}
        for _, method, params in calls:
            if method == "eth_getTransactionReceipt":
                h = params[0].lower()
                asked[h] = asked.get(h, 0) + 1
        visited = sum(1 for h in tx_of_op.values() if h in asked)
        passes = WINDOW_S * 1000 / SWEEP_MS
        print("\n    reconciler over %.0f s with %d unresolved operations, bound %d/s: %d RPC calls "
              "(%.1f/s, worst 1 s window %d), %d/%d operations visited, receipt asks per operation "
              "max %d (passes: ~%d)" % (WINDOW_S, PAYMENTS, RPC_PER_SECOND, len(calls), per_second,
                                        worst_second, visited, PAYMENTS, max(asked.values() or [0]),
                                        passes), file=sys.stderr)
        # The bound: a token bucket of RPC_PER_SECOND per second with one second's burst.
        self.assertLessEqual(len(calls), RPC_PER_SECOND * (WINDOW_S + 1))
        self.assertLessEqual(worst_second, 2 * RPC_PER_SECOND)
        self.assertGreater(len(calls), 0, "the reconciler made no call at all")
        # Paging: every unresolved operation was looked at, not just the first page forever.
        self.assertEqual(visited, PAYMENTS, "operations never visited: %r" % [
            op for op, h in tx_of_op.items() if h not in asked])
        # Backoff: none is looked at on every pass (1 s, 2 s, 4 s, 8 s ...: at most 5 in 15 s).
        self.assertLessEqual(max(asked.values()), 5)

        # A block: all 30 settle, decided by the reconciler under the same bound.
        t1 = time.monotonic()
        chain.rpc.mine()
        deadline_poll(lambda: not gw.in_flight(), 60, interval=0.5, what="all settled by the reconciler")
        elapsed = time.monotonic() - t1
        later = proxy.since(t1)
        self.assertLessEqual(len(later), RPC_PER_SECOND * (elapsed + 1) + 10)
        self.assertEqual(len(gw.operations("settled")), PAYMENTS)
        print("    after one block: all %d settled by the reconciler in %.1f s with %d RPC calls"
              % (PAYMENTS, elapsed, len(later)), file=sys.stderr)


if __name__ == "__main__":
    X.main(sys.argv)
