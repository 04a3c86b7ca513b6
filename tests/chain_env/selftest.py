#!/usr/bin/env python3
"""Proves the on-chain test environment works: Anvil, TestUSDC (EIP-3009), the official x402
clients (v2 @x402/fetch, v1 x402-fetch) and the reference x402 server (@x402/express).

    bash tests/chain_env/install.sh && python3 tests/chain_env/selftest.py [-k substring] [-v]

Prints one line per check and closes with "N passed, N failed"; exit status 1 on any failure.
Takes ~15-25 s on 2 cores (mostly node start-ups).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import anvil as A  # noqa: E402
from anvil import ACCOUNTS, Anvil, RpcError  # noqa: E402

CHAIN_ID = 84532  # Base Sepolia: lets v1 clients use "base-sepolia"
NETWORK = f"eip155:{CHAIN_ID}"
DEPLOYER, BUYER, SELLER, FACILITATOR = ACCOUNTS[0], ACCOUNTS[1], ACCOUNTS[2], ACCOUNTS[3]
PRICE = 1000  # 0.001 USDC

CHECKS: list = []


def check(fn):
    CHECKS.append(fn)
    return fn


def node(args: list[str], stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["node", *args], cwd=HERE, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def node_json(args: list[str], stdin: str | None = None, timeout: float = 60) -> dict:
    p = node(args, stdin, timeout)
    if not p.stdout.strip():
        raise AssertionError(f"node {args[0]} printed nothing (rc {p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def b64json(obj) -> str:
    return base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode()


def unb64json(s: str):
    return json.loads(base64.b64decode(s))


def eq_addr(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def expect_revert(reason: str | None, contains: str):
    assert reason is not None, f"expected a revert containing {contains!r}, the call succeeds"
    assert contains in reason, f"expected revert containing {contains!r}, got {reason!r}"


class Env:
    """Shared chain state for the checks: one Anvil, one TestUSDC("USDC", "2")."""

    def __init__(self):
        self.node = Anvil(chain_id=CHAIN_ID).start()
        self.rpc = self.node.rpc
        self.token = A.deploy_test_usdc(self.rpc, "USDC", "2")
        A.mint(self.rpc, self.token, BUYER.address, 1_000_000_000)  # 1000 USDC
        self.domain = {"name": "USDC", "version": "2", "chainId": CHAIN_ID, "verifyingContract": self.token}

    def close(self):
        self.node.stop()

    def now(self) -> int:
        return self.rpc.block_timestamp()

    def sign(self, key=BUYER, domain=None, **message) -> dict:
        message.setdefault("to", SELLER.address)
        message.setdefault("value", PRICE)
        message.setdefault("validAfter", 0)
        message.setdefault("validBefore", self.now() + 60)
        return A.sign_authorization({"privateKey": key.private_key, "domain": domain or self.domain,
                                     "message": message})


# ============================================================================ static checks
@check
def selectors_topics_and_keys_match_viem(env):
    """The hardcoded selectors, topics and Anvil keys in anvil.py equal what viem computes."""
    script = """
import { toFunctionSelector, toEventSelector, keccak256, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
const inp = JSON.parse(process.argv[1]);
const out = { selectors: {}, topics: {}, addresses: [], typehash: keccak256(toHex(inp.typestr)) };
for (const f of inp.fns) out.selectors[f] = toFunctionSelector(f).slice(2);
for (const e of inp.events) out.topics[e] = toEventSelector(e);
for (const k of inp.keys) out.addresses.push(privateKeyToAccount(k).address);
console.log(JSON.stringify(out));
"""
    events = ["Transfer(address,address,uint256)", "Approval(address,address,uint256)",
              "AuthorizationUsed(address,bytes32)", "AuthorizationCanceled(address,bytes32)"]
    arg = json.dumps({"fns": list(A.SELECTORS), "events": events, "keys": [a.private_key for a in ACCOUNTS],
                      "typestr": "TransferWithAuthorization(address from,address to,uint256 value,"
                                 "uint256 validAfter,uint256 validBefore,bytes32 nonce)"})
    p = node(["--input-type=module", "-e", script, arg])
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["selectors"] == A.SELECTORS, f"selector mismatch: {got['selectors']}"
    assert got["topics"] == dict(zip(events, [A.TRANSFER_TOPIC, A.APPROVAL_TOPIC, A.AUTHORIZATION_USED_TOPIC,
                                              A.AUTHORIZATION_CANCELED_TOPIC])), got["topics"]
    assert got["addresses"] == [a.address for a in ACCOUNTS], got["addresses"]
    assert got["typehash"] == A.TRANSFER_WITH_AUTHORIZATION_TYPEHASH


@check
def artifact_is_up_to_date(env):
    p = node(["compile.mjs", "--check"], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


# ============================================================================ token basics
@check
def token_metadata_and_domain(env):
    rpc, tok = env.rpc, env.token
    assert A.token_name(rpc, tok) == "USDC"
    assert A.token_version(rpc, tok) == "2"
    assert A.decode_uint(rpc.eth_call(tok, A.calldata("decimals()"))) == 6
    assert rpc.eth_call(tok, A.calldata("TRANSFER_WITH_AUTHORIZATION_TYPEHASH()")) == \
        A.TRANSFER_WITH_AUTHORIZATION_TYPEHASH
    script = """
import { domainSeparator } from "viem";
console.log(domainSeparator({ domain: JSON.parse(process.argv[1]) }));
"""
    p = node(["--input-type=module", "-e", script, json.dumps(env.domain)])
    assert p.returncode == 0, p.stderr
    assert A.domain_separator(rpc, tok) == p.stdout.strip(), "DOMAIN_SEPARATOR differs from viem's"


@check
def mint_is_deployer_only_and_erc20_works(env):
    rpc, tok = env.rpc, env.token
    expect_revert(rpc.revert_reason(tok, A.calldata("mint(address,uint256)", BUYER.address, 1), BUYER.address),
                  "FiatToken: caller is not a minter")
    supply = A.total_supply(rpc, tok)
    A.mint(rpc, tok, DEPLOYER.address, 500)
    assert A.total_supply(rpc, tok) == supply + 500
    r = rpc.transact(DEPLOYER.address, tok, A.calldata("approve(address,uint256)", SELLER.address, 300))
    assert r["status"] == "0x1"
    assert A.decode_uint(rpc.eth_call(tok, A.calldata("allowance(address,address)", DEPLOYER.address,
                                                      SELLER.address))) == 300
    r = rpc.transact(SELLER.address, tok, A.calldata("transferFrom(address,address,uint256)", DEPLOYER.address,
                                                     FACILITATOR.address, 200))
    assert r["status"] == "0x1"
    expect_revert(rpc.revert_reason(tok, A.calldata("transferFrom(address,address,uint256)", DEPLOYER.address,
                                                    FACILITATOR.address, 200), SELLER.address),
                  "ERC20: transfer amount exceeds allowance")
    r = rpc.transact(DEPLOYER.address, tok, A.calldata("transfer(address,uint256)", FACILITATOR.address, 300))
    assert r["status"] == "0x1"
    assert A.balance_of(rpc, tok, FACILITATOR.address) == 500
    expect_revert(rpc.revert_reason(tok, A.calldata("transfer(address,uint256)", BUYER.address, 1),
                                    DEPLOYER.address), "ERC20: transfer amount exceeds balance")


# ============================================================================ EIP-3009
@check
def transfer_with_authorization_vrs_then_replay_reverts(env):
    rpc, tok = env.rpc, env.token
    b0, s0 = A.balance_of(rpc, tok, BUYER.address), A.balance_of(rpc, tok, SELLER.address)
    sig = env.sign()
    auth, nonce = sig["message"], sig["message"]["nonce"]
    assert A.authorization_state(rpc, tok, BUYER.address, nonce) is False
    assert A.simulate_transfer_with_authorization(rpc, tok, auth, sig["signature"]) is None
    block0 = rpc.block_number()
    r = A.transfer_with_authorization(rpc, tok, auth, sig["signature"], split=True)
    assert r["status"] == "0x1", r
    assert A.balance_of(rpc, tok, BUYER.address) == b0 - PRICE
    assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
    assert A.authorization_state(rpc, tok, BUYER.address, nonce) is True
    topics = [lg["topics"][0] for lg in r["logs"]]
    assert topics == [A.AUTHORIZATION_USED_TOPIC, A.TRANSFER_TOPIC], topics
    assert r["logs"][0]["topics"][2] == nonce
    assert A.count_transfer_logs(rpc, tok, from_=BUYER.address, from_block=block0 + 1) == 1
    # the same authorization again: reverts, and a forced submission is mined with status 0
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, auth, sig["signature"]),
                  "FiatTokenV2: authorization is used or canceled")
    r2 = A.transfer_with_authorization(rpc, tok, auth, sig["signature"], split=True)
    assert r2["status"] == "0x0"
    assert A.balance_of(rpc, tok, BUYER.address) == b0 - PRICE


@check
def transfer_with_authorization_bytes_overload(env):
    rpc, tok = env.rpc, env.token
    s0 = A.balance_of(rpc, tok, SELLER.address)
    sig = env.sign(value=7)
    data = A.transfer_with_authorization_calldata(sig["message"], sig["signature"], split=False)
    assert data.startswith("0xcf092995")
    r = A.transfer_with_authorization(rpc, tok, sig["message"], sig["signature"], split=False)
    assert r["status"] == "0x1"
    assert A.balance_of(rpc, tok, SELLER.address) == s0 + 7
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, sig["message"], sig["signature"], split=False),
                  "FiatTokenV2: authorization is used or canceled")
    sig2 = env.sign(value=7)
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, sig2["message"], sig2["signature"][:-2],
                                                         split=False), "ECRecover: invalid signature length")


@check
def expired_and_not_yet_valid(env):
    rpc, tok = env.rpc, env.token
    now = env.now()
    sig = env.sign(validBefore=now - 1)
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, sig["message"], sig["signature"]),
                  "FiatTokenV2: authorization is expired")
    r = A.transfer_with_authorization(rpc, tok, sig["message"], sig["signature"])
    assert r["status"] == "0x0"
    sig = env.sign(validAfter=now + 3600, validBefore=now + 7200)
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, sig["message"], sig["signature"]),
                  "FiatTokenV2: authorization is not yet valid")


@check
def bad_signatures_revert(env):
    rpc, tok = env.rpc, env.token
    sig = env.sign()
    auth = sig["message"]
    high = A.high_s_twin(sig["signature"])
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, auth, high),
                  "ECRecover: invalid signature 's' value")
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, auth, high, split=False),
                  "ECRecover: invalid signature 's' value")
    v, r_, s_ = A.split_signature(sig["signature"])
    bad_v = A.calldata("transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
                       auth["from"], auth["to"], int(auth["value"]), int(auth["validAfter"]),
                       int(auth["validBefore"]), auth["nonce"], v + 2, r_, s_)
    expect_revert(rpc.revert_reason(tok, bad_v, DEPLOYER.address), "ECRecover: invalid signature 'v' value")
    # signed by someone else, or over another domain name: a well-formed signature that never validates
    other = env.sign(key=SELLER, **{k: auth[k] for k in ("to", "value", "validAfter", "validBefore", "nonce")})
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, auth, other["signature"]),
                  "FiatTokenV2: invalid signature")
    wrong_domain = env.sign(domain={**env.domain, "name": "USD Coin"},
                            **{k: auth[k] for k in ("to", "value", "validAfter", "validBefore", "nonce")})
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, auth, wrong_domain["signature"]),
                  "FiatTokenV2: invalid signature")
    tampered = dict(auth, value=str(int(auth["value"]) + 1))
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, tampered, sig["signature"]),
                  "FiatTokenV2: invalid signature")
    # and the original still works afterwards
    assert A.simulate_transfer_with_authorization(rpc, tok, auth, sig["signature"]) is None


@check
def receive_and_cancel_authorization(env):
    rpc, tok = env.rpc, env.token
    sig = A.sign_authorization({"privateKey": BUYER.private_key, "domain": env.domain,
                                "primaryType": "ReceiveWithAuthorization",
                                "message": {"to": SELLER.address, "value": 5, "validAfter": 0,
                                            "validBefore": env.now() + 60}})
    m = sig["message"]
    v, r_, s_ = A.split_signature(sig["signature"])
    data = A.calldata("receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
                      m["from"], m["to"], int(m["value"]), int(m["validAfter"]), int(m["validBefore"]), m["nonce"],
                      v, r_, s_)
    expect_revert(rpc.revert_reason(tok, data, DEPLOYER.address), "FiatTokenV2: caller must be the payee")
    assert rpc.transact(SELLER.address, tok, data)["status"] == "0x1"
    assert A.authorization_state(rpc, tok, BUYER.address, m["nonce"])
    # cancel an unused nonce, then a transfer with it fails
    t = env.sign()
    c = A.sign_authorization({"privateKey": BUYER.private_key, "domain": env.domain,
                              "primaryType": "CancelAuthorization", "message": {"nonce": t["message"]["nonce"]}})
    v, r_, s_ = A.split_signature(c["signature"])
    rc = rpc.transact(DEPLOYER.address, tok, A.calldata("cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)",
                                                        BUYER.address, t["message"]["nonce"], v, r_, s_))
    assert rc["status"] == "0x1" and rc["logs"][0]["topics"][0] == A.AUTHORIZATION_CANCELED_TOPIC
    assert A.authorization_state(rpc, tok, BUYER.address, t["message"]["nonce"])
    expect_revert(A.simulate_transfer_with_authorization(rpc, tok, t["message"], t["signature"]),
                  "FiatTokenV2: authorization is used or canceled")


@check
def published_x402_vector_settles_at_its_address(env):
    """The x402 spec's signed vector (USDC/2/84532/0x036C…) settles on TestUSDC placed at that
    address on a chain whose clock is inside the vector's validity window: the contract's EIP-712
    digest is right independently of viem."""
    vec_token = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
    auth = {"from": "0x857b06519E91e3A54538791bDbb0E22373e36b66",
            "to": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C", "value": "10000",
            "validAfter": "1740672089", "validBefore": "1740672154",
            "nonce": "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"}
    signature = ("0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf58"
                 "36e9bd15092f9ecab05ded3d6293af148b571c")
    with Anvil(chain_id=CHAIN_ID, extra_args=["--timestamp", "1740672000"]) as n2:
        rpc = n2.rpc
        deployed = A.deploy_test_usdc(rpc, "USDC", "2")
        rpc.call("anvil_setCode", vec_token, rpc.call("eth_getCode", deployed, "latest"))

        def short_string_slot(s: str) -> str:  # Solidity layout of a string < 32 bytes
            b = s.encode()
            return "0x" + (b + b"\0" * (31 - len(b)) + bytes([2 * len(b)])).hex()

        for slot, value in ((0, "USDC"), (1, "USDC"), (2, "2")):  # name, symbol, version
            rpc.call("anvil_setStorageAt", vec_token, hex(slot), short_string_slot(value))
        assert A.token_name(rpc, vec_token) == "USDC"
        A.mint(rpc, vec_token, auth["from"], 10000)  # minter is immutable (account #0), copied with the code
        rpc.set_next_block_timestamp(1740672100)
        r = A.transfer_with_authorization(rpc, vec_token, auth, signature)
        assert r["status"] == "0x1", "published vector did not settle"
        assert A.balance_of(rpc, vec_token, auth["to"]) == 10000


# ============================================================================ Anvil controls
@check
def automine_drop_mine_snapshot_time(env):
    rpc, tok = env.rpc, env.token
    sig = env.sign()
    rpc.set_automine(False)
    try:
        assert rpc.get_automine() is False
        h = rpc.send_transaction(DEPLOYER.address, tok,
                                 A.transfer_with_authorization_calldata(sig["message"], sig["signature"]))
        time.sleep(0.1)
        assert rpc.receipt(h) is None, "receipt must stay null with automine off"
        assert rpc.pending_count() == 1
        rpc.drop_transaction(h)
        assert rpc.pending_count() == 0
        assert A.authorization_state(rpc, tok, BUYER.address, sig["message"]["nonce"]) is False
        h = rpc.send_transaction(DEPLOYER.address, tok,
                                 A.transfer_with_authorization_calldata(sig["message"], sig["signature"]))
        rpc.mine()
        assert rpc.receipt(h)["status"] == "0x1"
    finally:
        rpc.set_automine(True)
    # snapshot / jump time / revert: chain time comes back
    snap = rpc.snapshot()
    t0 = env.now()
    rpc.increase_time(3600)
    rpc.mine()
    assert env.now() >= t0 + 3600
    late = env.sign()  # validBefore = (now + 3600) + 60
    assert rpc.revert(snap) is True
    assert env.now() < t0 + 60
    assert A.simulate_transfer_with_authorization(rpc, tok, late["message"], late["signature"]) is None


@check
def anvil_stop_frees_port_and_restart_is_fast(env):
    t = time.monotonic()
    n = Anvil(chain_id=31337, automine=False).start()
    started = time.monotonic() - t
    port, pid = n.port, n.pid
    assert n.rpc.get_automine() is False
    n.stop()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    n2 = Anvil(chain_id=31337, port=port).start()  # same port again
    try:
        assert A.install_multicall3(n2.rpc) is True
        assert A.install_multicall3(n2.rpc) is False  # already there
        # getChainId() = 0x3408e470 (viem toFunctionSelector)
        assert A.decode_uint(n2.rpc.eth_call(A.MULTICALL3_ADDRESS, "0x3408e470")) == 31337
    finally:
        n2.stop()
    assert started < 5, f"anvil took {started:.2f}s to answer"


# ============================================================================ x402 clients
class StubX402Server:
    """A tiny x402 resource server + facilitator in Python (v2 on /paid, v1 on /paid-v1) that
    settles with transferWithAuthorization from Anvil account #0. It exists to drive the official
    clients; it is not AgentPay."""

    def __init__(self, env: Env):
        self.env = env
        self.settled: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.handle(self)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.req_body = self.rfile.read(n) if n else b""
                outer.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def requirement(self, v1: bool, path: str) -> dict:
        e = self.env
        if v1:
            return {"scheme": "exact", "network": "base-sepolia", "maxAmountRequired": str(PRICE),
                    "resource": self.url + path, "description": "stub", "mimeType": "application/json",
                    "payTo": SELLER.address, "maxTimeoutSeconds": 60, "asset": e.token,
                    "extra": {"name": "USDC", "version": "2"}}
        return {"scheme": "exact", "network": NETWORK, "amount": str(PRICE), "asset": e.token,
                "payTo": SELLER.address, "maxTimeoutSeconds": 60, "extra": {"name": "USDC", "version": "2"}}

    def challenge(self, h, v1: bool, error: str):
        path = h.path
        if v1:
            body = json.dumps({"x402Version": 1, "error": error, "accepts": [self.requirement(True, path)]}).encode()
            h.send_response(402)
        else:
            pr = {"x402Version": 2, "error": error,
                  "resource": {"url": self.url + path, "description": "stub", "mimeType": "application/json"},
                  "accepts": [self.requirement(False, path)]}
            body = b"{}"
            h.send_response(402)
            h.send_header("PAYMENT-REQUIRED", b64json(pr))
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def handle(self, h):
        v1 = h.path.startswith("/paid-v1")
        header = h.headers.get("X-PAYMENT" if v1 else "PAYMENT-SIGNATURE")
        if not header:
            return self.challenge(h, v1, "payment required")
        try:
            p = unb64json(header)
            auth, sig = p["payload"]["authorization"], p["payload"]["signature"]
            req = self.requirement(v1, h.path)
            if not v1:
                assert p["accepted"]["asset"].lower() == req["asset"].lower()
            assert eq_addr(auth["to"], SELLER.address) and int(auth["value"]) == PRICE
        except Exception as ex:  # noqa: BLE001
            return self.challenge(h, v1, f"invalid payload: {ex}")
        rpc, tok = self.env.rpc, self.env.token
        reason = A.simulate_transfer_with_authorization(rpc, tok, auth, sig)
        if reason:
            return self.challenge(h, v1, reason)
        r = A.transfer_with_authorization(rpc, tok, auth, sig)
        if r["status"] != "0x1":
            return self.challenge(h, v1, "settlement failed")
        self.settled.append({"auth": auth, "tx": r["transactionHash"], "v1": v1})
        body = json.dumps({"ok": True, "echo": (getattr(h, "req_body", b"") or b"").decode()}).encode()
        h.send_response(200)
        h.send_header("X-PAYMENT-RESPONSE" if v1 else "PAYMENT-RESPONSE",
                      b64json({"success": True, "transaction": r["transactionHash"],
                               "network": "base-sepolia" if v1 else NETWORK, "payer": auth["from"]}))
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def run_client(*args: str, stdin: str | None = None) -> dict:
    return node_json(["x402_client.mjs", *args], stdin=stdin)


@check
def official_v2_client_pays_stub_server(env):
    stub = StubX402Server(env)
    try:
        rpc, tok = env.rpc, env.token
        s0 = A.balance_of(rpc, tok, SELLER.address)
        out = run_client("--version", "2", "--url", stub.url + "/paid", "--private-key", BUYER.private_key,
                         "--network", NETWORK, "--asset", tok, "--method", "POST", "--body", '{"q":1}',
                         "--header", "Content-Type: application/json", "--header", "X-Test: yes")
        assert out["status"] == 200, out
        assert out["payment_response"]["success"] is True, out
        assert json.loads(out["body"])["echo"] == '{"q":1}'
        assert out["attempts"] == 2 and out["client_error"] is None
        pl = out["payment_payload"]
        assert pl["x402Version"] == 2 and pl["accepted"]["asset"].lower() == tok.lower()
        a = pl["payload"]["authorization"]
        assert a["validAfter"] == "0", a  # NOTES.md: v2 signs validAfter = 0
        assert A.authorization_state(rpc, tok, BUYER.address, a["nonce"])
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
        # default spend controls refuse an unknown token: no payment is sent
        out = run_client("--version", "2", "--url", stub.url + "/paid", "--private-key", BUYER.private_key,
                         "--network", NETWORK)
        assert out["status"] == 402 and out["attempts"] == 1 and out["client_error"], out
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
    finally:
        stub.close()


@check
def official_v1_client_pays_stub_server(env):
    stub = StubX402Server(env)
    try:
        rpc, tok = env.rpc, env.token
        s0 = A.balance_of(rpc, tok, SELLER.address)
        out = run_client("--version", "1", "--url", stub.url + "/paid-v1", "--private-key", BUYER.private_key)
        assert out["status"] == 200, out
        assert out["payment_response"]["success"] is True
        a = out["payment_payload"]["payload"]["authorization"]
        now = int(time.time())
        assert abs(int(a["validAfter"]) - (now - 600)) < 30, a  # NOTES.md: v1 signs now - 600
        assert out["payment_payload"]["network"] == "base-sepolia"
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
    finally:
        stub.close()


@check
def sign_only_replays_one_signature(env):
    stub = StubX402Server(env)
    try:
        rpc, tok = env.rpc, env.token
        with urllib.request.urlopen(stub.url + "/paid") as resp:
            raise AssertionError(f"expected 402, got {resp.status}")
    except urllib.error.HTTPError as e:
        assert e.code == 402
        challenge = e.headers["PAYMENT-REQUIRED"]
    try:
        header = node(["x402_client.mjs", "--sign-only", "--version", "2", "--private-key", BUYER.private_key,
                       "--network", NETWORK, "--asset", tok], stdin=challenge).stdout.strip()
        payload = unb64json(header)
        assert payload["x402Version"] == 2 and payload["payload"]["signature"].startswith("0x")
        s0 = A.balance_of(rpc, tok, SELLER.address)
        statuses = []
        for _ in range(2):
            req = urllib.request.Request(stub.url + "/paid", headers={"PAYMENT-SIGNATURE": header})
            try:
                with urllib.request.urlopen(req) as resp:
                    statuses.append(resp.status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
                err = unb64json(e.headers["PAYMENT-REQUIRED"])["error"]
        assert statuses == [200, 402], statuses
        assert "authorization is used or canceled" in err, err
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
        # --json form, and v1 sign-only from a v1 402 body
        j = node_json(["x402_client.mjs", "--sign-only", "--json", "--version", "2", "--private-key",
                       BUYER.private_key, "--network", NETWORK, "--asset", tok], stdin=challenge)
        assert j["header"] == "PAYMENT-SIGNATURE" and j["payload"]["accepted"]["payTo"] == SELLER.address
        v1_body = json.dumps({"x402Version": 1, "error": "", "accepts": [stub.requirement(True, "/paid-v1")]})
        v1 = node_json(["x402_client.mjs", "--sign-only", "--json", "--version", "1", "--private-key",
                        BUYER.private_key], stdin=v1_body)
        assert v1["header"] == "X-PAYMENT" and v1["payload"]["network"] == "base-sepolia"
    finally:
        stub.close()


@check
def official_v2_client_pays_reference_server(env):
    """@x402/fetch against @x402/express + in-process @x402/evm facilitator on this Anvil."""
    rpc, tok = env.rpc, env.token
    proc = subprocess.Popen(["node", "reference_server.mjs", "--rpc", env.node.url, "--chain-id", str(CHAIN_ID),
                             "--asset", tok, "--pay-to", SELLER.address, "--amount", str(PRICE),
                             "--name", "USDC", "--version", "2"],
                            cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, f"reference server did not start: {proc.stderr.read()[-3000:]}"
        info = json.loads(line)
        assert eq_addr(info["facilitator"], FACILITATOR.address)
        s0 = A.balance_of(rpc, tok, SELLER.address)
        out = run_client("--version", "2", "--url", info["url"] + "/paid", "--private-key", BUYER.private_key,
                         "--network", NETWORK, "--asset", tok)
        assert out["status"] == 200, out
        pr = out["payment_response"]
        assert pr["success"] is True and pr["network"] == NETWORK, pr
        rc = rpc.receipt(pr["transaction"])
        assert rc["status"] == "0x1" and eq_addr(rc["from"], FACILITATOR.address)
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
        assert rpc.call("eth_getCode", A.MULTICALL3_ADDRESS, "latest") != "0x"  # installed by the server
        # replaying the settled PAYMENT-SIGNATURE: the reference answers 402 (nonce already used)
        req = urllib.request.Request(info["url"] + "/paid", headers={"PAYMENT-SIGNATURE": out["payment_header"]})
        try:
            with urllib.request.urlopen(req) as resp:
                raise AssertionError(f"replay accepted: {resp.status}")
        except urllib.error.HTTPError as e:
            assert e.code == 402, e.code
            err = unb64json(e.headers["PAYMENT-REQUIRED"]).get("error")
        assert err == "invalid_exact_evm_nonce_already_used", err
        assert A.balance_of(rpc, tok, SELLER.address) == s0 + PRICE
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ============================================================================ runner
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="", help="run only checks whose name contains this")
    ap.add_argument("-v", action="store_true", help="print tracebacks")
    args = ap.parse_args()
    if not (HERE / "node_modules").exists():
        print(f"node_modules missing: run bash {HERE / 'install.sh'}", file=sys.stderr)
        return 1
    passed = failed = 0
    t_all = time.monotonic()
    env = Env()
    try:
        for fn in CHECKS:
            if args.k not in fn.__name__:
                continue
            t = time.monotonic()
            try:
                fn(env)
                passed += 1
                print(f"PASS {fn.__name__} ({time.monotonic() - t:.2f}s)", flush=True)
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"FAIL {fn.__name__} ({time.monotonic() - t:.2f}s): {type(e).__name__}: {e}", flush=True)
                if args.v:
                    traceback.print_exc()
    finally:
        env.close()
    print(f"selftest took {time.monotonic() - t_all:.1f}s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
