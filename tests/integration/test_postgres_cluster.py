#!/usr/bin/env python3
"""Several gateways on one PostgreSQL database: the same guarantees as one process on one file.

Real `agentpay serve` processes on one database of the test cluster (tests/pg/cluster.sh, started by
ctest; its state directory comes in AGENTPAY_TEST_POSTGRES_STATE), the demo seller upstream, and the
shared invariant checker (tests/fault/invariants.py) on the database after every test:
  - 3 gateways, 64 clients sending the same keys to different gateways at once, retries landing on
    other gateways than the first attempt (certain: a gate before the seller holds every key's upstream
    call until the other clients of the key have had an answer that is not final): one hold, one
    capture, one upstream execution per key;
  - kill -9 of a gateway in the middle of a paid call while the other two serve: a retry on another
    gateway completes it with one charge;
  - the database restarted as a crash does (pg_ctl restart -m immediate) under paid load, on a cluster
    of its own so that the restart cannot hurt the tests ctest runs beside this one: every
    acknowledged payment is still there, nothing is charged twice, /healthz says 503 while it is away,
    and the gateways answer again within seconds of the database, by themselves, each holding its
    liveness lock again;
  - the workers of every gateway sweep the same expired hold: released once, one alert;
  - an API key revoked through one gateway is refused by every gateway within a second.

Run:  AGENTPAY_TEST_POSTGRES_STATE=DIR python3 tests/integration/test_postgres_cluster.py --agentpay BIN
(DIR as written by `tests/pg/cluster.sh start DIR`; the restart test starts and removes a cluster of its
own with the same script).
"""

import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fault"))
from fault_proxy import FaultProxy  # noqa: E402
CLUSTER_SH = os.path.join(ROOT, "tests", "pg", "cluster.sh")
PRICE = harness.PRICE
DEPOSIT = 10_000_000


_private_clusters = []  # state directories of the clusters the tests started themselves


def stop_everything(signum=None, frame=None):
    """SIGTERM (a ctest timeout): the clusters this file started go too, then every child process."""
    for state in _private_clusters:
        subprocess.run(["bash", CLUSTER_SH, "stop", state], timeout=60, check=False)
    harness.emergency_shutdown(signum, frame)


def shared_cluster_state():
    state = os.environ.get("AGENTPAY_TEST_POSTGRES_STATE")
    if not state:
        raise RuntimeError("set AGENTPAY_TEST_POSTGRES_STATE to the directory of `tests/pg/cluster.sh start DIR`")
    return state


class Gate(FaultProxy):
    """A proxy before the seller that holds every request until open(): while it is shut no upstream call
    can finish. `held` counts the requests that reached it."""

    def __init__(self, seller_port):
        # A port of tests/testports.py: the proxy's own choice (port 0) is an ephemeral port.
        super().__init__(("127.0.0.1", seller_port), listen=("127.0.0.1", harness.free_port()))
        self._opened = threading.Event()
        self.held = 0

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def open(self):
        self._opened.set()

    def _forward(self, raw):
        with self._lock:
            self.held += 1
        self._opened.wait()
        return super()._forward(raw)


class ClusterTestCase(unittest.TestCase):
    """A seller and GATEWAYS gateways sharing one fresh database; invariants checked after each test."""

    GATEWAYS = 3
    gateway_args = ("--attach-wait-ms", "200")
    cluster_state = staticmethod(shared_cluster_state)

    def upstream_url(self):
        """What the gateways forward to."""
        return self.seller.url

    def setUp(self):
        os.environ["AGENTPAY_TEST_POSTGRES_URL_FILE"] = os.path.join(self.cluster_state(), "url")
        self.workdir = harness.tempfile.mkdtemp(prefix="agentpay-pg-cluster-")
        self.addCleanup(harness.shutil.rmtree, self.workdir, ignore_errors=True)
        self.seller = harness.Seller(self.workdir)
        self.addCleanup(self.seller.kill9)
        self.seller.start()
        url = harness.fresh_postgres_database()
        self.db = (url, url)
        self.gws = []
        upstream = self.upstream_url()
        for i in range(self.GATEWAYS):
            gw = harness.Gateway(self.workdir, upstream, extra_args=self.gateway_args, db=self.db)
            gw.log_path = os.path.join(self.workdir, "gateway-%d.log" % i)
            self.addCleanup(gw.stop)
            gw.start()
            self.gws.append(gw)

    def tearDown(self):
        live = next((gw for gw in self.gws if gw.alive()), None)
        errors = harness.collect_invariant_violations(live, db_path=self.db[1])
        if errors:
            self.fail("invariants on the shared database:\n  - " + "\n  - ".join(errors))

    def account(self, name):
        acct = self.gws[0].create_account(name, deposit=DEPOSIT)
        for gw in self.gws[1:]:
            gw.accounts[acct.id] = acct  # the same account, read through the shared store
        return acct

    def postings(self, op_id):
        with harness.open_db(self.db[1]) as db:
            return db.execute("SELECT kind, amount FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                              (op_id,)).fetchall()

    def pay_until_done(self, acct, key, first, body, fault="ok", deadline_s=30, answers=None):
        """Sends `key` to gateway `first`, then to the next gateway after every answer that is not final,
        until a 200. Returns every answer, in order (appended to `answers` as they come, if given)."""
        answers = [] if answers is None else answers
        i = first
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                r = self.gws[i % len(self.gws)].pay(acct, key, body=body, fault=fault, timeout=20)
            except OSError:
                r = None  # that gateway is gone, or the connection was cut: the next one
            if r is not None:
                answers.append(r)
                if r.status == 200:
                    return answers
                self.assertIn(r.status, (202, 409, 502, 503), r)
            i += 1
            time.sleep(0.1)
        self.fail("key %s: no 200 within %ds: %r" % (key, deadline_s, answers))


class SameKeysOnThreeGatewaysTest(ClusterTestCase):
    KEYS = 8
    CLIENTS = 64
    # The upstream calls wait at the gate for up to GATE_S; the gateways' upstream timeout is longer.
    GATE_S = 15
    gateway_args = ("--attach-wait-ms", "200", "--upstream-timeout-ms", "60000")

    def upstream_url(self):
        self.gate = Gate(self.seller.port).start()
        self.addCleanup(self.gate.stop)
        self.addCleanup(self.gate.open)  # a failed test leaves no call waiting at the gate
        return self.gate.url

    def test_one_hold_one_capture_one_execution_per_key(self):
        acct = self.account("crowd")
        body = b'{"task":"crowd"}'
        results = [[] for _ in range(self.CLIENTS)]
        start = threading.Barrier(self.CLIENTS)

        def client(n):
            start.wait()
            # Client n starts on gateway n % 3 and moves on to the next one after every 202/409.
            self.pay_until_done(acct, "crowd-%d" % (n % self.KEYS), n, body, answers=results[n],
                                deadline_s=self.GATE_S + 30)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(self.CLIENTS)]
        for t in threads:
            t.start()
        # The gate is shut: the first client of each key waits at it, every other client of that key
        # can only be told "not yet" (202, 409). Open it once each of those has been told so at least
        # once (or after GATE_S): retries on other gateways are then the test's set-up, not luck.
        others = self.CLIENTS - self.KEYS
        deadline = time.monotonic() + self.GATE_S
        while time.monotonic() < deadline:
            if self.gate.held >= self.KEYS and sum(1 for answers in results if answers) >= others:
                break
            time.sleep(0.02)
        told_not_yet = sum(1 for answers in results if answers)
        held = self.gate.held
        self.gate.open()
        for t in threads:
            t.join()
        print("gate opened after %d of %d clients had been told to come back" % (told_not_yet, others))
        self.assertEqual(held, self.KEYS, "one upstream call per key waited at the gate")
        self.assertGreater(told_not_yet, 0, "no client was told to come back while the gate was shut")

        by_key = {}
        for n, answers in enumerate(results):
            by_key.setdefault(n % self.KEYS, []).append(answers[-1])
            moved = len(answers) > 1
            if moved:
                by_key.setdefault("moved", []).append(n)
        self.assertTrue(by_key.get("moved"), "some clients must have retried on another gateway")
        for k in range(self.KEYS):
            finals = by_key[k]
            op_ids = {r.operation_id for r in finals}
            self.assertEqual(len(op_ids), 1, "key %d: one operation, got %r" % (k, op_ids))
            self.assertEqual(len({r.body for r in finals}), 1, "key %d: one answer" % k)
            originals = [r for n, answers in enumerate(results) if n % self.KEYS == k
                         for r in answers if r.status == 200 and r.replayed == "false"]
            self.assertEqual(len(originals), 1, "key %d: exactly one original 200" % k)
            self.assertEqual(self.postings(op_ids.pop()), [("hold", PRICE), ("capture", PRICE)], "key %d" % k)
        self.assertEqual(self.seller.executed(), self.KEYS, "one upstream execution per key")
        self.assertEqual(self.gws[2].account(acct)["captured"], self.KEYS * PRICE)


class KillOneGatewayTest(ClusterTestCase):
    def test_kill9_mid_call_then_retry_elsewhere_charges_once(self):
        acct = self.account("survivor")
        body = b'{"task":"long"}'
        first = {}

        def doomed_call():
            try:
                first["answer"] = self.gws[0].pay(acct, "long-job", body=body, fault="slow:1500", timeout=20)
            except OSError as error:
                first["error"] = error

        t = threading.Thread(target=doomed_call)
        t.start()
        # The key and the hold are committed before the upstream call; wait for them, then kill.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with harness.open_db(self.db[1]) as db:
                if db.execute("SELECT COUNT(*) FROM ledger_entries WHERE kind = 'hold'").fetchone()[0]:
                    break
            time.sleep(0.02)
        self.gws[0].kill9()
        t.join()
        self.assertNotIn("answer", first, "the killed gateway must not have answered")

        # The other two keep serving other payments meanwhile.
        for i, gw in enumerate(self.gws[1:]):
            r = gw.pay(acct, "other-%d" % i, body=b'{"task":"other"}')
            self.assertEqual(r.status, 200, r)

        answers = self.pay_until_done(acct, "long-job", 1, body, fault="slow:1500")
        done = answers[-1]
        self.assertEqual(self.postings(done.operation_id), [("hold", PRICE), ("capture", PRICE)],
                         "the hold of the dead gateway is reused and captured once")
        again = self.gws[2].pay(acct, "long-job", body=body, fault="slow:1500")
        self.assertEqual((again.status, again.replayed, again.body), (200, "true", done.body), again)
        # A tampered retry, on yet another gateway: refused, nothing charged.
        tampered = self.gws[1].pay(acct, "long-job", body=body + b" ")
        self.assertEqual(tampered.status, 422, tampered)
        self.assertEqual(tampered.json()["code"], "idempotency_key_mismatch", tampered)
        self.assertEqual(self.gws[1].account(acct)["captured"], 3 * PRICE)
        self.assertEqual(self.gws[1].account(acct)["held"], 0)


class SharedWorkersTest(ClusterTestCase):
    gateway_args = ("--attach-wait-ms", "200", "--hold-ttl-ms", "1000", "--sweep-interval-ms", "50")

    def test_three_sweepers_release_an_expired_hold_once_with_one_alert(self):
        acct = self.account("expiring")
        r = self.gws[1].pay(acct, "abandoned", body=b'{"n":1}', fault="5xx")
        self.assertEqual(r.status, 502, r)
        deadline = time.monotonic() + 10
        while self.gws[2].account(acct)["held"] != 0:
            self.assertLess(time.monotonic(), deadline, "the expired hold was never released")
            time.sleep(0.05)
        time.sleep(0.5)  # every sweeper has had ten more passes at it
        self.assertEqual(self.postings(r.operation_id), [("hold", PRICE), ("release", PRICE)])
        alerts = [a for a in self.gws[0].admin("GET", "/admin/v1/alerts").json()["alerts"]
                  if a["operation_id"] == r.operation_id]
        self.assertEqual(len(alerts), 1, alerts)


class KeyRevocationTest(ClusterTestCase):
    def test_a_key_revoked_on_one_gateway_is_refused_by_all_within_a_second(self):
        acct = self.account("rotating")
        for i, gw in enumerate(self.gws):  # every gateway has seen (and may remember) the key
            self.assertEqual(gw.pay(acct, "before-%d" % i, body=b'{"n":1}').status, 200)
        keys = self.gws[0].admin("GET", "/admin/v1/accounts/%s/api-keys" % acct.id).json()["api_keys"]
        self.assertEqual(len(keys), 1, keys)
        revoked = self.gws[1].admin("DELETE", "/admin/v1/accounts/%s/api-keys/%s" % (acct.id, keys[0]["key_id"]))
        self.assertEqual(revoked.status, 200, revoked)
        started = time.monotonic()
        refused, accepted, n = set(), 0, 0
        while len(refused) < len(self.gws):
            self.assertLess(time.monotonic() - started, 1.0, "still accepted after 1 s by gateways %r" % (
                sorted(set(range(len(self.gws))) - refused)))
            for i, gw in enumerate(self.gws):
                if i in refused:
                    continue
                n += 1
                status = gw.pay(acct, "after-%d" % n, body=b'{"n":1}').status
                if status == 401:
                    refused.add(i)
                else:
                    self.assertEqual(status, 200)
                    accepted += 1  # a gateway still trusting what it read of the key (at most 500 ms)
        print("revoked: refused by all %d gateways %.0f ms later (%d payments accepted meanwhile)" % (
            len(self.gws), (time.monotonic() - started) * 1000, accepted))
        for gw in self.gws:
            del gw.accounts[acct.id]  # its key no longer opens the account views
        for i, gw in enumerate(self.gws):  # and it stays refused, charging nothing
            self.assertEqual(gw.pay(acct, "later-%d" % i, body=b'{"n":1}').status, 401)
        self.assertEqual(self.gws[2].admin_account(acct.id)["captured"], (3 + accepted) * PRICE)


class DatabaseRestartTest(ClusterTestCase):
    """On a cluster of its own (tests/pg/cluster.sh): restarting the shared one would cut the connections
    of every PostgreSQL test ctest runs beside this one."""

    GATEWAYS = 2

    @classmethod
    def setUpClass(cls):
        state = harness.tempfile.mkdtemp(prefix="agentpay-pg-restart-")
        cls.addClassCleanup(harness.shutil.rmtree, state, ignore_errors=True)
        cls.addClassCleanup(subprocess.run, ["bash", CLUSTER_SH, "stop", state], timeout=120)
        _private_clusters.append(state)
        subprocess.run(["bash", CLUSTER_SH, "start", state], check=True, timeout=120,
                       stdout=subprocess.DEVNULL)
        cls.cluster_state = staticmethod(lambda: state)

    def test_immediate_restart_under_load_loses_nothing_acknowledged(self):
        acct = self.account("steady")
        stop = threading.Event()
        lock = threading.Lock()
        acknowledged, pending, statuses, first_ok_after = {}, {}, {}, []
        restarted_at, problems = [], []

        def client(n):
            # A well-behaved agent: one key per action, retried (same key) until answered 200.
            i, key = 0, None
            while not stop.is_set():
                if key is None:
                    key = "load-%d-%d" % (n, i)
                    i += 1
                try:
                    r = self.gws[(n + i) % len(self.gws)].pay(acct, key, body=b'{"n":1}', timeout=20)
                except OSError:
                    r = None
                with lock:
                    status = r.status if r else "error"
                    statuses[status] = statuses.get(status, 0) + 1
                    if r is not None and r.status == 200:
                        acknowledged[key] = r.operation_id
                        pending.pop(key, None)
                        key = None
                        if restarted_at and not first_ok_after:
                            first_ok_after.append(time.monotonic())
                    else:
                        pending[key] = n
                        if r is not None:
                            # Checked after the run (an assertion here would only end this thread).
                            if r.status not in (202, 409, 502, 503):
                                problems.append("unexpected answer %r" % r)
                            if r.status == 503 and r.header("Retry-After") is None:
                                problems.append("503 without Retry-After: %r" % r)
                            # Public answers carry no store text: libpq's names the server.
                            for leak in (b"127.0.0.1", b"PostgreSQL", b"port", b"connection to"):
                                if r.status == 503 and leak in r.body:
                                    problems.append("503 names the store (%r): %r" % (leak, r))
                time.sleep(0.01 if key is None else 0.1)

        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(8)]
        health = []
        prober_stop = threading.Event()

        def probe():
            # While the database is down, /healthz says so (the restart takes seconds).
            while not prober_stop.is_set():
                try:
                    health.append(self.gws[0].healthz())
                except OSError:
                    pass
                time.sleep(0.05)

        prober = threading.Thread(target=probe, daemon=True)
        try:
            for t in threads:
                t.start()
            time.sleep(2)
            before = len(acknowledged)
            began = time.monotonic()
            prober.start()
            subprocess.run(["bash", CLUSTER_SH, "restart", self.cluster_state()], check=True, timeout=90)
            restarted_at.append(time.monotonic())
            prober_stop.set()
            prober.join(timeout=30)
            time.sleep(4)
        finally:
            # Whatever failed above, the clients stop: a test that fails must not hang.
            stop.set()
            prober_stop.set()
            for t in threads:
                t.join(timeout=60)
        self.assertFalse(any(t.is_alive() for t in threads), "a client never returned")
        self.assertEqual(problems[:5], [])
        down = [h for h in health if h.status == 503]
        self.assertTrue(down, "/healthz never said the database was away: %r" % [h.status for h in health])
        for h in down:
            self.assertEqual(h.json().get("code"), "store_unavailable", h)
            self.assertNotIn(b"127.0.0.1", h.body, h)

        self.assertGreater(before, 0, "payments went through before the restart")
        self.assertTrue(first_ok_after, "no payment succeeded after the restart: %r" % statuses)
        back_s = first_ok_after[0] - restarted_at[0]
        print("database restart took %.2f s; first 200 %.2f s after it was back; answers %r" % (
            restarted_at[0] - began, back_s, statuses))
        self.assertLess(back_s, 5, "service must resume within seconds of the database")
        # A retry goes to the gateway that answered the attempt before it. An attempt whose outcome
        # that gateway could not record (a COMMIT whose answer the restart took, a completion it
        # could not write) is its own, and nobody runs it: the retry takes it over at once instead
        # of attaching to it until its lease runs out (202s for up to the route's timeout + 5 s).
        self.assertNotIn(202, statuses, "a retry waited on an attempt nobody was running")
        for gw in self.gws:
            self.assertEqual(gw.healthz().status, 200)
        # The restart ended every session, and with them the gateways' liveness locks: each takes
        # its own again by itself, or the others would see it dead and take over its calls.
        deadline = time.monotonic() + 5
        while True:
            with harness.open_db(self.db[1]) as db:
                held = db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                                  "AND objsubid = 1 AND database = (SELECT oid FROM pg_database "
                                  "WHERE datname = current_database())").fetchone()[0]
            if held == len(self.gws) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(held, len(self.gws), "liveness locks held again after the restart")

        # Every acknowledged payment is in the books, captured once.
        for key, op_id in acknowledged.items():
            self.assertEqual(self.postings(op_id), [("hold", PRICE), ("capture", PRICE)], key)
        # The actions still unanswered when the load stopped settle on a retry, charged once.
        for key, n in sorted(pending.items()):
            answers = self.pay_until_done(acct, key, n, b'{"n":1}')
            self.assertEqual(self.postings(answers[-1].operation_id), [("hold", PRICE), ("capture", PRICE)], key)
        total = len(acknowledged) + len(pending)
        self.assertEqual(self.gws[0].account(acct)["captured"], total * PRICE)


if __name__ == "__main__":
    harness.main(sys.argv, on_sigterm=stop_everything)
