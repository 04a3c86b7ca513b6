#!/usr/bin/env python3
"""Issue 13, item 7: the admin surface apart. Real `agentpay serve` processes on real SQLite.

- The public listener (--listen) answers every admin, devnet-control, metrics and console path, and
  their variants (dot segments, repeated slashes, percent-encoding, case, parameters), exactly as it
  answers an unknown endpoint: 404 not_found, with the admin token or without; nothing changes.
- The admin listener (--admin-listen) refuses every admin call without the admin token, with a wrong
  one, or with an account's API key (401), and changes nothing; it serves no paid route.
- The demo's devnet controls are on the admin listener only; its JSON-RPC reads stay public.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import signal  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import harness  # noqa: E402

ADMIN = {"Authorization": "Bearer " + harness.ADMIN_TOKEN}

# Paths of the admin surface as a client might spell them, each meant to reach the admin API,
# the devnet controls, /metrics or /console/ on the public port.
ADMIN_PATHS = [
    "/admin", "/admin/", "/admin/v1/accounts", "/admin/v1/alerts", "/admin/v1/operations",
    "/admin/v1/operations?limit=5", "/admin/v1/devnet", "/admin/v1/accounts/ACCT",
    "/admin/v1/accounts/ACCT/deposits", "/admin/v1/accounts/ACCT/api-keys",
    "/admin/v1/audit", "/admin/v1/audit/payments", "/%61dmin/v1/audit", "//admin/v1/audit/payments?limit=5",
    "/admin/v1/overview", "/admin/v1/operations/op_x/trace", "/%61dmin/v1/overview",
    "/metrics", "/metrics/", "/metrics?x=1", "/console", "/console/", "/console/index.html",
    "//admin/v1/alerts", "/./admin/v1/alerts", "/x/../admin/v1/alerts", "/%61dmin/v1/alerts",
    "/%2561dmin/v1/alerts", "/ADMIN/v1/alerts", "/Admin/v1/accounts", "/admin%2fv1/alerts",
    "/admin;x/v1/alerts", "/METRICS", "/%6detrics", "/metrics.txt", "/.//metrics", "/\\admin/v1/alerts",
]


class PublicListenerTest(harness.GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.acct = self.gw.create_account("victim", deposit=50000)

    def test_public_listener_refuses_the_admin_surface_like_an_unknown_endpoint(self):
        unknown = self.gw.request("GET", "/v1/no-such-endpoint")
        self.assertProblem(unknown, 404, "not_found")
        before = self.gw.full_state()
        executed = self.seller.executed()
        for path in ADMIN_PATHS:
            path = path.replace("ACCT", self.acct.id)
            for method, body in (("GET", None), ("POST", {"name": "intruder"}),
                                 ("POST", {"amount": "1000", "reference": "steal"}), ("DELETE", None)):
                for headers in (ADMIN, {}, {"Authorization": "Bearer " + self.acct.api_key}):
                    r = self.gw.request(method, path, body=body, headers=headers)
                    what = "%s %s %s" % (method, path, "with a bearer" if headers else "bare")
                    self.assertProblem(r, 404, "not_found", what)
                    self.assertEqual(r.body, unknown.body, what + ": not the unknown-endpoint answer")
                    self.assertNotIn(b"agentpay_", r.body, what)
        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed, "no admin path was forwarded upstream")
        self.assertEqual(self.gw.healthz().status, 200)
        # The same calls on the admin listener do work: the split is real, not a broken admin API.
        self.assertIn("agentpay_", self.gw.metrics())
        self.assertEqual(self.gw.admin("GET", "/admin/v1/alerts").status, 200)

    def test_a_path_that_only_starts_like_admin_is_still_a_paid_route(self):
        # /administrators is not ours: the paid route "/" serves it (402 without payment).
        r = self.gw.request("GET", "/administrators")
        self.assertEqual(r.status, 402, r)

    def assertUnchanged(self, before):
        self.assertEqual(self.gw.full_state(), before, "state changed")


class AdminListenerTest(harness.GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.acct = self.gw.create_account("owner", deposit=50000)
        self.key_id = self.gw.admin("GET", "/admin/v1/accounts/%s/api-keys" % self.acct.id).json()[
            "api_keys"][0]["key_id"]

    def test_every_admin_call_needs_the_admin_token(self):
        a = self.acct.id
        calls = [("POST", "/admin/v1/accounts", {"name": "x"}),
                 ("GET", "/admin/v1/accounts/" + a, None),
                 ("POST", "/admin/v1/accounts/%s/deposits" % a, {"amount": "5", "reference": "r"}),
                 ("GET", "/admin/v1/accounts/%s/api-keys" % a, None),
                 ("POST", "/admin/v1/accounts/%s/api-keys" % a, None),
                 ("DELETE", "/admin/v1/accounts/%s/api-keys/%s" % (a, self.key_id), None),
                 ("GET", "/admin/v1/alerts", None),
                 ("GET", "/admin/v1/operations", None),
                 ("GET", "/admin/v1/audit", None),
                 ("GET", "/admin/v1/audit/payments?limit=5", None),
                 ("GET", "/admin/v1/overview", None),
                 ("GET", "/admin/v1/accounts?limit=5", None),
                 ("GET", "/admin/v1/operations?account=" + a, None),
                 ("GET", "/admin/v1/operations/op_x", None),
                 ("GET", "/admin/v1/operations/op_x/trace", None),
                 ("POST", "/admin/v1/operations/op_x/resolve", {"outcome": "no_action", "note": "n"}),
                 ("GET", "/admin/v1/nope", None)]
        bad = [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Bearer " + self.acct.api_key},
               {"Authorization": "Bearer " + harness.ADMIN_TOKEN + "x"},
               {"Authorization": "Bearer " + harness.ADMIN_TOKEN[:-1]},
               {"Authorization": harness.ADMIN_TOKEN}, {"Authorization": "Basic " + harness.ADMIN_TOKEN},
               {"Authorization": "bearer " + harness.ADMIN_TOKEN}]
        before = self.gw.full_state()
        for method, path, body in calls:
            for headers in bad:
                r = self.gw.admin_request(method, path, body=body, headers=headers)
                self.assertProblem(r, 401, "unauthorized", "%s %s with %r" % (method, path, headers))
        self.assertEqual(self.gw.full_state(), before)
        # The account's key was not revoked by any of them.
        r = self.gw.request("GET", "/v1/account", headers={"Authorization": "Bearer " + self.acct.api_key})
        self.assertEqual(r.status, 200, r)

    def test_the_admin_listener_serves_no_payments_and_no_public_views(self):
        executed = self.seller.executed()
        for method, path in (("POST", "/work"), ("GET", "/"), ("GET", "/v1/account"),
                             ("GET", "/v1/operations/op_x"), ("POST", "/devnet/rpc")):
            r = self.gw.admin_request(method, path, body=b"{}",
                                      headers={"Authorization": "Bearer " + self.acct.api_key})
            self.assertProblem(r, 404, "not_found", "%s %s on the admin listener" % (method, path))
        self.assertEqual(self.seller.executed(), executed)
        self.assertEqual(self.gw.admin_request("GET", "/healthz").status, 200)

    def test_the_pages_carry_no_data_and_refuse_framing(self):
        # The console and the inspector (which opens the console's traces there) are static files;
        # their data comes only from the admin API, under the token. Never framed, no inline code.
        for path in ("/console/", "/console/console.js", "/console/timeline.js", "/inspector/",
                     "/inspector/inspector.js", "/inspector/timeline.js"):
            r = self.gw.admin_request("GET", path)
            self.assertEqual(r.status, 200, (path, r))
            self.assertIn("default-src 'self'", r.header("Content-Security-Policy") or "", path)
            self.assertIn("frame-ancestors 'none'", r.header("Content-Security-Policy") or "", path)
            self.assertEqual(r.header("X-Frame-Options"), "DENY", path)
            self.assertNotIn(harness.ADMIN_TOKEN, r.body.decode(), path)
        self.assertProblem(self.gw.admin_request("GET", "/inspector/../admin/v1/audit"), 404, "not_found")
        self.assertProblem(self.gw.admin_request("GET", "/console/shared/timeline.js"), 404, "not_found")


class AdminListenerOffTest(harness.GatewayTestCase):
    gateway_args = ("--admin-listen", "off")

    def test_off_means_no_admin_surface_anywhere(self):
        # The banner's next line may come a moment after the "listening on" the harness waited for.
        deadline = time.monotonic() + 10
        while "admin listener off" not in self.gw.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("admin listener off", self.gw.output())
        self.assertFalse(harness.wait_port(self.gw.admin_port, timeout=0.5), "nothing listens there")
        for path in ("/admin/v1/alerts", "/metrics"):
            self.assertProblem(self.gw.request("GET", path, headers=ADMIN), 404, "not_found", path)


class DemoDevnetControlsTest(unittest.TestCase):
    """The demo: devnet controls only on the admin listener, with the token; JSON-RPC reads public."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="agentpay-sec-demo-")
        cls.demo = harness.DemoServer(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.demo.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_devnet_controls_are_on_the_admin_listener_only(self):
        public, admin = self.demo.port, self.demo.admin_port
        token = {"Authorization": "Bearer " + self.demo.admin_token}
        for path in ("/admin/v1/devnet", "//admin/v1/devnet", "/admin/v1/../v1/devnet/../../admin/v1/devnet"):
            r = harness.http_request(public, "POST", path, body={"automine": False}, headers=token)
            self.assertEqual(r.status, 404, (path, r))
        state = harness.http_request(admin, "GET", "/admin/v1/devnet", headers=token)
        self.assertEqual(state.status, 200, state)
        self.assertTrue(state.json()["automine"], "the public calls changed nothing")
        for headers in ({}, {"Authorization": "Bearer nope"}):
            r = harness.http_request(admin, "POST", "/admin/v1/devnet", body={"automine": False}, headers=headers)
            self.assertEqual(r.status, 401, r)
        self.assertTrue(harness.http_request(admin, "GET", "/admin/v1/devnet", headers=token).json()["automine"])
        # JSON-RPC reads stay on the public listener (CONTRACT 2), and are not on the admin one.
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        self.assertEqual(harness.http_request(public, "POST", "/devnet/rpc", body=rpc).status, 200)
        self.assertEqual(harness.http_request(admin, "POST", "/devnet/rpc", body=rpc).status, 404)

    def test_the_banner_names_the_admin_listener(self):
        self.assertIn("admin listener): %s" % self.demo.admin_base, self.demo.banner)


if __name__ == "__main__":
    harness.main(sys.argv)
