"""Issue 13 items 5 and 6 against real processes: rate limits (per client address, per account), connections
per client address, the header deadline, the early 402, and route normalisation attacks.

Each test class starts its own `agentpay seller` and `agentpay serve` (tests/integration/harness.py) on free
ports and a fresh SQLite file, with the limits it exercises set low; the money invariants are checked after
every test. Other client addresses are other loopback addresses (127.0.0.2, 127.0.0.3, ...): Linux routes the
whole 127/8 to lo, so a socket bound to one of them reaches the gateway from that address.

Run:  python3 tests/security/test_limits.py --agentpay build/agentpay [unittest args]
"""

import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402


def request_from(source, port, method, path, body=None, headers=None, timeout=10):
    """One request on a fresh connection from the loopback address `source`."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return harness.Response(resp.status, resp.reason, resp.getheaders(), resp.read())
    finally:
        conn.close()


def raw_from(source, port, data, timeout=5.0):
    """Send raw bytes from `source` (no half-close) and read until the server closes: (bytes, seconds)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    started = time.monotonic()
    received = b""
    try:
        s.sendall(data)
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    finally:
        s.close()
    return received, time.monotonic() - started


def head_and_body(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers, body


class LimitsTestCase(harness.GatewayTestCase):
    def assertTooMany(self, resp, who):
        doc = self.assertProblem(resp, 429, "limit_exceeded")
        self.assertIn(who, doc["detail"])
        retry = resp.header("Retry-After")
        self.assertIsNotNone(retry, "429 without Retry-After: %r" % resp)
        self.assertRegex(retry, r"^[1-9][0-9]*$", "Retry-After is whole seconds, at least 1")
        return int(retry)


class ClientAddressRateTest(LimitsTestCase):
    # 10 a second, burst 10, for client addresses only; no account limit. The harness's own calls come
    # from 127.0.0.1; the tests' from other loopback addresses.
    gateway_args = ("--rate-limit-per-client", "10:10", "--rate-limit-per-account", "off")

    def test_429_with_retry_after_then_refill_and_other_addresses_unaffected(self):
        acct = self.gw.create_account("rate-ip", deposit=10 ** 6)
        before = self.gw.full_state()
        pay = {"Authorization": "Bearer " + acct.api_key, "Content-Type": "application/json"}
        # 127.0.0.2 spends its burst of 10 on unpaid 402s (they count too), then is refused.
        for _ in range(10):
            self.assertEqual(request_from("127.0.0.2", self.gw.port, "POST", "/x", b"{}").status, 402)
        refused = request_from("127.0.0.2", self.gw.port, "POST", "/x", b"{}", headers=pay)
        retry = self.assertTooMany(refused, "client address")
        self.assertEqual(retry, 1)
        # Every endpoint is behind the address's bucket, not only paid routes.
        self.assertTooMany(request_from("127.0.0.2", self.gw.port, "GET", "/healthz"), "client address")
        self.assertEqual(self.gw.full_state(), before, "a refused request moved money or wrote state")
        self.assertExecuted(0)
        # Another address is not affected.
        r = request_from("127.0.0.3", self.gw.port, "POST", "/x", b"{}", headers=pay)
        self.assertEqual(r.status, 200, r)
        # After Retry-After, the bucket has refilled.
        time.sleep(retry + 0.1)
        r = request_from("127.0.0.2", self.gw.port, "POST", "/x", b"{}", headers=pay)
        self.assertEqual(r.status, 200, r)
        self.assertExecuted(2)

    def test_a_flood_gets_exactly_the_rate(self):
        # 3 s of requests, one connection at a time: burst + rate x time get through, no more.
        ok = refused = 0
        started = time.monotonic()
        while time.monotonic() - started < 3.0:
            r = request_from("127.0.0.4", self.gw.port, "GET", "/healthz")
            if r.status == 200:
                ok += 1
            else:
                self.assertTooMany(r, "client address")
                refused += 1
        elapsed = time.monotonic() - started
        self.assertGreater(refused, 0)
        self.assertLessEqual(ok, 10 + int(10 * elapsed) + 1, "more than burst + rate x time got through")
        self.assertGreaterEqual(ok, 10 + int(10 * elapsed) - 4, "the bucket did not refill at its rate")


class AccountRateTest(LimitsTestCase):
    gateway_args = ("--rate-limit-per-account", "1:2", "--rate-limit-per-client", "off")

    def test_per_account_bucket(self):
        a = self.gw.create_account("rate-a", deposit=10 ** 6)
        b = self.gw.create_account("rate-b", deposit=10 ** 6)
        # Junk keys and unknown keys get 401 and drain nobody's bucket.
        for i in range(10):
            self.assertProblem(self.gw.pay("ak_" + "0" * 64, "junk-%d" % i), 401, "unauthorized")
        self.assertEqual(self.gw.pay(a, "a-1").status, 200)
        self.assertEqual(self.gw.pay(a, "a-2").status, 200)
        before = self.gw.full_state()
        retry = self.assertTooMany(self.gw.pay(a, "a-3"), "account")
        self.assertEqual(self.gw.full_state(), before, "a 429 moved money or wrote state")
        # A replay of a completed key is also a request of that account.
        self.assertTooMany(self.gw.pay(a, "a-1"), "account")
        # Another account on the same address is not affected.
        self.assertEqual(self.gw.pay(b, "b-1").status, 200)
        time.sleep(retry + 0.1)
        r = self.gw.pay(a, "a-3")
        self.assertEqual(r.status, 200, r)
        self.assertAccount(a, captured=3 * harness.PRICE, held=0)
        self.assertAccount(b, captured=harness.PRICE, held=0)
        self.assertExecuted(4)


class ConnectionsPerClientTest(LimitsTestCase):
    gateway_args = ("--max-connections-per-client", "5", "--rate-limit", "off")

    def test_503_past_the_limit_other_addresses_served(self):
        held = []
        try:
            for _ in range(5):
                s = socket.socket()
                s.bind(("127.0.0.2", 0))
                s.connect(("127.0.0.1", self.gw.port))
                held.append(s)
            time.sleep(0.2)
            raw, seconds = raw_from("127.0.0.2", self.gw.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, body = head_and_body(raw)
            self.assertEqual(status, 503, raw)
            self.assertEqual(json.loads(body)["code"], "limit_exceeded", raw)
            self.assertEqual(headers.get("retry-after"), "1", raw)
            self.assertEqual(headers.get("connection"), "close", raw)
            self.assertLess(seconds, 3.0, "the refused connection was not closed")
            # Another address still gets in.
            self.assertEqual(request_from("127.0.0.3", self.gw.port, "GET", "/healthz").status, 200)
        finally:
            for s in held:
                s.close()
        # Once those close, the address is served again.
        deadline = time.monotonic() + 5
        while True:
            r = request_from("127.0.0.2", self.gw.port, "GET", "/healthz")
            if r.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(r.status, 200, r)


class HeaderDeadlineTest(LimitsTestCase):
    gateway_args = ("--header-timeout-ms", "1000", "--rate-limit", "off")

    def test_trickling_header_is_cut_at_the_deadline(self):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", self.gw.port))
        started = time.monotonic()
        closed_at = None
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        try:
            for byte in request:
                try:
                    s.send(bytes([byte]))
                except OSError:
                    closed_at = time.monotonic()
                    break
                s.settimeout(0.1)
                try:
                    if s.recv(1024) == b"":
                        closed_at = time.monotonic()
                        break
                except socket.timeout:
                    pass
                except ConnectionResetError:
                    closed_at = time.monotonic()
                    break
                if time.monotonic() - started > 8:
                    break
        finally:
            s.close()
        self.assertIsNotNone(closed_at, "a header trickling for 8 s was never cut")
        self.assertGreaterEqual(closed_at - started, 0.9)
        self.assertLess(closed_at - started, 3.0, "cut later than the 1 s header deadline")

    def test_silent_connection_is_cut_and_idle_keep_alive_is_not(self):
        raw, seconds = raw_from("127.0.0.1", self.gw.port, b"", timeout=10)
        self.assertEqual(raw, b"")
        self.assertGreaterEqual(seconds, 0.9)
        self.assertLess(seconds, 3.0, "a connection that never sent a byte outlived the header deadline")
        # A keep-alive connection between requests waits for the idle timeout (60 s), not 1 s.
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        try:
            conn.request("GET", "/healthz")
            self.assertEqual(conn.getresponse().read() is not None, True)
            time.sleep(2.0)
            conn.request("GET", "/healthz")
            self.assertEqual(conn.getresponse().status, 200)
        finally:
            conn.close()


class EarlyChallengeTest(LimitsTestCase):
    gateway_args = ("--rate-limit", "off")

    def check_402(self, raw, seconds):
        status, headers, body = head_and_body(raw)
        self.assertEqual(status, 402, raw[:300])
        self.assertIn("payment-required", headers)
        self.assertEqual(headers.get("connection"), "close", "the unread body ends the connection")
        self.assertEqual(json.loads(body)["code"], "payment_required")
        self.assertLess(seconds, 2.0, "the 402 waited for a body")

    def test_huge_content_length_and_no_body_gets_402_at_once(self):
        head = b"POST /work HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
        self.check_402(*raw_from("127.0.0.1", self.gw.port, head, timeout=10))

    def test_under_the_body_limit_no_body_sent(self):
        # Under --max-body-bytes: the server would otherwise wait 30 s for these bytes.
        head = b"PUT /work HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n"
        self.check_402(*raw_from("127.0.0.1", self.gw.port, head, timeout=10))

    def test_expect_100_continue_gets_402_instead(self):
        head = (b"POST /work HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                b"Content-Length: 100000000\r\n\r\n")
        raw, seconds = raw_from("127.0.0.1", self.gw.port, head, timeout=10)
        self.assertFalse(raw.startswith(b"HTTP/1.1 100"), raw[:100])
        self.check_402(raw, seconds)

    def test_chunked_body_gets_402_while_the_client_still_sends(self):
        s = socket.socket()
        s.settimeout(5)
        s.connect(("127.0.0.1", self.gw.port))
        started = time.monotonic()
        try:
            s.sendall(b"POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + b"x" * 1024)
            raw = b""
            while b"\r\n\r\n" not in raw:
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
            seconds = time.monotonic() - started
            # The client keeps sending; the gateway discards it and the connection ends.
            try:
                for _ in range(100):
                    s.sendall(b"x" * 1024)
            except OSError:
                pass
            while True:
                try:
                    chunk = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not chunk:
                    break
                raw += chunk
        finally:
            s.close()
        self.check_402(raw, seconds)

    def test_paid_request_body_is_still_read(self):
        acct = self.gw.create_account("early", deposit=10 ** 6)
        body = b'{"n":"' + b"y" * 200000 + b'"}'
        r = self.gw.pay(acct, "big-body", body=body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json()["body"]), len(body))
        self.assertExecuted(1)


SELLER_PRICE_CHEAP = 1
SELLER_PRICE_EXPENSIVE = 1000


class _RoutedGateway(harness.Gateway):
    """`agentpay serve` with [[route]] tables from a --config file instead of --upstream/--price."""

    def __init__(self, workdir, upstream_url, routes_config, extra_args=()):
        self.routes_config = routes_config
        super().__init__(workdir, upstream_url, extra_args=extra_args)

    def _argv(self):
        return [harness.binary(), "serve", "--listen", "127.0.0.1:%d" % self.port,
                "--db", "sqlite:" + self.db_path, "--admin-token-file", self.token_file,
                "--admin-listen", "127.0.0.1:%d" % self.admin_port,
                "--config", self.routes_config] + self.extra_args


class RouteNormalisationTest(LimitsTestCase):
    """Routes: /cheap (price 1), /expensive (price 1000), /based (price 10, upstream at /base); the seller
    echoes the path it got."""

    gateway_args = ("--rate-limit", "off")

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="agentpay-sec-")
        harness._workdirs.add(self.workdir)
        if not os.environ.get("AGENTPAY_IT_KEEP"):
            self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        self.addCleanup(harness._workdirs.discard, self.workdir)
        url = self.start_upstream()
        config = os.path.join(self.workdir, "routes.toml")
        with open(config, "w") as f:
            for prefix, price, upstream in (("/cheap", SELLER_PRICE_CHEAP, url),
                                            ("/expensive", SELLER_PRICE_EXPENSIVE, url),
                                            ("/based", 10, url + "/base")):
                f.write('[[route]]\nprefix = "%s"\nupstream = "%s"\nprice = "%d"\n\n' % (prefix, upstream, price))
        self.gw = _RoutedGateway(self.workdir, url, config, extra_args=self.gateway_args)
        self.addCleanup(self.gw.stop)
        self.gw.start()

    def raw_paid(self, target, acct, key, body=b"{}"):
        data = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (target, acct.api_key, key, len(body))).encode() + body
        raw, _ = raw_from("127.0.0.1", self.gw.port, data, timeout=15)
        status, headers, payload = head_and_body(raw)
        return status, headers, payload

    def test_paths_match_and_forward_normalised(self):
        acct = self.gw.create_account("paths", deposit=10 ** 6)
        captured = 0
        executed = 0
        cases = [
            # (target, expected status, price charged, path the seller must see)
            ("/cheap/x", 200, SELLER_PRICE_CHEAP, "/cheap/x"),
            ("/cheap/../expensive", 200, SELLER_PRICE_EXPENSIVE, "/expensive"),
            ("/cheap/%2e%2e/expensive", 200, SELLER_PRICE_EXPENSIVE, "/expensive"),
            ("/cheap/.%2E/expensive/y", 200, SELLER_PRICE_EXPENSIVE, "/expensive/y"),
            ("//expensive", 200, SELLER_PRICE_EXPENSIVE, "/expensive"),
            ("/cheap//../expensive", 200, SELLER_PRICE_EXPENSIVE, "/expensive"),
            ("/%63heap/./x", 200, SELLER_PRICE_CHEAP, "/cheap/x"),
            ("/expensive/../cheap", 200, SELLER_PRICE_CHEAP, "/cheap"),
            ("/based/a/../b", 200, 10, "/base/based/b"),
            ("/based/../../../etc/passwd", 404, 0, None),
            ("/based/%2e%2e/%2e%2e/secret", 404, 0, None),
        ]
        for i, (target, status, price, seen) in enumerate(cases):
            got, headers, payload = self.raw_paid(target, acct, "norm-%d" % i)
            self.assertEqual(got, status, "%s: %r" % (target, payload[:300]))
            if status == 200:
                self.assertEqual(json.loads(payload)["path"], seen, target)
                self.assertTrue(json.loads(payload)["path"].startswith("/base/") or not target.startswith("/based"))
                captured += price
                executed += 1
            else:
                self.assertEqual(json.loads(payload)["code"], "not_found", target)
            self.assertAccount(acct, captured=captured, held=0)
        self.assertExecuted(executed)

    def test_tricks_are_refused_with_invalid_target(self):
        acct = self.gw.create_account("tricks", deposit=10 ** 6)
        before = self.gw.full_state()
        for i, target in enumerate([
                "/cheap/..%2Fexpensive", "/cheap%2F..%2Fexpensive", "/cheap/..%5Cexpensive",
                "/cheap/..;/expensive", "/cheap/%2e%2e;x/expensive", "/cheap/a%00",
                "/cheap/%zz", "http://127.0.0.1/cheap", "http://evil.example/expensive"]):
            status, _, payload = self.raw_paid(target, acct, "trick-%d" % i)
            self.assertEqual(status, 400, "%s: %r" % (target, payload[:300]))
            self.assertEqual(json.loads(payload)["code"], "invalid_target", target)
        # Unpaid, with a body not yet read: the same answer from the head alone.
        raw, _ = raw_from("127.0.0.1", self.gw.port,
                          b"POST http://127.0.0.1/cheap HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        status, _, payload = head_and_body(raw)
        self.assertEqual((status, json.loads(payload)["code"]), (400, "invalid_target"))
        self.assertEqual(self.gw.full_state(), before)
        self.assertExecuted(0)

    def test_fingerprint_uses_the_normalised_path(self):
        acct = self.gw.create_account("fingerprint", deposit=10 ** 6)
        status, headers, first = self.raw_paid("/expensive/r", acct, "same-key")
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("idempotent-replayed"), "false")
        # The same request spelt another way is the same request: a replay, not a mismatch.
        status, headers, again = self.raw_paid("/cheap/../expensive/./r", acct, "same-key")
        self.assertEqual(status, 200, again)
        self.assertEqual(headers.get("idempotent-replayed"), "true")
        self.assertEqual(again, first)
        self.assertAccount(acct, captured=SELLER_PRICE_EXPENSIVE, held=0)
        self.assertExecuted(1)


class RouteAmbiguityTest(LimitsTestCase):
    """Issue 36 item 2. Routes: / (price 1) and /expensive (price 500000), one real seller that echoes the
    path it got. A path that the gateway reads under / but a common upstream could read under /expensive
    (Tomcat's ';' parameters, IIS's letter case, Windows' trailing dots, double decoding, NFKC) is refused
    before anything is stored, charged or forwarded."""

    gateway_args = ("--rate-limit", "off")
    PRICE_DEAR = 500000

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="agentpay-sec-")
        harness._workdirs.add(self.workdir)
        if not os.environ.get("AGENTPAY_IT_KEEP"):
            self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        self.addCleanup(harness._workdirs.discard, self.workdir)
        url = self.start_upstream()
        config = os.path.join(self.workdir, "routes.toml")
        with open(config, "w") as f:
            for prefix, price in (("/", 1), ("/expensive", self.PRICE_DEAR)):
                f.write('[[route]]\nprefix = "%s"\nupstream = "%s"\nprice = "%d"\n\n' % (prefix, url, price))
        self.gw = _RoutedGateway(self.workdir, url, config, extra_args=self.gateway_args)
        self.addCleanup(self.gw.stop)
        self.gw.start()

    def raw(self, target, acct=None, key=None, body=b"{}"):
        """One POST with `target` sent byte for byte, paid with the account's key if `acct` is given."""
        paid = ("Authorization: Bearer %s\r\nIdempotency-Key: %s\r\n" % (acct.api_key, key)) if acct else ""
        data = (b"POST " + target + b" HTTP/1.1\r\nHost: x\r\n" + paid.encode() +
                b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                + body)
        raw, _ = raw_from("127.0.0.1", self.gw.port, data, timeout=15)
        return head_and_body(raw)

    def test_paths_an_upstream_reads_as_another_route_are_refused(self):
        acct = self.gw.create_account("ambiguity", deposit=10 ** 6)
        before = self.gw.full_state()
        ambiguous = [
            # as the issue reported them
            b"/expensive;jsessionid=1/report", b"/Expensive/report", b"/EXPENSIVE/report", b"/expensive%3b/report",
            # and found since
            b"/expensive;jsessionid=1", b"/Expensive", b"/expensive%3Bx=1/report", b"/expensive%253B/report",
            b"/expensive./report", b"/expensive%20/report", b"/expensive::$DATA/report", b"/%2545xpensive/report",
            b"/%EF%BD%85xpensive/report", b"/expen%C5%BFive/report", b"/EXPENS~1/report", b"/;x/expensive/report",
            b"/%20/expensive/report", b"/Expensive?q=1", b"/expensive.json", b"/Expensive.JSON?q=1",
            b"/\xef\xbd\x85xpensive/report",  # the fullwidth e as raw UTF-8 bytes, not escaped
        ]
        for i, target in enumerate(ambiguous):
            for paid in (True, False):  # the pipeline, and the early 402 that answers from the head alone
                status, _, payload = self.raw(target, acct if paid else None, "amb-%d" % i)
                self.assertEqual(status, 400, "%r: %r" % (target, payload[:300]))
                doc = json.loads(payload)
                self.assertEqual(doc["code"], "ambiguous_target", target)
                self.assertIn("/expensive", doc["detail"], target)
                self.assertNotIn("operation_id", doc, target)
        # Segments some server reads as '..' or as a delimiter: refused whatever the routes.
        for i, target in enumerate([b"/x/..%3B/expensive", b"/x/..%3b/expensive", b"/x/..%20/expensive",
                                    b"/x/%252E%252E/expensive", b"/x%252F..%252Fexpensive",
                                    b"/x/%EF%BC%8E%EF%BC%8E/expensive", b"/x%EF%BC%8Fexpensive",
                                    b"/x%C0%AF..%C0%AFexpensive"]):
            status, _, payload = self.raw(target, acct, "inv-%d" % i)
            self.assertEqual(status, 400, "%r: %r" % (target, payload[:300]))
            self.assertEqual(json.loads(payload)["code"], "invalid_target", target)
        # Nothing stored, nothing charged, nothing forwarded: the books are as they were.
        self.assertEqual(self.gw.full_state(), before)
        self.assertAccount(acct, deposited=10 ** 6, captured=0, held=0)
        self.assertExecuted(0)

    def test_paths_that_read_as_one_route_are_served(self):
        acct = self.gw.create_account("one-route", deposit=2 * 10 ** 6)
        cases = [
            # (target, price charged, path the seller must see: forwarded as sent)
            (b"/cheap;x=1/y", 1, "/cheap;x=1/y"),
            (b"/expensive/report;v=2", self.PRICE_DEAR, "/expensive/report;v=2"),
            (b"/expensive/Report", self.PRICE_DEAR, "/expensive/Report"),
            (b"/x/expensive", 1, "/x/expensive"),
            (b"/%E6%97%A5%E6%9C%AC/report", 1, "/%E6%97%A5%E6%9C%AC/report"),
            (b"/report.json", 1, "/report.json"),
            (b"/expensive/report.json", self.PRICE_DEAR, "/expensive/report.json"),
        ]
        captured = 0
        for i, (target, price, seen) in enumerate(cases):
            status, _, payload = self.raw(target, acct, "one-%d" % i)
            self.assertEqual(status, 200, "%r: %r" % (target, payload[:300]))
            self.assertEqual(json.loads(payload)["path"], seen, target)
            captured += price
            self.assertAccount(acct, captured=captured, held=0)
        self.assertExecuted(len(cases))
        # The dear route's own spelling is sold at its price; its variants are not sold at all.
        self.assertEqual(captured, 4 + 3 * self.PRICE_DEAR)


if __name__ == "__main__":
    harness.main(sys.argv)
