"""x402 kill -9 rounds of the fault suite (fault_suite.py --x402-rounds N): the real gateway settling on a
real Anvil (tests/chain_env), paid with EIP-3009 authorizations signed by viem, killed with SIGKILL at a
random moment of every round and restarted on the same database, with seller and client-leg faults too.

Each payment is one business action: a key, one signed authorization, retried with the same
PAYMENT-SIGNATURE until a final answer (never a second authorization: CONTRACT section 3). After each
round the suite waits for the reconciler to resolve every settlement, then checks the chain against the
books (x402_harness.money_violations: every settled operation is exactly one Transfer, nothing else
reached payTo, no authorization used twice, every relayer transaction accounted for), the store
invariants (invariants.py: one payment record per authorization, one operation per transaction), and,
per payment, that a client told 200 has a settled operation whose authorization is used on chain.

Anvil faults beyond kill -9 (automine off, dropped transactions, SIGSTOP) are the x402 integration
suite's (tests/integration/test_x402_gateway.py).
"""

import os
import random
import threading
import time

import harness
import invariants
import x402_harness as X

RECEIPT_TIMEOUT_MS = 2000
SETTLE_WAIT_S = 40.0
GATEWAY_ARGS = ("--sweep-interval-ms", "100", "--upstream-timeout-ms", "1500", "--attach-wait-ms", "1000",
                "--receipt-timeout-ms", str(RECEIPT_TIMEOUT_MS), "--hold-ttl-ms", "2000")
ROUTE_PRICES = {"/": X.PRICE, "/after": X.AFTER_PRICE}
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
        self.gw = X.X402Gateway(workdir, self.chain, self.seller.url, extra_args=GATEWAY_ARGS, name="x402-gateway")
        self.gw.start()
        self.proxy = proxy_factory(self.gw.port)
        self.challenges = {}
        for path in ROUTE_PRICES:
            _, _, required, _ = self.gw.challenge(path + ("/work" if path == "/after" else ""), "POST",
                                                   b"{}", "application/json")
            self.challenges[path] = (required["accepts"][0], required.get("resource"))

    def stop(self):
        self.proxy.stop()
        self.gw.stop()
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
    def __init__(self, world, rng, key, route, signed):
        self.world, self.rng, self.key, self.route = world, rng, key, route
        accepted, resource = world.challenges[route]
        self.payload = X.b64json(X.v2_payload(accepted, signed, resource))
        self.authorization = signed["message"]
        self.path = route + ("/work" if route == "/after" else "")
        self.final = None
        self.statuses = []

    def run(self):
        tally = self.world.tally
        deadline = time.monotonic() + 12.0
        for attempt in range(10):
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
                self.final = (r.status, r.operation_id)
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


def run_x402_round(world, rng, round_no, violations):
    count = rng.randint(2, 5)
    routes = [rng.choice(list(ROUTE_PRICES)) for _ in range(count)]
    signed = world.chain.sign([{"key": X.BUYER, "message": X.auth_message(
        world.chain, value=ROUTE_PRICES[route], valid_before=world.chain.now() + 600)} for route in routes])
    payments = [Payment(world, random.Random(rng.random()), "x%d-%d" % (round_no, i), route, s)
                for i, (route, s) in enumerate(zip(routes, signed))]
    threads = [threading.Thread(target=p.run, daemon=True) for p in payments]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, started + rng.uniform(0, 1.2) - time.monotonic()))
    world.kill_and_restart()
    for thread in threads:
        thread.join(timeout=40)
    where = "x402 round %d" % round_no
    wait_settled(world, violations, where)
    for p in payments:
        p.check(violations)
    for v in X.money_violations(world.chain, [world.gw]):
        violations.append("%s: chain: %s" % (where, v))
    for v in invariants.check(world.gw.db_path).violations:
        violations.append("%s: store: %s" % (where, v))


def summary_rows(world, tally):
    settled = len(world.gw.operations("settled"))
    transfers = len(world.chain.transfers_to_pay_to())
    answered = sorted((k, v) for k, v in tally.counts.items() if k.startswith("x402 payments answered"))
    return [("x402 rounds (each with kill -9 + restart)", tally.get("x402 rounds")),
            ("kill -9 of the x402 gateway", tally.get("kill -9 of the x402 gateway")),
            ("x402 requests", tally.get("x402 requests"))] + answered + [
            ("x402 payments without a final answer", tally.get("x402 payments without a final answer")),
            ("x402 settled operations / Transfers to payTo", "%d / %d" % (settled, transfers))]
