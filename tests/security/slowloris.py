"""Slow clients for the security test and the benchmark: N connections from one loopback address that
trickle a request header (one header line every `interval_s`) and never finish it, or stay idle.

A connection the server closes (header deadline, per-client connection limit) is reopened after
`reopen_delay_s`, so the pressure stays at N for as long as the driver runs; reconnects are spread out
(at most `max_connects_per_s`), so the driver measures slow clients, not a connection flood. Stdlib only,
one thread, epoll.
"""

import collections
import errno
import select
import socket
import threading
import time


class SlowClients:
    def __init__(self, port, count, source="127.0.0.2", mode="trickle", interval_s=1.0,
                 reopen_delay_s=1.0, max_connects_per_s=500, host="127.0.0.1"):
        assert mode in ("trickle", "idle")
        self.port, self.count, self.source, self.mode, self.host = port, count, source, mode, host
        self.interval_s, self.reopen_delay_s = interval_s, reopen_delay_s
        self.max_connects_per_s = max_connects_per_s
        self.stats = {"connects": 0, "connect_errors": 0, "closed_by_server": 0, "answered_503": 0,
                      "lines_sent": 0}
        self._open = {}  # fd -> [socket, request line still to send]
        self._due = collections.deque()
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def open_now(self):
        with self._lock:
            return len(self._open)

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def wait_open(self, at_least, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open_now() >= at_least:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        with self._lock:
            for entry in self._open.values():
                entry[0].close()
            self._open.clear()

    def _connect(self, poller, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.source, 0))
            s.setblocking(False)
            err = s.connect_ex((self.host, self.port))
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, "connect")
        except OSError:
            s.close()
            self.stats["connect_errors"] += 1
            return False
        self.stats["connects"] += 1
        poller.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
        entry = [s, True]  # True: the request line is still to send
        with self._lock:
            self._open[s.fileno()] = entry
        if self.mode == "trickle":
            self._due.append((now + 0.05, entry))
        return True

    def _close(self, poller, fd):
        with self._lock:
            entry = self._open.pop(fd, None)
        if entry:
            try:
                poller.unregister(fd)
            except OSError:
                pass
            entry[0].close()
            entry[0] = None  # its place in the trickle queue is skipped

    def _run(self):
        poller = select.epoll()
        reopen_at = collections.deque()  # times at which a closed slot may reconnect (ascending)
        self._due = collections.deque()  # (time, entry) of the next trickle, ascending
        budget_started, budget_used = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now - budget_started >= 1.0:
                    budget_started, budget_used = now, 0
                # Fill the free slots: never opened yet, or closed and past their reopen delay.
                never_opened = self.count - self.open_now() - len(reopen_at)
                while budget_used < self.max_connects_per_s and (
                        never_opened > 0 or (reopen_at and reopen_at[0] <= now)):
                    if never_opened > 0:
                        never_opened -= 1
                    else:
                        reopen_at.popleft()
                    budget_used += 1
                    if not self._connect(poller, now):
                        reopen_at.append(now + self.reopen_delay_s)
                # Trickle: one header line per connection per interval, never the blank line.
                while self._due and self._due[0][0] <= now:
                    _, entry = self._due.popleft()
                    s = entry[0]
                    if s is None:
                        continue
                    data = b"GET /slow HTTP/1.1\r\nHost: x\r\n" if entry[1] else b"X-Slow: a\r\n"
                    try:
                        s.send(data)
                        self.stats["lines_sent"] += 1
                        entry[1] = False
                        self._due.append((now + self.interval_s, entry))
                    except (BlockingIOError, InterruptedError):
                        self._due.append((now + self.interval_s, entry))
                    except OSError:
                        self._close(poller, s.fileno())
                        self.stats["closed_by_server"] += 1
                        reopen_at.append(now + self.reopen_delay_s)
                # Closures by the server (and any answer it sends first).
                for fd, _ in poller.poll(0.02):
                    with self._lock:
                        entry = self._open.get(fd)
                    if entry is None:
                        continue
                    try:
                        data = entry[0].recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if data.startswith(b"HTTP/1.1 503"):
                        self.stats["answered_503"] += 1
                    if data == b"" or data.startswith(b"HTTP/"):
                        self._close(poller, fd)
                        self.stats["closed_by_server"] += 1
                        reopen_at.append(time.monotonic() + self.reopen_delay_s)
        finally:
            poller.close()
