#!/usr/bin/env python3
"""`agentpay serve --demo` pays x402 on the built-in devnet: the official v2 client pays with the
printed demo buyer key; the devnet admin controls (/admin/v1/devnet) hold a settlement back so the
gateway answers 202 settlement_unknown, and the reconciler settles it once a block is mined; after
a restart on the same directory the devnet's balances and the operations are still there.

usage: test_demo_devnet.py [--agentpay PATH] [unittest args]"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
AGENTPAY = os.path.join(HERE, "..", "..", "build", "agentpay")
CLIENT = os.path.join(HERE, "..", "chain_env", "x402_client.mjs")
DEMO_PRICE = 10000
DEMO_FUNDING = 10_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    """One `serve --demo` process in `workdir`; what it printed, parsed."""

    def __init__(self, workdir):
        self.port = free_port()
        self.proc = subprocess.Popen([AGENTPAY, "serve", "--demo", "--listen", "127.0.0.1:%d" % self.port],
                                     cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        lines = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
            lines.append(line)
            if "Any x402 client can pay with it" in line:
                break
        self.banner = "".join(lines)
        key = re.search(r"private key \(devnet only, worth nothing\): (0x[0-9a-f]{64})", self.banner)
        chain = re.search(r"network (eip155:\d+), asset (0x[0-9a-fA-F]{40})", self.banner)
        token = os.path.join(workdir, "agentpay-data", "admin-token")
        if not key or not chain:
            self.stop()
            raise AssertionError("demo did not print the buyer:\n" + self.banner)
        self.buyer_key, self.network, self.asset = key.group(1), chain.group(1), chain.group(2)
        self.admin_token = open(token).read().strip()
        self.base = "http://127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def request(self, method, path, body=None, headers=None):
        if body is None:
            data = None
        else:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode()

    def devnet(self, body=None):
        auth = {"Authorization": "Bearer " + self.admin_token, "Content-Type": "application/json"}
        status, _, text = self.request("POST" if body else "GET", "/admin/v1/devnet", body, auth)
        if status != 200:
            raise AssertionError("devnet admin: %d %s" % (status, text))
        return json.loads(text)

    def pay(self, extra_args=()):
        out = subprocess.run(["node", CLIENT, "--version", "2", "--url", self.base + "/hello",
                              "--private-key", self.buyer_key, "--network", self.network,
                              "--asset", self.asset, "--method", "POST", "--body", '{"q":1}',
                              "--header", "Content-Type: application/json", *extra_args],
                             capture_output=True, text=True, timeout=60)
        self_result = json.loads(out.stdout)
        if "error" in self_result:
            raise AssertionError("client got no answer: %s" % self_result)
        return self_result

    def operation(self, op_id):
        status, _, text = self.request("GET", "/v1/operations/" + op_id)
        if status != 200:
            raise AssertionError("operation %s: %d %s" % (op_id, status, text))
        return json.loads(text)

    def resend(self, header_value):
        return self.request("POST", "/hello", '{"q":1}',  # the client's very bytes
                            {"PAYMENT-SIGNATURE": header_value, "Content-Type": "application/json"})


def settled_count(demo_dir):
    """Operations settled in the demo's database (read-only)."""
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(demo_dir, "agentpay-data", "agentpay.db"),
                         uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM operations WHERE settlement = 'settled'").fetchone()[0]
    finally:
        db.close()


class DemoDevnetTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-demo-")
        self.demo = Demo(self.dir)

    def tearDown(self):
        self.demo.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_official_client_pays_then_unknown_then_reconciled_then_restart(self):
        demo = self.demo
        paid = demo.pay()
        self.assertEqual(paid["status"], 200, paid)
        self.assertTrue(paid["payment_response"]["success"], paid)
        self.assertEqual(paid["attempts"], 2, "one 402, one paid request")

        # Hold settlements back: the gateway waits --receipt-timeout-ms (5 s), then answers 202.
        demo.devnet({"automine": False})
        held = demo.pay()
        self.assertEqual(held["status"], 202, held)
        self.assertEqual(json.loads(held["body"])["code"], "settlement_unknown")
        self.assertEqual(held["attempts"], 2, "the client must not sign a second authorization")
        op_id = held["headers"]["agentpay-operation-id"]
        self.assertEqual(held["headers"]["location"], "/v1/operations/" + op_id)
        self.assertEqual(demo.operation(op_id)["settlement"], "unknown")
        # Resending the same signature while unknown: 202 again, nothing new submitted.
        status, _, body = demo.resend(held["payment_header"])
        self.assertEqual(status, 202, body)

        before = demo.devnet()["block_number"]
        mined = demo.devnet({"mine": True, "automine": True})
        self.assertGreater(mined["block_number"], before)
        deadline = time.monotonic() + 10
        while demo.operation(op_id)["settlement"] != "settled":
            self.assertLess(time.monotonic(), deadline, "the reconciler did not settle it")
            time.sleep(0.2)
        status, headers, body = demo.resend(held["payment_header"])
        self.assertEqual(status, 200, body)
        response = json.loads(base64.b64decode(headers["PAYMENT-RESPONSE"]))
        self.assertTrue(response["success"])
        self.assertEqual(response["transaction"], demo.operation(op_id)["tx_hash"])
        self.assertEqual(settled_count(self.dir), 2)

        # Restart on the same directory: the devnet kept the buyer's spending, the store the ops.
        demo.stop()
        self.demo = demo = Demo(self.dir)
        self.assertEqual(demo.operation(op_id)["settlement"], "settled")
        again = demo.pay()
        self.assertEqual(again["status"], 200, again)
        self.assertEqual(settled_count(self.dir), 3)
        self.assertIn("funded with %d atomic units" % DEMO_FUNDING, demo.banner)

    def test_devnet_admin_needs_the_admin_token_and_checks_its_input(self):
        status, _, _ = self.demo.request("GET", "/admin/v1/devnet")
        self.assertEqual(status, 401)
        auth = {"Authorization": "Bearer " + self.demo.admin_token}
        for body in ({"mine_delay_ms": -1}, {"automine": "yes"}, {"drop": "0x12"}):
            status, _, text = self.demo.request("POST", "/admin/v1/devnet", body, auth)
            self.assertEqual(status, 400, (body, text))
        status, _, text = self.demo.request("POST", "/admin/v1/devnet", {"drop": "0x" + "ab" * 32}, auth)
        self.assertEqual(status, 200, text)
        self.assertIn("nothing dropped", text)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "--agentpay":
        AGENTPAY = os.path.abspath(args[1])
        args = args[2:]
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)
