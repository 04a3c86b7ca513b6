#!/usr/bin/env python3
"""Black-box integration tests of the gateway's x402 path on a real chain (CONTRACT.md sections 2, 3, 5).

Each test class starts a fresh Anvil (chain id 84532) with TestUSDC("USDC", "2"), the demo seller and
`agentpay serve --chain-rpc ...` on its own SQLite file; payments come from the official x402 clients
(tests/chain_env/x402_client.mjs) or are built from viem signatures for the invalid cases. After every
test the money check runs on chain (x402_harness.money_violations): buyers' losses == payTo's gain ==
the amounts of the settled operations (plus the tests' own transfers), each settled operation backed by
exactly one Transfer, no authorization used twice, no relayer transaction wasted (a void operation's
own expired tx, which the gateway sends to use up its relayer nonce, is the one tolerated revert).

Run:  python3 tests/integration/test_x402_gateway.py --agentpay build/agentpay [unittest args, e.g. -k void]
Needs tests/chain_env installed (bash tests/chain_env/install.sh). AGENTPAY_IT_KEEP=1 keeps the temp dirs.
"""

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import (AFTER_PRICE, BUYER, BUYER2, NETWORK, PAY_TO, POOR, PRICE, RELAYER,  # noqa: E402
                          STRANGER, V1_NETWORK, A, X402TestCase, auth_message, b64json, eq_addr,
                          v1_payload, v2_payload)

BODY = b'{"task":"summarize","doc":"q3-report"}'
JSON = "application/json"
B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
SWEEP = ("--sweep-interval-ms", "200")


def op_location(op_id):
    return "/v1/operations/%s" % op_id


def nonce_of(payload):
    return payload["payload"]["authorization"]["nonce"]


def _code(resp):
    try:
        return json.loads(resp.body).get("code")
    except (ValueError, AttributeError):
        return None


def concurrently(n, fn):
    """Run fn(i) in n threads released together; every call must return (no transport error)."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def worker(i):
        try:
            barrier.wait(timeout=20)
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "some requests never finished"
    errors = [r for r in results if not isinstance(r, harness.Response)]
    assert not errors, "requests failed at the transport level: %r" % errors
    return results


# ================================================================================================
class PaidFlowTest(X402TestCase):
    """Challenge, official clients, replays, idempotency keys, concurrency, upstream outcomes."""

    gateway_args = SWEEP

    def new_transfers(self, since):
        return self.chain.transfers_to_pay_to()[since:]

    def sign_v2(self, path, method="POST", body=BODY, n=1, key=BUYER, **msg):
        """Challenge `path`, then n viem signatures for it: (accepted, resource, [signed])."""
        _, _, pr, _ = self.gw.challenge(path, method, body, JSON if body is not None else None)
        signed = self.chain.sign([{"key": key, "message": auth_message(self.chain, **msg)} for _ in range(n)])
        return pr["accepts"][0], pr.get("resource"), signed

    # -- the challenge

    def test_402_challenge_v2_header_and_v1_body(self):
        before = self.chain.state()
        for path, price in (("/resource?q=1", PRICE), ("/after/thing", AFTER_PRICE)):
            r, header, pr, v1 = self.gw.challenge(path)
            self.assertRegex(header, B64, "standard base64 alphabet")
            self.assertEqual(len(header) % 4, 0, "padded base64")
            self.assertEqual(pr.get("x402Version"), 2, pr)
            a = pr["accepts"][0]
            self.assertEqual(a.get("scheme"), "exact", a)
            self.assertEqual(a.get("network"), NETWORK, a)
            self.assertEqual(a.get("amount"), str(price), a)
            self.assertTrue(eq_addr(a.get("asset"), self.chain.token), a)
            self.assertTrue(eq_addr(a.get("payTo"), PAY_TO.address), a)
            self.assertEqual(a.get("maxTimeoutSeconds"), 120, "default --max-timeout-seconds: %r" % a)
            self.assertEqual(a.get("extra"), {"name": "USDC", "version": "2"}, a)
            self.assertEqual(urlparse(pr.get("resource", {}).get("url", "")).path, path.split("?")[0], pr)

            self.assertEqual(v1.get("x402Version"), 1, v1)
            self.assertEqual(v1.get("code"), "payment_required", v1)
            b = v1["accepts"][0]
            self.assertEqual(b.get("scheme"), "exact", b)
            self.assertEqual(b.get("network"), V1_NETWORK, "v1 name of chain 84532: %r" % b)
            self.assertEqual(b.get("maxAmountRequired"), str(price), b)
            self.assertTrue(eq_addr(b.get("asset"), self.chain.token), b)
            self.assertTrue(eq_addr(b.get("payTo"), PAY_TO.address), b)
            self.assertEqual(b.get("extra"), {"name": "USDC", "version": "2"}, b)
            self.assertEqual(b.get("maxTimeoutSeconds"), 120, b)
            self.assertTrue(str(b.get("resource", "")).startswith("http"), b)
            self.assertIsInstance(b.get("description"), str, b)
            self.assertIsInstance(b.get("mimeType"), str, b)
            self.assertNotIn("outputSchema", b, "outputSchema crashes x402-fetch")
        self.assertEqual(self.chain.state(), before, "a challenge moved money or sent a transaction")

    # -- official clients, lost responses

    def test_official_v2_client_pays_once_and_a_lost_response_replays(self):
        executed, since = self.seller.executed(), len(self.chain.transfers_to_pay_to())
        out = X.run_client(self.chain, 2, self.gw.url("/v2/item?x=1"), headers=["Idempotency-Key: lost-v2"])
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(out["attempts"], 2, "one 402, one paid request: %r" % out)
        self.assertIsNone(out["client_error"], out)
        pr = out["payment_response"]
        self.assertEqual((pr.get("success"), pr.get("network")), (True, NETWORK), pr)
        self.assertTrue(eq_addr(pr.get("payer"), BUYER.address), pr)
        self.assertRegex(pr.get("transaction", ""), X.TX_HASH, pr)
        self.assertEqual(json.loads(out["body"]).get("ok"), True, out)
        op_id = out["headers"].get("agentpay-operation-id")
        self.assertTrue(op_id, out["headers"])
        self.assertEqual(out["headers"].get("idempotent-replayed"), "false", out["headers"])

        new = self.new_transfers(since)
        self.assertEqual([(t["from"], t["to"], t["value"], t["tx"]) for t in new],
                         [(BUYER.address.lower(), PAY_TO.address.lower(), PRICE, pr["transaction"])], new)
        self.assertTrue(self.chain.used(BUYER.address, nonce_of(out["payment_payload"])))
        op = self.gw.operation(op_id)
        self.assertEqual((op["id"], op["amount"], op["intent"], op["settlement"], op["fulfillment"],
                          op.get("response_status")),
                         (op_id, str(PRICE), "accepted", "settled", "succeeded", 200), op)
        self.assertTrue(eq_addr(op.get("tx_hash"), pr["transaction"]), op)
        events = self.gw.trace(op_id)["events"]
        self.assertTrue(events, "empty payment trace")
        self.assertEqual([e["at_ms"] for e in events], sorted(e["at_ms"] for e in events), events)

        # The response was "lost": the client sends the very same PAYMENT-SIGNATURE and key again.
        for _ in range(2):
            again = self.gw.pay("/v2/item?x=1", v2=out["payment_header"], key="lost-v2")
            _, settle = self.assertPaidResponse(again, replayed="true")
            self.assertEqual((again.operation_id, again.body.decode()), (op_id, out["body"]), again)
            self.assertEqual(settle["transaction"], pr["transaction"], settle)
        self.assertEqual(len(self.new_transfers(since)), 1, "a replay moved money")
        self.assertEqual(self.seller.executed(), executed + 1)
        # Without the key the header is public (the chain has it) and names a new action whose
        # authorization is spent: the 402 of a used nonce, no body, no id (docs/protocol.md 5a).
        bare = self.gw.pay("/v2/item?x=1", v2=out["payment_header"])
        self.assertProblem(bare, 402, "invalid_exact_evm_nonce_already_used")
        self.assertIsNone(bare.operation_id, bare)

    def test_the_admin_overview_shows_the_relayer_read_from_the_chain(self):
        # The gateway reads the relayer's gas and mined nonce at start and every 30 s; the overview
        # only shows that reading (an admin request never calls the node).
        def reading():
            relayer = json.loads(self.gw.admin("GET", "/admin/v1/overview").body).get("relayer")
            return relayer if relayer and relayer["read_age_ms"] is not None else None
        relayer = harness.wait_for(reading, timeout=10, what="the relayer's first reading")
        self.assertTrue(eq_addr(relayer["address"], RELAYER.address), relayer)
        self.assertEqual((relayer["charges_gas"], relayer["error"]), (True, ""), relayer)
        now = int(self.chain.rpc.call("eth_getBalance", RELAYER.address, "latest"), 16)
        self.assertGreater(int(relayer["balance_wei"]), 0, relayer)
        self.assertGreaterEqual(int(relayer["balance_wei"]), now, "gas is only ever spent: %r" % relayer)
        self.assertLessEqual(relayer["mined_nonce"], self.chain.relayer_nonce("latest"), relayer)
        # Automine: the node holds nothing unmined for long; the reading says what it held then.
        self.assertGreaterEqual(relayer["pending"], 0, relayer)
        self.assertIsInstance(relayer["nonces_taken"], int, relayer)
        # Only the admin token reads it.
        r = self.gw.request("GET", "/admin/v1/overview")
        self.assertEqual(r.status, 404, r)

    def test_official_v1_client_pays_once_and_a_lost_response_replays(self):
        executed, since = self.seller.executed(), len(self.chain.transfers_to_pay_to())
        out = X.run_client(self.chain, 1, self.gw.url("/legacy/item"), headers=["Idempotency-Key: lost-v1"])
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(out["attempts"], 2, out)
        self.assertIsNone(out["client_error"], out)
        self.assertIn("x-payment-response", out["headers"], out["headers"])
        self.assertNotIn("payment-response", out["headers"], out["headers"])
        pr = out["payment_response"]
        self.assertEqual((pr.get("success"), pr.get("network")), (True, V1_NETWORK), pr)
        self.assertTrue(eq_addr(pr.get("payer"), BUYER.address), pr)
        self.assertEqual(out["payment_payload"]["x402Version"], 1, out)
        new = self.new_transfers(since)
        self.assertEqual([(t["from"], t["value"], t["tx"]) for t in new],
                         [(BUYER.address.lower(), PRICE, pr["transaction"])], new)
        op_id = out["headers"].get("agentpay-operation-id")
        again = self.gw.pay("/legacy/item", v1=out["payment_header"], key="lost-v1")
        _, settle = self.assertPaidResponse(again, version=1, replayed="true")
        self.assertEqual((again.operation_id, settle["transaction"]), (op_id, pr["transaction"]), again)
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed + 1)

    # -- idempotency keys on the x402 path

    def test_new_signature_with_a_settled_key_gets_the_stored_result_and_stays_unused(self):
        executed, since = self.seller.executed(), len(self.chain.transfers_to_pay_to())
        accepted, resource, (s1, s2) = self.sign_v2("/orders", n=2)
        first = self.gw.pay("/orders", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="order-7")
        _, settle1 = self.assertPaidResponse(first, replayed="false")
        second = self.gw.pay("/orders", "POST", BODY, v2=v2_payload(accepted, s2, resource), key="order-7")
        _, settle2 = self.assertPaidResponse(second, replayed="true")
        self.assertEqual((second.operation_id, second.body), (first.operation_id, first.body))
        self.assertEqual(settle2["transaction"], settle1["transaction"])
        self.assertTrue(self.chain.used(BUYER.address, s1["message"]["nonce"]))
        self.assertFalse(self.chain.used(BUYER.address, s2["message"]["nonce"]),
                         "the second authorization must be left unused")
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed + 1)

    def test_payment_identifier_extension_is_the_key_without_a_header(self):
        since = len(self.chain.transfers_to_pay_to())
        accepted, resource, (s1, s2) = self.sign_v2("/pid", n=2)
        ext = {"payment-identifier": {"info": {"id": "pid_" + os.urandom(10).hex()}}}
        first = self.gw.pay("/pid", "POST", BODY, v2=v2_payload(accepted, s1, resource, ext))
        self.assertPaidResponse(first, replayed="false")
        second = self.gw.pay("/pid", "POST", BODY, v2=v2_payload(accepted, s2, resource, ext))
        self.assertPaidResponse(second, replayed="true")
        self.assertEqual(second.operation_id, first.operation_id)
        self.assertFalse(self.chain.used(BUYER.address, s2["message"]["nonce"]))
        # Without header or extension the key is (from, nonce): a new nonce is a new payment.
        third = self.gw.pay("/pid", "POST", BODY, v2=v2_payload(accepted, s2, resource))
        self.assertPaidResponse(third, replayed="false")
        self.assertNotEqual(third.operation_id, first.operation_id)
        self.assertEqual(len(self.new_transfers(since)), 2)

    def test_idempotency_key_is_scoped_to_the_payer(self):
        since = len(self.chain.transfers_to_pay_to())
        accepted, resource, (s1,) = self.sign_v2("/scoped")
        (s2,) = self.chain.sign([{"key": BUYER2, "message": auth_message(self.chain)}])
        a = self.gw.pay("/scoped", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="shared-key")
        self.assertPaidResponse(a, replayed="false")
        b = self.gw.pay("/scoped", "POST", BODY, v2=v2_payload(accepted, s2, resource), key="shared-key")
        self.assertPaidResponse(b, replayed="false", payer=BUYER2)
        self.assertNotEqual(a.operation_id, b.operation_id, "another payer's key must not replay")
        self.assertEqual(sorted(t["from"] for t in self.new_transfers(since)),
                         sorted([BUYER.address.lower(), BUYER2.address.lower()]))

    def test_same_key_different_request_is_422_and_not_settled(self):
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        accepted, resource, (s1, s2) = self.sign_v2("/fp", n=2)
        first = self.gw.pay("/fp", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="fp-key")
        self.assertPaidResponse(first, replayed="false")
        state = self.chain.state()
        other = self.gw.pay("/fp", "POST", b'{"task":"other"}', v2=v2_payload(accepted, s2, resource), key="fp-key")
        self.assertProblem(other, 422, "idempotency_key_mismatch")
        self.assertEqual(self.chain.state(), state)
        self.assertFalse(self.chain.used(BUYER.address, s2["message"]["nonce"]))
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed + 1)

    # -- concurrency

    def test_8_concurrent_requests_with_one_authorization_settle_once(self):
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        accepted, resource, (s1,) = self.sign_v2("/burst")
        header = b64json(v2_payload(accepted, s1, resource))
        results = concurrently(8, lambda i: self.gw.pay("/burst", "POST", BODY, v2=header, key="burst",
                                                        timeout=40))
        fresh = [r for r in results if r.status == 200 and r.replayed == "false"]
        self.assertEqual(len(fresh), 1, [(r.status, r.replayed, r.body[:80]) for r in results])
        op_id = fresh[0].operation_id
        for r in results:
            self.assertEqual(r.operation_id, op_id, r)
            if r.status == 200:
                self.assertEqual(r.body, fresh[0].body, r)
            else:
                self.assertProblem(r, 202, "operation_in_progress")
                self.assertEqual(r.header("Location"), op_location(op_id), r)
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed + 1)

    def test_one_authorization_under_4_different_keys_pays_for_one_request(self):
        # The same signed authorization sent under four Idempotency-Keys at once (x402 #1645: one
        # settlement, free work for the rest). Only one request may be served as paid.
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        accepted, resource, (s1,) = self.sign_v2("/multi")
        header = b64json(v2_payload(accepted, s1, resource))
        results = concurrently(4, lambda i: self.gw.pay("/multi", "POST", BODY, v2=header, key="multi-%d" % i,
                                                        timeout=40))
        summary = [(r.status, r.replayed, r.operation_id, r.body[:100]) for r in results]
        fresh = [r for r in results if r.status == 200 and r.replayed == "false"]
        self.assertEqual(len(fresh), 1, summary)
        for r in results:
            if r.status == 200:
                self.assertEqual(r.operation_id, fresh[0].operation_id, "free work: %r" % summary)
            else:
                self.assertIn(r.status, (202, 402, 409, 422), summary)
        print("\n    same authorization, 4 keys: %r" % [(r.status, _code(r)) for r in results], file=sys.stderr)
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed + 1, "the upstream did free work")

    # -- upstream outcomes

    def test_upstream_5xx_after_settlement_then_a_free_retry(self):
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        accepted, resource, (s1, s2) = self.sign_v2("/jobs", n=2)
        header = b64json(v2_payload(accepted, s1, resource))
        r1 = self.gw.pay("/jobs", "POST", BODY, v2=header, key="job-5xx", fault="5xx")
        self.assertProblem(r1, 502, "fulfillment_pending")
        op_id = r1.operation_id
        self.assertTrue(op_id, r1)
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("settled", "pending_retry"), op)
        self.assertEqual(len(self.new_transfers(since)), 1)
        self.assertEqual(self.seller.executed(), executed, "a 5xx is not an execution")

        # The fingerprint does not cover headers: the retry may drop the fault header.
        r2 = self.gw.pay("/jobs", "POST", BODY, v2=header, key="job-5xx")
        body, _ = self.assertPaidResponse(r2)
        self.assertEqual(r2.operation_id, op_id, r2)
        self.assertEqual(self.seller.executed(), executed + 1)
        r3 = self.gw.pay("/jobs", "POST", BODY, v2=v2_payload(accepted, s2, resource), key="job-5xx")
        self.assertPaidResponse(r3, replayed="true")
        self.assertEqual(r3.body, r2.body)
        self.assertFalse(self.chain.used(BUYER.address, s2["message"]["nonce"]))
        self.assertEqual(len(self.new_transfers(since)), 1, "the retry was charged again")
        op = self.gw.operation(op_id)
        self.assertEqual((op["settlement"], op["fulfillment"], op.get("response_status")),
                         ("settled", "succeeded", 200), op)

    def test_settle_before_route_upstream_4xx_is_settled_and_rejected(self):
        since = len(self.chain.transfers_to_pay_to())
        accepted, resource, (s1,) = self.sign_v2("/refused")
        r = self.gw.pay("/refused", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="before-4xx",
                        fault="4xx")
        self.assertEqual(r.status, 400, r)
        op = self.gw.operation(r.operation_id)
        self.assertEqual((op["settlement"], op["fulfillment"]), ("settled", "rejected"), op)
        self.assertEqual(len(self.new_transfers(since)), 1)

    def test_settle_after_route_upstream_4xx_is_not_settled(self):
        since, state = len(self.chain.transfers_to_pay_to()), self.chain.state()
        accepted, resource, (s1,) = self.sign_v2("/after/refused", value=AFTER_PRICE)
        self.assertEqual(accepted["amount"], str(AFTER_PRICE))
        r = self.gw.pay("/after/refused", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="after-4xx",
                        fault="4xx")
        self.assertEqual(r.status, 400, r)
        self.assertTrue(r.operation_id, r)
        op = self.gw.operation(r.operation_id)
        self.assertEqual(op["settlement"], "none", op)
        self.assertFalse(self.chain.used(BUYER.address, s1["message"]["nonce"]))
        self.assertEqual(self.chain.state(), state, "settle=after + 4xx must send nothing")
        self.assertEqual(len(self.new_transfers(since)), 0)

    def test_settle_after_route_upstream_2xx_settles_after_the_call(self):
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        accepted, resource, (s1,) = self.sign_v2("/after/ok", value=AFTER_PRICE)
        r = self.gw.pay("/after/ok", "POST", BODY, v2=v2_payload(accepted, s1, resource), key="after-ok")
        self.assertPaidResponse(r, replayed="false")
        self.assertEqual([t["value"] for t in self.new_transfers(since)], [AFTER_PRICE])
        self.assertEqual(self.seller.executed(), executed + 1)
        op = self.gw.operation(r.operation_id)
        self.assertEqual((op["settlement"], op["fulfillment"], op["amount"]),
                         ("settled", "succeeded", str(AFTER_PRICE)), op)


# ================================================================================================
class InvalidPaymentTest(X402TestCase):
    """Definitively invalid payments: 402 with the x402 reason; malformed ones: 400. Nothing sent."""

    gateway_args = SWEEP
    PATH = "/inv"

    def challenge(self, gw=None):
        _, header, pr, v1 = (gw or self.gw).challenge(self.PATH)
        return header, pr, v1

    def assertRefused(self, resp, status, code, nonce=None, payer=BUYER, state=None, msg=None):
        self.assertProblem(resp, status, code, msg)
        self.assertNotEqual(resp.header("Idempotent-Replayed"), "true", resp)
        if state is not None:
            self.assertEqual(self.chain.state(), state, "%s: a refused payment sent a transaction" % msg)
        if nonce is not None:
            self.assertFalse(self.chain.used(payer.address, nonce), msg)

    def test_invalid_authorizations_get_402_with_the_reason(self):
        _, pr, _ = self.challenge()
        accepted, resource = pr["accepts"][0], pr.get("resource")
        now = self.chain.now()
        other_chain = dict(self.chain.domain, chainId=1)
        cases = [  # (name, signer, message overrides, domain, payload edit, version, code)
            ("signed by a stranger", STRANGER, {"from_": BUYER.address}, None, None, 2,
             "invalid_exact_evm_signature"),
            ("signed for another chain", BUYER, {}, other_chain, None, 2, "invalid_exact_evm_signature"),
            ("value above the price", BUYER, {"value": PRICE + 1}, None, None, 2,
             "invalid_exact_evm_payload_authorization_value_mismatch"),
            ("value below the price", BUYER, {"value": PRICE - 1}, None, None, 2,
             "invalid_exact_evm_payload_authorization_value_mismatch"),
            ("wrong recipient", BUYER, {"to": STRANGER.address}, None, None, 2,
             "invalid_exact_evm_recipient_mismatch"),
            ("expired", BUYER, {"valid_before": now - 5}, None, None, 2,
             "invalid_exact_evm_payload_authorization_valid_before"),
            ("expires in 2 s", BUYER, {"valid_before": now + 2}, None, None, 2,
             "invalid_exact_evm_payload_authorization_valid_before"),
            ("not yet valid", BUYER, {"valid_after": now + 600}, None, None, 2,
             "invalid_exact_evm_payload_authorization_valid_after"),
            ("v2 network mismatch", BUYER, {}, None, ("accepted", "network", "eip155:1"), 2,
             "invalid_exact_evm_network_mismatch"),
            ("v2 asset mismatch", BUYER, {}, None, ("accepted", "asset", STRANGER.address), 2,
             "invalid_exact_evm_asset_mismatch"),
            ("v1 value above the price", BUYER, {"value": PRICE + 1}, None, None, 1,
             "invalid_exact_evm_authorization_value"),
            ("v1 network mismatch", BUYER, {}, None, ("v1", "network", "base"), 1,
             "invalid_exact_evm_network_mismatch"),
        ]
        signed = self.chain.sign([{"key": signer, "domain": domain, "message": auth_message(self.chain, **over)}
                                  for _, signer, over, domain, _, _, _ in cases])
        (good,) = self.chain.sign([{"key": BUYER, "message": auth_message(self.chain)}])
        twin = dict(good, signature=A.high_s_twin(good["signature"]))
        flipped = dict(good, signature=good["signature"][:10] + ("0" if good["signature"][10] != "0" else "1")
                       + good["signature"][11:])
        headers = []
        for (name, _, _, _, edit, version, code), s in zip(cases, signed):
            if version == 2:
                payload = v2_payload(accepted, s, resource)
                if edit:
                    payload[edit[0]] = dict(payload[edit[0]], **{edit[1]: edit[2]})
                headers.append((name, {"PAYMENT-SIGNATURE": b64json(payload)}, code, s))
            else:
                payload = v1_payload(s)
                if edit:
                    payload[edit[1]] = edit[2]
                headers.append((name, {"X-PAYMENT": b64json(payload)}, code, s))
        for name, s in (("high-s twin of a valid signature", twin), ("one byte of r changed", flipped)):
            headers.append((name, {"PAYMENT-SIGNATURE": b64json(v2_payload(accepted, s, resource))},
                            "invalid_exact_evm_signature", s))

        for name, h, code, s in headers:
            with self.subTest(name):
                state = self.chain.state()
                r = self.gw.request("GET", self.PATH, headers=h)
                self.assertRefused(r, 402, code, nonce=s["message"]["nonce"], payer=BUYER, state=state, msg=name)

        # After its refused twins, the valid signature itself still pays (a refusal consumes nothing).
        ok = self.gw.pay(self.PATH, v2=v2_payload(accepted, good, resource))
        self.assertPaidResponse(ok, replayed="false")

    def test_a_refused_payment_does_not_consume_its_idempotency_key(self):
        _, pr, _ = self.challenge()
        accepted, resource = pr["accepts"][0], pr.get("resource")
        bad, good = self.chain.sign([{"key": STRANGER, "message": auth_message(self.chain, from_=BUYER.address)},
                                     {"key": BUYER, "message": auth_message(self.chain)}])
        r = self.gw.pay(self.PATH, v2=v2_payload(accepted, bad, resource), key="step-1")
        self.assertRefused(r, 402, "invalid_exact_evm_signature")
        ok = self.gw.pay(self.PATH, v2=v2_payload(accepted, good, resource), key="step-1")
        self.assertPaidResponse(ok, replayed="false")

    def test_nonce_already_used_on_chain(self):
        _, pr, _ = self.challenge()
        (s,) = self.chain.sign([{"key": BUYER, "message": auth_message(self.chain)}])
        self.chain.pay_directly(s["message"], s["signature"])  # someone else settled it first
        state = self.chain.state()
        r = self.gw.pay(self.PATH, v2=v2_payload(pr["accepts"][0], s, pr.get("resource")))
        self.assertRefused(r, 402, "invalid_exact_evm_nonce_already_used", state=state, msg="reused nonce")

    def test_insufficient_balance(self):
        _, pr, _ = self.challenge()
        (s,) = self.chain.sign([{"key": POOR, "message": auth_message(self.chain)}])
        self.assertEqual(self.chain.balance(POOR.address), PRICE - 1)
        state = self.chain.state()
        r = self.gw.pay(self.PATH, v2=v2_payload(pr["accepts"][0], s, pr.get("resource")))
        self.assertRefused(r, 402, "invalid_exact_evm_insufficient_balance", nonce=s["message"]["nonce"],
                           payer=POOR, state=state, msg="balance below the price")
        self.assertEqual(self.chain.balance(POOR.address), PRICE - 1)

    def test_malformed_payment_headers_are_400(self):
        _, pr, v1 = self.challenge()
        (s,) = self.chain.sign([{"key": BUYER, "message": auth_message(self.chain)}])
        good = v2_payload(pr["accepts"][0], s, pr.get("resource"))
        # An unknown field (ignored, as zod does) tuned so that the standard encoding needs padding and
        # has '+' or '/': then the unpadded and the URL-safe variants really differ from it.
        for i in range(300):
            good["memo"] = "~?>" * (i % 9 + 1) + "." * (i // 9)
            raw = json.dumps(good, separators=(",", ":")).encode()
            std = base64.b64encode(raw).decode()
            if std.endswith("=") and ("+" in std or "/" in std):
                break
        url_safe = base64.urlsafe_b64encode(raw).decode()
        self.assertNotEqual(url_safe, std)
        self.assertNotEqual(std.rstrip("="), std)

        def edited(path, value):
            p = json.loads(json.dumps(good))
            node = p
            for k in path[:-1]:
                node = node[k]
            if value is KeyError:
                del node[path[-1]]
            else:
                node[path[-1]] = value
            return b64json(p)

        auth = ("payload", "authorization")
        cases = [
            ("not base64", "PAYMENT-SIGNATURE", "!!not base64!!"),
            ("unpadded base64", "PAYMENT-SIGNATURE", std.rstrip("=")),
            ("url-safe base64", "PAYMENT-SIGNATURE", url_safe),
            ("base64 of text", "PAYMENT-SIGNATURE", base64.b64encode(b"hello, world").decode()),
            ("base64 of a JSON array", "PAYMENT-SIGNATURE", base64.b64encode(b"[1,2,3]").decode()),
            ("truncated JSON", "PAYMENT-SIGNATURE", base64.b64encode(raw[:-7]).decode()),
            ("no payload", "PAYMENT-SIGNATURE", edited(("payload",), KeyError)),
            ("no authorization", "PAYMENT-SIGNATURE", edited(("payload", "authorization"), KeyError)),
            ("signature not hex", "PAYMENT-SIGNATURE", edited(("payload", "signature"), "0x" + "zz" * 65)),
            ("signature 64 bytes", "PAYMENT-SIGNATURE", edited(("payload", "signature"), s["signature"][:-2])),
            ("signature odd length", "PAYMENT-SIGNATURE", edited(("payload", "signature"), s["signature"] + "1")),
            ("nonce 31 bytes", "PAYMENT-SIGNATURE", edited(auth + ("nonce",), s["message"]["nonce"][:-2])),
            ("from 19 bytes", "PAYMENT-SIGNATURE", edited(auth + ("from",), BUYER.address[:-2])),
            ("to not an address", "PAYMENT-SIGNATURE", edited(auth + ("to",), "payTo")),
            ("value with exponent", "PAYMENT-SIGNATURE", edited(auth + ("value",), "1e3")),
            ("negative value", "PAYMENT-SIGNATURE", edited(auth + ("value",), "-1000")),
            ("value leading zero", "PAYMENT-SIGNATURE", edited(auth + ("value",), "01000")),
            ("value as a JSON number", "PAYMENT-SIGNATURE", edited(auth + ("value",), PRICE)),
            ("value 2^256", "PAYMENT-SIGNATURE", edited(auth + ("value",), str(2 ** 256))),
            ("value 10^80", "PAYMENT-SIGNATURE", edited(auth + ("value",), "1" + "0" * 80)),
            ("validBefore hex", "PAYMENT-SIGNATURE", edited(auth + ("validBefore",), "0x7fffffff")),
            ("validBefore 2^256+1", "PAYMENT-SIGNATURE", edited(auth + ("validBefore",), str(2 ** 256 + 1))),
            ("x402Version 1 in PAYMENT-SIGNATURE", "PAYMENT-SIGNATURE", edited(("x402Version",), 1)),
            ("x402Version as a string", "PAYMENT-SIGNATURE", edited(("x402Version",), "2")),
            ("v2 body in X-PAYMENT", "X-PAYMENT", std),
        ]
        for name, header, value in cases:
            with self.subTest(name):
                state = self.chain.state()
                r = self.gw.request("GET", self.PATH, headers={header: value})
                self.assertRefused(r, 400, "malformed_payment", state=state, msg=name)
        self.assertFalse(self.chain.used(BUYER.address, s["message"]["nonce"]))

    def test_invalid_idempotency_key_is_400_and_consumes_nothing(self):
        _, pr, _ = self.challenge()
        (s,) = self.chain.sign([{"key": BUYER, "message": auth_message(self.chain)}])
        header = b64json(v2_payload(pr["accepts"][0], s, pr.get("resource")))
        for bad in ("x" * 256, "has space", "caf\u00e9"):
            with self.subTest(repr(bad[:20])):
                state = self.chain.state()
                r = self.gw.request("GET", self.PATH, headers={"PAYMENT-SIGNATURE": header,
                                                               "Idempotency-Key": bad})
                self.assertRefused(r, 400, "invalid_idempotency_key", nonce=s["message"]["nonce"], state=state,
                                   msg="key %r" % bad[:20])
        ok = self.gw.pay(self.PATH, v2=header, key="x" * 255)
        self.assertPaidResponse(ok, replayed="false")

    def test_wrong_domain_name_never_settles(self):
        # A gateway misconfigured with --asset-name "USD Coin" for a token whose EIP-712 name is "USDC":
        # the official client signs the advertised (wrong) domain, which the token will never accept.
        try:
            wrong = self.start_gateway(asset_name="USD Coin", name="gateway-wrong-name")
        except harness.ProcessError as e:
            print("\n    wrong --asset-name: the gateway refused to start: %s" % str(e)[:300], file=sys.stderr)
            return
        _, header, pr, _ = wrong.challenge(self.PATH)
        self.assertEqual(pr["accepts"][0]["extra"]["name"], "USD Coin")
        signed = X.official_sign_v2(self.chain, header)
        state = self.chain.state()
        r = wrong.pay(self.PATH, v2=signed["value"])
        self.assertEqual(r.status, 402, r)
        code = r.json().get("code")
        self.assertIn(code, ("invalid_exact_evm_token_name_mismatch", "invalid_exact_evm_signature"), r)
        print("\n    wrong --asset-name: 402 %s" % code, file=sys.stderr)
        self.assertEqual(self.chain.state(), state, "a payment the token cannot accept was submitted")
        self.assertFalse(self.chain.used(BUYER.address, nonce_of(signed["payload"])))


# ================================================================================================
class UnknownSettlementTest(X402TestCase):
    """Anvil with automine off: receipts are not seen in time, so settlement becomes unknown."""

    automine = False
    gateway_args = SWEEP + ("--receipt-timeout-ms", "1000")

    def pay_unknown(self, path, key=None):
        """Pay with automine off: 202 settlement_unknown; returns (response, op, tx hash, header, extra sig)."""
        _, _, pr, _ = self.gw.challenge(path, "POST", BODY, JSON)
        s1, s2 = self.chain.sign([{"key": BUYER, "message": auth_message(self.chain)} for _ in range(2)])
        header = b64json(v2_payload(pr["accepts"][0], s1, pr.get("resource")))
        other = b64json(v2_payload(pr["accepts"][0], s2, pr.get("resource")))
        r = self.gw.pay(path, "POST", BODY, v2=header, key=key)
        self.assertProblem(r, 202, "settlement_unknown")
        op_id = r.operation_id
        self.assertTrue(op_id, r)
        self.assertEqual(r.header("Location"), op_location(op_id), r)
        self.assertRegex(r.header("Retry-After") or "", r"^[0-9]+$", r)
        self.assertIn(r.replayed, ("true", "false"), r)
        op = self.gw.operation(op_id)
        self.assertIn(op["settlement"], ("submitted", "unknown"), op)
        h = op.get("tx_hash")
        self.assertRegex(h or "", X.TX_HASH, op)
        tx = self.chain.tx(h)
        self.assertIsNotNone(tx, "the operation's tx_hash is not in the pool: %r" % op)
        self.assertIsNone(tx["blockNumber"], tx)
        self.assertTrue(eq_addr(tx["from"], RELAYER.address) and eq_addr(tx["to"], self.chain.token), tx)
        self.assertEqual([t["hash"] for t in self.chain.pending_relayer_txs()], [h])
        return r, op, h, header, other, s1, s2

    def test_unknown_settlement_then_mined_is_reconciled_and_served(self):
        since, executed = len(self.chain.transfers_to_pay_to()), self.seller.executed()
        r, op, h, header, other, s1, s2 = self.pay_unknown("/unknown", key="unk-1")
        self.assertEqual(self.seller.executed(), executed, "settle=before: no upstream call before settlement")
        # Retries while the outcome is unknown: never 402, never a second transaction or authorization.
        for name, hdr in (("same signature", header), ("new signature", other)):
            again = self.gw.pay("/unknown", "POST", BODY, v2=hdr, key="unk-1")
            self.assertEqual(again.status, 202, "%s while unknown: %r" % (name, again))
            self.assertIn(again.json().get("code"), ("settlement_unknown", "operation_in_progress"), again)
            self.assertEqual(again.operation_id, r.operation_id, again)
        self.assertEqual([t["hash"] for t in self.chain.pending_relayer_txs()], [h])

        self.chain.rpc.mine()
        op = self.gw.wait_settlement(r.operation_id, "settled", timeout=10)
        self.assertTrue(eq_addr(op["tx_hash"], h), op)
        paid = self.gw.pay("/unknown", "POST", BODY, v2=header, key="unk-1")
        _, settle = self.assertPaidResponse(paid)
        self.assertTrue(eq_addr(settle["transaction"], h), settle)
        replay = self.gw.pay("/unknown", "POST", BODY, v2=header, key="unk-1")
        self.assertPaidResponse(replay, replayed="true")
        self.assertEqual(replay.body, paid.body)
        self.assertEqual(self.seller.executed(), executed + 1)
        self.assertTrue(self.chain.used(BUYER.address, s1["message"]["nonce"]))
        self.assertFalse(self.chain.used(BUYER.address, s2["message"]["nonce"]), "a second authorization was used")
        self.assertEqual(len(self.chain.transfers_to_pay_to()) - since, 1)

    def test_dropped_transaction_is_rebroadcast_with_the_same_hash(self):
        since = len(self.chain.transfers_to_pay_to())
        r, op, h, header, _, s1, _ = self.pay_unknown("/dropped", key="drop-1")
        self.chain.rpc.drop_transaction(h)
        self.assertIsNone(self.chain.tx(h), "anvil_dropTransaction did not drop it")
        t0 = time.monotonic()
        try:
            X.deadline_poll(lambda: self.chain.tx(h), 10, interval=0.05, what="re-broadcast of %s" % h)
        except AssertionError:
            others = self.chain.pending_relayer_txs()
            self.fail("the dropped tx %s never came back in 10 s; relayer txs in the pool: %r" % (
                h, [(t["hash"], t["nonce"]) for t in others]))
        print("\n    re-broadcast after %.2f s" % (time.monotonic() - t0), file=sys.stderr)
        self.assertEqual([t["hash"] for t in self.chain.pending_relayer_txs()], [h], "only the same tx")
        self.chain.rpc.mine()
        self.gw.wait_settlement(r.operation_id, "settled", timeout=10)
        paid = self.gw.pay("/dropped", "POST", BODY, v2=header, key="drop-1")
        _, settle = self.assertPaidResponse(paid)
        self.assertTrue(eq_addr(settle["transaction"], h), settle)
        self.assertEqual(len(self.chain.transfers_to_pay_to()) - since, 1)

    def test_anvil_stopped_during_settlement_gives_202_and_one_payment(self):
        since = len(self.chain.transfers_to_pay_to())
        proc = subprocess.Popen(X.client_argv(self.chain, 2, self.gw.url("/sigstop"),
                                              headers=["Idempotency-Key: sigstop-1"]), cwd=X.CHAIN_ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            X.deadline_poll(lambda: self.chain.pending_relayer_txs() or proc.poll() is not None, 30,
                            interval=0.01, what="the settlement tx in the pool")
            if proc.poll() is not None:
                self.fail("the client finished before a settlement tx was submitted: %r" % (proc.communicate(),))
            self.chain.node.pause()
            paused_at = time.monotonic()
            out, err = proc.communicate(timeout=60)
            answered_after = time.monotonic() - paused_at
        finally:
            self.chain.node.resume()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        print("\n    answered %.2f s after SIGSTOP (--receipt-timeout-ms 1000)" % answered_after, file=sys.stderr)
        self.assertGreater(answered_after, 0.2, "the answer did not wait for the stopped node: the test is void")
        self.assertTrue(out.strip(), err[-2000:])
        res = json.loads(out.strip().splitlines()[-1])
        self.assertNotIn("error", res, res)
        self.assertEqual(res["status"], 202, "a paid request whose settlement is unknown: %r" % res)
        self.assertEqual(json.loads(res["body"]).get("code"), "settlement_unknown", res)
        self.assertEqual(res["attempts"], 2, "the client must have made exactly one payment: %r" % res)
        op_id = res["headers"].get("agentpay-operation-id")
        self.assertEqual(res["headers"].get("location"), op_location(op_id), res["headers"])
        nonce = nonce_of(res["payment_payload"])

        op = self.gw.operation(op_id)
        self.assertIn(op["settlement"], ("submitted", "unknown", "settled"), op)
        h = op["tx_hash"]
        if self.chain.rpc.pending_count():
            self.chain.rpc.mine()
        self.gw.wait_settlement(op_id, "settled", timeout=15)
        self.assertTrue(self.chain.used(BUYER.address, nonce))
        paid = self.gw.pay("/sigstop", v2=res["payment_header"], key="sigstop-1")
        _, settle = self.assertPaidResponse(paid)
        self.assertTrue(eq_addr(settle["transaction"], h), (settle, op))
        new = self.chain.transfers_to_pay_to()[since:]
        self.assertEqual([(t["from"], t["value"]) for t in new], [(BUYER.address.lower(), PRICE)], new)


# ================================================================================================
class VoidSettlementTest(X402TestCase):
    """A settlement tx that never gets mined becomes void once its authorization has expired."""

    automine = False
    gateway_args = SWEEP + ("--receipt-timeout-ms", "800", "--max-timeout-seconds", "12",
                            "--expiry-buffer-seconds", "2")
    quiesce_timeout = 20.0

    def freeze_gateway(self, fn):
        """Run fn() with the gateway stopped (SIGSTOP), so it cannot re-broadcast in between."""
        with self.gw.frozen():
            return fn()

    def void_a_payment(self, path, key):
        """Pay with automine off, drop the tx whenever it shows up and mine empty blocks until the
        operation is void. Returns (the signed payment, the tx hash, the buyer's balance before)."""
        rpc = self.chain.rpc
        _, header, pr, _ = self.gw.challenge(path, "POST", BODY, JSON)
        self.assertEqual(pr["accepts"][0]["maxTimeoutSeconds"], 12, pr)
        signed = X.official_sign_v2(self.chain, header)
        valid_before = int(signed["payload"]["payload"]["authorization"]["validBefore"])
        nonce = nonce_of(signed["payload"])
        self.assertLessEqual(valid_before - time.time(), 13, signed["payload"])
        balance = self.chain.balance(BUYER.address)

        r = self.gw.pay(path, "POST", BODY, v2=signed["value"], key=key)
        self.assertProblem(r, 202, "settlement_unknown")
        op_id = r.operation_id
        h = X.deadline_poll(lambda: self.gw.operation(op_id).get("tx_hash"), 5, what="tx_hash")
        seen, appearances = set(), []  # appearances: when we found (and dropped) it, relative to validBefore
        deadline = valid_before + 2 + 15
        while True:
            op = self.gw.operation(op_id)
            if op["settlement"] == "void":
                break
            self.assertIn(op["settlement"], ("submitted", "unknown"), op)
            if time.time() > deadline:
                self.fail("not void %.0f s after validBefore + buffer: %r" % (time.time() - valid_before - 2, op))

            def drop_and_mine():
                found = self.chain.pending_relayer_txs()
                for tx in found:
                    seen.add(tx["hash"])
                    rpc.drop_transaction(tx["hash"])
                self.assertEqual(rpc.pending_count(), 0)
                rpc.mine()  # an empty block: chain time moves on
                return found
            if self.freeze_gateway(drop_and_mine):
                appearances.append(round(time.time() - valid_before, 1))
            time.sleep(0.4)
        void_at = time.time() - valid_before
        print("\n    void %.1f s after validBefore; the tx was back in the pool at %r s (relative to validBefore)"
              % (void_at, appearances), file=sys.stderr)
        self.assertGreaterEqual(void_at, 2, "void before validBefore + buffer")
        self.assertTrue(any(t < 0 for t in appearances), "never re-broadcast before validBefore")
        self.assertEqual(seen, {h}, "only the same signed tx may be re-broadcast")
        self.assertIsNone(rpc.receipt(h))
        self.assertFalse(self.chain.used(BUYER.address, nonce))
        self.assertEqual(self.chain.balance(BUYER.address), balance)
        # Nothing was charged: the key answers 402 (never 202 or 200), without or with the expired payment.
        r1 = self.gw.pay(path, "POST", BODY, key=key)
        self.assertEqual(r1.status, 402, r1)
        r2 = self.gw.pay(path, "POST", BODY, v2=signed["value"], key=key)
        self.assertEqual(r2.status, 402, r2)
        print("    after void, the key answers 402 %s / 402 %s" % (_code(r1), _code(r2)), file=sys.stderr)
        self.assertFalse(self.chain.used(BUYER.address, nonce))
        return signed, h, balance

    def pay_after_void(self, path, keys, balance, paid_before=0):
        """With automine back on, new payments (one per key) must settle: 200 each."""
        self.chain.rpc.set_automine(True)
        for i, key in enumerate(keys):
            _, header, _, _ = self.gw.challenge(path, "POST", BODY, JSON)
            fresh = X.official_sign_v2(self.chain, header)
            r3 = self.gw.pay(path, "POST", BODY, v2=fresh["value"], key=key)
            if r3.status != 200:
                pool = self.chain.rpc.call("txpool_content") or {}
                self.fail("after void, a new payment (key %r) got %d %s; relayer nonce on chain %d; the pool "
                          "holds relayer txs %r" % (
                              key, r3.status, _code(r3), self.chain.relayer_nonce("latest"),
                              {sec: {n: t["hash"] for by in (pool.get(sec) or {}).values() for n, t in by.items()}
                               for sec in ("pending", "queued")}))
            self.assertPaidResponse(r3, replayed="false")
        self.assertEqual(self.chain.balance(BUYER.address), balance - (paid_before + len(keys)) * PRICE)

    def test_1_never_mined_settlement_becomes_void_and_releases_the_key(self):
        signed, h, balance = self.void_a_payment("/void", "void-1")
        # The gateway may leave its expired tx in the pool to use up the relayer nonce it holds (it can
        # only revert); it must be those same bytes.
        residue = self.chain.pending_relayer_txs()
        self.assertIn([t["hash"] for t in residue], ([], [h]), residue)
        # The gateway keeps working, and the released key may start over with a new payment.
        self.pay_after_void("/void", ("after-void", "void-1"), balance)
        self.assertFalse(self.chain.used(BUYER.address, nonce_of(signed["payload"])))

    def test_2_relayer_recovers_when_the_node_drops_the_void_tx_for_good(self):
        # The node keeps dropping the relayer's tx, also after void (e.g. an evicting mempool): the relayer
        # nonce that tx held stays unused on chain. Later settlements must not queue behind that gap.
        self.chain.rpc.set_automine(False)
        balance0 = self.chain.balance(BUYER.address)
        signed, h, balance = self.void_a_payment("/void2", "void-2")
        self.assertEqual(balance, balance0)
        for tx in self.chain.pending_relayer_txs():
            self.chain.rpc.drop_transaction(tx["hash"])
        time.sleep(1.0)  # five sweep intervals: room for the gateway to notice and fill the gap itself
        self.pay_after_void("/void2", ("after-void-2",), balance)


# ================================================================================================
class MoneyCheckSelfTest(unittest.TestCase):
    """The money check must notice wrong books: feed it tampered operation views over a real chain."""

    class Ops:
        name = "fake-gateway"

        def __init__(self, ops):
            self.ops = {o["id"]: o for o in ops}

        def operations(self, settlement=None):
            return [o for o in self.ops.values() if settlement in (None, o["settlement"])]

        def operation(self, op_id):
            return self.ops[op_id]

    def test_money_check_detects_wrong_books(self):
        chain = X.Chain()
        self.addCleanup(chain.stop)
        rpc = chain.rpc
        now = chain.now()
        good, expired, direct = chain.sign([
            {"key": BUYER, "message": auth_message(chain)},
            {"key": BUYER, "message": auth_message(chain, valid_before=now - 5)},
            {"key": BUYER2, "message": auth_message(chain)}])
        receipt = A.transfer_with_authorization(rpc, chain.token, good["message"], good["signature"],
                                                sender=RELAYER.address)
        h = receipt["transactionHash"]
        op = {"id": "op_good", "principal": BUYER.address, "amount": str(PRICE), "settlement": "settled",
              "tx_hash": h}
        self.assertEqual(X.money_violations(chain, [self.Ops([op])]), [], "pristine books must pass")

        def violations(ops, **chain_edits):
            saved = {k: getattr(chain, k) for k in chain_edits}
            try:
                for k, v in chain_edits.items():
                    setattr(chain, k, v)
                return X.money_violations(chain, [self.Ops(ops)])
            finally:
                for k, v in saved.items():
                    setattr(chain, k, v)

        tampered = {
            "amount differs": [dict(op, amount=str(PRICE - 1))],
            "another payer": [dict(op, principal=BUYER2.address)],
            "no payer in principal": [dict(op, principal="account:42")],
            "no tx_hash": [dict(op, tx_hash=None)],
            "tx that does not exist": [dict(op, tx_hash="0x" + "ab" * 32)],
            "one tx claimed twice": [op, dict(op, id="op_twin")],
            "transfer without operation": [],
            "operation marked void": [dict(op, settlement="void")],
        }
        for name, ops in tampered.items():
            with self.subTest(name):
                self.assertTrue(violations(ops), "the money check missed: %s" % name)
        with self.subTest("unrecorded direct transfer"):
            chain.pay_directly(direct["message"], direct["signature"])
            self.assertEqual(violations([op]), [])
            self.assertTrue(violations([op], direct=[]), "missed an unaccounted transfer")

        # A reverted relayer tx is a violation, unless it is a void operation's own expired tx.
        r_used = A.transfer_with_authorization(rpc, chain.token, good["message"], good["signature"],
                                               sender=RELAYER.address)
        self.assertEqual(int(r_used["status"], 16), 0)
        void_used = {"id": "op_void", "principal": BUYER.address, "amount": str(PRICE), "settlement": "void",
                     "tx_hash": r_used["transactionHash"]}
        self.assertTrue(violations([op]), "missed a reverted relayer tx")
        self.assertTrue(violations([op, void_used]), "a void op's tx reverting for another reason than expiry")
        # (only the expired-revert of a void operation's own tx is tolerated)
        r_exp = A.transfer_with_authorization(rpc, chain.token, expired["message"], expired["signature"],
                                              sender=RELAYER.address)
        self.assertEqual(int(r_exp["status"], 16), 0)
        void_exp = dict(void_used, id="op_void2", tx_hash=r_exp["transactionHash"])
        found = violations([op, void_exp])
        self.assertFalse([v for v in found if r_exp["transactionHash"] in v], found)
        self.assertTrue([v for v in found if r_used["transactionHash"] in v], found)


if __name__ == "__main__":
    X.main(sys.argv)
