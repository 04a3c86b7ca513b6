#!/usr/bin/env python3
"""Black-box integration tests of the agent client, `agentpay pay` (CONTRACT.md section 6, issue 5).

Real processes only: Anvil with TestUSDC (tests/chain_env), the demo seller, `agentpay serve --chain-rpc ...`
(x402_harness.X402Gateway), the reference x402 server (@x402/express + facilitator, reference_server.mjs), and
`agentpay pay` run as separate processes sharing one budget file. Money is checked on chain: every Transfer
out of a buyer is accounted for (x402_harness.money_violations after each test), budgets are never exceeded,
and what the budget file calls spent equals what moved on chain.

Faults come from the fault suite's proxy (tests/fault/fault_proxy.py, FaultProxy) with paid_only modes:
drop_response forwards a paid request and closes the client's connection without the answer (a response
lost after the server charged); drop_request closes it without forwarding (a request that never arrived).
Its log records each exchange's Idempotency-Key and the SHA-256 of its PAYMENT-SIGNATURE / X-PAYMENT, so
the tests check that every attempt re-presented the same signed payment.

Run:  python3 tests/integration/test_agent_client.py --agentpay build/agentpay [unittest args, e.g. -k budget]
Needs tests/chain_env installed (bash tests/chain_env/install.sh). AGENTPAY_IT_KEEP=1 keeps the temp dirs.
"""

import json
import os
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fault"))

import harness  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import (BUYER, BUYER2, PAY_TO, PRICE, STRANGER, A, X402TestCase,  # noqa: E402
                          deadline_poll, eq_addr, unb64json)

PAY_TIMEOUT_S = 90
SWEEP = ("--sweep-interval-ms", "200")


# ----------------------------------------------------------------------------------------------- proxy

def fault_proxy(test, upstream_port, mode, count=None):
    """A FaultProxy in front of `upstream_port` whose `mode` applies to paid requests only (one-shot when
    `count` is given); stopped when the test ends."""
    proxy = FaultProxy(("127.0.0.1", upstream_port)).start()
    test.addCleanup(proxy.stop)
    proxy.set_mode(mode, count=count, paid_only=True)
    return proxy


def proxy_url(proxy, path):
    return "http://127.0.0.1:%d%s" % (proxy.port, path)


def paid_exchanges(proxy):
    """The proxy's log entries of paid requests, in the order they were handled."""
    return [e for e in proxy.log() if e["paid"]]


# ----------------------------------------------------------------------------------------------- client

class PayRun:
    """One finished `agentpay pay` process: exit code, its --json object, its stderr."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv, self.rc, self.stdout, self.stderr = argv, rc, stdout, stderr
        lines = stdout.strip().splitlines()
        self.out = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None

    def __repr__(self):
        return "<agentpay pay rc=%s out=%s stderr=%s>" % (self.rc, json.dumps(self.out)[:1500],
                                                          self.stderr[-2500:])


def pay_argv(url, budget_db, *extra):
    return [harness.binary(), "pay", url, "--budget-db", budget_db, "--json"] + [str(a) for a in extra]


def run_pay(url, budget_db, *extra, timeout=PAY_TIMEOUT_S):
    argv = pay_argv(url, budget_db, *extra)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return PayRun(argv, p.returncode, p.stdout, p.stderr)


def start_pay(url, budget_db, *extra):
    argv = pay_argv(url, budget_db, *extra)
    return argv, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_pay(started, timeout=PAY_TIMEOUT_S):
    argv, proc = started
    stdout, stderr = proc.communicate(timeout=timeout)
    return PayRun(argv, proc.returncode, stdout, stderr)


def agentpay(*args, timeout=60):
    p = subprocess.run([harness.binary()] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def budget_json(budget_db):
    rc, out, err = agentpay("pay", "budget", "--budget-db", budget_db, "--json")
    if rc != 0:
        raise AssertionError("agentpay pay budget failed (%d): %s" % (rc, err))
    return json.loads(out)


def reconcile(budget_db, chain_url=None, api_key=None):
    args = ["pay", "reconcile", "--budget-db", budget_db, "--json"]
    if chain_url:
        args += ["--chain-rpc", chain_url]
    if api_key:
        args += ["--api-key", api_key]
    rc, out, err = agentpay(*args)
    return rc, (json.loads(out) if out.strip() else None), err


def stored_row(budget_db, key):
    """The reservation row as the budget file holds it (read-only), including the signed header."""
    db = sqlite3.connect("file:%s?mode=ro" % budget_db, uri=True, timeout=10)
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM reservations WHERE key = ?", (key,)).fetchone()
        return dict(row) if row else None
    finally:
        db.close()


def write_key(workdir, name, account):
    path = os.path.join(workdir, name)
    harness.write_secret(path, account.private_key + "\n")
    return path


def buyer_transfers(chain, buyer, to=PAY_TO):
    return [t for t in chain.transfers(from_=buyer.address) if eq_addr(t["to"], to.address)]


def tx_hashes(transfers):
    return {t["tx"].lower() for t in transfers}


class ClientTestCase(X402TestCase):
    """X402TestCase plus a per-test budget file name and the buyer key files."""

    def setUp(self):
        super().setUp()
        self.n = getattr(type(self), "_n", 0) + 1
        type(self)._n = self.n
        self.db = os.path.join(self.workdir, "budget-%s-%d.db" % (self._testMethodName, self.n))
        self.buyer_key = write_key(self.workdir, "buyer.key", BUYER)
        self.buyer2_key = write_key(self.workdir, "buyer2.key", BUYER2)

    def assertBudget(self, budget_db, committed, spent, states):
        b = budget_json(budget_db)
        self.assertEqual((int(b["committed"]), int(b["spent"])), (committed, spent), b)
        self.assertLessEqual(int(b["committed"]), int(b["total"]), b)
        got = sorted(r["state"] for r in b["reservations"])
        self.assertEqual(got, sorted(states), b)
        return b

    def wallet_gateway(self):
        """A wallet-only gateway of its own (built-in devnet, SQLite in a subdir), in front of the same
        seller; its ledger invariants (harness.assert_invariants) are checked when the test ends. It is
        kept out of the on-chain money check, which reads only the x402 gateways."""
        workdir = os.path.join(self.workdir, "wallet-%d" % self.n)
        os.makedirs(workdir)
        gw = harness.Gateway(workdir, self.seller.url, price=PRICE,
                             extra_args=SWEEP + ("--hold-ttl-ms", "3000"))
        self.addCleanup(gw.stop)
        gw.start()
        self.addCleanup(lambda: harness.assert_invariants(self, gw) if gw.alive() else None)
        return gw


# ================================================================================================
class AgentClientTest(ClientTestCase):
    """Anvil automining; the gateway's wallet and x402 paths, the reference server, and the fault proxy."""

    gateway_args = SWEEP

    def test_eight_concurrent_x402_payers_share_a_budget_of_five(self):
        before = tx_hashes(buyer_transfers(self.chain, BUYER))
        url = self.gw.url("/report")
        started = [start_pay(url, self.db, "--buyer-key-file", self.buyer_key, "--budget", 5 * PRICE,
                             "--task", "concurrent-x402", "--step", i) for i in range(8)]
        runs = [finish_pay(s) for s in started]
        codes = sorted(r.rc for r in runs)
        self.assertEqual(codes, [0] * 5 + [4] * 3, runs)
        paid = [r for r in runs if r.rc == 0]
        refused = [r for r in runs if r.rc == 4]
        for r in refused:
            self.assertEqual((r.out["outcome"], r.out["attempts"], r.out["reservation_state"]),
                             ("over_budget", 0, ""), r)
        new = tx_hashes(buyer_transfers(self.chain, BUYER)) - before
        self.assertEqual(len(new), 5, "exactly five payments on chain, got %r" % new)
        self.assertEqual({r.out["evidence"]["transaction"].lower() for r in paid}, new, paid)
        for r in paid:
            self.assertEqual((r.out["outcome"], r.out["amount"], r.out["attempts"]), ("paid", str(PRICE), 1), r)
            self.assertEqual(json.loads(r.out["body"]).get("ok"), True, r)
        b = self.assertBudget(self.db, 5 * PRICE, 5 * PRICE, ["spent"] * 5)
        self.assertEqual(int(b["total"]), 5 * PRICE, b)
        keys = {r["key"] for r in b["reservations"]}
        self.assertEqual(keys, {r.out["key"] for r in paid}, "the over-budget runs reserved nothing")

    def test_eight_concurrent_wallet_payers_share_a_budget_of_five(self):
        gw = self.wallet_gateway()
        acct = gw.create_account("agent", deposit=100 * PRICE)
        url = "http://127.0.0.1:%d/wallet-work" % gw.port
        started = [start_pay(url, self.db, "--api-key", acct.api_key, "--budget", 5 * PRICE,
                             "--task", "concurrent-wallet", "--step", i, "-d", '{"n":%d}' % i,
                             "-H", "Content-Type: application/json") for i in range(8)]
        runs = [finish_pay(s) for s in started]
        self.assertEqual(sorted(r.rc for r in runs), [0] * 5 + [4] * 3, runs)
        account = gw.account(acct)
        self.assertEqual((account["captured"], account["held"]), (5 * PRICE, 0), account)
        self.assertEqual(len(gw.admin_operations()), 5, "the over-budget runs sent nothing")
        self.assertBudget(self.db, 5 * PRICE, 5 * PRICE, ["spent"] * 5)

    def test_response_lost_after_the_gateway_charged_is_retried_with_the_same_signature(self):
        proxy = fault_proxy(self, self.gw.port, "drop_response", count=1)
        before = tx_hashes(buyer_transfers(self.chain, BUYER))
        executed = self.seller.executed()
        r = run_pay(proxy_url(proxy, "/lost"), self.db, "--buyer-key-file", self.buyer_key, "--budget", 10 * PRICE,
                    "--task", "lost-response", "--step", 1, "--max-attempts", 4)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((r.out["outcome"], r.out["attempts"], r.out["replayed"]), ("paid", 2, True), r)
        self.assertEqual(json.loads(r.out["body"]).get("ok"), True, r)
        self.assertEqual(proxy.stats()["responses_dropped"], 1)
        paid = paid_exchanges(proxy)
        self.assertEqual([(e["mode"], e["status"]) for e in paid], [("drop_response", 200), ("pass", 200)],
                         "the dropped answer was the paid 200, then one re-send: %r" % paid)
        first, second = paid
        self.assertIsNotNone(first["payment_sha256"], first)
        self.assertEqual(first["payment_sha256"], second["payment_sha256"], "same signed payment")
        self.assertEqual(first["idempotency_key"], second["idempotency_key"])
        self.assertEqual(first["idempotency_key"], r.out["key"])
        new = tx_hashes(buyer_transfers(self.chain, BUYER)) - before
        self.assertEqual(len(new), 1, "exactly one Transfer on chain: %r" % new)
        self.assertEqual({r.out["evidence"]["transaction"].lower()}, new, r)
        self.assertEqual(self.seller.executed(), executed + 1, "the upstream ran once")
        self.assertBudget(self.db, PRICE, PRICE, ["spent"])

    def test_x402_v1_payment(self):
        before = tx_hashes(buyer_transfers(self.chain, BUYER2))
        r = run_pay(self.gw.url("/v1"), self.db, "--buyer-key-file", self.buyer2_key, "--budget", PRICE,
                    "--idempotency-key", "v1-order-1", "--x402-version", 1)
        self.assertEqual((r.rc, r.out["outcome"]), (0, "paid"), r)
        self.assertEqual(stored_row(self.db, "v1-order-1")["x402_version"], 1)
        self.assertEqual(len(tx_hashes(buyer_transfers(self.chain, BUYER2)) - before), 1)
        again = run_pay(self.gw.url("/v1"), self.db, "--buyer-key-file", self.buyer2_key,
                        "--idempotency-key", "v1-order-1", "--x402-version", 1)
        self.assertEqual((again.rc, again.out["replayed"]), (0, True), again)
        self.assertEqual(len(tx_hashes(buyer_transfers(self.chain, BUYER2)) - before), 1, "no second payment")
        self.assertBudget(self.db, PRICE, PRICE, ["spent"])

    def test_wallet_exit_3_when_attempts_run_out_then_reconciled_by_the_gateway(self):
        gw = self.wallet_gateway()
        acct = gw.create_account("agent-5xx", deposit=10 * PRICE)
        executed = self.seller.executed()
        r = run_pay("http://127.0.0.1:%d/flaky" % gw.port, self.db, "--api-key", acct.api_key,
                    "--budget", 3 * PRICE, "--task", "flaky", "--step", 7, "--max-attempts", 3,
                    "-H", "X-Seller-Fault: 5xx")
        self.assertEqual((r.rc, r.out["outcome"], r.out["attempts"]), (3, "unknown", 3), r)
        self.assertEqual(r.out["reservation_state"], "unknown", r)
        self.assertTrue(r.out["operation_id"], r)
        self.assertEqual(self.seller.executed(), executed, "5xx: nothing executed")
        self.assertBudget(self.db, PRICE, 0, ["unknown"])
        self.assertEqual(gw.account(acct)["held"], PRICE, "the gateway keeps the hold")
        # Without the account's key the gateway shows nothing: kept, and says why.
        rc, rep, err = reconcile(self.db)
        self.assertEqual(rc, 3, err)
        self.assertIn("needs --api-key", rep["kept"][0]["why"], rep)
        # Reconcile while the gateway still holds the money: kept.
        rc, rep, err = reconcile(self.db, api_key=acct.api_key)
        self.assertEqual(rc, 3, err)
        self.assertEqual([c["to"] for c in rep["kept"]], ["unknown"], rep)
        self.assertIn("held", rep["kept"][0]["why"], rep)
        # The hold expires (--hold-ttl-ms 3000) and the sweeper releases it: reconcile releases too.
        deadline_poll(lambda: gw.operation(r.out["operation_id"])["settlement"] == "released", 15,
                      what="the sweeper to release the hold")
        rc, rep, err = reconcile(self.db, api_key=acct.api_key)
        self.assertEqual(rc, 0, err)
        self.assertEqual([(c["from"], c["to"]) for c in rep["changes"]], [("unknown", "released")], rep)
        self.assertBudget(self.db, 0, 0, ["released"])
        self.assertEqual(gw.account(acct)["captured"], 0)

    def test_reconcile_releases_only_after_expiry_plus_buffer_and_an_unused_nonce(self):
        proxy = fault_proxy(self, self.gw.port, "drop_request")
        url = proxy_url(proxy, "/never-arrives")
        runs = {}
        for step in (1, 2):
            runs[step] = run_pay(url, self.db, "--buyer-key-file", self.buyer_key, "--budget", 4 * PRICE,
                                 "--task", "black-hole", "--step", step, "--max-attempts", 2,
                                 "--timeout-ms", 5000)
            self.assertEqual((runs[step].rc, runs[step].out["reservation_state"]), (3, "unknown"), runs[step])
        self.assertEqual(proxy.stats()["requests_dropped"], 4, "2 attempts each, none forwarded")
        paid = paid_exchanges(proxy)
        self.assertEqual([(e["mode"], e["status"]) for e in paid], [("drop_request", None)] * 4, paid)
        for step in (1, 2):
            attempts = [e for e in paid if e["idempotency_key"] == runs[step].out["key"]]
            self.assertEqual(len(attempts), 2, paid)
            self.assertEqual(len({e["payment_sha256"] for e in attempts}), 1, "same signed payment: %r" % attempts)
        self.assertBudget(self.db, 2 * PRICE, 0, ["unknown", "unknown"])
        unused, used = (stored_row(self.db, runs[s].out["key"]) for s in (1, 2))
        # Someone relays step 2's authorization (the header is in the budget file): it is used on chain.
        payload = unb64json(used["payment_header"])
        auth = payload["payload"]["authorization"]
        self.chain.pay_directly(auth, payload["payload"]["signature"])
        self.assertTrue(self.chain.used(used["payer"], used["nonce"]))
        self.assertFalse(self.chain.used(unused["payer"], unused["nonce"]))

        rc, rep, err = reconcile(self.db, self.chain.url)
        self.assertEqual(rc, 3, err)
        self.assertEqual([(c["key"], c["to"]) for c in rep["changes"]], [(used["key"], "spent")], rep)
        self.assertEqual([(c["key"], c["to"]) for c in rep["kept"]], [(unused["key"], "unknown")], rep)
        self.assertIn("not expired", rep["kept"][0]["why"], rep)
        self.assertIn(stored_row(self.db, used["key"])["tx_hash"], [t["tx"] for t in
                                                                  buyer_transfers(self.chain, BUYER)])
        rpc = self.chain.rpc
        snapshot = rpc.snapshot()
        try:
            # Past validBefore but inside the 30 s buffer: still kept.
            rpc.increase_time(unused["valid_before_s"] - rpc.block_timestamp() + 5)
            rpc.mine()
            rc, rep, err = reconcile(self.db, self.chain.url)
            self.assertEqual((rc, [c["to"] for c in rep["kept"]], rep["changes"]), (3, ["unknown"], []), rep)
            self.assertBudget(self.db, 2 * PRICE, PRICE, ["spent", "unknown"])
            # Past validBefore + buffer, nonce unused on chain: released.
            rpc.increase_time(30)
            rpc.mine()
            self.assertGreaterEqual(rpc.block_timestamp(), unused["valid_before_s"] + 30)
            rc, rep, err = reconcile(self.db, self.chain.url)
            self.assertEqual(rc, 0, err)
            self.assertEqual([(c["key"], c["from"], c["to"]) for c in rep["changes"]],
                             [(unused["key"], "unknown", "released")], rep)
            self.assertFalse(self.chain.used(unused["payer"], unused["nonce"]))
            self.assertBudget(self.db, PRICE, PRICE, ["spent", "released"])
        finally:
            self.assertTrue(rpc.revert(snapshot))

    def test_reference_server_lost_response_costs_one_payment_and_reports_paid_not_delivered(self):
        port = X.start_reference_server(self, STRANGER.address, "reference-%d.log" % self.n)
        proxy = fault_proxy(self, port, "drop_response", count=1)
        before = tx_hashes(buyer_transfers(self.chain, BUYER2, to=STRANGER))
        r = run_pay(proxy_url(proxy, "/paid"), self.db, "--buyer-key-file", self.buyer2_key, "--budget", 3 * PRICE,
                    "--task", "reference", "--step", 1, "--max-attempts", 4, "--chain-rpc", self.chain.url)
        new = tx_hashes(buyer_transfers(self.chain, BUYER2, to=STRANGER)) - before
        # The reference server settled once; account for it in the money check of tearDown.
        for _ in new:
            self.chain.direct.append((BUYER2.address.lower(), STRANGER.address.lower(), PRICE))
        self.assertEqual(len(new), 1, "exactly one payment on chain: %r (%r)" % (new, r))
        self.assertEqual((r.rc, r.out["outcome"]), (3, "paid_not_delivered"), r)
        self.assertIn("nonce_already_used", r.out["reason"], r)
        paid = paid_exchanges(proxy)
        self.assertEqual([e["mode"] for e in paid], ["drop_response", "pass"], "one send, one re-send: %r" % paid)
        self.assertIsNotNone(paid[0]["payment_sha256"], paid)
        self.assertEqual(paid[0]["payment_sha256"], paid[1]["payment_sha256"],
                         "the same signature was re-presented, never a new one")
        ev = r.out["evidence"]
        row = stored_row(self.db, r.out["key"])
        self.assertTrue(eq_addr(ev["payer"], BUYER2.address), ev)
        self.assertEqual(ev["nonce"], row["nonce"], ev)
        self.assertIs(ev.get("authorization_used"), True, ev)
        self.assertEqual({ev["transaction"].lower()}, new, ev)
        self.assertTrue(self.chain.used(BUYER2.address, row["nonce"]))
        self.assertIn("paid, not delivered", r.stderr, r)
        self.assertBudget(self.db, PRICE, PRICE, ["spent"])


# ================================================================================================
class AgentClientUnknownSettlementTest(ClientTestCase):
    """Anvil with automine off: the gateway answers 202 settlement_unknown until a block is mined."""

    automine = False
    gateway_args = SWEEP + ("--receipt-timeout-ms", "800")

    def test_202_is_polled_until_settled_then_served(self):
        before = tx_hashes(buyer_transfers(self.chain, BUYER))
        started = start_pay(self.gw.url("/slow-chain"), self.db, "--buyer-key-file", self.buyer_key,
                            "--budget", 2 * PRICE, "--task", "poll", "--step", 1, "--timeout-ms", 40000)
        op = deadline_poll(lambda: next(iter(self.gw.operations("unknown")), None), 20,
                           what="the payment's settlement to become unknown")
        time.sleep(1.0)  # the client is polling the operation now
        self.assertIsNone(started[1].poll(), "the client must still be waiting")
        self.chain.rpc.mine()
        r = finish_pay(started)
        self.assertEqual((r.rc, r.out["outcome"]), (0, "paid"), r)
        self.assertEqual(r.out["attempts"], 2, "one 202, one re-send after settlement: %r" % r)
        self.assertEqual(r.out["operation_id"], op["id"], r)
        self.assertIn("following /v1/operations/%s" % op["id"], r.stderr, r)
        new = tx_hashes(buyer_transfers(self.chain, BUYER)) - before
        self.assertEqual(len(new), 1, new)
        self.assertEqual({r.out["evidence"]["transaction"].lower()}, new, r)
        self.assertBudget(self.db, PRICE, PRICE, ["spent"])

    def test_exit_3_keeps_state_then_reconcile_and_rerun_never_pay_twice(self):
        before = tx_hashes(buyer_transfers(self.chain, BUYER))
        r = run_pay(self.gw.url("/stuck"), self.db, "--buyer-key-file", self.buyer_key, "--budget", 2 * PRICE,
                    "--task", "stuck", "--step", 1, "--max-attempts", 2, "--timeout-ms", 3000)
        self.assertEqual((r.rc, r.out["outcome"], r.out["reservation_state"]), (3, "unknown", "unknown"), r)
        b = self.assertBudget(self.db, PRICE, 0, ["unknown"])
        kept = b["reservations"][0]
        row = stored_row(self.db, kept["key"])
        self.assertTrue(row["payment_header"] and kept["nonce"] and kept["valid_before_s"] > time.time(), kept)
        # Before the chain moves: reconcile keeps it (unused, not expired).
        rc, rep, _ = reconcile(self.db, self.chain.url)
        self.assertEqual((rc, [c["to"] for c in rep["kept"]]), (3, ["unknown"]), rep)
        # The block that settles it: the gateway's reconciler marks it settled, reconcile marks it spent.
        self.chain.rpc.mine()
        op = self.gw.wait_settlement(r.out["operation_id"], "settled")
        rc, rep, _ = reconcile(self.db, self.chain.url)
        self.assertEqual((rc, [(c["from"], c["to"]) for c in rep["changes"]]), (0, [("unknown", "spent")]), rep)
        self.assertEqual(stored_row(self.db, kept["key"])["tx_hash"], op["tx_hash"].lower())
        # Running the step again re-presents the same signed payment and is served, without paying again.
        again = run_pay(self.gw.url("/stuck"), self.db, "--buyer-key-file", self.buyer_key,
                        "--task", "stuck", "--step", 1)
        self.assertEqual((again.rc, again.out["outcome"]), (0, "paid"), again)
        self.assertEqual(stored_row(self.db, kept["key"])["payment_header"], row["payment_header"])
        new = tx_hashes(buyer_transfers(self.chain, BUYER)) - before
        self.assertEqual(new, {op["tx_hash"].lower()})
        self.assertBudget(self.db, PRICE, PRICE, ["spent"])


if __name__ == "__main__":
    X.main(sys.argv)
