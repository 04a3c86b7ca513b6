"""Black-box harness for the AgentPay wallet gateway integration tests.

Starts real `agentpay seller` and `agentpay serve` processes on loopback, talks to them over HTTP with
http.client (or raw sockets), and checks the money invariants of CONTRACT.md section 4 against both the
HTTP API and the SQLite file (opened read-only).

Stdlib only. Every wait has a timeout; every process started here is killed by its owner (tearDown /
cleanup) and, as a last resort, by an atexit hook, so no orphans are left behind.
"""

import atexit
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fault"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import invariants  # noqa: E402  (tests/fault/invariants.py: the one store invariant checker)
import testports  # noqa: E402  (tests/testports.py: ports no other test process takes)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BINARY = os.path.join(REPO_ROOT, "build", "agentpay")

PRICE = 1000
ADMIN_TOKEN = "it-admin-token-0123456789abcdef"
READY_TIMEOUT_S = 15.0
HTTP_TIMEOUT_S = 20.0

_binary = os.environ.get("AGENTPAY_BIN", DEFAULT_BINARY)


def set_binary(path):
    global _binary
    _binary = os.path.abspath(path)


def take_binary_arg(argv):
    """Takes `--agentpay PATH` (or `--agentpay=PATH`) out of argv, checks the binary and makes it the
    one tests start; returns the remaining arguments (argv[0] first) for unittest.main."""
    binary = DEFAULT_BINARY
    rest = [argv[0]]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--agentpay":
            if i + 1 >= len(argv):
                sys.exit("--agentpay needs a path")
            binary = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--agentpay="):
            binary = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        sys.exit("agentpay binary not found or not executable: %s" % binary)
    set_binary(binary)
    return rest


def binary():
    return _binary


# ----------------------------------------------------------------------------------------------
# processes

_live_processes = set()
_live_lock = threading.Lock()


def _kill_all_live():
    with _live_lock:
        procs = list(_live_processes)
    for proc in procs:
        try:
            proc.kill9()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_kill_all_live)

_workdirs = set()


def emergency_shutdown(signum=None, frame=None):
    """SIGTERM handler (e.g. a ctest timeout): kill every child now, remove temp dirs, exit 128+signum.
    A plain sys.exit() would be swallowed by unittest as a test error and the run would go on."""
    _kill_all_live()
    if not os.environ.get("AGENTPAY_IT_KEEP"):
        for d in list(_workdirs):
            shutil.rmtree(d, ignore_errors=True)
    os._exit(128 + (signum or signal.SIGTERM))


def main(argv, on_sigterm=None, before=None):
    """The main of every test file: takes --agentpay (take_binary_arg), runs `before` (a check that
    fails loudly), makes SIGTERM (a ctest timeout) stop everything the tests started
    (`on_sigterm`, default emergency_shutdown; PR_SET_PDEATHSIG in the children covers SIGKILL, see
    _die_with_parent), then runs the file's tests."""
    rest = take_binary_arg(argv)
    if before is not None:
        before()
    signal.signal(signal.SIGTERM, on_sigterm or emergency_shutdown)
    unittest.main(argv=rest, verbosity=2)


def _die_with_parent():
    """In the child, before exec: ask Linux to SIGKILL it if the test runner dies (e.g. killed by a ctest
    timeout), so a crashed run leaves no orphans. Best effort; a no-op elsewhere."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def write_secret(path, content):
    """Writes a secret file (token, key) the way the gateway wants it: mode 0600 from creation
    (the gateway refuses one that group or others can read)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(content)
    os.chmod(path, 0o600)


def free_port():
    """A port for a server this test starts: free now and reserved against other test processes and
    outgoing connections (tests/testports.py)."""
    return testports.reserve()


def wait_port(port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def wait_for(probe, timeout, what):
    """The first truthy value `probe()` returns within `timeout` seconds; AssertionError naming
    `what` (and the last value seen) when none does."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, value))
        time.sleep(0.05)


def run_audit(admin_url, token_file, *args, timeout=120):
    """`agentpay admin audit --json [args]` against a gateway's admin listener: (exit status, the
    report as JSON, or the output when it printed none)."""
    done = subprocess.run([binary(), "admin", "--url", admin_url, "--token-file", token_file,
                           "audit", "--json", *args], capture_output=True, timeout=timeout)
    out = done.stdout.decode()
    try:
        return done.returncode, json.loads(out)
    except ValueError:
        return done.returncode, out + done.stderr.decode()


class ProcessError(RuntimeError):
    pass


class ManagedProcess:
    """One child process whose combined stdout/stderr is captured line by line (and to a log file)."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.popen = None
        self._lines = []
        self._cond = threading.Condition()
        self._reader = None

    # -- lifecycle

    def start(self, ready_text="listening on", port=None, timeout=READY_TIMEOUT_S):
        """Starts the process and waits for `ready_text` in its output (None: no text, only `port`)."""
        self._lines = []
        log = open(self.log_path, "ab")
        log.write(("$ " + " ".join(self.argv) + "\n").encode())
        log.flush()
        self.popen = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent)
        with _live_lock:
            _live_processes.add(self)
        self._reader = threading.Thread(target=self._read, args=(self.popen, log), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        with self._cond:
            while ready_text is not None and not any(ready_text in line for line in self._lines):
                if self.popen.poll() is not None and not self._reader.is_alive():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            ready = ready_text is None or any(ready_text in line for line in self._lines)
        if not ready:
            output = self.output()
            self.kill9()
            raise ProcessError("%s did not print %r within %.0fs (exit code %s). Output:\n%s" % (
                self.name, ready_text, timeout, self.popen.returncode, output))
        if port is not None and not wait_port(port, timeout=5):
            output = self.output()
            self.kill9()
            raise ProcessError("%s printed %r but port %d does not accept connections. Output:\n%s" % (
                self.name, ready_text, port, output))
        return self

    def _read(self, popen, log):
        try:
            for raw in iter(popen.stdout.readline, b""):
                log.write(raw)
                log.flush()
                with self._cond:
                    self._lines.append(raw.decode("utf-8", "replace"))
                    self._cond.notify_all()
        finally:
            log.close()
            with self._cond:
                self._cond.notify_all()

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def output(self):
        with self._cond:
            return "".join(self._lines)

    def _reap(self, timeout):
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        if self._reader is not None:
            self._reader.join(timeout=5)
        try:
            self.popen.stdout.close()
        except Exception:  # noqa: BLE001
            pass
        with _live_lock:
            _live_processes.discard(self)
        return True

    def kill9(self):
        """SIGKILL by pid and reap."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap(timeout=10)

    def stop(self, grace_s=5.0):
        """SIGTERM, then SIGKILL after grace_s."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if self._reap(timeout=grace_s):
                return
        self.kill9()


class Seller(ManagedProcess):
    def __init__(self, workdir, fault=None):
        self.port = free_port()
        argv = [binary(), "seller", "--listen", "127.0.0.1:%d" % self.port]
        if fault:
            argv += ["--fault", fault]
        super().__init__("seller", argv, os.path.join(workdir, "seller.log"))

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self, **kw):
        return super().start(port=self.port, **kw)

    def executed(self):
        r = http_request(self.port, "GET", "/_seller/stats")
        if r.status != 200:
            raise AssertionError("seller stats answered %d: %r" % (r.status, r.body))
        return int(r.json()["executed"])


class Account:
    def __init__(self, account_id, api_key, name):
        self.id = account_id
        self.api_key = api_key
        self.name = name

    def __repr__(self):
        return "Account(%s)" % self.id


def postgres_server_url():
    """The test PostgreSQL cluster's URL (database "postgres"): AGENTPAY_TEST_POSTGRES_URL, or the URL in
    the file AGENTPAY_TEST_POSTGRES_URL_FILE (ctest starts a cluster with tests/pg/cluster.sh)."""
    url = os.environ.get("AGENTPAY_TEST_POSTGRES_URL")
    if url:
        return url
    path = os.environ.get("AGENTPAY_TEST_POSTGRES_URL_FILE")
    if not path:
        raise RuntimeError("AGENTPAY_IT_DB=postgres needs AGENTPAY_TEST_POSTGRES_URL or "
                           "AGENTPAY_TEST_POSTGRES_URL_FILE (tests/pg/cluster.sh start DIR writes DIR/url)")
    with open(path) as f:
        return f.read().strip()


def fresh_postgres_database():
    """A new empty database on the test cluster; returns its URL."""
    import psycopg2
    base = postgres_server_url()
    name = "it_" + secrets.token_hex(8)
    admin = psycopg2.connect(base, connect_timeout=10)
    try:
        admin.autocommit = True
        admin.cursor().execute("CREATE DATABASE " + name)
    finally:
        admin.close()
    return base[:base.rindex("/") + 1] + name


def fresh_store(workdir, filename="agentpay.db"):
    """The --db of a new gateway: a SQLite file in workdir, or with AGENTPAY_IT_DB=postgres a fresh
    database on the test PostgreSQL cluster. Returns (the --db URL, what open_db takes)."""
    backend = os.environ.get("AGENTPAY_IT_DB", "sqlite")
    if backend == "postgres":
        url = fresh_postgres_database()
        return url, url
    if backend != "sqlite":
        raise RuntimeError("AGENTPAY_IT_DB must be sqlite or postgres, got %r" % backend)
    path = os.path.join(workdir, filename)
    return "sqlite:" + path, path


def on_postgres():
    return os.environ.get("AGENTPAY_IT_DB") == "postgres"


class Gateway(ManagedProcess):
    """`agentpay serve` with one paid route `/` forwarding to the seller, on a SQLite file in workdir (or a
    fresh PostgreSQL database with AGENTPAY_IT_DB=postgres: see fresh_store)."""

    def __init__(self, workdir, upstream_url, price=PRICE, extra_args=(), db=None):
        """db: (the --db URL, what open_db takes) of an existing store to share; default a fresh one."""
        self.workdir = workdir
        self.port = free_port()
        self.admin_port = free_port()  # --admin-listen: the admin API and /metrics live there only
        self.db_url, self.db_path = db or fresh_store(workdir)
        self.token_file = os.path.join(workdir, "admin-token")
        write_secret(self.token_file, ADMIN_TOKEN + "\n")
        self.upstream_url = upstream_url
        self.price = price
        self.extra_args = list(extra_args)
        self.accounts = {}  # account id -> Account (api keys the harness knows)
        super().__init__("gateway", self._argv(), os.path.join(workdir, "gateway.log"))

    def _argv(self):
        # The harness's admin listener, unless the test gives its own --admin-listen.
        admin = [] if "--admin-listen" in self.extra_args else ["--admin-listen", "127.0.0.1:%d" % self.admin_port]
        return [binary(), "serve",
                "--listen", "127.0.0.1:%d" % self.port] + admin + [
                "--db", self.db_url,
                "--upstream", self.upstream_url,
                "--price", str(self.price),
                "--admin-token-file", self.token_file] + self.extra_args

    def start(self, **kw):
        return super().start(port=self.port, **kw)

    def restart_after_crash(self, extra_args=None):
        """Start again on the same DB file and port (the previous process must be dead)."""
        assert not self.alive(), "restart_after_crash: the old gateway is still running"
        if extra_args is not None:
            self.extra_args = list(extra_args)
        self.argv = self._argv()
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start()
            except ProcessError:
                # The same port can be briefly unavailable right after a SIGKILL; retry a few times.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- HTTP helpers

    def request(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S):
        return http_request(self.port, method, path, body=body, headers=headers, timeout=timeout)

    def admin_request(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S):
        """A request to the admin listener (--admin-listen), with exactly the headers given."""
        return http_request(self.admin_port, method, path, body=body, headers=headers, timeout=timeout)

    def admin(self, method, path, body=None, timeout=HTTP_TIMEOUT_S):
        headers = {"Authorization": "Bearer " + ADMIN_TOKEN}
        return self.admin_request(method, path, body=body, headers=headers, timeout=timeout)

    @property
    def admin_url(self):
        return "http://127.0.0.1:%d" % self.admin_port

    def metrics(self):
        """GET /metrics on the admin listener, as text."""
        r = self.admin_request("GET", "/metrics", timeout=5)
        if r.status != 200:
            raise AssertionError("GET /metrics: expected 200, got %r" % r)
        return r.body.decode() if isinstance(r.body, bytes) else r.body

    def healthz(self):
        return self.request("GET", "/healthz", timeout=5)

    def audit(self, *args):
        """`agentpay admin audit --json` against this gateway: (exit status, the report or the output)."""
        return run_audit(self.admin_url, self.token_file, *args)

    def create_account(self, name, deposit=None, reference=None):
        r = self.admin("POST", "/admin/v1/accounts", {"name": name})
        if r.status != 201:
            raise AssertionError("create account %r: expected 201, got %d %r" % (name, r.status, r.body))
        data = r.json()
        acct = Account(data["account_id"], data["api_key"], name)
        self.accounts[acct.id] = acct
        if deposit is not None:
            r = self.deposit(acct, deposit, reference or ("initial-" + name))
            if r.status != 201:
                raise AssertionError("deposit for %r: expected 201, got %d %r" % (name, r.status, r.body))
        return acct

    def deposit(self, acct, amount, reference):
        return self.admin("POST", "/admin/v1/accounts/%s/deposits" % acct.id,
                          {"amount": str(amount), "reference": reference})

    def account(self, acct):
        """GET /v1/account with the account's API key, as a dict of ints (account_id kept as str)."""
        r = self.request("GET", "/v1/account", headers={"Authorization": "Bearer " + acct.api_key})
        if r.status != 200:
            raise AssertionError("GET /v1/account for %s: expected 200, got %d %r" % (acct.id, r.status, r.body))
        return money_fields(r.json())

    def admin_account(self, account_id):
        r = self.admin("GET", "/admin/v1/accounts/%s" % account_id)
        if r.status != 200:
            raise AssertionError("GET /admin/v1/accounts/%s: expected 200, got %d %r" % (
                account_id, r.status, r.body))
        return money_fields(r.json())

    def pay(self, acct, key, body=b'{"task":"summarize","n":1}', fault=None, method="POST", path="/work",
            content_type="application/json", headers=None, timeout=HTTP_TIMEOUT_S):
        """A paid wallet request. key=None sends no Idempotency-Key header."""
        h = {}
        if acct is not None:
            h["Authorization"] = "Bearer " + (acct if isinstance(acct, str) else acct.api_key)
        if key is not None:
            h["Idempotency-Key"] = key
        if fault is not None:
            h["X-Seller-Fault"] = fault
        if content_type is not None and body is not None:
            h["Content-Type"] = content_type
        if headers:
            h.update(headers)
        return self.request(method, path, body=body, headers=h, timeout=timeout)

    def operation(self, op_id, headers=None):
        """The operation's view, read with the admin token unless other credentials are given."""
        r = self.request("GET", "/v1/operations/%s" % op_id,
                         headers=headers or {"Authorization": "Bearer " + ADMIN_TOKEN})
        if r.status != 200:
            raise AssertionError("GET /v1/operations/%s: expected 200, got %d %r" % (op_id, r.status, r.body))
        return r.json()

    def trace(self, op_id, headers=None):
        r = self.request("GET", "/v1/operations/%s/trace" % op_id,
                         headers=headers or {"Authorization": "Bearer " + ADMIN_TOKEN})
        if r.status != 200:
            raise AssertionError("GET trace of %s: expected 200, got %d %r" % (op_id, r.status, r.body))
        return r.json()

    def admin_operations(self, **query):
        qs = "&".join("%s=%s" % (k, v) for k, v in query.items())
        r = self.admin("GET", "/admin/v1/operations" + ("?" + qs if qs else ""))
        if r.status != 200:
            raise AssertionError("GET /admin/v1/operations: expected 200, got %d %r" % (r.status, r.body))
        return r.json()["operations"]

    def full_state(self):
        """Everything a money-neutral request must leave unchanged: every account (admin view and, where
        the key is known, the wallet view), and the ledger/operation row counts in the DB."""
        state = {}
        with open_db(self.db_path) as db:
            ids = [row[0] for row in db.execute("SELECT id FROM accounts ORDER BY id")]
            state["ledger_rows"] = db.execute("SELECT COUNT(*) FROM ledger_entries").fetchone()[0]
            state["operations"] = db.execute("SELECT COUNT(*) FROM operations").fetchone()[0]
            state["idempotency_keys"] = db.execute("SELECT COUNT(*) FROM idempotency_keys").fetchone()[0]
        for account_id in ids:
            state["admin:" + account_id] = self.admin_account(account_id)
            if account_id in self.accounts:
                state["wallet:" + account_id] = self.account(self.accounts[account_id])
        return state


_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")
MONEY_FIELDS = ("balance", "held", "available", "deposited", "captured")


def money_fields(doc):
    """The money fields of an account document, parsed strictly: decimal strings of non-negative ints."""
    out = {"account_id": doc.get("account_id")}
    for field in MONEY_FIELDS:
        value = doc.get(field)
        if not isinstance(value, str) or not _DECIMAL.match(value):
            raise AssertionError("account field %r must be a decimal string of atomic units, got %r in %r" % (
                field, value, doc))
        out[field] = int(value)
    return out


# ----------------------------------------------------------------------------------------------
# HTTP

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise AssertionError("response body is not JSON (%s): %r" % (e, self.body[:500]))

    @property
    def replayed(self):
        return self.header("Idempotent-Replayed")

    @property
    def operation_id(self):
        return self.header("AgentPay-Operation-Id")

    def __repr__(self):
        return "<Response %d %s headers=%r body=%r>" % (self.status, self.reason, self.headers, self.body[:300])


def http_request(port, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S, tls=None):
    """One request on a fresh connection. body may be bytes, str or a JSON-able dict/list. With `tls`
    (an ssl.SSLContext), over HTTPS to "localhost"."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    elif isinstance(body, str):
        body = body.encode()
    if tls is not None:
        conn = http.client.HTTPSConnection("localhost", port, timeout=timeout, context=tls)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, resp.reason, resp.getheaders(), data)
    finally:
        conn.close()


def raw_exchange(port, data, timeout=5.0, half_close=True):
    """Send raw bytes, optionally half-close, and read until the server closes.

    Returns (bytes received, closed_by_server). Raises AssertionError if the server neither answers nor
    closes within timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    received = b""
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            # The server may answer (e.g. 431) and close before we finish sending (EPIPE, ECONNRESET,
            # ENOTCONN on shutdown); what it sent is still readable below.
            pass
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return received, True
            except socket.timeout:
                raise AssertionError("server neither answered nor closed within %.1fs after %r (got %r)" % (
                    timeout, data[:80], received[:200]))
            if not chunk:
                return received, True
            received += chunk
    finally:
        s.close()


def parse_status(raw):
    """Status code of the first response in raw bytes, or None."""
    if not raw.startswith(b"HTTP/1."):
        return None
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------
# invariants

def open_db(path):
    return invariants.open_db(path)


LEDGER_SHAPES = invariants.LEDGER_SHAPES


def collect_invariant_violations(gateway=None, db_path=None):
    """The shared store invariants (tests/fault/invariants.py) on the gateway's DB file and, if a gateway
    is given, its HTTP API views of every account (the gateway must then be running). Returns a list of
    human-readable violations (empty = all good)."""
    db_path = db_path or gateway.db_path
    errors = list(invariants.check(db_path).violations)
    if gateway is None:
        return errors
    if not gateway.alive():
        errors.append("gateway process is not running (exit code %s): API views not checked" % (
            gateway.popen.returncode if gateway.popen else None))
        return errors
    # The gateway's own books audit (`agentpay admin audit`) must agree: nothing wrong. (Not with the
    # admin listener turned off: then nobody can ask.)
    args = gateway.extra_args
    admin_off = "--admin-listen" in args and args[args.index("--admin-listen") + 1:][:1] == ["off"]
    if not admin_off:
        code, report = gateway.audit()
        if code != 0 or not isinstance(report, dict) or not report.get("ok"):
            listed = report.get("listed") if isinstance(report, dict) else report
            errors.append("agentpay admin audit exited %d: %s" % (code, listed))
    with open_db(db_path) as db:
        accounts = db.execute("SELECT id, deposited, captured, held FROM accounts ORDER BY id").fetchall()
    for account_id, deposited, captured, held in accounts:
        balance = deposited - captured
        where = "account %s (table: deposited=%d captured=%d held=%d)" % (account_id, deposited, captured, held)
        expected_api = {"account_id": account_id, "balance": balance, "held": held,
                        "available": balance - held, "deposited": deposited, "captured": captured}
        views = [("admin GET /admin/v1/accounts/%s" % account_id, lambda: gateway.admin_account(account_id))]
        if account_id in gateway.accounts:
            acct = gateway.accounts[account_id]
            views.append(("GET /v1/account", lambda: gateway.account(acct)))
        for label, fetch in views:
            try:
                got = fetch()
            except (AssertionError, OSError, http.client.HTTPException) as e:
                errors.append("%s: %s failed: %s" % (where, label, e))
                continue
            if got != expected_api:
                errors.append("%s: %s = %r, expected %r" % (where, label, got, expected_api))
            if got["balance"] != got["deposited"] - got["captured"]:
                errors.append("%s: %s balance != deposited - captured: %r" % (where, label, got))
            if got["available"] != got["balance"] - got["held"]:
                errors.append("%s: %s available != balance - held: %r" % (where, label, got))
            if not (0 <= got["held"] <= got["balance"]):
                errors.append("%s: %s need 0 <= held <= balance: %r" % (where, label, got))
    return errors


def assert_invariants(testcase, gateway):
    errors = collect_invariant_violations(gateway)
    if errors:
        testcase.fail("money invariants violated (db %s):\n  - %s" % (gateway.db_path, "\n  - ".join(errors)))


# ----------------------------------------------------------------------------------------------
# serve --demo

class DemoServer:
    """One `agentpay serve --demo` in `workdir` on a free port, and what its banner printed: the
    devnet buyer's key and address, the network, asset and payee, the devnet JSON-RPC URL, and the
    admin token the demo wrote."""

    BANNER_END = "Any x402 client can pay with it"

    def __init__(self, workdir, extra_args=(), timeout=20):
        self.workdir = workdir
        self.port = free_port()
        self.admin_port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        # Where the admin API, the devnet controls and /metrics are served (--admin-listen).
        self.admin_base = "http://127.0.0.1:%d" % self.admin_port
        self.proc = subprocess.Popen(
            [binary(), "serve", "--demo", "--listen", "127.0.0.1:%d" % self.port,
             "--admin-listen", "127.0.0.1:%d" % self.admin_port, *extra_args],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=_die_with_parent)
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
            lines.append(line)
            if self.BANNER_END in line:
                break
        self.banner = "".join(lines)
        found = {name: re.search(pattern, self.banner) for name, pattern in (
            ("key", r"private key \(devnet only, worth nothing\): (0x[0-9a-f]{64})"),
            ("chain", r"network (eip155:\d+), asset (0x[0-9a-fA-F]{40})"),
            ("rpc", r"devnet JSON-RPC \(reads\): (http://\S+)"),
            ("buyer", r"Demo x402 buyer on the devnet: (0x[0-9a-fA-F]{40})"),
            ("pay_to", r"pay to (0x[0-9a-fA-F]{40})"))}
        missing = [name for name, match in found.items() if not match]
        if missing:
            self.stop()
            raise AssertionError("the demo did not print %s:\n%s" % (", ".join(missing), self.banner))
        self.buyer_key = found["key"].group(1)
        self.network, self.asset = found["chain"].group(1), found["chain"].group(2)
        self.rpc_url, self.buyer = found["rpc"].group(1), found["buyer"].group(1)
        self.pay_to = found["pay_to"].group(1)
        self.token_file = os.path.join(workdir, "agentpay-data", "admin-token")
        with open(self.token_file) as f:
            self.admin_token = f.read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()

    def count_operations(self, where="1 = 1"):
        """Operations in the demo's database matching a SQL condition (read-only)."""
        db = open_db(os.path.join(self.workdir, "agentpay-data", "agentpay.db"))
        try:
            return db.execute("SELECT COUNT(*) FROM operations WHERE " + where).fetchone()[0]
        finally:
            db.close()


# ----------------------------------------------------------------------------------------------
# base test case

class GatewayTestCase(unittest.TestCase):
    """Each test gets its own temp dir, seller and gateway; the invariants are checked after every test."""

    seller_fault = None
    gateway_args = ()

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="agentpay-it-")
        _workdirs.add(self.workdir)
        if not os.environ.get("AGENTPAY_IT_KEEP"):
            self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        self.addCleanup(_workdirs.discard, self.workdir)
        upstream_url = self.start_upstream()
        self.gw = Gateway(self.workdir, upstream_url, extra_args=self.gateway_args)
        self.addCleanup(self.gw.stop)
        self.gw.start()

    def start_upstream(self):
        """Start the upstream and return its URL. Default: `agentpay seller`."""
        self.seller = Seller(self.workdir, fault=self.seller_fault)
        self.addCleanup(self.seller.kill9)
        self.seller.start()
        return self.seller.url

    def tearDown(self):
        try:
            assert_invariants(self, self.gw)
        except AssertionError as e:
            raise AssertionError("%s\n--- gateway output (tail) ---\n%s" % (e, self.gw.output()[-3000:])) from None

    # -- assertion helpers

    def assertProblem(self, resp, status, code, msg=None):
        ctx = "%s%r" % ((msg + ": ") if msg else "", resp)
        self.assertEqual(resp.status, status, ctx)
        ctype = resp.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/problem+json"),
                        "problem responses must be application/problem+json, got %r: %s" % (ctype, ctx))
        doc = resp.json()
        self.assertEqual(doc.get("code"), code, ctx)
        self.assertEqual(doc.get("status"), status, ctx)
        for field in ("type", "title", "detail"):
            self.assertIn(field, doc, ctx)
        return doc

    def assertAccount(self, acct, **expected):
        got = self.gw.account(acct)
        sub = {k: got[k] for k in expected}
        self.assertEqual(sub, expected, "account %s state %r" % (acct.id, got))
        return got

    def assertExecuted(self, n, msg=None):
        self.assertEqual(self.seller.executed(), n, msg or "seller executed count")
