"""The invariant checker of AgentPay's store (issue 4), shared by every suite that runs a gateway.

`check(db_path, ...)` reads one consistent snapshot of a gateway's store (read-only): a SQLite file, or a
PostgreSQL database when db_path is a postgresql:// URL (through psycopg2). It returns a
Report: `violations` (human-readable strings; empty means every invariant holds) and `figures` (the
counts the fault suite prints: charges, double charges, money created or lost, stuck holds, ...).

Invariants (CONTRACT sections 3-5, docs/wallet-ledger.md):
  1. Ledger: every posting has a known kind and shape (deposit external->wallet, hold wallet->hold,
     capture hold->revenue, release hold->wallet, refund revenue->wallet), a positive amount, and the
     postings of an operation name that operation.
  2. Money conserved per account (stored deposited/captured/held equal the ledger's; balance =
     deposited - captured; 0 <= held <= balance) and in total (sum of balances + revenue = deposits =
     -net(external)).
  3. At most one capture per wallet operation, captures <= amount, refunds <= captures; held operations
     hold exactly their amount; settled ones captured it once; released/none/void/failed keep nothing.
  4. At most one charge per (principal, key) within retention: two charged operations of one key
     overlap only if the first one's key was forgotten (retained_until_ms) before the second began.
  5. x402: one payment record per authorization (payer, nonce), one operation per transaction hash,
     every settled x402 operation has a transaction.
  6. No hold older than its TTL + the sweep interval (+ slack), once no live attempt holds it (only
     checked when `now_ms` is given, i.e. while a gateway with a running sweeper owns the file).
  7. Every settled operation is fulfilled (succeeded, or rejected as documented for settle=before),
     waiting for a retry (pending_retry; not_started for an x402 settle=before payment the reconciler
     settled), in flight under a live lease, or alerted; every hold released by the sweeper raised exactly one alert.
  8. Seller executions versus charges, when the seller's count is given: every wallet charge is a 2xx
     from the seller, so charges <= executions; the difference is work done unpaid (reported).

The standard library and, for PostgreSQL only, psycopg2 (Debian's python3-psycopg2). Used by
tests/integration/harness.py (which adds the HTTP views of the same accounts) and by tests/fault/fault_suite.py.
"""

import sqlite3

LEDGER_SHAPES = {
    # kind: (debit kind, credit kind); per-account names are "<kind>:<account id>"
    "deposit": ("external", "wallet"),
    "hold": ("wallet", "hold"),
    "capture": ("hold", "revenue"),
    "release": ("hold", "wallet"),
    "refund": ("revenue", "wallet"),
}
OPERATION_KINDS = ("hold", "capture", "release", "refund")
FINAL_FULFILLMENTS = ("succeeded", "rejected")


class Report:
    def __init__(self):
        self.violations = []
        self.figures = {
            "accounts": 0, "operations": 0, "charges": 0, "double_charges": 0, "money_delta": 0,
            "stuck_holds": 0, "held_now": 0, "alerts": 0, "open_alerts": 0, "x402_settled": 0,
            "unpaid_executions": None,
        }

    def add(self, message):
        self.violations.append(message)

    @property
    def ok(self):
        return not self.violations


def is_postgres(target):
    return target.startswith(("postgresql://", "postgres://"))


class PostgresSnapshot:
    """A read-only PostgreSQL connection with sqlite3's small interface as the suites use it: execute()
    with ? parameters returning a cursor, BEGIN/COMMIT around one REPEATABLE READ snapshot, `with`
    closing it."""

    def __init__(self, url):
        import psycopg2  # only the PostgreSQL runs need it
        self.conn = psycopg2.connect(url, connect_timeout=10)
        self.conn.set_session(isolation_level="REPEATABLE READ", readonly=True)

    def execute(self, sql, params=()):
        if sql == "BEGIN":
            return None  # psycopg2 begins the transaction with the first statement
        if sql == "COMMIT":
            self.conn.commit()
            return None
        cursor = self.conn.cursor()
        cursor.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(params))
        return cursor

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def open_db(path):
    """A read-only connection to a gateway's store: a SQLite path or a postgresql:// URL."""
    if is_postgres(path):
        return PostgresSnapshot(path)
    return sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)


def _ledger_name(kind, account_id):
    return kind + ":" + account_id if kind in ("wallet", "hold") else kind


def _table_exists(db, name):
    if isinstance(db, PostgresSnapshot):
        return db.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                          "AND table_name = ?", (name,)).fetchone()
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()


def read_snapshot(db_path):
    """Everything the checks need, from one read transaction."""
    with open_db(db_path) as db:
        db.execute("BEGIN")
        snap = {
            "accounts": db.execute("SELECT id, deposited, captured, held FROM accounts ORDER BY id").fetchall(),
            "ledger": db.execute("SELECT id, operation_id, kind, debit, credit, amount FROM ledger_entries "
                                 "ORDER BY id").fetchall(),
            "deposits": db.execute("SELECT account_id, amount FROM deposits").fetchall(),
            "operations": db.execute(
                "SELECT id, principal, idempotency_key, amount, settlement, fulfillment, hold_expires_ms, "
                "lease_expires_ms, retained_until_ms, created_ms FROM operations").fetchall(),
            "alerts": db.execute("SELECT id, operation_id, kind, resolved_ms FROM alerts").fetchall(),
            "expired_events": db.execute("SELECT operation_id, COUNT(*) FROM operation_events "
                                         "WHERE kind = 'hold_expired' GROUP BY operation_id").fetchall(),
            "payments": [],
        }
        if _table_exists(db, "x402_payments"):
            snap["payments"] = db.execute("SELECT operation_id, payer, nonce, tx_hash FROM x402_payments").fetchall()
        db.execute("COMMIT")
    return snap


def _check_ledger(snap, report):
    """Invariant 1. Returns (net per ledger account, per operation {kind: [amounts]})."""
    net, per_op = {}, {}
    for row_id, op_id, kind, debit, credit, amount in snap["ledger"]:
        if not isinstance(amount, int) or amount <= 0:
            report.add("ledger row %d (%s): amount must be a positive integer, got %r" % (row_id, kind, amount))
            continue
        shape = LEDGER_SHAPES.get(kind)
        if shape is None:
            report.add("ledger row %d: unknown kind %r (%s -> %s)" % (row_id, kind, debit, credit))
        else:
            account_id = next((n.split(":", 1)[1] for n in (debit, credit) if ":" in n), "?")
            expected = (_ledger_name(shape[0], account_id), _ledger_name(shape[1], account_id))
            if (debit, credit) != expected:
                report.add("ledger row %d: %s posting must be %s -> %s, got %s -> %s" % (
                    row_id, kind, expected[0], expected[1], debit, credit))
        if kind == "deposit" and op_id is not None:
            report.add("ledger row %d: deposit posting has operation_id %r" % (row_id, op_id))
        if kind in OPERATION_KINDS:
            if not op_id:
                report.add("ledger row %d: %s posting without operation_id" % (row_id, kind))
            else:
                per_op.setdefault(op_id, {}).setdefault(kind, []).append(amount)
        net[debit] = net.get(debit, 0) - amount
        net[credit] = net.get(credit, 0) + amount
    if sum(net.values()) != 0:
        report.add("ledger: debits != credits (net sum %d)" % sum(net.values()))
    return net, per_op


def _sum_kind(ledger, kind, side, name):
    index = 3 if side == "debit" else 4
    return sum(row[5] for row in ledger if row[2] == kind and row[index] == name)


def _check_accounts(snap, net, report):
    """Invariant 2. Returns the signed total of money created (+) or lost (-)."""
    deposits = {}
    for account_id, amount in snap["deposits"]:
        deposits[account_id] = deposits.get(account_id, 0) + amount  # Python ints: no overflow
    sum_balance = sum_deposited = 0
    ids = set()
    ledger = snap["ledger"]
    for account_id, deposited, captured, held in snap["accounts"]:
        ids.add(account_id)
        balance = deposited - captured
        sum_balance += balance
        sum_deposited += deposited
        where = "account %s (table: deposited=%d captured=%d held=%d)" % (account_id, deposited, captured, held)
        if captured < 0 or captured > deposited:
            report.add("%s: need 0 <= captured <= deposited" % where)
        if not 0 <= held <= balance:
            report.add("%s: need 0 <= held <= balance=%d" % (where, balance))
        wallet, hold = "wallet:" + account_id, "hold:" + account_id
        l_deposited = _sum_kind(ledger, "deposit", "credit", wallet)
        l_captured = _sum_kind(ledger, "capture", "debit", hold) - _sum_kind(ledger, "refund", "credit", wallet)
        if l_deposited != deposited:
            report.add("%s: deposited != sum of deposit postings (%d)" % (where, l_deposited))
        if l_captured != captured:
            report.add("%s: captured != capture postings less refunds (%d)" % (where, l_captured))
        if net.get(hold, 0) != held:
            report.add("%s: held != net of '%s' postings (%d)" % (where, hold, net.get(hold, 0)))
        if net.get(wallet, 0) != balance - held:
            report.add("%s: available (balance-held=%d) != net of '%s' postings (%d)" % (
                where, balance - held, wallet, net.get(wallet, 0)))
        if deposits.get(account_id, 0) != deposited:
            report.add("%s: deposited != sum of the deposits table (%d)" % (where, deposits.get(account_id, 0)))
    for name in net:
        if name.startswith(("wallet:", "hold:")) and name.split(":", 1)[1] not in ids:
            report.add("ledger account %r has postings but no accounts row" % name)
    revenue, external = net.get("revenue", 0), net.get("external", 0)
    delta = sum_balance + revenue - sum_deposited
    if delta != 0:
        report.add("money not conserved: sum(balances)=%d + revenue=%d = %d != sum(deposits)=%d (%+d)" % (
            sum_balance, revenue, sum_balance + revenue, sum_deposited, delta))
    if -external != sum_deposited:
        report.add("net of 'external' (%d) != -sum(deposits) (%d)" % (external, sum_deposited))
    report.figures["accounts"] = len(ids)
    return delta


def _check_wallet_operation(op, postings, report):
    """Invariant 3 for one wallet operation. Returns whether it is charged (net capture > 0)."""
    op_id, principal, _key, amount, settlement, fulfillment = op[:6]
    holds, captures = sum(postings.get("hold", [])), sum(postings.get("capture", []))
    releases, refunds = sum(postings.get("release", [])), sum(postings.get("refund", []))
    outstanding = holds - captures - releases
    where = "operation %s (%s, amount %d, settlement=%s, fulfillment=%s, postings=%r)" % (
        op_id, principal, amount, settlement, fulfillment, postings)
    double = len(postings.get("capture", [])) > 1 or captures > amount
    if double:
        report.add("%s: charged more than once" % where)
    if refunds > captures:
        report.add("%s: refunded more than captured" % where)
    if outstanding < 0:
        report.add("%s: more captured/released than held" % where)
    if settlement == "held" and outstanding != amount:
        report.add("%s: settlement held but outstanding hold is %d" % (where, outstanding))
    if settlement == "settled" and (captures != amount or outstanding != 0):
        report.add("%s: settled must be exactly one capture of the amount and no outstanding hold" % where)
    if settlement in ("none", "released", "void", "failed") and (captures != 0 or outstanding != 0):
        report.add("%s: settlement %s must leave no capture and no outstanding hold" % (where, settlement))
    if settlement == "held":
        report.figures["held_now"] += 1
    return double, captures > 0


def _check_keys(charged_by_key, report):
    """Invariant 4: charged operations of one (principal, key), oldest first, never overlap retention."""
    for (principal, key), ops in charged_by_key.items():
        ops.sort(key=lambda o: (o[1], o[0]))
        for (first_id, _, first_retained), (second_id, second_created, _) in zip(ops, ops[1:]):
            if first_retained is None or second_created < first_retained:
                report.figures["double_charges"] += 1
                report.add("key %r of %s charged twice: operation %s, then %s created at %d while the first "
                           "was still remembered (retained until %r)" % (
                               key, principal, first_id, second_id, second_created, first_retained))


def _check_x402(snap, ops_by_id, report):
    """Invariant 5."""
    by_auth, by_tx = {}, {}
    for op_id, payer, nonce, tx_hash in snap["payments"]:
        by_auth.setdefault((payer.lower(), nonce.lower()), []).append(op_id)
        if tx_hash:
            by_tx.setdefault(tx_hash.lower(), []).append(op_id)
        op = ops_by_id.get(op_id)
        if op is None:
            report.add("x402 payment of unknown operation %s" % op_id)
        elif op[4] == "settled" and not tx_hash:
            report.add("x402 operation %s is settled without a transaction" % op_id)
    for auth, op_ids in by_auth.items():
        if len(op_ids) > 1:
            report.add("authorization %r pays for %d operations: %r" % (auth, len(op_ids), op_ids))
    for tx_hash, op_ids in by_tx.items():
        if len(op_ids) > 1:
            settled = [i for i in op_ids if ops_by_id.get(i, [None] * 5)[4] == "settled"]
            report.add("transaction %s carries %d payments (%d settled): %r" % (
                tx_hash, len(op_ids), len(settled), op_ids))
            report.figures["double_charges"] += max(0, len(settled) - 1)


def _check_holds_and_alerts(snap, report, now_ms, hold_slack_ms):
    """Invariants 6 and 7."""
    alerts_by_op = {}
    for _alert_id, op_id, kind, resolved_ms in snap["alerts"]:
        alerts_by_op.setdefault(op_id, []).append(kind)
        report.figures["alerts"] += 1
        report.figures["open_alerts"] += resolved_ms is None
    expired = dict(snap["expired_events"])
    for op_id, count in expired.items():
        got = alerts_by_op.get(op_id, []).count("hold_expired_after_possible_work")
        if got != count:
            report.add("operation %s: the sweeper released its hold %d time(s) but %d alert(s) were raised" % (
                op_id, count, got))
    for op in snap["operations"]:
        op_id, principal, _key, _amount, settlement, fulfillment, hold_expires, lease_expires = op[:8]
        alerted = bool(alerts_by_op.get(op_id))
        # not_started: an x402 settle=before payment settled by the reconciler, its call still to come
        waiting = ("pending_retry", "not_started")
        if settlement == "settled" and fulfillment not in FINAL_FULFILLMENTS + waiting and not alerted:
            live = fulfillment == "in_progress" and now_ms is not None and lease_expires > now_ms
            if not live and now_ms is not None:
                report.add("operation %s is settled, fulfillment %s, and has no alert" % (op_id, fulfillment))
        if settlement == "released" and fulfillment == "pending_retry" and not alerted:
            report.add("operation %s: hold released with the work possibly done, but no alert" % op_id)
        if now_ms is None or settlement != "held" or hold_expires is None:
            continue
        due = hold_expires
        if fulfillment == "in_progress":
            due = max(due, lease_expires)  # the sweeper never takes a hold from a live attempt
        if now_ms > due + hold_slack_ms:
            report.figures["stuck_holds"] += 1
            report.add("operation %s (%s): hold due for release at %d is still held at %d (%d ms late)" % (
                op_id, principal, due, now_ms, now_ms - due))


def check(db_path, now_ms=None, hold_slack_ms=None, seller_executions=None):
    """All invariants over one snapshot of db_path. `now_ms` (the gateway's clock) enables the stuck-hold
    check; a hold is stuck once it is `hold_slack_ms` (the sweep interval plus scheduling slack) past
    the later of its expiry and its attempt's lease. `seller_executions` enables invariant 8."""
    report = Report()
    snap = read_snapshot(db_path)
    net, per_op = _check_ledger(snap, report)
    report.figures["money_delta"] = _check_accounts(snap, net, report)
    ops_by_id = {op[0]: op for op in snap["operations"]}
    report.figures["operations"] = len(ops_by_id)
    for op_id, postings in per_op.items():
        if op_id not in ops_by_id:
            report.add("ledger has postings for unknown operation %s: %r" % (op_id, postings))
    charged_by_key = {}
    for op in snap["operations"]:
        op_id, principal, key, settlement = op[0], op[1], op[2], op[4]
        if principal.startswith("account:"):
            double, charged = _check_wallet_operation(op, per_op.get(op_id, {}), report)
            report.figures["double_charges"] += double
        else:
            charged = settlement == "settled"
            report.figures["x402_settled"] += charged
        if charged:
            report.figures["charges"] += 1
            charged_by_key.setdefault((principal, key), []).append((op_id, op[9], op[8]))
    _check_keys(charged_by_key, report)
    _check_x402(snap, ops_by_id, report)
    _check_holds_and_alerts(snap, report, now_ms, hold_slack_ms if hold_slack_ms is not None else 0)
    if seller_executions is not None:
        wallet_charges = report.figures["charges"] - report.figures["x402_settled"]
        report.figures["unpaid_executions"] = seller_executions - wallet_charges
        if wallet_charges > seller_executions:
            report.add("%d wallet charges but the seller executed only %d times: a charge without work" % (
                wallet_charges, seller_executions))
    return report
