#!/usr/bin/env python3
"""Self-test of tests/fault/fault_proxy.py against a counting stdlib HTTP server: every mode does what its
name says, and the counters and the control API report it.

Run: python3 tests/fault/test_fault_proxy.py
"""

import http.client
import http.server
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_proxy import FaultProxy  # noqa: E402


class _Counting(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        with self.server.lock:
            self.server.executed += 1
            self.server.seen_headers.append(dict(self.headers))
            n = self.server.executed
        doc = json.dumps({"executed": n, "echo": body.decode(), "pad": "x" * 2000}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(doc)))
        self.end_headers()
        self.wfile.write(doc)


def post(port, body=b'{"a":1}', headers=None, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/work", body=body, headers=dict(headers or {}, **{"Content-Type": "application/json"}))
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class FaultProxyTest(unittest.TestCase):
    def setUp(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
        self.server.lock, self.server.executed, self.server.seen_headers = threading.Lock(), 0, []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.proxy = FaultProxy(("127.0.0.1", self.server.server_address[1])).start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.addCleanup(self.proxy.stop)

    def test_pass_forwards_and_answers(self):
        status, body = post(self.proxy.port, b'{"x":2}')
        self.assertEqual((status, json.loads(body)["echo"]), (200, '{"x":2}'))
        # "passed" counts once the proxy's sendall returned, which may be just after the client read.
        deadline = time.monotonic() + 5
        stats = self.proxy.stats()
        while stats["passed"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            stats = self.proxy.stats()
        self.assertEqual((stats["requests"], stats["forwarded"], stats["passed"]), (1, 1, 1))

    def test_drop_response_executes_upstream_but_client_gets_nothing(self):
        self.proxy.set_mode("drop_response", count=1)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            post(self.proxy.port)
        self.assertEqual(self.server.executed, 1, "the request reached the upstream")
        self.assertEqual(self.proxy.stats()["responses_dropped"], 1)
        self.assertEqual(post(self.proxy.port)[0], 200, "one-shot: the next request passes")
        self.assertEqual(self.server.executed, 2)

    def test_cut_midstream_sends_half_then_closes(self):
        self.proxy.set_mode("cut_midstream")
        with self.assertRaises((http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError)):
            post(self.proxy.port)
        self.assertEqual(self.server.executed, 1)
        self.assertEqual(self.proxy.stats()["responses_cut"], 1)

    def test_delay_and_header_override(self):
        started = time.monotonic()
        status, _ = post(self.proxy.port, headers={"X-Fault-Proxy-Mode": "delay:300"})
        self.assertEqual(status, 200)
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertNotIn("X-Fault-Proxy-Mode", self.server.seen_headers[-1], "the mode header is stripped")
        self.assertEqual(self.proxy.stats()["delayed"], 1)

    def test_drop_request_and_reset_never_reach_upstream(self):
        for mode, counter in (("drop_request", "requests_dropped"), ("reset", "resets")):
            self.proxy.set_mode(mode, count=1)
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
                post(self.proxy.port)
            self.assertEqual(self.proxy.stats()[counter], 1)
        self.assertEqual(self.server.executed, 0)

    def test_random_mix_is_seeded_and_counted(self):
        self.proxy.set_mode("random", weights={"pass": 1, "drop_response": 1}, seed=7)
        outcomes = []
        for _ in range(20):
            try:
                outcomes.append(post(self.proxy.port)[0])
            except (http.client.RemoteDisconnected, ConnectionError):
                outcomes.append(None)
        # The proxy counts a passed answer once it has sent it: the client may read it first.
        deadline = time.monotonic() + 10
        stats = self.proxy.stats()
        while stats["passed"] + stats["responses_dropped"] < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
            stats = self.proxy.stats()
        self.assertEqual(stats["passed"] + stats["responses_dropped"], 20)
        self.assertEqual(outcomes.count(None), stats["responses_dropped"])
        self.assertTrue(0 < stats["responses_dropped"] < 20, stats)
        self.assertEqual(self.server.executed, 20)

    def test_control_api(self):
        def control(method, path, doc=None):
            conn = http.client.HTTPConnection("127.0.0.1", self.proxy.control_port, timeout=5)
            conn.request(method, path, body=json.dumps(doc) if doc is not None else None)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        self.assertEqual(control("POST", "/mode", {"mode": "drop_response", "count": 1})[1]["queued"], 1)
        self.assertEqual(control("POST", "/mode", {"mode": "bogus"})[0], 400)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            post(self.proxy.port)
        status, stats = control("GET", "/stats")
        self.assertEqual((status, stats["responses_dropped"], stats["forwarded"]), (200, 1, 1))
        self.assertEqual(control("GET", "/log")[1][0]["mode"], "drop_response")
        self.assertEqual(control("POST", "/reset")[1]["requests"], 0)

    def test_paid_only_modes_skip_unpaid_requests_and_the_log_records_key_and_signature_hash(self):
        import hashlib
        self.proxy.set_mode("drop_response", count=1, paid_only=True)
        self.assertEqual(post(self.proxy.port)[0], 200, "unpaid: passes, the one-shot is kept")
        self.assertEqual(self.proxy.stats()["queued"], 1)
        paid = {"PAYMENT-SIGNATURE": "sig-A", "Idempotency-Key": "k1"}
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            post(self.proxy.port, headers=paid)
        self.assertEqual(post(self.proxy.port, headers=paid)[0], 200, "one-shot used up")
        self.assertEqual(post(self.proxy.port, headers={"X-PAYMENT": "sig-B"})[0], 200)
        log = self.proxy.log()
        self.assertEqual([(e["mode"], e["status"], e["paid"], e["idempotency_key"]) for e in log],
                         [("pass", 200, False, None), ("drop_response", 200, True, "k1"),
                          ("pass", 200, True, "k1"), ("pass", 200, True, None)])
        self.assertEqual([e["payment_sha256"] for e in log],
                         [None] + [hashlib.sha256(b"sig-A").hexdigest()] * 2 + [hashlib.sha256(b"sig-B").hexdigest()])
        self.proxy.set_mode("drop_request", paid_only=True)  # global: paid requests never arrive
        self.assertEqual(post(self.proxy.port)[0], 200)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            post(self.proxy.port, headers={"Authorization": "Bearer x"})
        self.assertEqual(self.server.executed, 5, "the dropped paid request never reached the upstream")
        self.assertEqual(self.proxy.stats()["requests_dropped"], 1)

    def test_upstream_down_is_counted_and_closes_the_client(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead_port = s.getsockname()[1]
        proxy = FaultProxy(("127.0.0.1", dead_port)).start()
        self.addCleanup(proxy.stop)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            post(proxy.port)
        self.assertEqual(proxy.stats()["upstream_errors"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
