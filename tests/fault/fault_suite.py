#!/usr/bin/env python3
"""AgentPay fault-injection suite (issue 4): the real gateway (`agentpay serve`), the real seller
(`agentpay seller`) and real SQLite, under faults, checked by the gateway's own books audit
(`agentpay admin audit`, docs/audit.md).

Topology: clients -> fault proxy (fault_proxy.py) -> gateway -> seller. Faults:
  - seller 5xx, slow (some beyond the gateway's upstream timeout), hang, work-then-drop, and 4xx
    (X-Seller-Fault per request);
  - on the client leg, per request (X-Fault-Proxy-Mode): response dropped after the gateway answered,
    response cut mid-stream, request delayed, connection reset, request dropped;
  - packet loss with nftables: a table of the suite's own with `numgen random mod 100 < N drop` on the
    gateway's and the seller's ports (both directions), checked first to really drop packets, deleted
    after each window (skipped, and said so, where nft is unavailable);
  - kill -9 of the gateway at a random point of every round's random workload, then a restart on the
    same database;
  - admin resolutions of the alerts, sent through a proxy in front of the admin listener (their answers
    dropped too) and retried.

First a few targeted scenarios with exact expectations (e.g. "response dropped after the gateway
charged": the retry replays, one charge, one execution). Then the rounds: each round runs a random
wallet workload (2-8 business actions over 3 accounts, some submitted twice at once), each client
retrying its key until a final answer or its attempt budget is spent; kills the gateway once or twice
at random moments and restarts it; then resolves a few alerts and checks every invariant plus, per
action, that what the client was finally told matches the books (200 -> charged once, 400 -> not
charged). The summary table is printed at the end; the exit code is 0 only if double charges, money
lost or created, stuck holds and invariant violations are all 0.

Run:  python3 tests/fault/fault_suite.py --agentpay build/agentpay [--rounds 50] [--seed N]
      python3 tests/fault/fault_suite.py --agentpay build/agentpay --rounds 500     (the long run)
"""

import argparse
import atexit
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import invariants  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

PRICE = 1000
DEPOSIT = 10 ** 12
ACCOUNTS = 3
HOLD_TTL_MS = 2000
SWEEP_INTERVAL_MS = 100
UPSTREAM_TIMEOUT_MS = 1500
RETENTION_MS = 15000       # longer than any client's retry window (ACTION_DEADLINE_S)
ATTACH_WAIT_MS = 1000
ACTION_DEADLINE_S = 9.0
MAX_ATTEMPTS = 8
REQUEST_TIMEOUT_S = 6.0
HOLD_SLACK_MS = SWEEP_INTERVAL_MS + 2000  # sweep interval plus scheduling slack
GATEWAY_ARGS = ("--hold-ttl-ms", str(HOLD_TTL_MS), "--sweep-interval-ms", str(SWEEP_INTERVAL_MS),
                "--upstream-timeout-ms", str(UPSTREAM_TIMEOUT_MS), "--retention-ms", str(RETENTION_MS),
                "--attach-wait-ms", str(ATTACH_WAIT_MS))

SELLER_FAULTS = [("ok", 50), ("5xx", 12), ("slow", 10), ("hang", 5), ("drop", 12), ("4xx", 6)]
PROXY_FAULTS = [("pass", 70), ("drop_response", 12), ("cut_midstream", 6), ("delay", 6), ("reset", 3),
                ("drop_request", 3)]
NETWORK_ERRORS = (OSError, http.client.HTTPException)


def weighted(rng, table):
    total = sum(w for _, w in table)
    pick = rng.uniform(0, total)
    for value, weight in table:
        if pick < weight:
            return value
        pick -= weight
    return table[-1][0]


class Tally:
    """Thread-safe counters for the summary."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts = {}

    def add(self, name, n=1):
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def get(self, name):
        with self._lock:
            return self.counts.get(name, 0)


# ----------------------------------------------------------------------------------------------- nftables

class PacketLoss:
    """Packet loss on loopback ports with a table of our own; `available` after a check that it drops."""

    TABLE = "agentpay_fault_%d" % os.getpid()

    def __init__(self):
        self.available = False
        self.reason = ""
        self.active = False

    def _nft(self, script):
        return subprocess.run(["nft", "-f", "-"], input=script.encode(), capture_output=True, timeout=10)

    def on(self, ports, percent):
        chance = "" if percent >= 100 else "numgen random mod 100 < %d " % percent
        rules = "\n".join("    tcp %s %d %scounter drop" % (direction, port, chance)
                          for port in ports for direction in ("dport", "sport"))
        script = ("table inet %s {\n  chain out {\n    type filter hook output priority 0; policy accept;\n"
                  "%s\n  }\n}\n" % (self.TABLE, rules))
        done = self._nft(script)
        if done.returncode != 0:
            raise RuntimeError("nft: %s" % done.stderr.decode())
        self.active = True

    def dropped(self):
        out = subprocess.run(["nft", "list", "table", "inet", self.TABLE], capture_output=True, text=True,
                             timeout=10).stdout
        return sum(int(part.split()[1]) for part in out.split("counter")[1:] if part.split()[0] == "packets")

    def off(self):
        if self.active:
            subprocess.run(["nft", "delete", "table", "inet", self.TABLE], capture_output=True, timeout=10)
            self.active = False

    def self_check(self):
        """Really drops? 100 % loss on a listening port must make connects fail and count packets."""
        if shutil.which("nft") is None:
            self.reason = "nft not installed (apt-get install nftables)"
            return False
        import socket
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        try:
            self.on([port], 100)
        except (RuntimeError, OSError) as error:
            server.close()
            self.reason = "cannot add an nftables table (%s)" % str(error).strip()
            return False
        try:
            connected = True
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                connected = False
            dropped = self.dropped()
        finally:
            self.off()
            server.close()
        if connected or dropped == 0:
            self.reason = "the nftables rule did not drop packets (connected=%s, dropped=%d)" % (connected, dropped)
            return False
        self.available = True
        return True


# ----------------------------------------------------------------------------------------------- the world

class World:
    """Seller, gateway (restartable on the same DB), fault proxy in front of the gateway, accounts."""

    def __init__(self, workdir, tally, loss):
        self.workdir = workdir
        self.tally = tally
        self.loss = loss
        self.seller = harness.Seller(workdir).start()
        self.gw = harness.Gateway(workdir, self.seller.url, price=PRICE, extra_args=GATEWAY_ARGS).start()
        self.proxy = FaultProxy(("127.0.0.1", self.gw.port), upstream_timeout_s=REQUEST_TIMEOUT_S + 2).start()
        # The admin API lives on the admin listener (--admin-listen): its calls get a proxy of their own.
        self.admin_proxy = FaultProxy(("127.0.0.1", self.gw.admin_port),
                                      upstream_timeout_s=REQUEST_TIMEOUT_S + 2).start()
        self.accounts = [self.gw.create_account("fault-%d" % i, deposit=DEPOSIT) for i in range(ACCOUNTS)]
        self.deposited = DEPOSIT * ACCOUNTS
        self.abandoned = []  # actions whose agent gave up; some come back in a later round
        self.reported = set()  # invariant violations already reported
        self._gw_lock = threading.Lock()

    def stop(self):
        self.loss.off()
        self.proxy.stop()
        self.admin_proxy.stop()
        self.gw.stop()
        self.seller.kill9()

    def kill_and_restart(self):
        with self._gw_lock:
            self.gw.kill9()
            self.tally.add("kill -9 of the gateway")
            self.gw.restart_after_crash()

    def pay(self, account, key, body, seller_fault, proxy_mode, timeout=REQUEST_TIMEOUT_S):
        headers = {"Authorization": "Bearer " + account.api_key, "Idempotency-Key": key,
                   "Content-Type": "application/json", "X-Seller-Fault": seller_fault,
                   "X-Fault-Proxy-Mode": proxy_mode}
        self.tally.add("requests")
        return harness.http_request(self.proxy.port, "POST", "/work", body=body, headers=headers,
                                    timeout=timeout)

    def operations_of(self, account, key):
        with invariants.open_db(self.gw.db_path) as db:
            return db.execute(
                "SELECT id, settlement, fulfillment, (SELECT COUNT(*) FROM ledger_entries l WHERE "
                "l.operation_id = o.id AND l.kind = 'capture'), created_ms, retained_until_ms FROM operations o "
                "WHERE principal = ? AND idempotency_key = ? ORDER BY created_ms", ("account:" + account.id, key)
            ).fetchall()


# ----------------------------------------------------------------------------------------------- clients

def complete(response):
    """Whether an answer arrived whole: its Content-Length header is there and matches the body."""
    length = response.header("Content-Length")
    return length is not None and length.isdigit() and int(length) == len(response.body)


class Action:
    """One business action: a key, a body, an account; `run` retries it like a careful agent."""

    def __init__(self, world, rng, account, key, body, abandons=False):
        self.world, self.rng, self.account, self.key, self.body = world, rng, account, key, body
        self.abandons = abandons  # a crashing agent: gives up after its first answer that is not final
        self.final = None  # (status, operation id) of the final answer, if one came
        self.statuses = []

    def draw_seller_fault(self, attempt):
        fault = weighted(self.rng, SELLER_FAULTS) if attempt == 0 or self.rng.random() < 0.35 else "ok"
        if fault == "slow":
            fault = "slow:%d" % self.rng.choice([50, 200, 600, 1200, 2200])  # 2200 > upstream timeout
        return fault

    def draw_proxy_mode(self):
        mode = weighted(self.rng, PROXY_FAULTS)
        return "delay:%d" % self.rng.choice([50, 150, 400]) if mode == "delay" else mode

    def run(self):
        tally = self.world.tally
        deadline = time.monotonic() + ACTION_DEADLINE_S
        for attempt in range(MAX_ATTEMPTS):
            if time.monotonic() > deadline:
                break
            seller_fault, proxy_mode = self.draw_seller_fault(attempt), self.draw_proxy_mode()
            if seller_fault != "ok":
                tally.add("fault: seller " + seller_fault.split(":")[0])
            try:
                r = self.world.pay(self.account, self.key, self.body, seller_fault, proxy_mode)
            except NETWORK_ERRORS:
                self.statuses.append("net")
                time.sleep(self.rng.uniform(0.05, 0.25))
                continue
            if not complete(r):  # cut mid-stream: http.client takes a truncated head at face value
                self.statuses.append("cut")
                time.sleep(self.rng.uniform(0.05, 0.25))
                continue
            self.statuses.append(r.status)
            if r.status == 200 or (r.status == 400 and b"seller refused" in r.body):
                self.final = (r.status, r.operation_id, r.replayed)
                return
            if r.status in (400, 402, 422):
                self.final = (r.status, r.operation_id, r.replayed)  # never expected: checked later
                return
            if self.abandons:
                self.world.tally.add("fault: agent abandoned its action (hold left to the sweeper)")
                self.world.abandoned.append(self)
                return
            time.sleep(self.rng.uniform(0.05, 0.3))  # 202, 502, 503, 504: retry the same key

    def check(self, violations):
        """What the client was finally told must match the books."""
        ops = self.world.operations_of(self.account, self.key)
        where = "action %s (%s; answers %r)" % (self.key, self.account.id, self.statuses)
        # A key is forgotten once its operation's retention ran out: an abandoned action retried later
        # than that is a new action with a new operation. Any other second operation is a violation.
        for older, newer in zip(ops, ops[1:]):
            retained_until, created = older[5], newer[4]
            if retained_until is None or retained_until > created:
                violations.append("%s: %d operations for one key within retention: %r" % (
                    where, len(ops), [op[:4] for op in ops]))
                return
        if len(ops) > 1:
            self.world.tally.add("late retries past retention (a new operation)")
        ops = [op[:4] for op in ops[-1:]]
        if self.final is None:
            if self not in self.world.abandoned:
                self.world.tally.add("actions given up")
            return
        status, op_id, _ = self.final
        if not ops:
            violations.append("%s: final answer %d but no operation" % (where, status))
            return
        stored_id, settlement, fulfillment, captures = ops[0]
        if op_id != stored_id:
            violations.append("%s: answered for operation %s, the key names %s" % (where, op_id, stored_id))
        if status == 200 and (settlement, fulfillment, captures) != ("settled", "succeeded", 1):
            violations.append("%s: told 200 but the books say %s/%s with %d capture(s)" % (
                where, settlement, fulfillment, captures))
        elif status == 400 and (settlement, fulfillment, captures) != ("released", "rejected", 0):
            violations.append("%s: told 400 but the books say %s/%s with %d capture(s)" % (
                where, settlement, fulfillment, captures))
        elif status not in (200, 400):
            violations.append("%s: unexpected final answer %d" % (where, status))
        self.world.tally.add("actions answered %d" % status)


# ----------------------------------------------------------------------------------------------- rounds

def resolve_some_alerts(world, rng, round_no, violations):
    r = world.gw.admin("GET", "/admin/v1/alerts?limit=1000")
    open_alerts = sorted({a["operation_id"] for a in r.json()["alerts"] if not a["resolved"]})
    for op_id in rng.sample(open_alerts, min(2, len(open_alerts))):
        outcome = rng.choice(["delivered", "refunded", "written_off", "no_action"])
        note = "fault round %d" % round_no
        body = json.dumps({"outcome": outcome, "note": note})
        answers = []
        for _ in range(10):
            mode = "drop_response" if rng.random() < 0.3 else "pass"
            headers = {"Authorization": "Bearer " + harness.ADMIN_TOKEN, "Content-Type": "application/json",
                       "X-Fault-Proxy-Mode": mode}
            try:
                got = harness.http_request(world.admin_proxy.port, "POST",
                                           "/admin/v1/operations/%s/resolve" % op_id,
                                           body=body, headers=headers, timeout=REQUEST_TIMEOUT_S)
            except NETWORK_ERRORS:
                answers.append("net")
                continue
            answers.append(got.status)
            if got.status == 200:
                world.tally.add("admin resolutions (%s)" % outcome)
                break
            if got.status == 409:
                violations.append("resolve %s %s (%s) got 409 on a retry of the same resolution: %r" % (
                    op_id, outcome, note, got.body[:300]))
                break
        else:
            violations.append("resolve %s never answered 200: %r" % (op_id, answers))


def run_round(world, rng, round_no, violations):
    tally = world.tally
    actions = []
    for i in range(rng.randint(2, 10)):
        account = rng.choice(world.accounts)
        body = json.dumps({"round": round_no, "action": i, "pad": "x" * rng.randint(0, 300)}).encode()
        action = Action(world, random.Random(rng.random()), account, "r%d-a%d" % (round_no, i), body,
                        abandons=rng.random() < 0.1)
        actions.append(action)
        if rng.random() < 0.2:  # the same action submitted twice at once (a duplicate agent)
            actions.append(Action(world, random.Random(rng.random()), account, action.key, body))
            tally.add("fault: concurrent duplicate")
    for old in rng.sample(world.abandoned, min(len(world.abandoned), rng.choice([0, 0, 1, 2]))):
        world.abandoned.remove(old)  # the agent comes back, maybe after the sweeper released its hold
        actions.append(Action(world, random.Random(rng.random()), old.account, old.key, old.body))
        tally.add("fault: late retry of an abandoned action")
    threads = [threading.Thread(target=a.run, daemon=True) for a in actions]
    loss_window = None
    if world.loss.available and rng.random() < 0.25:
        loss_window = (rng.uniform(0, 0.5), rng.uniform(1.0, 2.5), rng.choice([5, 10, 20, 30]))
    kills = [rng.uniform(0, 1.2)] + ([rng.uniform(0, 2.5)] if rng.random() < 0.1 else [])
    started = time.monotonic()
    for thread in threads:
        thread.start()
    events = sorted([(at, "kill") for at in kills] +
                    ([(loss_window[0], "loss_on"), (loss_window[0] + loss_window[1], "loss_off")]
                     if loss_window else []))
    for at, what in events:
        time.sleep(max(0.0, started + at - time.monotonic()))
        if what == "kill":
            world.kill_and_restart()
        elif what == "loss_on":
            world.loss.on([world.gw.port, world.seller.port], loss_window[2])
            tally.add("fault: packet loss window (%d%%)" % loss_window[2])
        else:
            tally.add("packets dropped by nftables", world.loss.dropped())
            world.loss.off()
    for thread in threads:
        thread.join(timeout=ACTION_DEADLINE_S + REQUEST_TIMEOUT_S + 10)
        if thread.is_alive():
            violations.append("round %d: a client did not finish" % round_no)
    world.loss.off()
    for action in actions:
        action.check(violations)
    resolve_some_alerts(world, rng, round_no, violations)
    check_books(world, "round %d" % round_no, violations)


class Books:
    """The gateway's books audit (`agentpay admin audit --json`: (exit status, report)) read as the
    suite's verdict: its violations, and the figures the summary prints. With `seller_executions`, also
    that every wallet charge was a seller execution (charges <= executions; the rest is unpaid work)."""

    def __init__(self, audited, open_alerts=0, seller_executions=None):
        code, audit = audited
        self.violations = []
        if not isinstance(audit, dict):
            self.violations.append("admin audit exited %d: %s" % (code, str(audit)[-300:]))
            audit = {"checks": [], "listed": [], "violations": 0, "totals": {}}
        self.violations += ["admin audit: %s %s: %s" % (v["check"], v["subject"], v["detail"])
                            for v in audit["listed"]]
        if audit["violations"] > len(audit["listed"]):
            self.violations.append("admin audit: %d more violations not listed" % (
                audit["violations"] - len(audit["listed"])))
        if code != 0 and not self.violations:
            self.violations.append("admin audit exited %d and listed nothing" % code)
        broken = {c["name"]: c["violations"] for c in audit["checks"] if c["ran"]}
        totals = audit["totals"]
        self.revenue = int(totals.get("captured", "0"))
        self.figures = {
            "charges": totals.get("charges", 0), "alerts": totals.get("alerts", 0), "open_alerts": open_alerts,
            "double_charges": broken.get("one_charge_per_key", 0) + broken.get("one_payment_per_authorization", 0),
            "money_delta": broken.get("money_conserved", 0) + broken.get("account_books", 0),
            "stuck_holds": broken.get("holds_within_ttl", 0), "unpaid_executions": None,
        }
        if seller_executions is not None:
            self.figures["unpaid_executions"] = seller_executions - self.figures["charges"]
            if self.figures["unpaid_executions"] < 0:
                self.violations.append("%d wallet charges but only %d seller executions (a charge without work)" % (
                    self.figures["charges"], seller_executions))


def check_books(world, where, violations):
    """The gateway's books audit with the gateway running (so holds must be moving), plus the API's money."""
    overview = json.loads(world.gw.admin("GET", "/admin/v1/overview").body)
    report = Books(world.gw.audit(), overview["open_alerts"], world.seller.executed())
    for v in report.violations:
        if v not in world.reported:  # a broken record stays broken: report it once
            world.reported.add(v)
            violations.append("%s: %s" % (where, v))
    balances = sum(world.gw.admin_account(a.id)["balance"] for a in world.accounts)
    money_delta = balances + report.revenue - world.deposited
    if money_delta != 0:
        violations.append("%s: balances (API) %d + revenue %d != deposits made %d" % (
            where, balances, revenue, world.deposited))
    return report, money_delta


# ----------------------------------------------------------------------------------------------- scenarios

def scenario(world, name, violations, fn):
    before = len(violations)
    try:
        fn()
    except AssertionError as error:
        violations.append("scenario %s: %s" % (name, error))
    except NETWORK_ERRORS as error:
        violations.append("scenario %s: network error %r" % (name, error))
    world.tally.add("scenarios passed" if len(violations) == before else "scenarios failed")


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def targeted_scenarios(world, violations):
    acct, tally = world.accounts[0], world.tally

    def captures(key):
        ops = world.operations_of(acct, key)
        expect(len(ops) == 1, "one operation for %s, got %r" % (key, ops))
        return ops[0][3]

    def response_dropped_after_charge():
        executed = world.seller.executed()
        try:
            world.pay(acct, "s-dropped", b'{"s":1}', "ok", "drop_response")
            raise AssertionError("the proxy should have dropped the answer")
        except NETWORK_ERRORS:
            pass
        expect(captures("s-dropped") == 1, "the gateway charged before the answer was lost")
        r = world.pay(acct, "s-dropped", b'{"s":1}', "ok", "pass")
        expect((r.status, r.replayed) == (200, "true"), "the retry replays: %r" % r)
        expect(captures("s-dropped") == 1 and world.seller.executed() == executed + 1, "one charge, one execution")

    def hang_then_retry():
        r = world.pay(acct, "s-hang", b'{"s":2}', "hang", "pass")
        tally.add("fault: seller hang")
        expect(r.status == 504, "a hanging seller is 504 after the upstream timeout: %r" % r)
        r = world.pay(acct, "s-hang", b'{"s":2}', "ok", "pass")
        expect(r.status == 200 and captures("s-hang") == 1, "the retry is charged once: %r" % r)

    def drop_then_retry():
        executed = world.seller.executed()
        r = world.pay(acct, "s-drop", b'{"s":3}', "drop", "pass")
        tally.add("fault: seller drop")
        expect(r.status == 502, "work-then-drop is 502: %r" % r)
        r = world.pay(acct, "s-drop", b'{"s":3}', "ok", "pass")
        expect(r.status == 200 and captures("s-drop") == 1, "charged once: %r" % r)
        expect(world.seller.executed() == executed + 2, "executed twice (the drop did the work), charged once")

    def kill_during_call():
        result = {}

        def call():
            try:
                result["r"] = world.pay(acct, "s-kill", b'{"s":4}', "slow:1000", "pass")
            except NETWORK_ERRORS as error:
                result["error"] = error
        thread = threading.Thread(target=call)
        thread.start()
        # The hold is committed before the upstream call (1 s at the seller): kill once it is there,
        # not after a fixed pause a busy machine may not have reached it in.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                row[1] == "held" for row in world.operations_of(acct, "s-kill")):
            time.sleep(0.02)
        world.kill_and_restart()
        thread.join()
        expect("error" in result or result["r"].status >= 500, "the killed call got no success: %r" % result)
        op = world.operations_of(acct, "s-kill")
        with invariants.open_db(world.gw.db_path) as db:
            postings = db.execute("SELECT kind, at_ms FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                                  (op[0][0] if op else "",)).fetchall()
        # A restart can outlast the hold's TTL on a busy machine: the restarted gateway's sweeper then
        # releases the hold, as it should (never before the TTL), and the retry holds again.
        kept = len(op) == 1 and op[0][1:4] == ("held", "pending_retry", 0)
        swept = (len(op) == 1 and op[0][1:4] == ("released", "pending_retry", 0) and
                 [kind for kind, _ in postings] == ["hold", "release"] and
                 postings[1][1] >= postings[0][1] + HOLD_TTL_MS)
        expect(kept or swept, "hold kept after recovery (or released once expired): %r, postings %r" % (
            op, postings))
        r = world.pay(acct, "s-kill", b'{"s":4}', "ok", "pass")
        expect(r.status == 200 and captures("s-kill") == 1, "the retry is charged once: %r" % r)

    def cut_midstream_then_retry():
        try:
            r = world.pay(acct, "s-cut", b'{"s":5}', "ok", "cut_midstream")
            expect(not complete(r), "a cut answer cannot arrive whole: %r" % r)
        except NETWORK_ERRORS:
            pass
        r = world.pay(acct, "s-cut", b'{"s":5}', "ok", "pass")
        expect((r.status, r.replayed) == (200, "true") and captures("s-cut") == 1, "replayed, charged once: %r" % r)

    def second_process_starts_during_a_call():
        # Issue 4: several gateway processes share one database. A second `agentpay serve` starts
        # (and runs its crash recovery) while the first is calling a slow seller: the first must
        # keep its claim and deliver its own answer, with one execution. On a database (and a seller,
        # whose count of executions is exact) of its own: two processes would both write the built-in
        # devnet's log beside the world's database.
        scratch = tempfile.mkdtemp(prefix="two-processes-", dir=world.workdir)
        seller = harness.Seller(scratch)
        args = ("--upstream-timeout-ms", "10000", "--sweep-interval-ms", str(SWEEP_INTERVAL_MS),
                "--attach-wait-ms", str(ATTACH_WAIT_MS))
        first = harness.Gateway(scratch, seller.url, price=PRICE, extra_args=args)
        second = harness.Gateway(scratch, seller.url, price=PRICE, extra_args=args,
                                 db=(first.db_url, first.db_path))
        second.log_path = os.path.join(scratch, "gateway-2.log")
        try:
            seller.start()
            first.start()
            payer = first.create_account("two-processes", deposit=DEPOSIT)
            executed = seller.executed()
            result = {}

            def call():
                try:
                    result["r"] = first.pay(payer, "s-two", body=b'{"s":7}', fault="slow:3000")
                except NETWORK_ERRORS as error:
                    result["error"] = error
            thread = threading.Thread(target=call)
            thread.start()
            time.sleep(0.5)
            second.start()  # on the same database, during the call
            thread.join()
            r = result.get("r")
            expect(r is not None and (r.status, r.replayed) == (200, "false"),
                   "the first process delivers its own answer: %r" % result)
            expect(seller.executed() == executed + 1, "one execution, got %d" % (
                seller.executed() - executed))
            again = second.pay(payer, "s-two", body=b'{"s":7}')
            expect((again.status, again.replayed) == (200, "true"),
                   "the retry through the second process replays: %r" % again)
            expect(seller.executed() == executed + 1, "still one execution")
            report = Books(second.audit(), seller_executions=seller.executed())
            expect(report.figures["charges"] == 1, "charged once, got %d charge(s)" % report.figures["charges"])
            expect(not report.violations, "books audit: %r" % report.violations)
        except harness.ProcessError as error:
            raise AssertionError("a gateway did not start: %s" % error)
        finally:
            second.stop()
            first.stop()
            seller.kill9()

    for name, fn in [("response dropped after the gateway charged", response_dropped_after_charge),
                     ("seller hang, then retry", hang_then_retry),
                     ("seller works then drops, then retry", drop_then_retry),
                     ("kill -9 during the upstream call, then retry", kill_during_call),
                     ("response cut mid-stream, then retry", cut_midstream_then_retry),
                     ("a second gateway process starts during a slow call", second_process_starts_during_a_call)]:
        scenario(world, name, violations, fn)
    if world.loss.available:
        def under_loss():
            world.loss.on([world.gw.port, world.seller.port], 30)
            try:
                actions = []
                for i in range(4):
                    action = Action(world, random.Random(i), acct, "s-loss-%d" % i, b'{"s":6}')
                    action.draw_seller_fault = lambda attempt: "ok"
                    action.draw_proxy_mode = lambda: "pass"
                    action.run()
                    actions.append(action)
                dropped = world.loss.dropped()
            finally:
                world.loss.off()
            tally.add("fault: packet loss window (30%)")
            tally.add("packets dropped by nftables", dropped)
            expect(dropped > 0, "30% loss dropped no packet")
            for i, action in enumerate(actions):
                key = "s-loss-%d" % i
                if action.final is None:
                    # Every attempt lost on the way (30% of packets both ways, for the agent's whole
                    # retry budget): the gateway may never have seen the key, or saw it once.
                    ops = world.operations_of(acct, key)
                    expect(len(ops) <= 1, "at most one operation for %s, got %r" % (key, ops))
                    expect(all(op[3] <= 1 for op in ops), "at most one charge under loss")
                else:
                    expect(captures(key) <= 1, "at most one charge under loss")
        scenario(world, "30% packet loss on the gateway and seller ports", violations, under_loss)


# ----------------------------------------------------------------------------------------------- summary

def print_summary(args, world, tally, report, money_delta, violations, elapsed, loss, extra):
    proxy = world.proxy.stats()
    executions = world.seller.executed()
    rows = [("rounds (each with kill -9 + restart)", args.rounds), ("seed", args.seed)]
    faults = sorted((k, v) for k, v in tally.counts.items() if k.startswith("fault: "))
    rows.append(("kill -9 of the gateway", tally.get("kill -9 of the gateway")))
    rows += [(k, v) for k, v in faults]
    rows += [("fault: proxy dropped response (all)", proxy["responses_dropped"]),
             ("fault: proxy cut response mid-stream (all)", proxy["responses_cut"]),
             ("fault: proxy delayed request", proxy["delayed"]),
             ("fault: proxy reset connection", proxy["resets"]),
             ("fault: proxy dropped request", proxy["requests_dropped"]),
             ("packets dropped by nftables", tally.get("packets dropped by nftables") if loss.available
              else "n/a (%s)" % loss.reason)]
    rows += [("requests (client -> proxy -> gateway)", tally.get("requests")),
             ("agents finally answered 200 (a duplicate pair counts 2)", tally.get("actions answered 200")),
             ("agents finally answered 400 (seller refused)", tally.get("actions answered 400")),
             ("agents not finished within their retry budget", tally.get("actions given up")),
             ("admin resolutions", sum(v for k, v in tally.counts.items() if k.startswith("admin resolutions")))]
    rows += sorted((k, v) for k, v in tally.counts.items() if k.startswith("admin resolutions ("))
    rows += [
             ("charges (operations captured)", report.figures["charges"]),
             ("seller executions", executions),
             ("seller executions not charged", report.figures["unpaid_executions"]),
             ("alerts raised / still open", "%d / %d" % (report.figures["alerts"], report.figures["open_alerts"])),
             ("targeted scenarios passed / failed", "%d / %d" % (tally.get("scenarios passed"),
                                                                   tally.get("scenarios failed")))]
    rows += extra
    rows += [
             ("double charges (must be 0)", report.figures["double_charges"]),
             ("money lost or created (must be 0)", money_delta + report.figures["money_delta"]),
             ("stuck holds (must be 0)", report.figures["stuck_holds"]),
             ("invariant violations (must be 0)", len(violations)),
             ("wall time (s)", "%.0f" % elapsed)]
    width = max(len(str(k)) for k, _ in rows)
    vwidth = max(len(str(v)) for _, v in rows)
    line = "+-" + "-" * width + "-+-" + "-" * vwidth + "-+"
    print("\nAgentPay fault suite summary")
    print(line)
    for k, v in rows:
        print("| %-*s | %*s |" % (width, k, vwidth, v))
    print(line)
    sys.stdout.flush()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agentpay", default=harness.DEFAULT_BINARY)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-packet-loss", action="store_true", help="skip the nftables faults")
    parser.add_argument("--x402-rounds", type=int, default=None,
                        help="x402 kill -9 rounds on Anvil (default: 10 where Anvil is installed, else 0)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2 ** 31)
    harness.set_binary(args.agentpay)
    workdir = tempfile.mkdtemp(prefix="agentpay-fault-")
    loss = PacketLoss()
    atexit.register(loss.off)

    def on_term(signum, frame):
        loss.off()
        if "x402_harness" in sys.modules:
            sys.modules["x402_harness"].emergency_shutdown(signum, frame)
        harness.emergency_shutdown(signum, frame)
    signal.signal(signal.SIGTERM, on_term)
    if not args.no_packet_loss:
        loss.self_check()
    else:
        loss.reason = "--no-packet-loss"
    print("fault suite: %d rounds, seed %d, work dir %s, packet loss: %s" % (
        args.rounds, args.seed, workdir, "on" if loss.available else "off (%s)" % loss.reason), flush=True)
    x402_note = ""
    if args.x402_rounds is None or args.x402_rounds > 0:
        import x402_rounds
        if not x402_rounds.anvil_available():
            x402_note = "Anvil not installed (bash tests/chain_env/install.sh)"
            args.x402_rounds = 0
        elif args.x402_rounds is None:
            args.x402_rounds = 10
    rng = random.Random(args.seed)
    tally = Tally()
    violations = []
    started = time.monotonic()
    world = World(workdir, tally, loss)
    x402_world = None
    report, money_delta = None, None
    try:
        targeted_scenarios(world, violations)
        for round_no in range(1, args.rounds + 1):
            before = len(violations)
            run_round(world, rng, round_no, violations)
            if len(violations) > before or round_no % 10 == 0:
                print("round %d/%d: %d violation(s) so far, %.0f s" % (
                    round_no, args.rounds, len(violations), time.monotonic() - started), flush=True)
        if args.x402_rounds:
            x402_world = x402_rounds.X402World(
                workdir, tally, lambda port: FaultProxy(("127.0.0.1", port), upstream_timeout_s=12).start())
            for round_no in range(1, args.x402_rounds + 1):
                x402_rounds.run_x402_round(x402_world, rng, round_no, violations)
                tally.add("x402 rounds")
            print("x402 rounds: %d, %d violation(s) so far, %.0f s" % (
                args.x402_rounds, len(violations), time.monotonic() - started), flush=True)
        # Let every kept hold expire and be swept, then the final check.
        time.sleep((HOLD_TTL_MS + HOLD_SLACK_MS) / 1000.0)
        report, money_delta = check_books(world, "final", violations)
        extra = x402_rounds.summary_rows(x402_world, tally) if x402_world else [
            ("x402 kill -9 rounds", "skipped (%s)" % (x402_note or "--x402-rounds 0"))]
        if x402_world:
            x402_report = Books(x402_world.gw.audit())
            report.figures["double_charges"] += x402_report.figures["double_charges"]
        print_summary(args, world, tally, report, money_delta, violations, time.monotonic() - started, loss,
                      extra)
    finally:
        if x402_world:
            x402_world.stop()
        world.stop()
        loss.off()
        if violations:
            print("\nVIOLATIONS (%d):" % len(violations))
            for v in violations[:200]:
                print("  - " + v)
            print("gateway log: %s" % os.path.join(workdir, "gateway.log"))
        if not args.keep and not violations:
            shutil.rmtree(workdir, ignore_errors=True)
    ok = report is not None and not violations and report.figures["double_charges"] == 0 and report.figures["stuck_holds"] == 0 \
        and money_delta == 0 and report.figures["money_delta"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
