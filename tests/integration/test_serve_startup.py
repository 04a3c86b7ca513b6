#!/usr/bin/env python3
"""`agentpay serve` at start: a configuration mistake is refused with the key named (never ignored),
the default data directory is created private, a missing directory or file is named, and
`--log-format json` writes one JSON object per line on every path that logs, operation ids included.

Run:  python3 tests/integration/test_serve_startup.py --agentpay build/agentpay
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import ADMIN_TOKEN, Gateway, Seller  # noqa: E402


class ScratchDirTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-startup-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        harness.write_secret(os.path.join(self.dir, "admin-token"), ADMIN_TOKEN + "\n")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def serve_refused(self, *args):
        """Runs serve, expects it to stop at start with exit 2; returns its stderr."""
        p = subprocess.run([harness.binary(), "serve", "--listen", "127.0.0.1:%d" % harness.free_port(),
                            "--admin-listen", "127.0.0.1:%d" % harness.free_port()] + list(args), cwd=self.dir, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, "serve %r should refuse to start: %s %s" % (args, p.stdout, p.stderr))
        return p.stderr


class ConfigMistakesTest(ScratchDirTest):
    """Each mistake a newcomer makes in the TOML file stops the gateway, naming the key."""

    ROUTE = '[[route]]\nprefix = "/weather"\nupstream = "http://127.0.0.1:9001"\nprice = "2500"\n'

    def test_dashed_key_names_the_underscore_key(self):
        err = self.serve_refused("--config", self.write("a.toml", 'admin-token-file = "admin-token"\n' + self.ROUTE))
        self.assertIn("a.toml:1: unknown key 'admin-token-file'; did you mean 'admin_token_file'?", err)

    def test_misspelt_route_field_names_the_real_field(self):
        err = self.serve_refused("--config", self.write("b.toml", self.ROUTE + "require_idempotency = true\n"))
        self.assertIn("unknown [[route]] field 'require_idempotency'; did you mean 'require_idempotency_key'?", err)

    def test_wrong_type_is_refused(self):
        err = self.serve_refused("--config", self.write("c.toml", self.ROUTE + 'require_idempotency_key = "yes"\n'))
        self.assertIn("'require_idempotency_key' must be true or false", err)

    def test_missing_config_file_is_named(self):
        err = self.serve_refused("--config", "nope.toml")
        self.assertIn("--config nope.toml: cannot open it", err)

    def test_missing_store_directory_is_named_and_not_created(self):
        err = self.serve_refused("--upstream", "http://127.0.0.1:9", "--price", "1",
                                 "--db", "sqlite:./missing/agentpay.db")
        self.assertIn("the directory ./missing does not exist", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "missing")))

    def test_missing_token_file_is_named(self):
        err = self.serve_refused("--upstream", "http://127.0.0.1:9", "--price", "1",
                                 "--admin-token-file", "no-such-token")
        self.assertIn("--admin-token-file: cannot read no-such-token (No such file or directory)", err)


class DefaultDirectoryTest(ScratchDirTest):
    def test_serve_creates_its_default_data_directory_private(self):
        """The README's second step: serve with no --db in an empty directory starts and keeps its data
        in ./agentpay-data (0700), and a route from a valid file takes requests."""
        seller = Seller(self.dir)
        self.addCleanup(seller.kill9)
        seller.start()
        port, admin_port = harness.free_port(), harness.free_port()
        config = self.write("agentpay.toml",
                            'listen = "127.0.0.1:%d"\nadmin_listen = "127.0.0.1:%d"\n'
                            'admin_token_file = "admin-token"\n'
                            '[[route]]\nprefix = "/weather"\nupstream = "%s"\nprice = "2500"\n'
                            'require_idempotency_key = true\n' % (port, admin_port, seller.url))
        gw = harness.ManagedProcess("gateway", [harness.binary(), "serve", "--config", config],
                                    os.path.join(self.dir, "gateway.log"))
        cwd = os.getcwd()
        os.chdir(self.dir)  # ManagedProcess starts the child in the current directory
        try:
            gw.start(port=port)
        finally:
            os.chdir(cwd)
        self.addCleanup(gw.stop)
        data = os.path.join(self.dir, "agentpay-data")
        self.assertTrue(os.path.isfile(os.path.join(data, "agentpay.db")))
        self.assertEqual(stat.S_IMODE(os.stat(data).st_mode), 0o700)
        # require_idempotency_key from the file is in force: no key, 400.
        r = harness.http_request(admin_port, "POST", "/admin/v1/accounts", body={"name": "a"},
                                 headers={"Authorization": "Bearer " + ADMIN_TOKEN})
        self.assertEqual(r.status, 201, r)
        key = r.json()["api_key"]
        r = harness.http_request(port, "POST", "/weather/today", body=b"{}",
                                 headers={"Authorization": "Bearer " + key})
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json()["code"], "idempotency_key_required")


class JsonLogTest(unittest.TestCase):
    """--log-format json: every line the gateway writes is one JSON object with time, level, event;
    a worker's decision about an operation carries its operation_id."""

    def test_every_line_is_json_and_worker_decisions_name_the_operation(self):
        workdir = tempfile.mkdtemp(prefix="agentpay-jsonlog-")
        self.addCleanup(shutil.rmtree, workdir, ignore_errors=True)
        seller = Seller(workdir)
        self.addCleanup(seller.kill9)
        seller.start()
        gw = Gateway(workdir, seller.url, extra_args=[
            "--log-format", "json", "--hold-ttl-ms", "1000", "--sweep-interval-ms", "100",
            "--upstream-timeout-ms", "300"])
        self.addCleanup(gw.stop)
        gw.start()
        acct = gw.create_account("logged", deposit=100000)
        # The upstream times out: the hold is kept, then expires and the sweeper releases it with an alert.
        r = gw.pay(acct, "slow-1", fault="slow:2000")
        self.assertEqual(r.status, 504, r)
        op_id = r.operation_id
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and op_id not in gw.output():
            time.sleep(0.1)
        gw.stop()
        lines = [line for line in gw.output().splitlines() if line.strip()]
        self.assertTrue(lines)
        events = []
        for line in lines:
            doc = json.loads(line)  # raises on any line that is not JSON
            for field in ("time", "level", "event", "message"):
                self.assertIn(field, doc, line)
            self.assertRegex(doc["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            events.append(doc)
        kinds = [e["event"] for e in events]
        self.assertIn("listening", kinds)
        self.assertIn("stopping", kinds)
        expired = [e for e in events if e["event"] == "hold_expired"]
        self.assertEqual(len(expired), 1, events)
        self.assertEqual(expired[0]["operation_id"], op_id)
        self.assertEqual(expired[0]["level"], "warning")


if __name__ == "__main__":
    harness.main(sys.argv)
