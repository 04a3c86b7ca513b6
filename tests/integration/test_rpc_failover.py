#!/usr/bin/env python3
"""RPC failover on a real chain (issue 14, item 5): the gateway is given two JSON-RPC endpoints of one Anvil
(two nginx processes proxying to it). The first is SIGSTOPped (it accepts connections and never answers:
every call to it times out), then killed (connections refused). Payments go on through the second: every
one is answered 200, none 402, and each authorization is submitted once (the money check: one Transfer per
settled operation, no (authorizer, nonce) used twice, every relayer transaction a settlement).

At start every endpoint's chain id is checked: an endpoint of another chain stops the gateway.

Run:  python3 tests/integration/test_rpc_failover.py --agentpay build/agentpay
"""

import os
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tls"))

import harness  # noqa: E402
import tls_harness as T  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import A, BUYER, X402TestCase  # noqa: E402

RPC_TIMEOUT_MS = 1000


class RpcFailoverTest(X402TestCase):
    @classmethod
    def start_gateway(cls, **kw):
        # Two fronts of the same Anvil, each its own nginx so that one can be stopped alone.
        cls.fronts = []
        for name in ("rpc-a", "rpc-b"):
            port = harness.free_port()
            nginx = T.Nginx(cls.workdir, {}, [T.Front(port, None, cls.chain.url)], name=name).start()
            cls.fronts.append((nginx, "http://127.0.0.1:%d" % port))
        kw["chain_url"] = cls.fronts[0][1]
        kw.setdefault("extra_args", ("--chain-rpc", cls.fronts[1][1], "--rpc-timeout-ms", str(RPC_TIMEOUT_MS),
                                     "--sweep-interval-ms", "200"))
        return super().start_gateway(**kw)

    @classmethod
    def tearDownClass(cls):
        for nginx, _ in getattr(cls, "fronts", []):
            nginx.signal_all(signal.SIGCONT)
            nginx.stop()
        super().tearDownClass()

    def pay_official(self, n, tag):
        """n payments by the official v2 client, one after another; their results."""
        return [X.run_client(self.chain, 2, self.gw.url("/%s-%d" % (tag, i))) for i in range(n)]

    def test_payments_go_on_through_the_second_endpoint_when_the_first_hangs_then_dies(self):
        first, first_url = self.fronts[0]
        second, second_url = self.fronts[1]
        self.assertIn("x402 on %s, %s (failover in this order)" % (first_url, second_url), self.gw.output())
        first_port, second_port = first.fronts[0].port, second.fronts[0].port
        relayer_before = self.chain.relayer_nonce()
        transfers_before = len(self.chain.transfers(from_=BUYER.address))
        served_before = second.requests(second_port)
        statuses = [r["status"] for r in self.pay_official(2, "healthy")]
        self.assertGreater(first.requests(first_port), 0, "the first endpoint serves while it is healthy")
        self.assertEqual(second.requests(second_port), served_before, "the second only after a failure")

        first.signal_all(signal.SIGSTOP)
        started = time.monotonic()
        statuses += [r["status"] for r in self.pay_official(4, "hung")]
        hung_s = time.monotonic() - started

        self.assertGreater(second.requests(second_port), served_before, "the second took over")
        first.signal_all(signal.SIGKILL)
        statuses += [r["status"] for r in self.pay_official(4, "dead")]

        self.assertEqual(statuses, [200] * 10, "every payment answered 200, none 402")
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers_before + 10)
        self.assertEqual(self.chain.relayer_nonce(), relayer_before + 10, "one transaction per payment")
        self.assertEqual(X.money_violations(self.chain, self.gateways), [])
        # A hung endpoint costs one timeout per rest period, not one per call.
        self.assertLess(hung_s, 4 * 10, "payments through a hung endpoint took %.1f s" % hung_s)

    def test_an_endpoint_of_another_chain_stops_the_gateway_at_start(self):
        other = A.Anvil(chain_id=31337).start()
        self.addCleanup(other.stop)
        gw = X.X402Gateway(self.workdir, self.chain, self.seller.url, name="gw-two-chains",
                           chain_url=self.fronts[1][1], extra_args=["--chain-rpc", other.url])
        with self.assertRaises(harness.ProcessError) as raised:
            gw.start()
        self.assertIn("--chain-rpc %s is chain 31337, not --chain-id 84532" % other.url, str(raised.exception))


if __name__ == "__main__":
    X.main(sys.argv)
