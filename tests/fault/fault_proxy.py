#!/usr/bin/env python3
"""A small HTTP fault proxy (stdlib only) for AgentPay's fault tests: put it between a client and the
gateway (or between the gateway and the seller) and choose, per request or globally, what happens to each
exchange. This kernel has no netem qdisc, so delay and mid-stream cuts are done here.

Usage, as a program:

    python3 tests/fault/fault_proxy.py --upstream 127.0.0.1:8402 [--listen 127.0.0.1:0]
                                       [--control 127.0.0.1:0] [--mode pass] [--seed N]
    -> prints "fault proxy listening on 127.0.0.1:P (upstream 127.0.0.1:8402), control on 127.0.0.1:C"

    # every request from now on: forward it, read the whole answer, close the client without it
    curl -X POST 127.0.0.1:C/mode -d '{"mode": "drop_response"}'
    # only the next 2 requests, then back to the global mode
    curl -X POST 127.0.0.1:C/mode -d '{"mode": "drop_response", "count": 2}'
    # a random mix (weights in percent-like units; seeded with --seed or "seed")
    curl -X POST 127.0.0.1:C/mode -d '{"mode": "random", "weights": {"pass": 80, "delay:300": 10, "cut_midstream": 10}}'
    curl 127.0.0.1:C/stats        # {"requests": .., "forwarded": .., "responses_dropped": .., ...}
    # only paid requests (PAYMENT-SIGNATURE, X-PAYMENT or Authorization): the next one loses its answer;
    # unpaid requests (e.g. the first, which gets the 402 challenge) pass
    curl -X POST 127.0.0.1:C/mode -d '{"mode": "drop_response", "count": 1, "paid_only": true}'
    curl 127.0.0.1:C/log          # the last 1000 exchanges: [{"method", "path", "mode", "status", "paid",
                                  #   "idempotency_key", "payment_sha256"}]
    curl -X POST 127.0.0.1:C/reset  # mode pass, queue and counters cleared

Usage, in-process (what tests/fault/fault_suite.py does):

    from fault_proxy import FaultProxy
    proxy = FaultProxy(("127.0.0.1", gateway_port)).start()   # proxy.port, proxy.control_port
    proxy.set_mode("drop_response", count=1)    # "the response is lost after the gateway charged"
    ...                                          # the client talks to 127.0.0.1:proxy.port
    proxy.stats()["responses_dropped"] == 1
    proxy.stop()

With paid_only, a mode (global or one-shot) applies only to paid requests, those carrying a
PAYMENT-SIGNATURE, X-PAYMENT or Authorization header; other requests pass (and do not use up a one-shot).
Each /log entry records the request's Idempotency-Key (None if absent) and the SHA-256 (hex) of its
PAYMENT-SIGNATURE value, else of its X-PAYMENT value (None if neither), so a test can check that every
attempt re-presented the same signed payment.

A single request may also choose its own fault with the request header `X-Fault-Proxy-Mode: MODE`
(removed before forwarding); it wins over the one-shot queue, which wins over the global mode.

Modes:
    pass             forward the request, return the answer
    drop_response    forward the request, read the full answer, close the client connection without it
    cut_midstream    forward, then send the first half of the answer's bytes and close
    delay:MS         wait MS milliseconds, then forward (latency on the way in)
    delay_response:MS  forward, read the answer, wait MS, then return it (latency on the way out)
    drop_request     close the client connection without forwarding anything
    reset            close the client connection with a TCP RST (SO_LINGER 0), without forwarding

Each request goes upstream on a connection of its own with `Connection: close`, and every answer closes the
client connection (clients reconnect per request). Requests: at most 64 KiB of headers; a body framed by
Content-Length or chunked encoding (passed through as is). Counters: requests (received), forwarded
(sent upstream), passed, responses_dropped, responses_cut, delayed, requests_dropped, resets,
upstream_errors (the upstream refused, reset or hung past --upstream-timeout), client_errors.
"""

import argparse
import hashlib
import http.server
import json
import random
import socket
import socketserver
import struct
import sys
import threading
import time

MAX_HEADER_BYTES = 64 * 1024
MODE_HEADER = b"x-fault-proxy-mode"
COUNTERS = ("requests", "forwarded", "passed", "responses_dropped", "responses_cut", "delayed",
            "requests_dropped", "resets", "upstream_errors", "client_errors")
SIMPLE_MODES = ("pass", "drop_response", "cut_midstream", "drop_request", "reset")
PAID_HEADERS = (b"payment-signature", b"x-payment", b"authorization")


def valid_mode(mode):
    if mode in SIMPLE_MODES:
        return True
    for prefix in ("delay:", "delay_response:"):
        if mode.startswith(prefix):
            value = mode[len(prefix):]
            return value.isdigit() and int(value) <= 600000
    return False


class _ClientGone(Exception):
    pass


def _recv_request(conn):
    """One HTTP request (head + body) as raw bytes, or None when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            if data:
                raise _ClientGone("client closed mid-header")
            return None
        data += chunk
        if len(data) > MAX_HEADER_BYTES and b"\r\n\r\n" not in data[:MAX_HEADER_BYTES + 4]:
            raise _ClientGone("header block too large")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name.strip(), value.strip()))
    length, chunked = 0, False
    for name, value in headers:
        if name.lower() == b"content-length":
            length = int(value)
        if name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    body = rest
    if chunked:
        while not body.endswith(b"0\r\n\r\n"):  # simple terminator scan, enough for test clients
            chunk = conn.recv(65536)
            if not chunk:
                raise _ClientGone("client closed mid-body")
            body += chunk
    else:
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                raise _ClientGone("client closed mid-body")
            body += chunk
    return lines[0], headers, body


def _build_request(request_line, headers, body):
    out = [request_line]
    for name, value in headers:
        if name.lower() in (MODE_HEADER, b"connection", b"keep-alive", b"proxy-connection"):
            continue
        out.append(name + b": " + value)
    out.append(b"Connection: close")
    return b"\r\n".join(out) + b"\r\n\r\n" + body


def _status_of(response):
    try:
        return int(response.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


class FaultProxy:
    """The proxy: one listening socket, a thread per client connection, a control HTTP server."""

    def __init__(self, upstream, listen=("127.0.0.1", 0), control=("127.0.0.1", 0), mode="pass", seed=None,
                 upstream_timeout_s=60.0):
        if not valid_mode(mode):
            raise ValueError("unknown mode %r" % mode)
        self.upstream = upstream
        self.upstream_timeout_s = upstream_timeout_s
        self._lock = threading.Lock()
        self._mode = mode
        self._paid_only = False  # the global mode applies to paid requests only
        self._queue = []  # one-shot modes, taken first: [(mode, paid_only)]
        self._weights = None  # random mode: [(mode, weight)]
        self._random = random.Random(seed)
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._by_mode = {}
        self._log = []
        self._listen_addr = listen
        self._control_addr = control
        self._sock = None
        self._control = None
        self._threads = []
        self._stopping = threading.Event()
        self._clients = set()

    # -- control

    def set_mode(self, mode, count=None, weights=None, seed=None, paid_only=False):
        """Global mode, or `count` one-shot modes queued before it; mode "random" draws each request's mode
        from `weights` ({mode: weight}). paid_only: the mode applies to paid requests only (see PAID_HEADERS);
        the others pass."""
        if mode == "random":
            if not weights or not all(valid_mode(m) and w >= 0 for m, w in weights.items()):
                raise ValueError("random mode needs weights {mode: weight} of known modes")
        elif not valid_mode(mode):
            raise ValueError("unknown mode %r" % mode)
        with self._lock:
            if seed is not None:
                self._random.seed(seed)
            if count is not None:
                if mode == "random":
                    raise ValueError("random mode is global only")
                self._queue.extend([(mode, bool(paid_only))] * int(count))
                return
            self._mode = mode
            self._paid_only = bool(paid_only)
            self._weights = sorted(weights.items()) if mode == "random" else None

    def stats(self):
        with self._lock:
            out = dict(self._counters)
            out["by_mode"] = dict(self._by_mode)
            out["mode"] = self._mode
            out["queued"] = len(self._queue)
            return out

    def log(self):
        with self._lock:
            return list(self._log)

    def reset(self):
        with self._lock:
            self._mode, self._queue, self._weights, self._paid_only = "pass", [], None, False
            self._counters = dict.fromkeys(COUNTERS, 0)
            self._by_mode, self._log = {}, []

    def _count(self, name, n=1):
        with self._lock:
            self._counters[name] += n

    def _choose(self, override, paid=False):
        with self._lock:
            queued = next((i for i, (_, only) in enumerate(self._queue) if paid or not only), None)
            if override is not None and valid_mode(override):
                mode = override
            elif queued is not None:
                mode = self._queue.pop(queued)[0]
            elif self._paid_only and not paid:
                mode = "pass"
            elif self._mode == "random":
                total = sum(w for _, w in self._weights)
                pick = self._random.uniform(0, total)
                mode = self._weights[-1][0]
                for candidate, weight in self._weights:
                    if pick < weight:
                        mode = candidate
                        break
                    pick -= weight
            else:
                mode = self._mode
            self._by_mode[mode] = self._by_mode.get(mode, 0) + 1
            return mode

    # -- lifecycle

    def start(self):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(self._listen_addr)
        self._sock.listen(512)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._control = _ControlServer(self._control_addr, self)
        self.control_port = self._control.server_address[1]
        for target in (self._accept_loop, self._control.serve_forever):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self):
        self._stopping.set()
        self._control.shutdown()
        self._control.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._sock.close()
        with self._lock:
            clients = list(self._clients)
        for conn in clients:
            try:
                conn.close()
            except OSError:
                pass

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    # -- one client connection: one request, one (faulty) answer

    def _serve(self, conn):
        try:
            conn.settimeout(self.upstream_timeout_s)
            try:
                request = _recv_request(conn)
            except (_ClientGone, OSError, ValueError):
                self._count("client_errors")
                return
            if request is None:
                return
            self._count("requests")
            request_line, headers, body = request
            lower = {}
            for name, value in headers:
                lower.setdefault(name.lower(), value)
            override = lower[MODE_HEADER].decode("latin-1") if MODE_HEADER in lower else None
            paid = any(h in lower for h in PAID_HEADERS)
            mode = self._choose(override, paid)
            parts = request_line.split(b" ")
            signed = lower.get(b"payment-signature", lower.get(b"x-payment"))
            key = lower.get(b"idempotency-key")
            entry = {"method": parts[0].decode("latin-1"),
                     "path": parts[1].decode("latin-1") if len(parts) > 1 else "",
                     "mode": mode, "status": None, "paid": paid,
                     "idempotency_key": key.decode("latin-1") if key is not None else None,
                     "payment_sha256": hashlib.sha256(signed).hexdigest() if signed is not None else None}

            def record(status):  # before the client sees anything: a client that got its answer finds it
                entry["status"] = status
                with self._lock:
                    self._log.append(entry)
                    del self._log[:-1000]
            self._exchange(conn, mode, request_line, headers, body, record)
        finally:
            with self._lock:
                self._clients.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _exchange(self, conn, mode, request_line, headers, body, record):
        """Applies `mode`; calls record(upstream status, None if not forwarded or no answer) before the
        client gets anything back."""
        if mode == "drop_request":
            self._count("requests_dropped")
            return record(None)
        if mode == "reset":
            self._count("resets")
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return record(None)
        if mode.startswith("delay:"):
            self._count("delayed")
            time.sleep(int(mode.split(":", 1)[1]) / 1000.0)
        response = self._forward(_build_request(request_line, headers, body))
        if response is None:
            return record(None)
        status = _status_of(response)
        record(status)
        try:
            if mode == "drop_response":
                self._count("responses_dropped")
            elif mode == "cut_midstream":
                self._count("responses_cut")
                conn.sendall(response[: max(1, len(response) // 2)])
            else:
                if mode.startswith("delay_response:"):
                    self._count("delayed")
                    time.sleep(int(mode.split(":", 1)[1]) / 1000.0)
                conn.sendall(response)
                self._count("passed")
        except OSError:
            self._count("client_errors")

    def _forward(self, raw):
        try:
            with socket.create_connection(self.upstream, timeout=self.upstream_timeout_s) as up:
                up.sendall(raw)
                self._count("forwarded")
                chunks = []
                while True:
                    chunk = up.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
        except OSError:
            self._count("upstream_errors")
            return None
        response = b"".join(chunks)
        if not response:
            self._count("upstream_errors")
            return None
        return response


class _ControlServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, address, proxy):
        self.proxy = proxy
        super().__init__(address, _ControlHandler)


class _ControlHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        proxy = self.server.proxy
        if self.path == "/stats":
            return self._answer(200, proxy.stats())
        if self.path == "/log":
            return self._answer(200, proxy.log())
        return self._answer(404, {"error": "GET /stats or /log"})

    def do_POST(self):
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/reset":
            proxy.reset()
            return self._answer(200, proxy.stats())
        if self.path != "/mode":
            return self._answer(404, {"error": "POST /mode or /reset"})
        try:
            doc = json.loads(raw or b"{}")
            proxy.set_mode(doc["mode"], count=doc.get("count"), weights=doc.get("weights"), seed=doc.get("seed"),
                           paid_only=bool(doc.get("paid_only")))
        except (ValueError, KeyError, TypeError) as error:
            return self._answer(400, {"error": str(error)})
        return self._answer(200, proxy.stats())


def _address(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv):
    parser = argparse.ArgumentParser(description="HTTP fault proxy (see the module docstring)")
    parser.add_argument("--upstream", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--control", default="127.0.0.1:0")
    parser.add_argument("--mode", default="pass")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--upstream-timeout-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    proxy = FaultProxy(_address(args.upstream), _address(args.listen), _address(args.control), args.mode,
                       args.seed, args.upstream_timeout_s).start()
    print("fault proxy listening on 127.0.0.1:%d (upstream %s), control on 127.0.0.1:%d" % (
        proxy.port, args.upstream, proxy.control_port), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    proxy.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
