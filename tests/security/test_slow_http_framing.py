#!/usr/bin/env python3
"""Framing that arrives a byte at a time, and interim answers, against the real gateway (issue 13).

Found by the libFuzzer targets fuzz/http_request_fuzzer.cc and fuzz/http_response_fuzzer.cc:
- Beast 1.74 asserted `n >= 5` in its chunk parser when the last chunk of a chunked body came one
  byte at a time; with assertions on, five bytes from any client ("0\\r\\n\\r\\n", one per packet)
  aborted every agentpay listener (gateway, seller). The same from an upstream aborted the gateway.
- a request head arriving in pieces could pass max_header_bytes (Beast 1.74 checks its limit per
  parse step; the fuzz input is pinned by fuzz/seeds/http_request/regression-header-limit-by-line-
  pieces). The listener now counts the head as a whole; HeadInLinePiecesTest checks that bound over
  TCP with one header line per packet.
- an upstream's 103 Early Hints was taken as its answer: the payment was captured for a bodiless
  103 and the real answer stayed on the pooled connection for the next caller.
Each test drives a real `agentpay serve` (and `agentpay seller` or a scripted upstream) over TCP and
checks the gateway stays up, answers, and charges exactly once (harness invariants after each test).

Run:  python3 tests/security/test_slow_http_framing.py --agentpay build/agentpay
"""

import os
import select
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import harness  # noqa: E402
from harness import PRICE, GatewayTestCase, parse_status  # noqa: E402

DEPOSIT = 10 * PRICE


def send_slowly(port, head, body_bytes, pause_s=0.03):
    """Sends head at once, then body_bytes one per packet; returns the raw answer."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        conn.sendall(head)
        for byte in body_bytes:
            conn.sendall(bytes([byte]))
            time.sleep(pause_s)
        answer = b""
        while b"\r\n\r\n" not in answer:
            got = conn.recv(4096)
            if not got:
                break
            answer += got
        return answer
    finally:
        conn.close()


class SlowChunkedRequestTest(GatewayTestCase):
    def test_unpaid_chunked_request_one_byte_at_a_time_gets_402(self):
        head = (b"POST /work HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        before = self.gw.full_state()
        answer = send_slowly(self.gw.port, head, b"0\r\n\r\n")
        self.assertEqual(parse_status(answer), 402, answer[:200])
        self.assertTrue(self.gw.alive(), "the gateway died:\n" + self.gw.output()[-2000:])
        self.assertEqual(self.gw.healthz().status, 200)
        self.assertEqual(self.gw.full_state(), before)

    def test_paid_chunked_request_one_byte_at_a_time_is_served_and_charged_once(self):
        acct = self.gw.create_account("slow", deposit=DEPOSIT)
        head = (b"POST /work HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + acct.api_key.encode() + b"\r\n"
                b"Idempotency-Key: slow-1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        answer = send_slowly(self.gw.port, head, b"2\r\n{}\r\n0\r\n\r\n")
        self.assertEqual(parse_status(answer), 200, answer[:300])
        self.assertTrue(self.gw.alive(), "the gateway died:\n" + self.gw.output()[-2000:])
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE)


class HeadInLinePiecesTest(GatewayTestCase):
    def test_a_head_sent_a_line_per_packet_is_bounded_as_a_whole(self):
        """20 KB of header lines, one per packet: 431 once the head passes the 16 KiB limit, and the
        gateway reads no further."""
        before = self.gw.full_state()
        conn = socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = 0
        answer = b""
        try:
            conn.sendall(b"GET /work HTTP/1.1\r\nHost: a\r\n")
            for i in range(200):
                if select.select([conn], [], [], 0)[0]:
                    break  # the gateway answered: stop sending, read it
                line = b"X-Pad-%03d: " % i + b"p" * 88 + b"\r\n"
                conn.sendall(line)
                sent += len(line)
                time.sleep(0.005)
            else:
                conn.sendall(b"\r\n")
            while b"\r\n\r\n" not in answer:
                got = conn.recv(4096)
                if not got:
                    break
                answer += got
        except OSError:
            pass  # a reset after the answer: what was read is what counts
        finally:
            conn.close()
        self.assertEqual(parse_status(answer), 431, answer[:200])
        self.assertLess(sent, 20 * 1024, "the gateway read the whole head before refusing it")
        self.assertTrue(self.gw.alive(), "the gateway died:\n" + self.gw.output()[-2000:])
        self.assertEqual(self.gw.healthz().status, 200)
        self.assertEqual(self.gw.full_state(), before)


class ScriptedUpstream:
    """A loopback upstream answering each request with `reply(n)` (n counts requests), written one
    byte per packet when slow is set."""

    def __init__(self, reply, slow=False):
        self.reply, self.slow, self.requests = reply, slow, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        try:
            while True:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
                while b"\r\n\r\n" in data:
                    head, data = data.split(b"\r\n\r\n", 1)
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value.strip())
                    while len(data) < length:
                        data += conn.recv(65536)
                    data = data[length:]
                    self.requests += 1
                    out = self.reply(self.requests)
                    if self.slow:
                        for byte in out:
                            conn.sendall(bytes([byte]))
                            time.sleep(0.01)
                    else:
                        conn.sendall(out)
        except OSError:
            return
        finally:
            conn.close()

    def stop(self):
        self.stopped = True
        self.sock.close()


class UpstreamFramingTest(GatewayTestCase):
    reply = None
    slow = False

    def start_upstream(self):
        self.upstream = ScriptedUpstream(type(self).reply, slow=type(self).slow)
        self.addCleanup(self.upstream.stop)
        return "http://127.0.0.1:%d" % self.upstream.port


class SlowChunkedUpstreamTest(UpstreamFramingTest):
    reply = staticmethod(lambda n: b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    slow = True

    def test_answer_arriving_one_byte_at_a_time_is_relayed_and_charged_once(self):
        acct = self.gw.create_account("slow-upstream", deposit=DEPOSIT)
        r = self.gw.pay(acct, "slow-up-1", timeout=30)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"ok")
        self.assertTrue(self.gw.alive(), "the gateway died:\n" + self.gw.output()[-2000:])
        self.assertAccount(acct, captured=PRICE, held=0)


class EarlyHintsUpstreamTest(UpstreamFramingTest):
    # Every answer is preceded by a 103; the body names the request it answers.
    reply = staticmethod(lambda n: b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                         % len(b"answer-%d" % n) + b"answer-%d" % n)

    def test_each_payer_gets_its_own_final_answer(self):
        first = self.gw.create_account("first", deposit=DEPOSIT)
        second = self.gw.create_account("second", deposit=DEPOSIT)
        r1 = self.gw.pay(first, "hints-1")
        self.assertEqual((r1.status, r1.body), (200, b"answer-1"), r1)
        r2 = self.gw.pay(second, "hints-2")
        self.assertEqual((r2.status, r2.body), (200, b"answer-2"), r2)
        self.assertAccount(first, captured=PRICE, held=0)
        self.assertAccount(second, captured=PRICE, held=0)


if __name__ == "__main__":
    harness.main(sys.argv)
