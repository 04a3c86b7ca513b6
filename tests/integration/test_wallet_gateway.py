#!/usr/bin/env python3
"""Black-box integration tests of the AgentPay wallet gateway (CONTRACT.md sections 1-4 and 8).

Every test starts a real `agentpay seller` and `agentpay serve` on loopback with its own SQLite file, drives
them over HTTP, asserts exact statuses, headers, balances and seller execution counts, and finally checks
the money invariants (harness.assert_invariants) against both the API and the DB file.

Run:  python3 tests/integration/test_wallet_gateway.py --agentpay build/agentpay [unittest args...]
"""

import base64
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import PRICE, GatewayTestCase, assert_invariants, parse_status, raw_exchange  # noqa: E402

DEPOSIT = 100000
BODY = b'{"task":"summarize","doc":"q3-report","n":1}'


def op_location(op_id):
    return "/v1/operations/%s" % op_id


class CompletedKeyReplayTest(GatewayTestCase):
    """1. A retry of a completed key returns the stored result, charged and executed once."""

    def test_retry_of_completed_key_replays_stored_result(self):
        acct = self.gw.create_account("replay", deposit=DEPOSIT)
        first = self.gw.pay(acct, "order-1", BODY)
        self.assertEqual(first.status, 200, first)
        self.assertEqual(first.replayed, "false", first)
        op_id = first.operation_id
        self.assertTrue(op_id, "AgentPay-Operation-Id missing: %r" % first)
        self.assertRegex(op_id, r"^[A-Za-z0-9_-]{22,}$", "operation ids are URL-safe and >= 128 random bits")
        seller_doc = json.loads(first.body)
        self.assertEqual(seller_doc.get("ok"), True, first)
        self.assertEqual(seller_doc.get("executed"), 1, first)
        self.assertEqual(seller_doc.get("body"), BODY.decode(), first)

        for attempt in range(2):
            again = self.gw.pay(acct, "order-1", BODY)
            self.assertEqual(again.status, 200, again)
            self.assertEqual(again.body, first.body, "replay %d must return the stored body" % attempt)
            self.assertEqual(again.header("Content-Type"), first.header("Content-Type"))
            self.assertEqual(again.replayed, "true", again)
            self.assertEqual(again.operation_id, op_id, again)

        self.assertExecuted(1)
        self.assertAccount(acct, deposited=DEPOSIT, captured=PRICE, held=0, balance=DEPOSIT - PRICE,
                           available=DEPOSIT - PRICE)
        op = self.gw.operation(op_id)
        self.assertEqual((op["id"], op["idempotency_key"], op["amount"], op["intent"], op["settlement"],
                          op["fulfillment"], op.get("response_status")),
                         (op_id, "order-1", str(PRICE), "accepted", "settled", "succeeded", 200), op)
        events = self.gw.trace(op_id)["events"]
        self.assertTrue(events, "trace of a completed operation is empty")
        times = [e["at_ms"] for e in events]
        self.assertEqual(times, sorted(times), "trace must be oldest first: %r" % events)
        for e in events:
            self.assertTrue(set(e) >= {"at_ms", "actor", "kind", "detail"}, e)

    def test_replay_never_answers_402_when_wallet_is_drained(self):
        # The account holds exactly one price; after paying, its available balance is 0. A retry of the
        # completed key must get the stored result, never 402 (CONTRACT 3: "Never answer 402 to a request
        # whose payment outcome is ... already settled").
        acct = self.gw.create_account("exact", deposit=PRICE)
        first = self.gw.pay(acct, "only-one", BODY)
        self.assertEqual((first.status, first.replayed), (200, "false"), first)
        self.assertAccount(acct, captured=PRICE, held=0, balance=0, available=0)
        again = self.gw.pay(acct, "only-one", BODY)
        self.assertEqual((again.status, again.replayed, again.body), (200, "true", first.body), again)
        other = self.gw.pay(acct, "another", BODY)
        self.assertProblem(other, 402, "insufficient_funds")
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=0, available=0)

    def test_unknown_operation_is_404(self):
        r = self.gw.request("GET", "/v1/operations/op_" + "0" * 32)
        self.assertEqual(r.status, 404, r)
        r = self.gw.request("GET", "/v1/operations/op_" + "0" * 32 + "/trace")
        self.assertEqual(r.status, 404, r)

    def test_request_without_key_is_a_new_action_each_time(self):
        acct = self.gw.create_account("nokey", deposit=DEPOSIT)
        a = self.gw.pay(acct, None, BODY)
        b = self.gw.pay(acct, None, BODY)
        self.assertEqual((a.status, a.replayed, b.status, b.replayed), (200, "false", 200, "false"), (a, b))
        self.assertNotEqual(a.operation_id, b.operation_id)
        self.assertExecuted(2)
        self.assertAccount(acct, captured=2 * PRICE, held=0, balance=DEPOSIT - 2 * PRICE)


def _pay_at_once(case, acct, key, fault, n):
    """n threads released together pay `key` with the same body; returns their responses, after
    asserting that every one got an HTTP answer."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def worker(i):
        try:
            barrier.wait(timeout=20)
            results[i] = case.gw.pay(acct, key, BODY, fault=fault, timeout=30)
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=45)
    case.assertFalse(any(t.is_alive() for t in threads), "some requests never finished")
    errors = [r for r in results if not isinstance(r, harness.Response)]
    case.assertEqual(errors, [], "requests failed at the transport level")
    return results


class ConcurrentDuplicatesTest(GatewayTestCase):
    """2. 64 concurrent duplicates of one key: one execution, one capture."""

    N = 64

    def test_64_concurrent_duplicates_execute_and_charge_once(self):
        acct = self.gw.create_account("burst", deposit=DEPOSIT)
        results = _pay_at_once(self, acct, "burst-key", "slow:300", self.N)

        fresh = [r for r in results if r.status == 200 and r.replayed == "false"]
        self.assertEqual(len(fresh), 1, "exactly one response must be the original (Idempotent-Replayed: "
                         "false); statuses/replayed: %r" % [(r.status, r.replayed) for r in results])
        original = fresh[0]
        op_id = original.operation_id
        self.assertTrue(op_id)
        counts = {"200": 0, "202": 0}
        for r in results:
            self.assertEqual(r.operation_id, op_id, r)
            if r.status == 200:
                counts["200"] += 1
                self.assertEqual(r.body, original.body, r)
                if r is not original:
                    self.assertEqual(r.replayed, "true", r)
            elif r.status == 202:
                counts["202"] += 1
                self.assertProblem(r, 202, "operation_in_progress")
                self.assertEqual(r.header("Location"), op_location(op_id), r)
                self.assertIsNotNone(r.header("Retry-After"), r)
            else:
                self.fail("unexpected status among duplicates: %r" % r)
        self.assertEqual(counts["200"] + counts["202"], self.N)

        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)

        with harness.open_db(self.gw.db_path) as db:
            ops = db.execute("SELECT id FROM operations WHERE idempotency_key = ?", ("burst-key",)).fetchall()
            self.assertEqual(ops, [(op_id,)], "exactly one operation for the key")
            kinds = db.execute("SELECT kind, amount FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                               (op_id,)).fetchall()
            self.assertEqual(kinds, [("hold", PRICE), ("capture", PRICE)],
                             "exactly one hold and one capture posting for the key")
            keys = db.execute("SELECT operation_id FROM idempotency_keys WHERE key = ?", ("burst-key",)).fetchall()
            self.assertEqual(keys, [(op_id,)])
        # The trace shows the duplicates that attached or were replayed: the first eight of them,
        # each with its time (a key's trace is bounded; /metrics counts all of them).
        def repeats():
            return [e for e in self.gw.trace(op_id)["events"] if e["kind"] in ("attached", "replayed")]
        shown = harness.wait_for(lambda: repeats() if len(repeats()) >= 8 else None, timeout=5,
                                 what="eight repeated arrivals in the trace")
        self.assertEqual(len(shown), 8, shown)
        self.assertTrue(all(e["actor"] == "client" for e in shown), shown)


class ConcurrentDuplicatesShortAttachTest(GatewayTestCase):
    """2b. The same burst with --attach-wait-ms 50: the duplicates get 202 operation_in_progress (never a
    second execution or charge), and the key then replays the one result."""

    N = 64
    gateway_args = ("--attach-wait-ms", "50")

    def test_duplicates_past_attach_wait_get_202_and_no_charge(self):
        acct = self.gw.create_account("burst202", deposit=DEPOSIT)
        results = _pay_at_once(self, acct, "burst-202", "slow:1000", self.N)
        fresh = [r for r in results if r.status == 200 and r.replayed == "false"]
        self.assertEqual(len(fresh), 1, [(r.status, r.replayed) for r in results])
        op_id = fresh[0].operation_id
        in_progress = 0
        for r in results:
            self.assertEqual(r.operation_id, op_id, r)
            if r is fresh[0]:
                continue
            if r.status == 200:
                self.assertEqual((r.body, r.replayed), (fresh[0].body, "true"), r)
                continue
            self.assertProblem(r, 202, "operation_in_progress")
            self.assertEqual(r.header("Location"), op_location(op_id), r)
            self.assertRegex(r.header("Retry-After") or "", r"^[0-9]+$", r)
            in_progress += 1
        self.assertGreater(in_progress, 0, "with a 1 s upstream and a 50 ms attach wait, duplicates must get 202")

        # Following the Location gives the outcome; the key then replays it.
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"], op.get("response_status")),
                         ("settled", "succeeded", 200), op)
        replay = self.gw.pay(acct, "burst-202", BODY)
        self.assertEqual((replay.status, replay.replayed, replay.body), (200, "true", fresh[0].body), replay)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)


class ConcurrentSpendTest(GatewayTestCase):
    """CONTRACT 4 under a race: many distinct keys against a wallet that can pay for only some of them."""

    def test_concurrent_distinct_keys_never_overdraw(self):
        n, affordable = 20, 5
        acct = self.gw.create_account("racer", deposit=affordable * PRICE)
        barrier = threading.Barrier(n)
        results = [None] * n

        def worker(i):
            try:
                barrier.wait(timeout=20)
                results[i] = self.gw.pay(acct, "race-%d" % i, BODY, fault="slow:200", timeout=30)
            except Exception as e:  # noqa: BLE001
                results[i] = e

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=45)
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual([r for r in results if not isinstance(r, harness.Response)], [])
        ok = [r for r in results if r.status == 200]
        refused = [r for r in results if r.status == 402]
        self.assertEqual((len(ok), len(refused)), (affordable, n - affordable),
                         [(r.status, r.body[:80]) for r in results])
        for r in ok:
            self.assertEqual(r.replayed, "false", r)
        for r in refused:
            self.assertProblem(r, 402, "insufficient_funds")
        self.assertExecuted(affordable)
        self.assertAccount(acct, deposited=affordable * PRICE, captured=affordable * PRICE, held=0, balance=0,
                           available=0)


class FingerprintAndScopeTest(GatewayTestCase):
    """3. Same key + different body is refused; keys are scoped per account."""

    def test_same_key_different_body_is_422_and_not_charged(self):
        acct = self.gw.create_account("mismatch", deposit=DEPOSIT)
        first = self.gw.pay(acct, "k-1", BODY)
        self.assertEqual((first.status, first.replayed), (200, "false"), first)

        other_bodies = [b'{"task":"summarize","doc":"q4-report","n":1}']
        for body in other_bodies:
            r = self.gw.pay(acct, "k-1", body)
            self.assertProblem(r, 422, "idempotency_key_mismatch")
        # The other parts of the fingerprint too: method, path, query, content type.
        variants = [dict(method="PUT"), dict(path="/work/other"), dict(path="/work?x=1"),
                    dict(content_type="text/plain")]
        for v in variants:
            r = self.gw.pay(acct, "k-1", BODY, **v)
            self.assertProblem(r, 422, "idempotency_key_mismatch", "variant %r" % v)

        # The original still replays; nothing charged beyond the first.
        again = self.gw.pay(acct, "k-1", BODY)
        self.assertEqual((again.status, again.replayed, again.body), (200, "true", first.body), again)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)

    def test_same_key_string_in_two_accounts_never_collides(self):
        a = self.gw.create_account("alice", deposit=DEPOSIT)
        b = self.gw.create_account("bob", deposit=DEPOSIT)
        ra = self.gw.pay(a, "shared-key", b'{"who":"alice"}')
        rb = self.gw.pay(b, "shared-key", b'{"who":"bob"}')
        self.assertEqual((ra.status, ra.replayed), (200, "false"), ra)
        self.assertEqual((rb.status, rb.replayed), (200, "false"), rb)
        self.assertNotEqual(ra.operation_id, rb.operation_id)
        self.assertEqual(json.loads(ra.body)["body"], '{"who":"alice"}')
        self.assertEqual(json.loads(rb.body)["body"], '{"who":"bob"}')
        self.assertExecuted(2)
        for acct in (a, b):
            self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE)
        # Each replays its own result.
        self.assertEqual(self.gw.pay(a, "shared-key", b'{"who":"alice"}').body, ra.body)
        self.assertEqual(self.gw.pay(b, "shared-key", b'{"who":"bob"}').body, rb.body)
        self.assertExecuted(2)


class UpstreamOutcomeTest(GatewayTestCase):
    """4, 5, 7. Upstream 4xx, 5xx and a dropped connection."""

    def test_upstream_4xx_is_passed_through_and_hold_released(self):
        acct = self.gw.create_account("refused", deposit=DEPOSIT)
        direct = harness.http_request(self.seller.port, "POST", "/work", body=BODY,
                                      headers={"X-Seller-Fault": "4xx", "Content-Type": "application/json"})
        self.assertEqual(direct.status, 400, direct)

        r = self.gw.pay(acct, "bad-input", BODY, fault="4xx")
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.body, direct.body, "the upstream's 4xx body is passed through")
        self.assertEqual(r.replayed, "false", r)
        op_id = r.operation_id
        self.assertTrue(op_id, r)
        self.assertAccount(acct, deposited=DEPOSIT, captured=0, held=0, balance=DEPOSIT, available=DEPOSIT)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"], op.get("response_status")),
                         ("released", "rejected", 400), op)
        self.assertExecuted(0)

        with harness.open_db(self.gw.db_path) as db:
            kinds = db.execute("SELECT kind FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                               (op_id,)).fetchall()
        self.assertEqual(kinds, [("hold",), ("release",)])

        # The rejection is a completed result: a retry with the same key gets it back, not a new call.
        again = self.gw.pay(acct, "bad-input", BODY, fault="ok")
        self.assertEqual((again.status, again.body, again.replayed, again.operation_id),
                         (400, direct.body, "true", op_id), again)
        self.assertExecuted(0)
        self.assertAccount(acct, captured=0, held=0, balance=DEPOSIT)

    def test_upstream_5xx_keeps_hold_and_retry_captures_once(self):
        acct = self.gw.create_account("flaky", deposit=DEPOSIT)
        r = self.gw.pay(acct, "job-5xx", BODY, fault="5xx")
        doc = self.assertProblem(r, 502, "fulfillment_pending")
        op_id = r.operation_id
        self.assertTrue(op_id, r)
        self.assertEqual(r.replayed, "false", r)
        if "operation_id" in doc:
            self.assertEqual(doc["operation_id"], op_id)
        self.assertAccount(acct, deposited=DEPOSIT, captured=0, held=PRICE, balance=DEPOSIT,
                           available=DEPOSIT - PRICE)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("held", "pending_retry"), op)
        self.assertIn("hold_expires_ms", op)
        self.assertExecuted(0)

        # The pending key is still bound to its request.
        mismatch = self.gw.pay(acct, "job-5xx", b'{"something":"else"}', fault="ok")
        self.assertProblem(mismatch, 422, "idempotency_key_mismatch")
        self.assertExecuted(0)
        self.assertAccount(acct, captured=0, held=PRICE)

        retry = self.gw.pay(acct, "job-5xx", BODY, fault="ok")
        self.assertEqual(retry.status, 200, retry)
        self.assertEqual(retry.operation_id, op_id, "a retry continues the same operation")
        self.assertEqual(retry.replayed, "false", "the retry ran the work; it is not a stored result")
        self.assertEqual(json.loads(retry.body)["executed"], 1, retry)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"], op.get("response_status")),
                         ("settled", "succeeded", 200), op)
        with harness.open_db(self.gw.db_path) as db:
            kinds = db.execute("SELECT kind, amount FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                               (op_id,)).fetchall()
        self.assertEqual(kinds, [("hold", PRICE), ("capture", PRICE)], "the kept hold is reused, not re-held")

        replay = self.gw.pay(acct, "job-5xx", BODY)
        self.assertEqual((replay.status, replay.body, replay.replayed), (200, retry.body, "true"), replay)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0)

        # The trace tells it as data: every step with its structured facts, the refused mismatch and
        # the replay among them (a replay is recorded after its answer: wait for it).
        def trace_with_replay():
            events = self.gw.trace(op_id)["events"]
            return events if any(e["kind"] == "replayed" for e in events) else None
        events = harness.wait_for(trace_with_replay, timeout=5, what="the replay in the trace")
        def fact(e):
            return {k: e[k] for k in ("attempt", "amount", "http_status", "reason") if k in e}
        steps = [(e["actor"], e["kind"], fact(e)) for e in events]
        price = str(PRICE)
        self.assertEqual(steps, [
            ("client", "request", {"attempt": 1, "amount": price}),
            ("ledger", "hold", {"amount": price}),
            ("upstream", "hold_kept", {"attempt": 1, "amount": price, "http_status": 500,
                                        "reason": "upstream_5xx"}),
            ("client", "mismatch_refused", {"http_status": 422, "reason": "idempotency_key_reused"}),
            ("gateway", "retry_resumed", {"attempt": 2, "amount": price, "reason": "hold_reused"}),
            ("ledger", "capture", {"amount": price}),
            ("upstream", "response", {"attempt": 2, "http_status": 200}),
            ("client", "replayed", {"http_status": 200}),
        ], events)

    def test_upstream_drop_after_work_then_retry_charges_once(self):
        acct = self.gw.create_account("dropper", deposit=DEPOSIT)
        r = self.gw.pay(acct, "job-drop", BODY, fault="drop")
        self.assertProblem(r, 502, "fulfillment_pending")
        op_id = r.operation_id
        self.assertTrue(op_id, r)
        self.assertExecuted(1, "drop executes the work before closing the connection")
        self.assertAccount(acct, captured=0, held=PRICE, available=DEPOSIT - PRICE)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("held", "pending_retry"), op)

        retry = self.gw.pay(acct, "job-drop", BODY, fault="ok")
        self.assertEqual((retry.status, retry.operation_id), (200, op_id), retry)
        # The demo seller does not deduplicate, so the work ran twice; the buyer is charged once.
        self.assertExecuted(2, "seller executed once for the dropped call and once for the retry")
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)


class UpstreamTimeoutTest(GatewayTestCase):
    """6. Upstream timeout keeps the hold; a retry captures once."""

    gateway_args = ("--upstream-timeout-ms", "500")

    def test_upstream_timeout_keeps_hold_and_retry_captures_once(self):
        acct = self.gw.create_account("slowpoke", deposit=DEPOSIT)
        t0 = time.monotonic()
        r = self.gw.pay(acct, "job-hang", BODY, fault="hang", timeout=15)
        elapsed = time.monotonic() - t0
        self.assertProblem(r, 504, "fulfillment_pending")
        self.assertGreaterEqual(elapsed, 0.45, "answered before the upstream timeout")
        self.assertLess(elapsed, 5.0, "the 500 ms upstream timeout was not applied")
        op_id = r.operation_id
        self.assertTrue(op_id, r)
        self.assertAccount(acct, captured=0, held=PRICE, balance=DEPOSIT, available=DEPOSIT - PRICE)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("held", "pending_retry"), op)
        self.assertExecuted(0)

        retry = self.gw.pay(acct, "job-hang", BODY, fault="ok")
        self.assertEqual((retry.status, retry.operation_id), (200, op_id), retry)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)
        replay = self.gw.pay(acct, "job-hang", BODY)
        self.assertEqual((replay.status, replay.replayed, replay.body), (200, "true", retry.body))


class RejectionTest(GatewayTestCase):
    """8. Requests that must not move money, plus a garbage loop; the gateway stays healthy."""

    gateway_args = ("--max-body-bytes", "1024")

    def setUp(self):
        super().setUp()
        self.rich = self.gw.create_account("rich", deposit=DEPOSIT)
        # One completed payment so balances are not trivially zero.
        r = self.gw.pay(self.rich, "warmup", BODY)
        self.assertEqual(r.status, 200, r)

    def assertUnchanged(self, before):
        after = self.gw.full_state()
        self.assertEqual(after, before, "a refused request changed account/ledger state")
        self.assertTrue(self.gw.alive(), "gateway died:\n" + self.gw.output()[-2000:])
        h = self.gw.healthz()
        self.assertEqual(h.status, 200, h)

    def test_insufficient_funds(self):
        poor = self.gw.create_account("poor", deposit=PRICE - 1)
        empty = self.gw.create_account("empty")
        # Funds held by a pending operation are not available: 1500 deposited, 1000 held -> 500 available.
        busy = self.gw.create_account("busy", deposit=PRICE + 500)
        r = self.gw.pay(busy, "pending", BODY, fault="5xx")
        self.assertProblem(r, 502, "fulfillment_pending")
        executed = self.seller.executed()
        before = self.gw.full_state()

        for acct, key in ((poor, "p1"), (empty, "e1"), (busy, "b1")):
            r = self.gw.pay(acct, key, BODY)
            self.assertProblem(r, 402, "insufficient_funds", "account %s" % acct.name)
        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed)

        # The kept hold is reused by a retry of its own key even though available (500) < price.
        retry = self.gw.pay(busy, "pending", BODY, fault="ok")
        self.assertEqual(retry.status, 200, "a retry of a held key must reuse the hold, not answer 402: %r" % retry)
        self.assertAccount(busy, captured=PRICE, held=0, balance=500, available=500)

        # A key refused for insufficient funds is not burned: after a deposit the same key works.
        self.assertEqual(self.gw.deposit(poor, 1, "top-up").status, 201)
        r = self.gw.pay(poor, "p1", BODY)
        self.assertEqual(r.status, 200, r)
        self.assertAccount(poor, deposited=PRICE, captured=PRICE, held=0, balance=0, available=0)

    def test_bad_api_key_is_401(self):
        executed = self.seller.executed()
        before = self.gw.full_state()
        bogus = "ak_" + "0" * 64
        for auth in ("Bearer " + bogus, "Bearer " + self.rich.api_key + "x", "Bearer x"):
            r = self.gw.pay(None, "k-401", BODY, headers={"Authorization": auth})
            self.assertProblem(r, 401, "unauthorized", "Authorization: %s" % auth)
        # An API key is not an admin token, and a wrong admin token is refused.
        r = self.gw.admin_request("GET", "/admin/v1/accounts/%s" % self.rich.id,
                                  headers={"Authorization": "Bearer " + self.rich.api_key})
        self.assertEqual(r.status, 401, r)
        r = self.gw.admin_request("POST", "/admin/v1/accounts/%s/deposits" % self.rich.id,
                                  body={"amount": "5", "reference": "x"},
                                  headers={"Authorization": "Bearer nope"})
        self.assertEqual(r.status, 401, r)
        r = self.gw.request("GET", "/v1/account", headers={"Authorization": "Bearer " + bogus})
        self.assertEqual(r.status, 401, r)
        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed)

    def test_oversized_body_is_413(self):
        # Exactly the limit is accepted (and charged) ...
        at_limit = b'{"pad":"' + b"a" * (1024 - 10) + b'"}'
        self.assertEqual(len(at_limit), 1024)
        r = self.gw.pay(self.rich, "at-limit", at_limit)
        self.assertEqual(r.status, 200, r)
        executed = self.seller.executed()
        before = self.gw.full_state()
        # ... one past it, or far past it, is not.
        for size in (1025, 2048, 64 * 1024):
            body = b'{"pad":"' + b"a" * (size - 10) + b'"}'
            self.assertEqual(len(body), size)
            try:
                r = self.gw.pay(self.rich, "too-big-%d" % size, body)
            except (ConnectionResetError, BrokenPipeError) as e:
                self.fail("oversized body of %d bytes: connection reset instead of 413 (%s)" % (size, e))
            self.assertProblem(r, 413, "limit_exceeded", "body of %d bytes" % size)
        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed)

    def test_malformed_idempotency_key_is_400(self):
        # The longest valid key (255 visible ASCII characters) is accepted.
        r = self.gw.pay(self.rich, "K" * 255, BODY)
        self.assertEqual(r.status, 200, r)
        r = self.gw.pay(self.rich, "!~" + "x" * 10, BODY)
        self.assertEqual(r.status, 200, r)
        executed = self.seller.executed()
        before = self.gw.full_state()
        bad_keys = ["K" * 256, "K" * 300, "has space", b"caf\xc3\xa9", ""]
        for key in bad_keys:
            r = self.gw.pay(self.rich, key, BODY)
            self.assertProblem(r, 400, "invalid_idempotency_key", "Idempotency-Key %r" % (key,))
        # A control character makes the header field itself invalid HTTP (RFC 9110 5.5), so the HTTP
        # layer may refuse the request before the gateway sees the key: 400 either way.
        for key in ("ctl\x01char", "nul\x00char", "del\x7fchar"):
            r = self.gw.pay(self.rich, key, BODY)
            self.assertEqual(r.status, 400, r)
            self.assertIn(r.json().get("code"), ("invalid_idempotency_key", "bad_request"), r)
        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed)

    def test_garbage_requests_leave_gateway_healthy_and_money_untouched(self):
        executed = self.seller.executed()
        before = self.gw.full_state()
        rng = random.Random(0xA9E)
        admin = "Authorization: Bearer %s\r\n" % harness.ADMIN_TOKEN
        deposit_path = "/admin/v1/accounts/%s/deposits" % self.rich.id

        def http_raw(method, path, headers="", body=b""):
            head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %d\r\n\r\n" % (
                method, path, headers, len(body))
            return head.encode("latin-1") + body

        cases = []  # (description, raw bytes, allowed statuses or None for "4xx or close")
        for i in range(14):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
            cases.append(("random bytes #%d" % i, junk, None))
        for method in ("G@T", "GET\x00", "<script>", "G E T", "\x16\x03\x01"):
            cases.append(("bad method %r" % method, ("%s / HTTP/1.1\r\nHost: x\r\n\r\n" % method).encode("latin-1"),
                          None))
        for version in ("HTTP/9.9", "HTTP/1", "FTP/1.0"):
            cases.append(("bad version %s" % version,
                          ("GET /healthz %s\r\nHost: x\r\n\r\n" % version).encode(), None))
        # Headers past 16 KiB: 431, or the connection closed without an answer (None).
        for size in (17 * 1024, 64 * 1024):
            cases.append(("huge header %d" % size, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size +
                          b"\r\n\r\n", {431, None}))
        cases.append(("many headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\n" +
                      b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(300)) + b"\r\n", {431, None}))
        cases.append(("bad content-length", b"POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999"
                      b"\r\n\r\n", None))
        cases.append(("negative content-length", b"POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                      None))
        cases.append(("bad chunk", b"POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                      None))
        for body in (b"{", b"[]", b'"name"', b"null", b'{"name":', b"\xff\xfe\x00", b"{'name': 'x'}", b"{}",
                     b'{"name": 5}'):
            cases.append(("admin: create account with %r" % body, http_raw("POST", "/admin/v1/accounts", admin, body),
                          {400}))
        for body in (b"{", b"[1,2]", b'{"amount": 5}', b'{"amount":"-5","reference":"neg"}',
                     b'{"amount":"1.5","reference":"frac"}', b'{"amount":"1e3","reference":"exp"}',
                     b'{"amount":"0","reference":"zero"}', b'{"amount":"99999999999999999999999","reference":"big"}',
                     b'{"amount":"100"}', b'{"reference":"noamount"}'):
            cases.append(("admin: deposit with %r" % body, http_raw("POST", deposit_path, admin, body), {400, 422}))
        cases.append(("admin: unknown admin path", http_raw("POST", "/admin/v1/nope", admin, b"{}"), {404, 405}))
        cases.append(("paid route, malformed bearer", http_raw("POST", "/work", "Authorization: Bearer\r\n", BODY),
                      {400, 401}))
        cases.append(("paid route, basic auth", http_raw("POST", "/work", "Authorization: Basic Zm9vOmJhcg==\r\n",
                                                         BODY), {400, 401, 402}))
        self.assertGreaterEqual(len(cases), 50)

        for desc, data, allowed in cases:
            # Admin calls go to the admin listener (--admin-listen); the public one has no /admin.
            port = self.gw.admin_port if desc.startswith("admin: ") else self.gw.port
            received, _ = raw_exchange(port, data, timeout=5)
            status = parse_status(received)
            if allowed is None:
                self.assertTrue(received == b"" or (status is not None and 400 <= status < 500),
                                "%s: expected a 4xx or a closed connection, got %r" % (desc, received[:300]))
            else:
                self.assertTrue(status in allowed or (None in allowed and received == b""),
                                "%s: expected one of %r, got %r" % (desc, allowed, received[:300]))
            if status is not None and status >= 400 and b"\r\n\r\n" in received:
                head, _, rest = received.partition(b"\r\n\r\n")
                if b"problem+json" in head.lower():
                    json.loads(rest.decode("utf-8"))  # the problem body is valid JSON
            self.assertTrue(self.gw.alive(), "gateway died on %s:\n%s" % (desc, self.gw.output()[-2000:]))

        self.assertUnchanged(before)
        self.assertEqual(self.seller.executed(), executed)
        # Still fully working for real traffic.
        r = self.gw.pay(self.rich, "after-garbage", BODY)
        self.assertEqual(r.status, 200, r)


class CrashRecoveryTest(GatewayTestCase):
    """9. kill -9 of the gateway mid upstream call: the hold is kept and a retry captures once."""

    gateway_args = ("--upstream-timeout-ms", "30000")

    def test_sigkill_during_upstream_call_keeps_hold_and_retry_captures_once(self):
        acct = self.gw.create_account("crash", deposit=DEPOSIT)
        outcome = {}

        def call():
            try:
                outcome["response"] = self.gw.pay(acct, "job-crash", BODY, fault="hang", timeout=40)
            except Exception as e:  # noqa: BLE001 - the connection dies with the gateway
                outcome["error"] = e

        t = threading.Thread(target=call, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        in_flight = []
        while time.monotonic() < deadline:
            in_flight = self.gw.admin_operations(fulfillment="in_progress")
            if in_flight:
                break
            time.sleep(0.05)
        self.assertEqual(len(in_flight), 1, "the request never became in_progress: %r" % in_flight)
        op_id = in_flight[0]["id"]
        self.assertEqual(in_flight[0]["idempotency_key"], "job-crash")
        self.assertAccount(acct, held=PRICE, captured=0)
        time.sleep(0.3)  # the upstream call is under way (the seller hangs on it)

        self.gw.kill9()
        self.assertEqual(self.gw.popen.returncode, -signal.SIGKILL)
        t.join(timeout=15)
        self.assertFalse(t.is_alive(), "client call did not end when the gateway died")
        self.assertNotIn("response", outcome, "the client got an answer from a killed gateway: %r" % outcome)

        self.gw.restart_after_crash()
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("held", "pending_retry"), op)
        self.assertIn("hold_expires_ms", op)
        self.assertAccount(acct, deposited=DEPOSIT, captured=0, held=PRICE, balance=DEPOSIT,
                           available=DEPOSIT - PRICE)
        assert_invariants(self, self.gw)
        self.assertExecuted(0)

        retry = self.gw.pay(acct, "job-crash", BODY, fault="ok")
        self.assertEqual((retry.status, retry.operation_id), (200, op_id), retry)
        self.assertExecuted(1)
        self.assertAccount(acct, captured=PRICE, held=0, balance=DEPOSIT - PRICE, available=DEPOSIT - PRICE)
        with harness.open_db(self.gw.db_path) as db:
            kinds = db.execute("SELECT kind FROM ledger_entries WHERE operation_id = ? ORDER BY id",
                               (op_id,)).fetchall()
        self.assertEqual(kinds, [("hold",), ("capture",)])


class DurabilityTest(GatewayTestCase):
    """A 200 means the capture and the stored result survive an immediate kill -9."""

    def test_completed_payment_survives_sigkill(self):
        acct = self.gw.create_account("durable", deposit=DEPOSIT)
        first = self.gw.pay(acct, "durable-1", BODY)
        self.assertEqual(first.status, 200, first)
        self.gw.kill9()
        self.gw.restart_after_crash()
        self.assertAccount(acct, deposited=DEPOSIT, captured=PRICE, held=0, balance=DEPOSIT - PRICE)
        again = self.gw.pay(acct, "durable-1", BODY)
        self.assertEqual((again.status, again.replayed, again.body, again.operation_id),
                         (200, "true", first.body, first.operation_id), again)
        self.assertExecuted(1)
        op = self.gw.operation(first.operation_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("settled", "succeeded"), op)


class HoldExpiryTest(GatewayTestCase):
    """CONTRACT 4: holds expire after the hold TTL; the sweeper releases an expired hold and, where the
    upstream may have done the work (5xx, timeout, crash), raises an alert. A later retry holds again."""

    gateway_args = ("--hold-ttl-ms", "1000", "--sweep-interval-ms", "50")

    def test_sweeper_releases_expired_hold_and_raises_alert(self):
        acct = self.gw.create_account("expiring", deposit=DEPOSIT)
        done = self.gw.pay(acct, "completed", BODY)
        self.assertEqual(done.status, 200, done)
        r = self.gw.pay(acct, "abandoned", BODY, fault="5xx")
        self.assertProblem(r, 502, "fulfillment_pending")
        op_id = r.operation_id
        op = self.gw.operation(op_id)
        self.assertEqual(op["settlement"], "held", op)
        self.assertIsInstance(op.get("hold_expires_ms"), int, op)
        self.assertGreaterEqual(op["hold_expires_ms"] - op["created_ms"], 1000, op)
        self.assertLessEqual(op["hold_expires_ms"] - op["created_ms"], 2000, op)
        self.assertAccount(acct, captured=PRICE, held=PRICE)

        deadline = time.monotonic() + 6  # TTL 1 s + sweep every 50 ms, generous margin
        state = self.gw.account(acct)
        while state["held"] != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            state = self.gw.account(acct)
        op = self.gw.operation(op_id)
        self.assertEqual(state["held"], 0, "the expired hold was not released by the sweeper "
                         "(hold_expires_ms=%r, now op=%r)" % (op.get("hold_expires_ms"), op))
        self.assertAccount(acct, deposited=DEPOSIT, captured=PRICE, held=0, balance=DEPOSIT - PRICE,
                           available=DEPOSIT - PRICE)
        self.assertEqual(op["settlement"], "released", op)

        alerts = self.gw.admin("GET", "/admin/v1/alerts")
        self.assertEqual(alerts.status, 200, "GET /admin/v1/alerts: %r" % alerts)
        self.assertIn(op_id, json.dumps(alerts.json()),
                      "no alert for the expired hold of an operation whose upstream may have done the work")
        self.assertNotIn(done.operation_id, json.dumps(alerts.json()), "a completed operation raised an alert")

        # A later retry with the same key holds the price again and captures once.
        retry = self.gw.pay(acct, "abandoned", BODY, fault="ok")
        self.assertEqual((retry.status, retry.operation_id), (200, op_id), retry)
        self.assertAccount(acct, captured=2 * PRICE, held=0, balance=DEPOSIT - 2 * PRICE)
        self.assertExecuted(2)


class AdminResolveTest(GatewayTestCase):
    """CONTRACT 3: POST /admin/v1/operations/{id}/resolve, through `agentpay admin resolve`: audited,
    idempotent, 409 already_resolved for another outcome; only `refunded` moves money, through the ledger."""

    gateway_args = ("--hold-ttl-ms", "1000", "--sweep-interval-ms", "50")

    def cli(self, *args):
        argv = [harness.binary(), "admin", "--url", self.gw.admin_url,
                "--token-file", self.gw.token_file] + list(args)
        done = subprocess.run(argv, capture_output=True, timeout=30)
        out = done.stdout.decode()
        return done.returncode, (json.loads(out) if out.strip().startswith("{") else out)

    def swept(self, acct, key):
        r = self.gw.pay(acct, key, BODY, fault="drop")  # the seller works, then drops the connection
        self.assertProblem(r, 502, "fulfillment_pending")
        deadline = time.monotonic() + 6
        while self.gw.operation(r.operation_id)["settlement"] != "released" and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.gw.operation(r.operation_id)["settlement"], "released")
        return r.operation_id

    def test_resolve_via_cli_is_audited_idempotent_and_conserves_money(self):
        acct = self.gw.create_account("resolve", deposit=DEPOSIT)
        op_id = self.swept(acct, "dropped")
        code, first = self.cli("resolve", op_id, "--outcome", "written_off", "--note", "seller ran it once")
        self.assertEqual(code, 0, first)
        self.assertEqual((first["outcome"], first["note"], first["refunded"]),
                         ("written_off", "seller ran it once", "0"), first)
        self.assertTrue(all(a["resolved"] for a in first["alerts"]), first)
        code, again = self.cli("resolve", op_id, "--outcome", "written_off", "--note", "seller ran it once")
        self.assertEqual((code, again), (0, first))
        code, other = self.cli("resolve", op_id, "--outcome", "refunded", "--note", "seller ran it once")
        self.assertEqual(code, 1, other)
        self.assertEqual(other["code"], "already_resolved", other)
        self.assertEqual(other["status"], 409, other)
        self.assertAccount(acct, captured=0, held=0, balance=DEPOSIT)
        events = [e for e in self.gw.trace(op_id)["events"] if e["kind"] == "resolved"]
        self.assertEqual([e["actor"] for e in events], ["admin"], events)
        self.assertIn("written_off", events[0]["detail"])

        # Retried after the sweep, the operation is charged once; a second alert-raising sweep is not
        # possible any more, so a refund needs an open alert: take a new dropped operation and retry it.
        op2 = self.swept(acct, "dropped-2")
        retry = self.gw.pay(acct, "dropped-2", BODY)
        self.assertEqual((retry.status, retry.operation_id), (200, op2), retry)
        self.assertAccount(acct, captured=PRICE, held=0)
        code, refunded = self.cli("resolve", op2, "--outcome", "refunded", "--note", "ran twice; refund")
        self.assertEqual(code, 0, refunded)
        self.assertEqual(refunded["refunded"], str(PRICE), refunded)
        self.assertAccount(acct, deposited=DEPOSIT, captured=0, held=0, balance=DEPOSIT, available=DEPOSIT)
        code, replay = self.cli("resolve", op2, "--outcome", "refunded", "--note", "ran twice; refund")
        self.assertEqual((code, replay), (0, refunded))
        self.assertAccount(acct, captured=0, balance=DEPOSIT)
        kinds = [e["kind"] for e in self.gw.trace(op2)["events"] if e["actor"] == "ledger"]
        self.assertEqual(kinds, ["hold", "release", "hold", "capture", "refund"])
        code, alerts = self.cli("alerts")
        self.assertEqual(code, 0)
        self.assertEqual(sorted(a["operation_id"] for a in alerts["alerts"]), sorted([op_id, op2]))
        self.assertFalse([a for a in alerts["alerts"] if not a["resolved"]], alerts)


class RetentionPruningTest(GatewayTestCase):
    """docs/protocol.md 10: the pruner forgets a final result and its key once --retention-ms has passed; a
    late retry is then a new action, charged again. A kept (unfinished) operation is never pruned."""

    gateway_args = ("--retention-ms", "300", "--sweep-interval-ms", "50", "--hold-ttl-ms", "600000")

    def metric(self, name):
        text = self.gw.metrics()
        return sum(int(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))

    def test_pruner_forgets_final_results_and_their_keys(self):
        acct = self.gw.create_account("pruned", deposit=DEPOSIT)
        done = self.gw.pay(acct, "old-order", BODY)
        kept = self.gw.pay(acct, "kept-order", BODY, fault="5xx")
        self.assertEqual((done.status, kept.status), (200, 502))
        deadline = time.monotonic() + 6
        while self.metric("agentpay_results_pruned_total") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.metric("agentpay_results_pruned_total"), 1)
        self.assertEqual(self.metric("agentpay_keys_pruned_total"), 1)
        with harness.open_db(self.gw.db_path) as db:
            keys = sorted(k for (k,) in db.execute("SELECT key FROM idempotency_keys"))
            body = db.execute("SELECT response_body FROM operations WHERE id = ?", (done.operation_id,)).fetchone()
        self.assertEqual(keys, ["kept-order"], "only the pruned key is gone")
        self.assertIsNone(body[0], "the stored result is dropped")
        op = self.gw.operation(done.operation_id)  # the operation stays readable by id
        self.assertEqual((op["settlement"], op["fulfillment"], op.get("response_status")), ("settled", "succeeded", 200))
        late = self.gw.pay(acct, "old-order", BODY)
        self.assertEqual((late.status, late.replayed), (200, "false"), late)
        self.assertNotEqual(late.operation_id, done.operation_id, "a pruned key is a new action")
        self.assertAccount(acct, captured=2 * PRICE, held=PRICE)
        retry = self.gw.pay(acct, "kept-order", BODY)  # the kept operation was never pruned
        self.assertEqual((retry.status, retry.operation_id), (200, kept.operation_id), retry)
        self.assertAccount(acct, captured=3 * PRICE, held=0)


class ForwardingTest(GatewayTestCase):
    """CONTRACT 3: what the upstream receives. The upstream here is a recording Python server."""

    def start_upstream(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        seen = self.seen = []

        class Recorder(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                seen.append({"method": self.command, "path": self.path, "headers": self.headers.items(),
                             "body": body})
                status = 500 if self.headers.get("X-Echo-Status") == "500" else 200
                out = json.dumps({"ok": status == 200, "n": len(seen)}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()

        def shutdown():
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        self.addCleanup(shutdown)
        return "http://127.0.0.1:%d" % server.server_address[1]

    @staticmethod
    def headers_of(record):
        return {k.lower(): v for k, v in record["headers"]}

    def test_forwarded_request_and_upstream_idempotency_key(self):
        acct = self.gw.create_account("fwd", deposit=DEPOSIT)
        extra = {"X-Custom": "v1", "Proxy-Authorization": "Basic c2VjcmV0OnNlY3JldA==", "TE": "trailers",
                 "Keep-Alive": "timeout=5", "X-Seller-Fault": "ok"}
        failing = dict(extra, **{"X-Echo-Status": "500"})
        r1 = self.gw.pay(acct, "fwd-key", b'{"a":1}', path="/api/thing?x=1&y=2", headers=failing)
        self.assertProblem(r1, 502, "fulfillment_pending")
        r2 = self.gw.pay(acct, "fwd-key", b'{"a":1}', path="/api/thing?x=1&y=2", headers=extra)
        self.assertEqual((r2.status, r2.operation_id), (200, r1.operation_id), r2)
        r3 = self.gw.pay(acct, "fwd-other", b"", method="PATCH", path="/p", content_type="text/plain")
        self.assertEqual(r3.status, 200, r3)
        self.assertEqual(len(self.seen), 3, self.seen)

        first, second, third = self.seen
        for rec in (first, second):
            h = self.headers_of(rec)
            self.assertEqual((rec["method"], rec["path"], rec["body"]), ("POST", "/api/thing?x=1&y=2", b'{"a":1}'))
            self.assertEqual(h.get("content-type"), "application/json", rec)
            self.assertEqual(h.get("x-custom"), "v1", rec)
            self.assertEqual(h.get("x-seller-fault"), "ok", rec)
            for name in ("authorization", "proxy-authorization", "te", "keep-alive", "payment-signature",
                         "x-payment"):
                self.assertNotIn(name, h, "%s must not be forwarded: %r" % (name, rec))
            for k, v in rec["headers"]:
                self.assertNotIn(acct.api_key, v, "the buyer's API key leaked to the upstream in %s" % k)
            self.assertIn("idempotency-key", h, rec)
            self.assertNotEqual(h["idempotency-key"], "fwd-key", "the buyer's key must be replaced")
        self.assertEqual(third["method"], "PATCH")
        self.assertEqual(third["path"], "/p")
        k1 = self.headers_of(first)["idempotency-key"]
        k2 = self.headers_of(second)["idempotency-key"]
        k3 = self.headers_of(third).get("idempotency-key")
        self.assertEqual(k1, k2, "the gateway's retries of one operation carry the same upstream key")
        self.assertNotEqual(k1, k3, "different operations get different upstream keys")
        self.assertAccount(acct, captured=2 * PRICE, held=0)

    def test_connection_nominated_headers_are_not_forwarded(self):
        # RFC 9110 7.6.1: fields named in Connection are hop-by-hop and a proxy must remove them.
        acct = self.gw.create_account("hop", deposit=DEPOSIT)
        r = self.gw.pay(acct, "hop-key", BODY, headers={"Connection": "X-Hop-Secret", "X-Hop-Secret": "s3cr3t"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.seen), 1)
        h = self.headers_of(self.seen[0])
        self.assertNotIn("x-hop-secret", h, "a header nominated by Connection was forwarded: %r" % self.seen[0])


class PaymentChallengeTest(GatewayTestCase):
    """10. A paid request without payment gets the x402 challenge."""

    B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")

    def test_402_challenge(self):
        acct = self.gw.create_account("bystander", deposit=DEPOSIT)
        before = self.gw.full_state()
        for method, path in (("POST", "/work"), ("GET", "/some/resource?q=1")):
            r = self.gw.pay(None, None, BODY if method == "POST" else None, method=method, path=path)
            self.assertEqual(r.status, 402, r)
            header = r.header("PAYMENT-REQUIRED")
            self.assertIsNotNone(header, "PAYMENT-REQUIRED header missing: %r" % r)
            self.assertRegex(header, self.B64, "standard base64 alphabet")
            self.assertEqual(len(header) % 4, 0, "padded base64")
            v2 = json.loads(base64.b64decode(header, validate=True))
            self.assertEqual(v2.get("x402Version"), 2, v2)
            self.assertIsInstance(v2.get("accepts"), list, v2)
            self.assertGreaterEqual(len(v2["accepts"]), 1, v2)
            a = v2["accepts"][0]
            self.assertEqual(a.get("amount"), str(PRICE), a)
            self.assertRegex(a.get("network", ""), r"^eip155:[0-9]+$", a)
            self.assertEqual(a.get("scheme"), "exact", a)
            extra = a.get("extra") or {}
            self.assertTrue(isinstance(extra.get("name"), str) and extra["name"], a)
            self.assertTrue(isinstance(extra.get("version"), str) and extra["version"], a)

            body = r.json()
            self.assertEqual(body.get("x402Version"), 1, body)
            self.assertEqual(body.get("code"), "payment_required", body)
            self.assertIsInstance(body.get("accepts"), list, body)
            self.assertEqual(body["accepts"][0].get("maxAmountRequired"), str(PRICE), body)
            self.assertEqual(body["accepts"][0].get("network"), a["network"], body)
            self.assertEqual(body["accepts"][0].get("scheme"), "exact", body)
            self.assertTrue((r.header("Content-Type") or "").startswith("application/"), r)
        self.assertEqual(self.gw.full_state(), before, "a 402 challenge moved money or created state")
        self.assertExecuted(0)
        self.assertAccount(acct, deposited=DEPOSIT, captured=0, held=0)


class AdminDepositTest(GatewayTestCase):
    """Admin deposits: idempotent by reference, never overflowing (the setup path of every other test)."""

    def test_deposit_reference_replay_and_mismatch(self):
        acct = self.gw.create_account("depositor")
        r1 = self.gw.deposit(acct, 5000, "ref-1")
        self.assertEqual((r1.status, r1.header("Idempotent-Replayed")), (201, "false"), r1)
        r2 = self.gw.deposit(acct, 5000, "ref-1")
        self.assertEqual((r2.status, r2.header("Idempotent-Replayed")), (200, "true"), r2)
        r3 = self.gw.deposit(acct, 6000, "ref-1")
        self.assertProblem(r3, 422, "deposit_reference_mismatch")
        self.assertAccount(acct, deposited=5000, balance=5000, available=5000, captured=0, held=0)
        self.assertEqual(self.gw.admin_account(acct.id)["deposited"], 5000)

    def test_deposit_amounts_never_overflow(self):
        # CONTRACT 1: overflow and negative amounts are rejected.
        acct = self.gw.create_account("whale")
        max_i64 = 2 ** 63 - 1
        r = self.gw.deposit(acct, max_i64, "max")
        self.assertEqual(r.status, 201, r)
        r = self.gw.deposit(acct, 1, "one-more")
        self.assertEqual(r.status, 422, r)
        self.assertIn(r.json().get("code"), ("amount_overflow", "limit_exceeded"), r)
        for amount in (str(2 ** 63), str(2 ** 64 + 1), "-1", "0", "01", "+5", " 5", "5.0"):
            r = self.gw.admin("POST", "/admin/v1/accounts/%s/deposits" % acct.id,
                              {"amount": amount, "reference": "bad-%s" % amount})
            self.assertIn(r.status, (400, 422), "amount %r: %r" % (amount, r))
        self.assertAccount(acct, deposited=max_i64, balance=max_i64, available=max_i64, captured=0, held=0)


class AdminAuditTest(GatewayTestCase):
    """GET /admin/v1/audit and /admin/v1/audit/payments (`agentpay admin audit`): the admin token only, on the
    admin listener only; the books of real payments pass with the right totals."""

    AUDIT_PATHS = ("/admin/v1/audit", "/admin/v1/audit/payments")

    def test_only_the_admin_token_reads_the_audit(self):
        acct = self.gw.create_account("audited", deposit=DEPOSIT)
        for path in self.AUDIT_PATHS:
            for auth in (None, "Bearer nope", "Bearer " + acct.api_key, "Bearer " + harness.ADMIN_TOKEN + "x"):
                r = self.gw.admin_request("GET", path, headers={"Authorization": auth} if auth else {})
                self.assertProblem(r, 401, "unauthorized", "%s with %r" % (path, auth))
                self.assertNotIn(b"totals", r.body)
                self.assertNotIn(b"payments", r.body)
            # The public listener serves no admin path, whatever the token.
            r = self.gw.request("GET", path, headers={"Authorization": "Bearer " + harness.ADMIN_TOKEN})
            self.assertEqual(r.status, 404, r)
            self.assertProblem(self.gw.admin("POST", path, body={}), 405, "method_not_allowed")
        for query in ("limit=0", "limit=1001", "limit=x", "after=" + "a" * 300):
            r = self.gw.admin("GET", "/admin/v1/audit/payments?" + query)
            self.assertProblem(r, 400, "invalid_request", query)
        # With a token file that is not the gateway's, the CLI prints no report and says why.
        wrong = os.path.join(self.workdir, "wrong-token")
        harness.write_secret(wrong, "not-the-token\n")
        done = subprocess.run([harness.binary(), "admin", "--url", self.gw.admin_url, "--token-file", wrong,
                               "audit"], capture_output=True, timeout=30)
        self.assertEqual(done.returncode, 2, done)
        self.assertEqual(done.stdout, b"")
        self.assertIn(b"401 unauthorized", done.stderr)

    def test_the_books_of_real_payments_pass_with_their_totals(self):
        acct = self.gw.create_account("audited", deposit=DEPOSIT)
        self.assertEqual(self.gw.pay(acct, "captured", BODY).status, 200)
        self.assertEqual(self.gw.pay(acct, "kept", BODY, fault="5xx").status, 502)
        self.assertEqual(self.gw.pay(acct, "released", BODY, fault="4xx").status, 400)
        code, report = self.gw.audit()
        self.assertEqual(code, 0, report)
        self.assertEqual((report["ok"], report["violations"], report["listed"]), (True, 0, []))
        self.assertEqual([c["name"] for c in report["checks"]], [
            "account_books", "money_conserved", "operation_postings", "one_charge_per_key",
            "one_payment_per_authorization", "holds_within_ttl", "settled_accounted_for", "chain_transfers"])
        examined = {c["name"]: (c["ran"], c["examined"]) for c in report["checks"]}
        self.assertEqual(examined["account_books"], (True, 1))
        self.assertEqual(examined["operation_postings"], (True, 3))
        self.assertEqual(examined["holds_within_ttl"], (True, 1))
        self.assertEqual(examined["chain_transfers"], (False, 0))  # the CLI's, with --chain-rpc
        totals = report["totals"]
        self.assertEqual((totals["accounts"], totals["operations"]), (1, 3))
        self.assertEqual((totals["deposited"], totals["balance"], totals["held"], totals["captured"]),
                         (str(DEPOSIT), str(DEPOSIT - PRICE), str(PRICE), str(PRICE)))
        # The table, as an operator reads it.
        done = subprocess.run([harness.binary(), "admin", "--url", self.gw.admin_url, "--token-file",
                               self.gw.token_file, "audit"], capture_output=True, timeout=30)
        self.assertEqual(done.returncode, 0, done)
        out = done.stdout.decode()
        self.assertRegex(out, r"operation_postings +3 +0\n")
        self.assertIn("chain_transfers", out)
        self.assertIn("OK: the books hold", out)


# Which check of `agentpay admin audit` each tampering of InvariantCheckerSelfTest breaks (at least).
AUDIT_FINDS = {
    "captured bumped": "account_books",
    "held zeroed": "account_books",
    "double capture": "operation_postings",
    "deposit posting lost": "account_books",
    "release to revenue": "money_conserved",
    "held op marked settled": "operation_postings",
    "settled op marked released": "operation_postings",
    "hold leaks": "operation_postings",
    "key charged twice": "one_charge_per_key",
    "refunded twice": "operation_postings",
    "swept without alert": "settled_accounted_for",
}


class InvariantCheckerSelfTest(GatewayTestCase):
    """The invariant checker must notice broken books: tamper with copies of a real DB, one way at a time."""

    @unittest.skipIf(harness.on_postgres(), "tampers with copies of a SQLite file; the checker's rules are "
                     "the same on PostgreSQL, where every test's tearDown runs them")
    def test_checker_detects_tampered_books(self):
        acct = self.gw.create_account("books", deposit=DEPOSIT)
        ok = self.gw.pay(acct, "settled", BODY)
        held = self.gw.pay(acct, "held", BODY, fault="5xx")
        released = self.gw.pay(acct, "released", BODY, fault="4xx")
        self.assertEqual((ok.status, held.status, released.status), (200, 502, 400))
        self.assertEqual(harness.collect_invariant_violations(self.gw), [])

        settled_op, held_op = ok.operation_id, held.operation_id
        tamperings = {
            "captured bumped": "UPDATE accounts SET captured = captured + 1",
            "held zeroed": "UPDATE accounts SET held = 0",
            "double capture": "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, at_ms) "
                              "SELECT operation_id, kind, debit, credit, amount, at_ms FROM ledger_entries "
                              "WHERE kind = 'capture'",
            "deposit posting lost": "DELETE FROM ledger_entries WHERE kind = 'deposit'",
            "release to revenue": "UPDATE ledger_entries SET credit = 'revenue' WHERE kind = 'release'",
            "held op marked settled": "UPDATE operations SET settlement = 'settled' WHERE id = '%s'" % held_op,
            "settled op marked released": "UPDATE operations SET settlement = 'released' WHERE id = '%s'"
                                          % settled_op,
            "hold leaks": "UPDATE ledger_entries SET amount = amount + 7 WHERE kind = 'hold' AND operation_id = '%s'"
                          % held_op,
            # Balanced books, but one key charged twice (a second operation with the same key, captured).
            "key charged twice": [
                "INSERT INTO operations SELECT id || 'x', principal, idempotency_key, fingerprint, route, amount, "
                "intent, settlement, fulfillment, hold_expires_ms, lease_expires_ms, attempts, response_status, "
                "response_content_type, response_body, retained_until_ms, created_ms + 1, updated_ms, claimed_by "
                "FROM operations WHERE id = '%s'" % settled_op,
                "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, at_ms) "
                "SELECT operation_id || 'x', kind, debit, credit, amount, at_ms FROM ledger_entries "
                "WHERE operation_id = '%s'" % settled_op,
                "UPDATE accounts SET captured = captured + %d" % PRICE,
            ],
            # Refunded twice, the account moved to match: the ledger refunds more than was captured.
            "refunded twice": [
                "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, at_ms) "
                "SELECT operation_id, 'refund', 'revenue', 'wallet:' || substr(debit, 6), amount, at_ms "
                "FROM ledger_entries WHERE kind = 'capture' AND operation_id = '%s'" % settled_op,
            ] * 2 + ["UPDATE accounts SET captured = 0, deposited = deposited + %d" % PRICE],
            "swept without alert": [
                "UPDATE operations SET settlement = 'released', fulfillment = 'pending_retry' WHERE id = '%s'"
                % held_op,
                "INSERT INTO ledger_entries (operation_id, kind, debit, credit, amount, at_ms) "
                "SELECT operation_id, 'release', credit, debit, amount, at_ms FROM ledger_entries "
                "WHERE kind = 'hold' AND operation_id = '%s'" % held_op,
                "UPDATE accounts SET held = held - %d" % PRICE,
            ],
        }
        src = harness.open_db(self.gw.db_path)
        try:
            for i, (name, sql) in enumerate(sorted(tamperings.items())):
                path = os.path.join(self.workdir, "tampered-%d.db" % i)
                dst = sqlite3.connect(path)
                try:
                    src.backup(dst)
                    self.assertEqual(harness.collect_invariant_violations(db_path=path), [],
                                     "pristine copy must pass")
                    for statement in ([sql] if isinstance(sql, str) else sql):
                        dst.execute(statement)
                    dst.commit()
                finally:
                    dst.close()
                violations = harness.collect_invariant_violations(db_path=path)
                self.assertTrue(violations, "the checker missed: %s" % name)
                # The gateway's books audit, on a gateway started on the tampered copy, names it too.
                gw = harness.Gateway(self.workdir, self.seller.url, db=("sqlite:" + path, path))
                gw.token_file = self.gw.token_file
                try:
                    gw.start()
                    code, report = gw.audit()
                finally:
                    gw.stop()
                self.assertEqual(code, 1, "the audit missed: %s: %s" % (name, report))
                named = {v["check"] for v in report["listed"]}
                self.assertIn(AUDIT_FINDS[name], named, "%s: %s" % (name, report["listed"]))
        finally:
            src.close()


if __name__ == "__main__":
    harness.main(sys.argv)
