"""x402 kill -9 rounds of the fault suite (fault_suite.py --x402-rounds N): the real gateway settling on a
real Anvil (tests/chain_env), paid with EIP-3009 authorizations signed by viem, killed with SIGKILL at a
random moment of every round and restarted on the same database, with seller and client-leg faults too.

Each payment is one business action: a key, one signed authorization, retried with the same
PAYMENT-SIGNATURE until a final answer (never a second authorization: CONTRACT section 3). After each
round the suite waits for the reconciler to resolve every settlement, then checks the chain against the
books (x402_harness.money_violations: every settled operation is exactly one Transfer, nothing else
reached payTo, no authorization used twice, every relayer transaction accounted for, and the gateway's
books audit with its chain check: one payment record per authorization, one operation per transaction),
and,
per payment, that a client told 200 has a settled operation whose authorization is used on chain.

Anvil faults, drawn per round with the suite's seed next to the kill -9 (class AnvilFaults):
  - an automine-off window (1-3 s): settlements wait in the pool, payments get 202 settlement_unknown and
    are retried; then automine goes back on and a block is mined. A 200 answered before that block is a
    violation (nothing could have settled);
  - inside such a window, anvil_dropTransaction of one of the gateway's pending settlement transactions,
    the one with the lowest relayer nonce when several wait (a relayer nonce gap: the later ones cannot be
    mined before it): the reconciler must re-broadcast the same transaction (same hash) within 10 s, and
    once automine is back every transaction that waited behind the gap must be mined within 15 s;
  - SIGSTOP of Anvil for 1-3 s while the round's payments settle, then SIGCONT;
  - a reorganisation (anvil_reorg 1) of the latest block once it holds a settlement transaction: the
    gateway runs with --confirmations 2, so that settlement is not counted yet; the same transaction
    (same hash) must be mined again within 15 s, and the money check then finds one Transfer;
  - RPC failover: the gateway's first --chain-rpc is a proxy in front of Anvil (Anvil itself is the
    second); the proxy hangs for 1-3 s (calls taken, never answered), and payments go on through the
    second endpoint.
A block is mined every 0.5 s besides the transactions' own (automine), except in automine-off
windows and SIGSTOPs, so that every settlement gets the second block --confirmations 2 waits for.
"""

import os
import random
import threading
import time

import harness
import x402_harness as X

RECEIPT_TIMEOUT_MS = 2000
SETTLE_WAIT_S = 40.0
# The rounds sign validBefore = now + 600 (one signed payment is retried across kills and restarts);
# the gateway refuses a validBefore past now + maxTimeoutSeconds + 30 s, so it advertises 600.
GATEWAY_ARGS = ("--sweep-interval-ms", "100", "--upstream-timeout-ms", "1500", "--attach-wait-ms", "1000",
                "--receipt-timeout-ms", str(RECEIPT_TIMEOUT_MS), "--hold-ttl-ms", "2000",
                "--max-timeout-seconds", "600", "--confirmations", "2", "--rpc-timeout-ms", "1000")
ROUTE_PRICES = {"/": X.PRICE, "/after": X.AFTER_PRICE}
ANVIL_AUTOMINE_OFF_P, ANVIL_DROP_P, ANVIL_SIGSTOP_P = 0.35, 0.6, 0.3  # drop: given an automine-off window
ANVIL_REORG_P, RPC_HANG_P = 0.3, 0.3  # reorg: when automine stays on
REBROADCAST_WAIT_S = 10.0
REMINE_WAIT_S = 15.0
TICK_S = 0.5
SELLER_FAULTS = [("ok", 60), ("5xx", 12), ("slow:2200", 8), ("hang", 5), ("drop", 10), ("4xx", 5)]
NETWORK_ERRORS = (OSError, harness.http.client.HTTPException)


def weighted(rng, table):
    pick = rng.uniform(0, sum(w for _, w in table))
    for value, weight in table:
        if pick < weight:
            return value
        pick -= weight
    return table[-1][0]


def anvil_available():
    return os.path.exists(X.A.DEFAULT_ANVIL) or bool(os.environ.get("ANVIL_BIN"))


class X402World:
    def __init__(self, workdir, tally, proxy_factory):
        self.tally = tally
        self.chain = X.Chain()
        self.seller = harness.Seller(workdir, fault=None)
        self.seller.name = "x402-seller"
        self.seller.log_path = os.path.join(workdir, "x402-seller.log")
        self.seller.start()
        # Two endpoints of the one Anvil: a proxy that can hang first, the node itself second.
        self.rpc_proxy = X.CountingProxy(self.chain.url)
        self.gw = X.X402Gateway(workdir, self.chain, self.seller.url, chain_url=self.rpc_proxy.url,
                                extra_args=GATEWAY_ARGS + ("--chain-rpc", self.chain.url), name="x402-gateway")
        self.gw.start()
        self.ticking = threading.Event()  # cleared while automine is off or Anvil is stopped
        self.ticking.set()
        self.stopping = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()
        self.proxy = proxy_factory(self.gw.port)
        self.challenges = {}
        for path in ROUTE_PRICES:
            _, _, required, _ = self.gw.challenge(path + ("/work" if path == "/after" else ""), "POST",
                                                   b"{}", "application/json")
            self.challenges[path] = (required["accepts"][0], required.get("resource"))

    def _tick(self):
        """A block every TICK_S on top of automine's: the second block of --confirmations 2."""
        while not self.stopping.wait(TICK_S):
            if self.ticking.is_set():
                try:
                    self.chain.rpc.mine()
                except Exception:  # noqa: BLE001 - Anvil stopped or busy: the next tick
                    pass

    def stop(self):
        self.stopping.set()
        self.ticker.join(timeout=5)
        self.proxy.stop()
        self.gw.stop()
        self.rpc_proxy.stop()
        self.seller.kill9()
        self.chain.stop()

    def kill_and_restart(self):
        self.gw.kill9()
        self.tally.add("kill -9 of the x402 gateway")
        deadline = time.monotonic() + 10
        while True:
            try:
                self.gw.start()
                return
            except harness.ProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


class Payment:
    def __init__(self, world, rng, key, route, signed, deadline_s=12.0, attempts=10):
        self.world, self.rng, self.key, self.route = world, rng, key, route
        self.deadline_s, self.attempts = deadline_s, attempts
        self.final_at = None  # time.monotonic() of the final answer
        accepted, resource = world.challenges[route]
        self.payload = X.b64json(X.v2_payload(accepted, signed, resource))
        self.authorization = signed["message"]
        self.path = route + ("/work" if route == "/after" else "")
        self.final = None
        self.statuses = []

    def run(self):
        tally = self.world.tally
        deadline = time.monotonic() + self.deadline_s
        for attempt in range(self.attempts):
            if time.monotonic() > deadline:
                break
            fault = weighted(self.rng, SELLER_FAULTS) if attempt == 0 else "ok"
            mode = self.rng.choice(["pass"] * 8 + ["drop_response", "cut_midstream"])
            if fault != "ok":
                tally.add("fault: x402 seller " + fault.split(":")[0])
            headers = {"PAYMENT-SIGNATURE": self.payload, "Idempotency-Key": self.key,
                       "Content-Type": "application/json", "X-Seller-Fault": fault, "X-Fault-Proxy-Mode": mode}
            tally.add("x402 requests")
            try:
                r = harness.http_request(self.world.proxy.port, "POST", self.path, body=b'{"x402":true}',
                                         headers=headers, timeout=8)
            except NETWORK_ERRORS:
                self.statuses.append("net")
                time.sleep(self.rng.uniform(0.1, 0.3))
                continue
            length = r.header("Content-Length")
            if length is None or int(length) != len(r.body):
                self.statuses.append("cut")
                continue
            self.statuses.append(r.status)
            if r.status == 200 or 400 <= r.status < 500 and r.status != 409:
                self.final, self.final_at = (r.status, r.operation_id), time.monotonic()
                return
            time.sleep(self.rng.uniform(0.1, 0.4))  # 202 (in progress, settlement unknown), 409, 5xx

    def check(self, violations):
        where = "x402 payment %s (%s; answers %r)" % (self.key, self.route, self.statuses)
        if self.final is None:
            self.world.tally.add("x402 payments without a final answer")
            return
        status, op_id = self.final
        self.world.tally.add("x402 payments answered %d" % status)
        if status == 402:
            violations.append("%s: 402 for a valid authorization retried with its own key" % where)
            return
        op = self.world.gw.operation(op_id) if op_id else None
        if status == 200:
            if not op or op["settlement"] != "settled" or op["fulfillment"] != "succeeded":
                violations.append("%s: told 200, the operation is %r" % (where, op))
            elif not self.world.chain.used(self.authorization["from"], self.authorization["nonce"]):
                violations.append("%s: told 200 but the authorization is unused on chain" % where)


def wait_settled(world, violations, where):
    deadline = time.monotonic() + SETTLE_WAIT_S
    while time.monotonic() < deadline:
        if not world.gw.in_flight():
            return
        time.sleep(0.2)
    violations.append("%s: settlements still in flight after %.0f s: %r" % (
        where, SETTLE_WAIT_S, [(o["id"], o["settlement"]) for o in world.gw.in_flight()]))


class AnvilFaults:
    """One round's Anvil faults (drawn from the round's rng), run on a thread next to the payments."""

    def __init__(self, world, rng, violations, where):
        self.world, self.violations, self.where = world, violations, where
        self.rng = random.Random(rng.random())
        self.automine_off = rng.random() < ANVIL_AUTOMINE_OFF_P
        self.drop = self.automine_off and rng.random() < ANVIL_DROP_P
        self.sigstop = rng.random() < ANVIL_SIGSTOP_P
        self.reorg = not self.automine_off and rng.random() < ANVIL_REORG_P
        self.rpc_hang = rng.random() < RPC_HANG_P
        self.hang_after_s, self.hang_for_s = rng.uniform(0.0, 0.8), rng.uniform(1.0, 3.0)
        self.window_s = rng.uniform(1.0, 3.0)
        self.stop_after_s, self.stop_for_s = rng.uniform(0.05, 0.8), rng.uniform(1.0, 3.0)
        self.mined_at = None  # time.monotonic() when automine went back on (None: it never went off)
        self.behind_gap = []  # hashes of the settlement transactions that waited behind a dropped one
        self.restored = False
        self.thread = None

    def any(self):
        return self.automine_off or self.sigstop or self.reorg or self.rpc_hang

    def start(self):
        """Before the payments start: automine off (so their settlements wait in the pool), then the thread."""
        if self.automine_off:
            self.world.ticking.clear()
            self.world.chain.rpc.set_automine(False)
            self.world.tally.add("Anvil automine-off windows")
        self.started = time.monotonic()
        if self.rpc_hang:
            threading.Thread(target=self._hang_rpc, daemon=True).start()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        chain, tally = self.world.chain, self.world.tally
        try:
            if self.sigstop:
                time.sleep(self.stop_after_s)
                self.world.ticking.clear()
                chain.node.pause()
                tally.add("Anvil SIGSTOPs")
                time.sleep(self.stop_for_s)
                chain.node.resume()
                if not self.automine_off:
                    self.world.ticking.set()
            if self.drop:
                self._drop_one()
            if self.reorg:
                self._reorg_one()
            if self.automine_off:
                time.sleep(max(0.0, self.started + self.window_s - time.monotonic()))
        except Exception as error:  # noqa: BLE001 - reported as a violation, the round goes on
            self.violations.append("%s: Anvil fault thread: %r" % (self.where, error))
        finally:
            self.end()

    def _drop_one(self):
        chain = self.world.chain
        deadline = time.monotonic() + self.window_s + 5.0
        pending = chain.pending_relayer_txs()
        while not pending and time.monotonic() < deadline:
            time.sleep(0.05)
            pending = chain.pending_relayer_txs()
        if not pending:
            self.world.tally.add("Anvil drops skipped (no settlement tx in the pool)")
            return
        if len(pending) >= 2:
            # A gap: the lowest relayer nonce goes, the later transactions wait behind it.
            lowest = min(pending, key=lambda t: int(t["nonce"], 16))
            h = lowest["hash"]
            self.behind_gap = [t["hash"] for t in pending if t["hash"] != h]
            self.world.tally.add("relayer nonce gaps (lowest nonce dropped, later ones waiting)")
        else:
            h = pending[0]["hash"]
        chain.rpc.drop_transaction(h)
        if chain.tx(h) is not None:
            # Back already: the gateway's reconciler re-sends the stored bytes of a transaction the
            # node lost, as it should, and may do so between the drop and this look. Not a fault of
            # the gateway; the round's money checks say whether it settled once.
            self.world.tally.add("Anvil drops re-sent by the gateway before the harness looked")
            return
        self.world.tally.add("Anvil dropped txs")
        deadline = time.monotonic() + REBROADCAST_WAIT_S
        while chain.tx(h) is None:
            if time.monotonic() > deadline:
                self.violations.append("%s: dropped settlement tx %s not re-broadcast within %.0f s (relayer txs "
                                       "in the pool: %r)" % (self.where, h, REBROADCAST_WAIT_S,
                                                             [t["hash"] for t in chain.pending_relayer_txs()]))
                return
            time.sleep(0.05)
        self.world.tally.add("Anvil dropped txs re-broadcast")

    def _hang_rpc(self):
        """The gateway's first RPC endpoint stops answering for a while; the second is Anvil itself."""
        time.sleep(self.hang_after_s)
        self.world.rpc_proxy.pause()
        self.world.tally.add("RPC endpoint hangs (failover)")
        time.sleep(self.hang_for_s)
        self.world.rpc_proxy.resume()

    def _reorg_one(self):
        """Once the latest block holds a settlement, it is replaced by an empty one (anvil_reorg 1)."""
        chain = self.world.chain
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            head = chain.rpc.block_number()
            mined = [t["tx"] for t in chain.transfers_to_pay_to() if t["block"] == head]
            if mined:
                break
            time.sleep(0.02)
        else:
            self.world.tally.add("Anvil reorgs skipped (no settlement in the latest block)")
            return
        self.world.ticking.clear()  # no block between the look and the reorg
        # Nor a transaction: Anvil 1.7.1 mining a transaction while anvil_reorg runs has been seen to
        # lose a block below its head (eth_getBlockByNumber null) and keep its logs, a state no real
        # node shows. The gateway is paused for the reorg; what it already sent lands first.
        try:
            with self.world.gw.frozen():
                if chain.rpc.block_number() != head:
                    self.world.tally.add("Anvil reorgs skipped (no settlement in the latest block)")
                    return
                chain.rpc.reorg(1)
        finally:
            self.world.ticking.set()
        self.world.tally.add("Anvil reorgs of a block with a settlement")
        h = mined[0]
        deadline = time.monotonic() + REMINE_WAIT_S
        while chain.rpc.receipt(h) is None:
            if time.monotonic() > deadline:
                self.violations.append("%s: settlement tx %s of a reorganised block not mined again within "
                                       "%.0f s" % (self.where, h, REMINE_WAIT_S))
                return
            time.sleep(0.05)
        self.world.tally.add("Anvil reorged settlements mined again")

    def end(self):
        """Idempotent: Anvil running, automine on, the pool mined, the ticker on, the RPC proxy flowing."""
        chain = self.world.chain
        chain.node.resume()
        self.world.rpc_proxy.resume()
        if self.automine_off and not self.restored:
            if self.mined_at is None:
                self.mined_at = time.monotonic()  # no block before this instant (automine off, nobody mines)
            chain.rpc.set_automine(True)
            chain.rpc.mine()
            self.restored = True
        self.world.ticking.set()

    def join(self, violations, payments):
        self.thread.join(timeout=60)
        if self.thread.is_alive():
            violations.append("%s: Anvil fault thread still running after 60 s" % self.where)
        self.end()
        if self.behind_gap:
            deadline = self.mined_at + REMINE_WAIT_S
            waiting = list(self.behind_gap)
            while waiting and time.monotonic() < deadline:
                waiting = [h for h in waiting if self.world.chain.rpc.receipt(h) is None]
                time.sleep(0.05)
            if waiting:
                violations.append("%s: settlement txs behind a relayer nonce gap not mined within %.0f s of "
                                  "automine: %r" % (self.where, REMINE_WAIT_S, waiting))
            else:
                self.world.tally.add("relayer nonce gaps closed (later ones mined)")
        if self.automine_off:
            for p in payments:
                if p.final and p.final[0] == 200 and p.final_at < self.mined_at:
                    violations.append("%s: x402 payment %s answered 200 while automine was off, before any "
                                      "block was mined" % (self.where, p.key))


def run_x402_round(world, rng, round_no, violations):
    where = "x402 round %d" % round_no
    faults = AnvilFaults(world, rng, violations, where)
    limits = dict(deadline_s=20.0, attempts=16) if faults.any() else {}
    count = rng.randint(2, 5)
    routes = [rng.choice(list(ROUTE_PRICES)) for _ in range(count)]
    signed = world.chain.sign([{"key": X.BUYER, "message": X.auth_message(
        world.chain, value=ROUTE_PRICES[route], valid_before=world.chain.now() + 600)} for route in routes])
    payments = [Payment(world, random.Random(rng.random()), "x%d-%d" % (round_no, i), route, s, **limits)
                for i, (route, s) in enumerate(zip(routes, signed))]
    threads = [threading.Thread(target=p.run, daemon=True) for p in payments]
    faults.start()
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, started + rng.uniform(0, 1.2) - time.monotonic()))
    world.kill_and_restart()
    for thread in threads:
        thread.join(timeout=40)
    faults.join(violations, payments)
    wait_settled(world, violations, where)
    for p in payments:
        p.check(violations)
    for v in X.money_violations(world.chain, [world.gw]):
        violations.append("%s: chain: %s" % (where, v))


def summary_rows(world, tally):
    settled = len(world.gw.operations("settled"))
    transfers = len(world.chain.transfers_to_pay_to())
    answered = sorted((k, v) for k, v in tally.counts.items() if k.startswith("x402 payments answered"))
    return [("x402 rounds (each with kill -9 + restart)", tally.get("x402 rounds")),
            ("kill -9 of the x402 gateway", tally.get("kill -9 of the x402 gateway")),
            ("Anvil faults: automine-off windows / dropped txs (re-broadcast) / SIGSTOPs", "%d / %d (%d) / %d" % (
                tally.get("Anvil automine-off windows"), tally.get("Anvil dropped txs"),
                tally.get("Anvil dropped txs re-broadcast"), tally.get("Anvil SIGSTOPs"))),
            ("relayer nonce gaps (closed, the later transactions mined)", "%d (%d)" % (
                tally.get("relayer nonce gaps (lowest nonce dropped, later ones waiting)"),
                tally.get("relayer nonce gaps closed (later ones mined)"))),
            ("Anvil reorgs of a block with a settlement (mined again) / RPC endpoint hangs", "%d (%d) / %d" % (
                tally.get("Anvil reorgs of a block with a settlement"),
                tally.get("Anvil reorged settlements mined again"), tally.get("RPC endpoint hangs (failover)"))),
            ("x402 requests", tally.get("x402 requests"))] + answered + [
            ("x402 payments without a final answer", tally.get("x402 payments without a final answer")),
            ("x402 settled operations / Transfers to payTo", "%d / %d" % (settled, transfers))]
