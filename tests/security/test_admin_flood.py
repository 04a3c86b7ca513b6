"""Issue 36 item 4: the operator is not locked out of the admin listener by a flood of connections.

The admin listener takes 64 connections. Before the fix, 70 local connections that each sent half a
request head took every slot for the header deadline (10 s), and the operator holding the token got
503 on every try. Now, when every slot is taken, the connection that has waited longest for a request
head and never showed the admin token is closed to make room, the listener's header deadline is 5 s,
and a connection that showed the token is never evicted.

Run:  python3 tests/security/test_admin_flood.py --agentpay build/agentpay
"""

import http.client
import os
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402

FLOOD = 70
HALF_HEAD = b"GET /admin/v1/alerts HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


class Flood:
    """FLOOD connections to `port` that each send half a head and hold; with `churn`, a connection
    the gateway closes is opened again at once, for as long as the flood runs."""

    def __init__(self, port, payload=HALF_HEAD, churn=False):
        self.port, self.payload, self.churn = port, payload, churn
        self.stop = threading.Event()
        self.opened = 0
        self.threads = [threading.Thread(target=self._hold, daemon=True) for _ in range(FLOOD)]

    def _open(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        s.sendall(self.payload)
        self.opened += 1
        return s

    def _hold(self):
        s = self._open()
        try:
            while not self.stop.is_set():
                s.settimeout(0.2)
                try:
                    if s.recv(4096) == b"" and self.churn:  # closed by the gateway: come back
                        s.close()
                        s = self._open()
                    elif not self.churn:
                        self.stop.wait(0.2)
                except socket.timeout:
                    pass
                except OSError:
                    if not self.churn:
                        self.stop.wait(0.2)
                        continue
                    s.close()
                    s = self._open()
        finally:
            s.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        deadline = time.monotonic() + 10
        while self.opened < FLOOD and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # every connection accepted and its half head read
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)


class AdminFloodTest(harness.GatewayTestCase):
    def operator_get(self, conn=None):
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.gw.admin_port, timeout=10)
        try:
            conn.request("GET", "/admin/v1/alerts", headers={"Authorization": "Bearer " + harness.ADMIN_TOKEN})
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            if own:
                conn.close()

    def test_half_sent_heads_do_not_lock_the_operator_out(self):
        with Flood(self.gw.admin_port):
            got = [self.operator_get() for _ in range(10)]
        self.assertEqual(got, [200] * 10)
        self.assertRegex(self.gw.metrics(), r"agentpay_http_requests_total [0-9]")

    def test_a_flood_that_comes_back_at_once_still_leaves_the_operator_a_slot(self):
        with Flood(self.gw.admin_port, churn=True) as flood:
            started = flood.opened
            got = []
            for _ in range(20):
                got.append(self.operator_get())
                time.sleep(0.05)
            reopened = flood.opened - started
        self.assertEqual(got, [200] * 20)
        self.assertGreater(reopened, 0, "the flood was never evicted, so this test proved nothing")

    def test_an_operator_connection_is_kept_while_a_flood_takes_the_rest(self):
        # Idle keep-alive connections without the token are evictable too; the operator's is not.
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.admin_port, timeout=10)
        self.assertEqual(self.operator_get(conn), 200)
        unauthenticated = b"GET /admin/v1/alerts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        with Flood(self.gw.admin_port, payload=unauthenticated, churn=True):
            for _ in range(10):
                self.assertEqual(self.operator_get(conn), 200)  # the same connection, kept
                self.assertEqual(self.operator_get(), 200)      # and new ones
        conn.close()


if __name__ == "__main__":
    harness.main(sys.argv)
