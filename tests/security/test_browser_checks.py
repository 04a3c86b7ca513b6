#!/usr/bin/env python3
"""Issue 36, item 5: what a browser, or any client, is shown and may do is decided by configuration,
never by the request's own Host. Real `agentpay serve` processes on real SQLite (and the demo's
built-in devnet), plain HTTP and HTTPS.

- The admin listener refuses a request whose Host names it by a DNS name it was not given (a page of
  evil.example whose name now resolves to it: DNS rebinding), 421 host_not_allowed, on every path;
  and every state-changing request, the devnet controls included, that a browser sends from an origin
  other than the listener's own (its address; on loopback also localhost, 127.0.0.1, [::1]) or one of
  --admin-origin, 403 cross_origin_refused. Refused requests change nothing.
- The 402 names its resource under --public-url, else under --listen's own URL (https when the
  listener serves TLS), plus the request's normalised path: a Host of evil.example is never echoed.
"""

import base64
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "tls"))

import harness  # noqa: E402
import tls_harness  # noqa: E402

ADMIN = {"Authorization": "Bearer " + harness.ADMIN_TOKEN}


def resources(response):
    """The resource URLs of a 402: (v2 PAYMENT-REQUIRED resource.url, v1 body accepts[0].resource)."""
    header = response.header("PAYMENT-REQUIRED")
    v2 = json.loads(base64.b64decode(header)) if header else {}
    v1 = response.json()
    return v2.get("resource", {}).get("url"), v1["accepts"][0].get("resource")


class AdminListenerTest(harness.GatewayTestCase):
    def rebound(self, name="evil.example"):
        return "%s:%d" % (name, self.gw.admin_port)

    def test_a_rebound_dns_name_is_refused_on_every_path_of_the_admin_listener(self):
        before = self.gw.full_state()
        host = {"Host": self.rebound()}
        for path in ("/metrics", "/healthz", "/console/", "/inspector/", "/admin/v1/overview",
                     "/admin/v1/accounts"):
            r = self.gw.admin_request("GET", path, headers=dict(ADMIN, **host))
            self.assertProblem(r, 421, "host_not_allowed", path)
            self.assertNotIn(b"agentpay_", r.body, path)
        # The rebinding page's write: its Host and Origin agree with each other, and with nothing else.
        page = dict(ADMIN, Host=self.rebound(), Origin="http://" + self.rebound())
        r = self.gw.admin_request("POST", "/admin/v1/accounts", body={"name": "rebound"}, headers=page)
        self.assertProblem(r, 421, "host_not_allowed")
        self.assertIn("--admin-origin", r.json()["detail"])
        self.assertEqual(self.gw.full_state(), before)

    def test_a_write_from_another_origin_is_refused_and_the_listeners_own_are_not(self):
        before = self.gw.full_state()
        own = "127.0.0.1:%d" % self.gw.admin_port
        for origin in ("https://evil.example", "http://evil.example:%d" % self.gw.admin_port,
                       "http://127.0.0.1:%d" % self.gw.port, "https://" + own, "null"):
            r = self.gw.admin_request("POST", "/admin/v1/accounts", body={"name": "forged"},
                                      headers=dict(ADMIN, Origin=origin))
            doc = self.assertProblem(r, 403, "cross_origin_refused", origin)
            self.assertIn("http://" + own, doc["detail"], "the refusal names what is accepted")
        self.assertEqual(self.gw.full_state(), before)
        # The loopback names of the listener's own port are its own origins; the CLI sends none.
        for name in ("127.0.0.1", "localhost", "[::1]"):
            origin = "http://%s:%d" % (name, self.gw.admin_port)
            r = self.gw.admin_request("POST", "/admin/v1/accounts", body={"name": "own-" + name},
                                      headers=dict(ADMIN, Origin=origin, Host="%s:%d" % (name, self.gw.admin_port)))
            self.assertEqual(r.status, 201, (origin, r))
        self.assertEqual(self.gw.admin("POST", "/admin/v1/accounts", {"name": "cli"}).status, 201)


class AdminOriginTest(harness.GatewayTestCase):
    """A console reached through a proxy at https://console.example.com."""

    gateway_args = ("--admin-origin", "https://console.example.com")

    def test_an_admin_origin_adds_a_name_the_listener_answers_to(self):
        proxied = {"Host": "console.example.com", "X-Forwarded-Proto": "https"}
        self.assertEqual(self.gw.admin_request("GET", "/metrics", headers=proxied).status, 200)
        r = self.gw.admin_request("POST", "/admin/v1/accounts", body={"name": "via-proxy"},
                                  headers=dict(ADMIN, Origin="https://console.example.com", **proxied))
        self.assertEqual(r.status, 201, r)
        r = self.gw.admin_request("POST", "/admin/v1/accounts", body={"name": "http-proxy"},
                                  headers=dict(ADMIN, Origin="http://console.example.com", **proxied))
        self.assertProblem(r, 403, "cross_origin_refused", "another scheme is another origin")
        r = self.gw.admin_request("GET", "/metrics", headers={"Host": "other.example.com"})
        self.assertProblem(r, 421, "host_not_allowed")


class DemoDevnetControlsTest(unittest.TestCase):
    """The devnet controls of `serve --demo` go through the same checks as every other admin write."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="agentpay-sec-browser-")
        cls.demo = harness.DemoServer(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.demo.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def controls(self):
        r = harness.http_request(self.demo.admin_port, "GET", "/admin/v1/devnet", headers=self.token())
        self.assertEqual(r.status, 200, r)
        state = r.json()
        return state["automine"], state["mine_delay_ms"], state["pending_transactions"]

    def token(self, **more):
        return dict({"Authorization": "Bearer " + self.demo.admin_token}, **more)

    def test_devnet_controls_refuse_a_cross_origin_write_and_change_nothing(self):
        before = self.controls()
        self.assertTrue(before[0], "automine is on at start")
        command = {"automine": False, "mine_delay_ms": 0}
        admin = "127.0.0.1:%d" % self.demo.admin_port
        for headers, status, code in (
                (self.token(Origin="https://evil.example"), 403, "cross_origin_refused"),
                (self.token(Origin=self.demo.base), 403, "cross_origin_refused"),  # the public listener
                (self.token(**{"Sec-Fetch-Site": "cross-site"}), 403, "cross_origin_refused"),
                (self.token(Host="evil.example:%d" % self.demo.admin_port,
                            Origin="http://evil.example:%d" % self.demo.admin_port), 421, "host_not_allowed")):
            r = harness.http_request(self.demo.admin_port, "POST", "/admin/v1/devnet", body=command,
                                     headers=headers)
            self.assertEqual((r.status, r.json().get("code")), (status, code), (headers, r))
        self.assertEqual(self.controls(), before, "a refused write changed the devnet")
        # The console's own origin may drive it (and puts it back).
        r = harness.http_request(self.demo.admin_port, "POST", "/admin/v1/devnet", body=command,
                                 headers=self.token(Origin="http://" + admin))
        self.assertEqual(r.status, 200, r)
        self.assertFalse(self.controls()[0])
        r = harness.http_request(self.demo.admin_port, "POST", "/admin/v1/devnet",
                                 body={"automine": True, "mine_delay_ms": before[1]}, headers=self.token())
        self.assertEqual(r.status, 200, r)

    def test_the_demo_402_names_its_own_listener(self):
        r = harness.http_request(self.demo.port, "GET", "/hello?q=1", headers={"Host": "evil.example"})
        self.assertEqual(r.status, 402, r)
        self.assertEqual(resources(r), (self.demo.base + "/hello?q=1",) * 2)


class ResourceUrlTest(harness.GatewayTestCase):
    def test_the_402_names_the_listener_never_the_host(self):
        expected = "http://127.0.0.1:%d/work/item?x=1" % self.gw.port
        for headers in ({"Host": "evil.example"}, {"Host": "evil.example:443", "X-Forwarded-Host": "evil.example"},
                        {}):
            r = self.gw.request("GET", "/work/./item?x=1", headers=headers)
            self.assertEqual(r.status, 402, r)
            self.assertEqual(resources(r), (expected, expected), headers)
        # The early 402, answered from the head before the body is read, says the same.
        r = self.gw.request("POST", "/work/item?x=1", body=b"x" * 1000, headers={"Host": "evil.example"})
        self.assertEqual(resources(r), (expected, expected))


class PublicUrlTest(harness.GatewayTestCase):
    gateway_args = ("--public-url", "https://Pay.Example.com/api/")

    def test_public_url_names_the_resource(self):
        r = self.gw.request("GET", "/work/item?x=1", headers={"Host": "evil.example"})
        self.assertEqual(r.status, 402, r)
        expected = "https://pay.example.com/api/work/item?x=1"
        self.assertEqual(resources(r), (expected, expected))


class HttpsResourceUrlTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="agentpay-sec-https-")
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        ca = tls_harness.make_ca(self.workdir)
        self.context = tls_harness.client_context(ca["ca.pem"])
        self.seller = harness.Seller(self.workdir)
        self.addCleanup(self.seller.kill9)
        self.seller.start()
        self.gw = harness.Gateway(self.workdir, self.seller.url,
                                  extra_args=["--tls-cert", ca["localhost.pem"], "--tls-key", ca["localhost.key"]])
        self.addCleanup(self.gw.stop)
        self.gw.start()

    def test_an_https_listener_names_an_https_resource(self):
        r = harness.http_request(self.gw.port, "GET", "/work?x=1", headers={"Host": "evil.example"},
                                 tls=self.context)
        self.assertEqual(r.status, 402, r)
        expected = "https://127.0.0.1:%d/work?x=1" % self.gw.port
        self.assertEqual(resources(r), (expected, expected))
        # The HTTPS admin listener's own origin is https.
        admin = "https://localhost:%d" % self.gw.admin_port
        for origin, status in (("http://localhost:%d" % self.gw.admin_port, 403), (admin, 201)):
            r = harness.http_request(self.gw.admin_port, "POST", "/admin/v1/accounts", body={"name": "tls"},
                                     headers=dict(ADMIN, Origin=origin), tls=self.context)
            self.assertEqual(r.status, status, (origin, r))


if __name__ == "__main__":
    harness.main(sys.argv)
