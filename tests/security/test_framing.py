"""Issue 36 item 3: HTTP framing that a proxy in front and the gateway could read differently.

The upstream here is a real HTTP server (Python's http.server, threaded) that records every request
it gets: method, path and headers. Before the fix:
- a request with `Transfer-Encoding: gzip` (or `xchunked`) and a body was read as bodyless, and the
  body bytes were parsed as a second request on the same connection: a smuggled request, paid and
  forwarded (the upstream saw `/work/smuggled`);
- fields of a chunked body's trailer were merged into the request's headers: an `Idempotency-Key`
  sent as a trailer became the key (the second request was a free replay), and `X-Trailer-Injected`
  reached the upstream.
Now the first gets 400 and the connection closes (RFC 9112 §6.3), and trailers are dropped.

Run:  python3 tests/security/test_framing.py --agentpay build/agentpay
"""

import http.server
import json
import os
import socket
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402


class RecordingUpstream:
    """A real HTTP/1.1 server on loopback that answers 200 JSON and records each request it got."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder.lock:
                    recorder.requests.append(
                        {"method": self.command, "path": self.path,
                         "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                payload = json.dumps({"ok": True, "path": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def seen(self):
        with self.lock:
            return list(self.requests)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def exchange(port, data, timeout=10):
    """Sends raw bytes on one connection and reads until the gateway closes it (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    received = b""
    try:
        s.sendall(data)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    finally:
        s.close()
    return received


def statuses(raw):
    """The status codes of the HTTP answers in `raw`, in order."""
    return [int(line.split(b" ")[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


class FramingTest(harness.GatewayTestCase):
    gateway_args = ("--rate-limit", "off")

    def start_upstream(self):
        self.upstream = RecordingUpstream()
        self.addCleanup(self.upstream.stop)
        return self.upstream.url

    def assertExecuted(self, n, msg=None):
        self.assertEqual(len(self.upstream.seen()), n, msg or "upstream requests")

    def head(self, acct, extra):
        return ("POST /work HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\n%s\r\n" % (acct.api_key, extra)).encode()

    def test_a_transfer_coding_other_than_chunked_is_400_and_nothing_is_smuggled(self):
        acct = self.gw.create_account("smuggler", deposit=10 ** 6)
        smuggled = ("GET /work/smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                    "Idempotency-Key: smuggled\r\n\r\n" % acct.api_key).encode()
        before = self.gw.full_state()
        for coding in ("gzip", "xchunked", "gzip, chunked", "chunked, gzip", "identity"):
            with self.subTest(coding):
                raw = exchange(self.gw.port, self.head(
                    acct, "Idempotency-Key: te-%s\r\nTransfer-Encoding: %s\r\n" % (coding, coding)) + smuggled)
                self.assertEqual(statuses(raw), [400], raw)
                head, _, body = raw.partition(b"\r\n\r\n")
                self.assertIn(b"Connection: close", head)
                self.assertEqual(json.loads(body)["code"], "bad_request")
        self.assertExecuted(0, "a request reached the upstream")
        self.assertEqual(self.gw.full_state(), before, "a refused request moved money or wrote state")

    def test_trailer_fields_are_dropped(self):
        acct = self.gw.create_account("trailers", deposit=10 ** 6)
        chunked = (b"Transfer-Encoding: chunked\r\n")
        body = b"2\r\n{}\r\n0\r\nIdempotency-Key: from-a-trailer\r\nX-Trailer-Injected: 1\r\n\r\n"
        for i in range(2):
            raw = exchange(self.gw.port, self.head(acct, "Connection: close\r\n" + chunked.decode()) + body)
            self.assertEqual(statuses(raw), [200], raw)
            self.assertIn(b"Idempotent-Replayed: false", raw, "the trailer's key made request %d a replay" % i)
        seen = self.upstream.seen()
        self.assertEqual(len(seen), 2, "two requests without a key are two business actions")
        for request in seen:
            self.assertNotIn("x-trailer-injected", request["headers"])
            # The gateway's own key (derived from the operation) is forwarded, never the trailer's.
            self.assertNotEqual(request["headers"].get("idempotency-key"), "from-a-trailer")
        self.assertAccount(acct, captured=2 * harness.PRICE, held=0)


if __name__ == "__main__":
    harness.main(sys.argv)
