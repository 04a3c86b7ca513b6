"""Harness for the x402 gateway integration tests (stdlib only).

A fresh Anvil (chain id 84532, so v1 clients can say "base-sepolia") with TestUSDC("USDC", "2"), the
demo seller, and `agentpay serve` pointed at the chain with --chain-rpc & co. Payments are built three
ways: by the official clients (tests/chain_env/x402_client.mjs, also --sign-only), or by hand from
viem signatures (tests/chain_env/sign_auth.mjs) for the invalid and malformed cases.

The money check (money_violations) reads only the chain and the gateway's operation views:
  - every settled operation names a mined, successful tx holding its payer's AuthorizationUsed and
    right after it a Transfer of the token from the operation's payer to payTo, of exactly the
    operation's amount; no such Transfer is claimed by two operations (a batch's transaction,
    --settle-batch-max, holds one for each of its payments);
  - Transfers into payTo == the settled operations plus the transfers the tests made themselves;
  - every buyer's loss and payTo's gain match those transfers to the unit;
  - no (authorizer, nonce) was used twice, and every relayer transaction is a successful settlement
    (or a void operation's own tx reverting as expired: the gateway's filler of its relayer nonce).

Accounts (Anvil's default mnemonic): #0 deploys/mints and makes the tests' own transactions, #1 buyer,
#2 payTo, #4 relayer (nothing else sends from it), #5 a second buyer, #6 a poor buyer, #7 a stranger.
"""

import base64
import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CHAIN_ENV = os.path.join(os.path.dirname(HERE), "chain_env")
sys.path.insert(0, HERE)
sys.path.insert(0, CHAIN_ENV)

import anvil as A  # noqa: E402
import harness  # noqa: E402

CHAIN_ID = 84532
NETWORK = "eip155:%d" % CHAIN_ID
V1_NETWORK = "base-sepolia"
TOKEN_NAME, TOKEN_VERSION = "USDC", "2"
DEPLOYER, BUYER, PAY_TO, RELAYER = A.ACCOUNTS[0], A.ACCOUNTS[1], A.ACCOUNTS[2], A.ACCOUNTS[4]
BUYER2, POOR, STRANGER = A.ACCOUNTS[5], A.ACCOUNTS[6], A.ACCOUNTS[7]
PRICE = 1000          # route "/" (settle before)
AFTER_PRICE = 2500    # route "/after" (settle after)
MINT = 10 ** 9        # 1000 USDC for each buyer
ADMIN_TOKEN = harness.ADMIN_TOKEN
ZERO_ADDRESS = "0x" + "0" * 40
TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")
ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def eq_addr(a, b):
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def b64json(obj):
    return base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode()


def unb64json(value):
    return json.loads(base64.b64decode(value, validate=True))


def deadline_poll(fn, timeout, interval=0.05, what="condition"):
    """Call fn() until it returns a truthy value; return it. Raise AssertionError after timeout."""
    end = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > end:
            raise AssertionError("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(interval)


# ----------------------------------------------------------------------------------------------- chain

_chains = set()


def emergency_shutdown(signum=None, frame=None):
    """SIGTERM handler: kill every Anvil of ours, then every other child (harness.emergency_shutdown exits)."""
    for chain in list(_chains):
        proc = chain.node.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
    harness.emergency_shutdown(signum, frame)


def main(argv):
    """harness.main for tests on Anvil: fails loudly when tests/chain_env is not installed, and a
    SIGTERM kills every Anvil of ours as well."""
    harness.main(argv, on_sigterm=emergency_shutdown, before=A.anvil_binary)


class Chain:
    """One Anvil + TestUSDC, buyers funded. `direct` records the transfers the tests make themselves
    (not through the gateway) as (from, to, value), so the money check can account for them."""

    def __init__(self, automine=True, token_name=TOKEN_NAME, block_time=None):
        self.node = A.Anvil(chain_id=CHAIN_ID, automine=automine, block_time=block_time).start()
        _chains.add(self)
        self.rpc = self.node.rpc
        self.token = A.deploy_test_usdc(self.rpc, token_name, TOKEN_VERSION)
        # Multicall3 (as Multicall3Lite) at its canonical address, as public chains have it: batched
        # settlement (--settle-batch-max) sends through it, and the reference facilitator asks it.
        A.install_multicall3(self.rpc)
        self.minted = {}
        for acct, amount in ((BUYER, MINT), (BUYER2, MINT), (POOR, PRICE - 1)):
            A.mint(self.rpc, self.token, acct.address, amount)
            self.minted[acct.address.lower()] = amount
        self.direct = []
        self.domain = {"name": TOKEN_NAME, "version": TOKEN_VERSION, "chainId": CHAIN_ID,
                       "verifyingContract": self.token}

    def stop(self):
        self.node.stop()
        _chains.discard(self)

    @property
    def url(self):
        return self.node.url

    def now(self):
        return int(time.time())

    def balance(self, who):
        return A.balance_of(self.rpc, self.token, who)

    def used(self, authorizer, nonce):
        return A.authorization_state(self.rpc, self.token, authorizer, nonce)

    def relayer_nonce(self, tag="pending"):
        return int(self.rpc.call("eth_getTransactionCount", RELAYER.address, tag), 16)

    def transfers(self, from_=None, to=None):
        return A.transfer_logs(self.rpc, self.token, from_=from_, to=to)

    def transfers_to_pay_to(self):
        return [t for t in self.transfers(to=PAY_TO.address) if t["from"] != ZERO_ADDRESS]

    def tx(self, tx_hash):
        return self.rpc.call("eth_getTransactionByHash", tx_hash)

    def pending_relayer_txs(self):
        content = self.rpc.call("txpool_content") or {}
        out = []
        for section in ("pending", "queued"):
            for sender, by_nonce in (content.get(section) or {}).items():
                if eq_addr(sender, RELAYER.address):
                    out.extend(by_nonce.values())
        return out

    def state(self):
        """What a refused payment must leave unchanged on chain."""
        return {"relayer_nonce": self.relayer_nonce(), "relayer_nonce_mined": self.relayer_nonce("latest"),
                "transfers_to_pay_to": len(self.transfers_to_pay_to()),
                "buyer": self.balance(BUYER.address), "pay_to": self.balance(PAY_TO.address)}

    def pay_directly(self, auth, signature):
        """Settle an authorization ourselves (from account #0), recorded as a direct transfer."""
        receipt = A.transfer_with_authorization(self.rpc, self.token, auth, signature)
        if int(receipt["status"], 16) != 1:
            raise AssertionError("direct transferWithAuthorization failed: %r" % receipt)
        self.direct.append((auth["from"].lower(), auth["to"].lower(), int(auth["value"])))
        return receipt

    def sign(self, requests):
        """sign_auth.mjs over a list of {key, message, domain?}; returns the list of results."""
        reqs = [{"privateKey": r["key"].private_key, "domain": r.get("domain") or self.domain,
                 "message": r["message"]} for r in requests]
        return A.sign_authorization(reqs) if reqs else []


# ----------------------------------------------------------------------------------------------- payments

def auth_message(chain, to=None, value=PRICE, valid_after=0, valid_before=None, nonce=None, from_=None):
    m = {"to": to or PAY_TO.address, "value": str(value), "validAfter": str(valid_after),
         "validBefore": str(valid_before if valid_before is not None else chain.now() + 120)}
    if nonce:
        m["nonce"] = nonce
    if from_:
        m["from"] = from_
    return m


def v2_payload(accepted, signed, resource=None, extensions=None):
    """The PAYMENT-SIGNATURE JSON the official v2 client sends, for a viem signature `signed`."""
    payload = {"x402Version": 2,
               "payload": {"authorization": dict(signed["message"]), "signature": signed["signature"]},
               "accepted": dict(accepted)}
    if resource is not None:
        payload["resource"] = resource
    if extensions is not None:
        payload["extensions"] = extensions
    return payload


def v1_payload(signed, network=V1_NETWORK):
    return {"x402Version": 1, "scheme": "exact", "network": network,
            "payload": {"signature": signed["signature"], "authorization": dict(signed["message"])}}


def node_json(args, stdin=None, timeout=60):
    p = subprocess.run(["node", *args], cwd=CHAIN_ENV, input=stdin, capture_output=True, text=True,
                       timeout=timeout, check=False)
    lines = p.stdout.strip().splitlines()
    if not lines:
        raise AssertionError("node %s printed nothing (rc %d): %s" % (args[0], p.returncode, p.stderr[-2000:]))
    return json.loads(lines[-1])


def official_sign_v2(chain, payment_required_b64, key=BUYER):
    """The PAYMENT-SIGNATURE value the official v2 client makes for a challenge: {header, value, payload}."""
    return node_json(["x402_client.mjs", "--sign-only", "--version", "2", "--private-key", key.private_key,
                      "--network", NETWORK, "--asset", chain.token, "--json"], stdin=payment_required_b64)


def official_sign_v1(v1_body, key=BUYER):
    return node_json(["x402_client.mjs", "--sign-only", "--version", "1", "--private-key", key.private_key,
                      "--json"], stdin=json.dumps(v1_body))


def client_argv(chain, version, url, key=BUYER, method="GET", body=None, headers=()):
    args = ["node", os.path.join(CHAIN_ENV, "x402_client.mjs"), "--version", str(version), "--url", url,
            "--private-key", key.private_key, "--method", method, "--timeout-ms", "60000"]
    if version == 2:
        args += ["--network", NETWORK, "--asset", chain.token]
    if body is not None:
        args += ["--body", body]
    for h in headers:
        args += ["--header", h]
    return args


def run_client(chain, version, url, key=BUYER, method="GET", body=None, headers=(), timeout=90):
    p = subprocess.run(client_argv(chain, version, url, key, method, body, headers), cwd=CHAIN_ENV,
                       capture_output=True, text=True, timeout=timeout, check=False)
    lines = p.stdout.strip().splitlines()
    if not lines:
        raise AssertionError("x402_client.mjs printed nothing (rc %d): %s" % (p.returncode, p.stderr[-2000:]))
    out = json.loads(lines[-1])
    if "error" in out:
        raise AssertionError("x402_client.mjs got no HTTP answer: %s" % out["error"])
    return out


# ----------------------------------------------------------------------------------------------- gateway

DEFAULT_ROUTES = (
    {"prefix": "/", "price": PRICE, "settle": "before"},
    {"prefix": "/after", "price": AFTER_PRICE, "settle": "after"},
)


class X402Gateway(harness.ManagedProcess):
    """`agentpay serve` on the Anvil chain: [[route]] tables in a TOML --config, SQLite in workdir (or
    PostgreSQL with AGENTPAY_IT_DB=postgres: harness.fresh_store)."""

    @contextlib.contextmanager
    def frozen(self, settle_s=0.05):
        """The gateway stopped (SIGSTOP) for the block, so that it sends nothing meanwhile; an RPC
        request it already sent gets settle_s to reach Anvil first. A gateway already gone is left
        alone."""
        pid = self.popen.pid if self.alive() else None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pid = None
        try:
            if pid is not None:
                time.sleep(settle_s)
            yield
        finally:
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def __init__(self, workdir, chain, upstream_url, routes=DEFAULT_ROUTES, asset_name=TOKEN_NAME,
                 extra_args=(), name="gateway", chain_url=None, tls=None, db=None, min_key_bits=0):
        """chain_url: --chain-rpc (default: the Anvil's own URL). tls: an ssl.SSLContext when the
        extra_args make the gateway serve HTTPS (--tls-cert), for the harness's own requests. db: (the
        --db URL, what open_db takes) of a store to share; default a fresh one. min_key_bits:
        --min-idempotency-key-bits; these tests name their keys for the reader (`lost-v2`), so by
        default every key proves the payer; None keeps the gateway's default (96), which
        security.replay tests (threat model T25)."""
        self.workdir = workdir
        self.tls = tls
        self.chain = chain
        self.port = harness.free_port()
        self.admin_port = harness.free_port()  # --admin-listen
        self.db_url, self.db_path = db or harness.fresh_store(workdir, name + ".db")
        self.token_file = os.path.join(workdir, name + "-admin-token")
        harness.write_secret(self.token_file, ADMIN_TOKEN + "\n")
        self.relayer_key_file = os.path.join(workdir, name + "-relayer-key")
        harness.write_secret(self.relayer_key_file, RELAYER.private_key + "\n")
        self.config_path = os.path.join(workdir, name + ".toml")
        with open(self.config_path, "w") as f:
            for r in routes:
                f.write('[[route]]\nprefix = "%s"\nupstream = "%s"\nprice = "%d"\nsettle = "%s"\n\n' % (
                    r["prefix"], upstream_url, r["price"], r.get("settle", "before")))
        self.routes = list(routes)
        self.asset_name = asset_name
        argv = [harness.binary(), "serve",
                "--config", self.config_path,
                "--listen", "127.0.0.1:%d" % self.port,
                "--admin-listen", "127.0.0.1:%d" % self.admin_port,
                "--db", self.db_url,
                "--admin-token-file", self.token_file,
                "--chain-rpc", chain_url or chain.url,
                "--chain-id", str(CHAIN_ID),
                "--asset", chain.token,
                "--asset-name", asset_name,
                "--asset-version", TOKEN_VERSION,
                "--pay-to", PAY_TO.address,
                "--relayer-key-file", self.relayer_key_file] + list(extra_args)
        if min_key_bits is not None:
            argv += ["--min-idempotency-key-bits", str(min_key_bits)]
        super().__init__(name, argv, os.path.join(workdir, name + ".log"))

    def start(self, **kw):
        return super().start(port=self.port, **kw)

    def url(self, path):
        if self.tls is not None:
            return "https://localhost:%d%s" % (self.port, path)
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def request(self, method, path, body=None, headers=None, timeout=harness.HTTP_TIMEOUT_S):
        return harness.http_request(self.port, method, path, body=body, headers=headers, timeout=timeout,
                                    tls=self.tls)

    def audit(self, *args):
        """`agentpay admin audit --json [args]` against this gateway (plain HTTP admin listener)."""
        return harness.run_audit("http://127.0.0.1:%d" % self.admin_port, self.token_file, *args)

    def admin(self, method, path, body=None):
        """A call to the admin listener (--admin-listen) with the admin token."""
        return harness.http_request(self.admin_port, method, path, body=body,
                                    headers={"Authorization": "Bearer " + ADMIN_TOKEN}, tls=self.tls)

    def challenge(self, path="/resource", method="GET", body=None, content_type=None):
        """A request without payment: (response, PAYMENT-REQUIRED value, its JSON, the v1 body)."""
        headers = {"Content-Type": content_type} if content_type else None
        r = self.request(method, path, body=body, headers=headers)
        if r.status != 402:
            raise AssertionError("expected the 402 challenge for %s %s, got %r" % (method, path, r))
        header = r.header("PAYMENT-REQUIRED")
        if not header:
            raise AssertionError("402 without PAYMENT-REQUIRED: %r" % r)
        return r, header, unb64json(header), r.json()

    def pay(self, path="/resource", method="GET", body=None, v2=None, v1=None, key=None, fault=None,
            content_type="application/json", headers=None, timeout=harness.HTTP_TIMEOUT_S):
        """A request paying with PAYMENT-SIGNATURE (v2: a dict or an already encoded string) or X-PAYMENT."""
        h = {}
        if v2 is not None:
            h["PAYMENT-SIGNATURE"] = v2 if isinstance(v2, str) else b64json(v2)
        if v1 is not None:
            h["X-PAYMENT"] = v1 if isinstance(v1, str) else b64json(v1)
        if key is not None:
            h["Idempotency-Key"] = key
        if fault is not None:
            h["X-Seller-Fault"] = fault
        if body is not None and content_type:
            h["Content-Type"] = content_type
        if headers:
            h.update(headers)
        return self.request(method, path, body=body, headers=h, timeout=timeout)

    def operation(self, op_id, headers=None):
        """The operation's view, read with the admin token unless other credentials are given."""
        r = self.request("GET", "/v1/operations/%s" % op_id,
                         headers=headers or {"Authorization": "Bearer " + ADMIN_TOKEN})
        if r.status != 200:
            raise AssertionError("GET /v1/operations/%s: expected 200, got %r" % (op_id, r))
        return r.json()

    def trace(self, op_id, headers=None):
        r = self.request("GET", "/v1/operations/%s/trace" % op_id,
                         headers=headers or {"Authorization": "Bearer " + ADMIN_TOKEN})
        if r.status != 200:
            raise AssertionError("GET trace of %s: expected 200, got %r" % (op_id, r))
        return r.json()

    def operations(self, settlement=None):
        q = "?limit=1000" + ("&settlement=" + settlement if settlement else "")
        r = self.admin("GET", "/admin/v1/operations" + q)
        if r.status != 200:
            raise AssertionError("GET /admin/v1/operations%s: %r" % (q, r))
        return r.json()["operations"]

    def wait_settlement(self, op_id, wanted, timeout=15.0):
        wanted = (wanted,) if isinstance(wanted, str) else tuple(wanted)
        return deadline_poll(lambda: (lambda op: op if op["settlement"] in wanted else None)(self.operation(op_id)),
                             timeout, what="operation %s settlement in %s" % (op_id, wanted))

    def in_flight(self):
        return [op for s in ("submitted", "unknown") for op in self.operations(s)]


# ----------------------------------------------------------------------------------------------- money check

def payer_of(op):
    m = ADDRESS.search(str(op.get("principal", "")))
    return m.group(0).lower() if m else None


def is_noop(tx):
    """The gap check's no-op: 0 wei from the relayer to itself, no calldata (it moves no token)."""
    return (eq_addr(tx.get("to") or "", RELAYER.address) and int(tx["value"], 16) == 0
            and tx["input"] in ("0x", ""))


def money_violations(chain, gateways):
    """The on-chain money check over everything the gateways settled (see the module docstring)."""
    errors = []
    rpc = chain.rpc
    pay_to = PAY_TO.address.lower()
    settled = []
    for gw in gateways:
        for listed in gw.operations("settled"):
            settled.append((gw, gw.operation(listed["id"])))

    # Each settled operation names a mined transaction holding a Transfer of its own: its payer's
    # AuthorizationUsed followed by the token's Transfer from the payer to payTo of its amount. A
    # batch's transaction (--settle-batch-max) holds several, one per member; no pair is counted
    # for two operations.
    claimed = {}  # (tx hash, index of the Transfer log) -> op id
    receipts = {}
    for gw, op in settled:
        where = "%s op %s (principal %r, amount %r, tx %r)" % (gw.name, op["id"], op.get("principal"),
                                                               op.get("amount"), op.get("tx_hash"))
        h = op.get("tx_hash")
        if not isinstance(h, str) or not TX_HASH.match(h):
            errors.append("%s: settled without a tx_hash" % where)
            continue
        if h.lower() not in receipts:
            receipts[h.lower()] = rpc.receipt(h)
        receipt = receipts[h.lower()]
        if receipt is None or int(receipt["status"], 16) != 1:
            errors.append("%s: settled but the tx is %s" % (where, "not mined" if receipt is None else "reverted"))
            continue
        payer = payer_of(op)
        if payer is None:
            errors.append("%s: the operation's principal names no payer address" % where)
            continue
        logs = receipt["logs"]
        pairs = []
        for i, lg in enumerate(logs):
            if not (lg["topics"] and lg["topics"][0] == A.TRANSFER_TOPIC and eq_addr(lg["address"], chain.token)):
                continue
            frm, to, value = "0x" + lg["topics"][1][-40:], "0x" + lg["topics"][2][-40:], int(lg["data"], 16)
            before = logs[i - 1] if i > 0 else None
            used_by_payer = (before is not None and before["topics"]
                             and before["topics"][0] == A.AUTHORIZATION_USED_TOPIC
                             and eq_addr(before["address"], chain.token)
                             and "0x" + before["topics"][1][-40:] == payer)
            if used_by_payer and frm == payer and to == pay_to and str(value) == str(op.get("amount")):
                pairs.append(i)
        free = [i for i in pairs if (h.lower(), i) not in claimed]
        if not free:
            errors.append("%s: the receipt has no Transfer of its amount from its payer to payTo after the "
                          "payer's AuthorizationUsed%s" % (where, " left unclaimed (counted twice)" if pairs else ""))
            continue
        claimed[(h.lower(), free[0])] = op["id"]

    # every transfer into payTo is a settled operation or one of the tests' own transfers
    logs = chain.transfers_to_pay_to()
    expected_in = sum(int(op["amount"]) for _, op in settled) + sum(v for f, t, v in chain.direct if t == pay_to)
    got_in = sum(t["value"] for t in logs)
    n_expected = len(settled) + sum(1 for f, t, v in chain.direct if t == pay_to)
    if got_in != expected_in or len(logs) != n_expected:
        errors.append("payTo received %d in %d Transfers; settled operations + direct transfers account for %d "
                      "in %d" % (got_in, len(logs), expected_in, n_expected))
    bal_pay_to = chain.balance(PAY_TO.address)
    if bal_pay_to != got_in:
        errors.append("payTo balance %d != the %d it received" % (bal_pay_to, got_in))
    for addr, minted in chain.minted.items():
        out = sum(t["value"] for t in chain.transfers(from_=addr))
        via_ops = sum(int(op["amount"]) for _, op in settled if payer_of(op) == addr)
        direct = sum(v for f, t, v in chain.direct if f == addr)
        bal = chain.balance(addr)
        if bal != minted - out:
            errors.append("buyer %s: balance %d != minted %d - sent %d" % (addr, bal, minted, out))
        if out != via_ops + direct:
            errors.append("buyer %s lost %d; its settled operations (%d) + direct transfers (%d) account for %d"
                          % (addr, out, via_ops, direct, via_ops + direct))

    # no authorization used twice; every relayer transaction is one successful settlement
    used = rpc.get_logs(chain.token, [A.AUTHORIZATION_USED_TOPIC], 0, "latest")
    keys = [(lg["topics"][1].lower(), lg["topics"][2].lower()) for lg in used]
    if len(keys) != len(set(keys)):
        errors.append("an authorization nonce was used twice: %r" % keys)
    latest = rpc.block_number()
    relayer_txs = []
    for n in range(latest + 1):
        block = rpc.call("eth_getBlockByNumber", hex(n), True)
        if block is None:  # the node no longer has a block it counted: say so, do not crash
            errors.append("the node has no block %d (its head was %d)" % (n, latest))
            break
        for tx in block["transactions"]:
            if eq_addr(tx["from"], RELAYER.address):
                relayer_txs.append(tx)
    # A void operation's own tx may be mined after the fact and revert as expired: the gateway sends it
    # on purpose to use up the relayer nonce it holds (reconciler: "fills the relayer nonce"). Harmless.
    void_txs = set()
    for gw in gateways:
        for op in gw.operations("void"):
            h = gw.operation(op["id"]).get("tx_hash")
            if isinstance(h, str):
                void_txs.add(h.lower())
    claimed_txs = {h for h, _ in claimed}
    for tx in relayer_txs:
        if is_noop(tx):
            continue  # the reconciler's filler of a relayer nonce gap: moves nothing
        receipt = rpc.receipt(tx["hash"])
        if int(receipt["status"], 16) != 1:
            reason = rpc.revert_reason(tx["to"], tx["input"], RELAYER.address) if tx.get("to") else None
            if tx["hash"].lower() in void_txs and "expired" in (reason or ""):
                continue
            errors.append("relayer tx %s reverted (%s): a settlement that could not succeed was submitted" % (
                tx["hash"], reason))
        elif tx["hash"].lower() not in claimed_txs:
            errors.append("relayer tx %s succeeded but no settled operation claims it" % tx["hash"])

    # Each gateway's own books audit, its chain check against this Anvil, must agree: nothing wrong.
    for gw in gateways:
        if not hasattr(gw, "admin_port") or gw.tls is not None:
            continue  # a test's stand-in, or an admin listener on HTTPS (test_tls.py audits that one)
        code, report = gw.audit("--chain-rpc", chain.url)
        if not isinstance(report, dict):
            report, output = None, report
        chain_row = [c for c in (report or {}).get("checks", []) if c["name"] == "chain_transfers"]
        if code != 0 or not report or not report.get("ok"):
            errors.append("%s: agentpay admin audit exited %d: %s" % (
                gw.name, code, report["listed"] if report else output[-600:]))
        elif chain_row[0]["examined"] != len([1 for g, _ in settled if g is gw]):
            errors.append("%s: the audit checked %d settled payments on chain, %d are settled" % (
                gw.name, chain_row[0]["examined"], len([1 for g, _ in settled if g is gw])))
    return errors


# ----------------------------------------------------------------------------------------------- facilitator

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "facilitator")


class ExampleSeller:
    """examples/facilitator/seller.mjs (or `script` there) as written, with the chain env's packages
    beside it, pointed at `facilitator_url` with the seller key `key`; started at once."""

    def __init__(self, workdir, chain, facilitator_url, name, key, script="seller.mjs",
                 network=NETWORK):
        app = os.path.join(workdir, name)
        os.makedirs(app, exist_ok=True)
        shutil.copy(os.path.join(EXAMPLES, script), app)
        os.symlink(os.path.join(CHAIN_ENV, "node_modules"), os.path.join(app, "node_modules"))
        self.name = name
        self.port = harness.free_port()
        self.log_path = os.path.join(workdir, name + ".log")
        env = dict(os.environ, FACILITATOR_URL=facilitator_url, SELLER_KEY=key, PAY_TO=PAY_TO.address,
                   ASSET=chain.token, NETWORK=network, PRICE=str(PRICE), PORT=str(self.port),
                   FACILITATOR_TIMEOUT_MS="5000")
        with open(self.log_path, "w") as log:
            self.popen = subprocess.Popen(["node", os.path.join(app, script)], env=env,
                                          stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.popen.stdout.readline()  # {"url": ...} once listening
        if not line:
            with open(self.log_path) as log:
                raise AssertionError("%s did not start: %s" % (name, log.read()[-2000:]))

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.popen.terminate()
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.popen.stdout.close()


# ----------------------------------------------------------------------------------------------- base class

def start_reference_server(test, pay_to, log_name="reference.log"):
    """The official @x402/express server with the reference facilitator (tests/chain_env/
    reference_server.mjs) on the test's chain, charging PRICE to `pay_to` for /paid; stopped when
    the test ends. Returns its port. (Its settlements are the test's own: account for them in
    chain.direct for the money check.)"""
    log = open(os.path.join(test.workdir, log_name), "w")
    test.addCleanup(log.close)
    proc = subprocess.Popen(["node", "reference_server.mjs", "--rpc", test.chain.url, "--asset", test.chain.token,
                             "--pay-to", pay_to, "--amount", str(PRICE), "--name", "USDC", "--version", "2"],
                            cwd=CHAIN_ENV, stdout=subprocess.PIPE, stderr=log, text=True,
                            preexec_fn=harness._die_with_parent)

    def stop():
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    test.addCleanup(stop)
    line = proc.stdout.readline()
    test.assertTrue(line, "reference server did not start")
    return json.loads(line)["port"]


class CountingProxy:
    """A JSON-RPC proxy on a free port that forwards to `upstream` and records (monotonic time,
    method, params) of every call (batches counted per call), and in `requests` (monotonic time,
    [(method, params), ...]) the calls of each HTTP request, a batch's together. pause() makes it a
    hung node."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.calls = []
        self.requests = []
        self.lock = threading.Lock()
        self.flowing = threading.Event()  # cleared by pause(): calls hang until resume()
        self.flowing.set()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Without it each answer stalls ~40 ms (Nagle and delayed ACKs), and the proxy, not the
            # gateway, would be what bounds the call rate.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.flowing.wait()
                try:
                    doc = json.loads(body)
                    items = doc if isinstance(doc, list) else [doc]
                    now = time.monotonic()
                    with proxy.lock:
                        for item in items:
                            proxy.calls.append((now, item.get("method"), item.get("params")))
                        proxy.requests.append((now, [(item.get("method"), item.get("params")) for item in items]))
                except ValueError:
                    pass
                req = urllib.request.Request(proxy.upstream, data=body,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as resp:
                    answer = resp.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def pause(self):
        """A node that stopped answering: calls are taken and held, unanswered, until resume()."""
        self.flowing.clear()

    def resume(self):
        self.flowing.set()

    def since(self, t0):
        with self.lock:
            return [c for c in self.calls if c[0] >= t0]

    def requests_since(self, t0):
        with self.lock:
            return [calls for at, calls in self.requests if at >= t0]

    def stop(self):
        self.resume()
        self.server.shutdown()
        self.server.server_close()


class X402TestCase(unittest.TestCase):
    """One Anvil, seller and gateway per class; the money check after every test."""

    automine = True
    block_time = None  # seconds between blocks (interval mining: automine off)
    gateway_args = ()
    routes = DEFAULT_ROUTES
    quiesce_timeout = 15.0
    min_key_bits = 0  # see X402Gateway

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="agentpay-x402-")
        harness._workdirs.add(cls.workdir)
        cls.chain = None
        cls.seller = None
        cls.gw = None
        cls.gateways = []
        try:
            cls.chain = Chain(automine=cls.automine, block_time=cls.block_time)
            cls.seller = harness.Seller(cls.workdir)
            cls.seller.start()
            cls.gw = cls.start_gateway()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_gateway(cls, **kw):
        kw.setdefault("routes", cls.routes)
        kw.setdefault("extra_args", cls.gateway_args)
        kw.setdefault("min_key_bits", cls.min_key_bits)
        gw = X402Gateway(cls.workdir, cls.chain, cls.seller.url, **kw)
        gw.start()
        cls.gateways.append(gw)
        return gw

    @classmethod
    def tearDownClass(cls):
        for gw in getattr(cls, "gateways", []):
            gw.stop()
        if getattr(cls, "seller", None):
            cls.seller.kill9()
        if getattr(cls, "chain", None):
            cls.chain.stop()
        keep = os.environ.get("AGENTPAY_IT_KEEP")
        if keep:
            print("kept %s" % cls.workdir, file=sys.stderr)
        else:
            shutil.rmtree(cls.workdir, ignore_errors=True)
        harness._workdirs.discard(cls.workdir)

    def tearDown(self):
        self.chain.node.resume()
        for gw in self.gateways:
            if gw.alive():
                os.kill(gw.popen.pid, signal.SIGCONT)
        errors = []
        try:
            if not self.chain.rpc.get_automine():
                if self.chain.rpc.pending_count():
                    self.chain.rpc.mine()
            for gw in self.gateways:
                if gw.alive():
                    try:
                        deadline_poll(lambda: not gw.in_flight(), self.quiesce_timeout,
                                      what="%s: no operation left submitted/unknown" % gw.name)
                    except AssertionError as e:
                        errors.append(str(e)[:600])
            errors += money_violations(self.chain, [gw for gw in self.gateways if gw.alive()])
        except AssertionError as e:
            errors.append(str(e))
        if errors:
            raise AssertionError("money check failed:\n  - %s\n--- gateway output (tail) ---\n%s" % (
                "\n  - ".join(errors), self.gw.output()[-4000:]))

    # -- helpers

    def assertProblem(self, resp, status, code, msg=None):
        ctx = "%s%r" % ((msg + ": ") if msg else "", resp)
        self.assertEqual(resp.status, status, ctx)
        ctype = resp.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/"), "problem response content type %r: %s" % (ctype, ctx))
        doc = resp.json()
        self.assertEqual(doc.get("code"), code, ctx)
        return doc

    def assertPaidResponse(self, resp, version=2, replayed=None, payer=BUYER):
        """200 with the seller's body and a PAYMENT-RESPONSE naming a mined tx; returns (body, settle response)."""
        self.assertEqual(resp.status, 200, resp)
        self.assertTrue(resp.operation_id, "AgentPay-Operation-Id missing: %r" % resp)
        self.assertIn(resp.replayed, ("true", "false"), resp)
        if replayed is not None:
            self.assertEqual(resp.replayed, replayed, resp)
        body = json.loads(resp.body)
        self.assertEqual(body.get("ok"), True, resp)
        name = "PAYMENT-RESPONSE" if version == 2 else "X-PAYMENT-RESPONSE"
        other = "X-PAYMENT-RESPONSE" if version == 2 else "PAYMENT-RESPONSE"
        value = resp.header(name)
        self.assertIsNotNone(value, "%s missing: %r" % (name, resp))
        self.assertIsNone(resp.header(other), "%s on a v%d payment: %r" % (other, version, resp))
        settle = unb64json(value)
        self.assertIs(settle.get("success"), True, settle)
        self.assertRegex(settle.get("transaction", ""), TX_HASH, settle)
        self.assertEqual(settle.get("network"), NETWORK if version == 2 else V1_NETWORK, settle)
        self.assertTrue(eq_addr(settle.get("payer"), payer.address), settle)
        receipt = self.chain.rpc.receipt(settle["transaction"])
        self.assertIsNotNone(receipt, "PAYMENT-RESPONSE names a tx that is not mined: %r" % settle)
        self.assertEqual(int(receipt["status"], 16), 1, receipt)
        return body, settle


class ProxiedX402TestCase(X402TestCase):
    """X402TestCase whose gateway talks to Anvil through a CountingProxy (cls.proxy), which records
    every JSON-RPC call the gateway and its workers make."""

    @classmethod
    def start_gateway(cls, **kw):
        cls.proxy = CountingProxy(cls.chain.url)
        kw.setdefault("routes", cls.routes)
        kw.setdefault("extra_args", cls.gateway_args)
        gw = X402Gateway(cls.workdir, cls.chain, cls.seller.url, chain_url=cls.proxy.url, **kw)
        gw.start()
        cls.gateways.append(gw)
        return gw

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if getattr(cls, "proxy", None):
            cls.proxy.stop()
