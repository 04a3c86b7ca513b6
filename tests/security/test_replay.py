#!/usr/bin/env python3
"""Threat model T1 and T4 (docs/threat-model.md), scripted as an attacker would, on a real Anvil with the
official x402 client (@x402/fetch) as the honest payer and `agentpay serve` as the gateway.

The attacker reads the relayer's transferWithAuthorization calldata off the chain, rebuilds the exact
PAYMENT-SIGNATURE header from it and a public 402 challenge, and sends it: with the same body, another
body, with a key the payer used (as if it had leaked), while the paid call is still running (settle
before the upstream: the transaction is public before the answer). Each attempt must yield no paid body,
no operation id, no attach and no view, and move nothing on chain or in the seller; the honest payer's
retry after a lost response still gets its body and pays once.

T25: keys bind to their payer (views name the payer; another payer's equal key string reads nothing) and
a key too easy to guess (`order-43`) with the public authorization proves nothing.

Run:  python3 tests/security/test_replay.py --agentpay build/agentpay
"""

import json
import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import A, BUYER, X402TestCase, b64json, eq_addr, run_client, v2_payload  # noqa: E402

BODY = '{"task":"summarize","doc":"q3-report"}'
JSON_HEADER = "Content-Type: application/json"
TRANSFER_WITH_AUTHORIZATION_VRS = "0xe3ee160e"


def authorization_from_calldata(tx):
    """What anyone reading the chain learns from the relayer's transaction: the payer's authorization
    and signature, exactly as signed."""
    data = tx["input"]
    if not data.startswith(TRANSFER_WITH_AUTHORIZATION_VRS):
        raise AssertionError("not transferWithAuthorization(v,r,s): %s" % data[:10])
    words = [data[10 + 64 * i: 10 + 64 * (i + 1)] for i in range(9)]
    message = {"from": "0x" + words[0][24:], "to": "0x" + words[1][24:], "value": str(int(words[2], 16)),
               "validAfter": str(int(words[3], 16)), "validBefore": str(int(words[4], 16)),
               "nonce": "0x" + words[5]}
    v, r, s = int(words[6], 16), words[7], words[8]
    return {"message": message, "signature": "0x" + r + s + "%02x" % v}


class PublicAuthorizationReplay(X402TestCase):
    """An attacker with the chain and the public 402: nothing paid is readable, replayable or attachable."""

    min_key_bits = None  # the gateway's default --min-idempotency-key-bits (96): T25

    def rebuilt_header(self, tx_hash, path="/resource", method="POST"):
        tx = self.chain.tx(tx_hash)
        self.assertTrue(eq_addr(tx["from"], X.RELAYER.address), tx)
        signed = authorization_from_calldata(tx)
        _, _, required, _ = self.gw.challenge(path, method, BODY.encode(), "application/json")
        return b64json(v2_payload(required["accepts"][0], signed, resource=required.get("resource")))

    def honest(self, key=None, fault=None, payer=BUYER):
        headers = [JSON_HEADER] + (["Idempotency-Key: " + key] if key else []) + (
            ["X-Seller-Fault: " + fault] if fault else [])
        out = run_client(self.chain, 2, self.gw.url("/resource"), key=payer, method="POST", body=BODY,
                         headers=headers)
        self.assertEqual(out["status"], 200, out)
        self.assertTrue(out["payment_response"]["success"], out)
        return out

    def books(self):
        return {"chain": self.chain.state(), "executed": self.seller.executed(),
                "operations": sorted((o["id"], o["settlement"], o["fulfillment"], o["attempts"])
                                     for o in self.gw.operations())}

    def assertNothingGiven(self, resp, op_id, paid_body):
        self.assertEqual(resp.status, 409, resp)
        self.assertEqual(resp.json().get("code"), "authorization_already_used", resp)
        self.assertIsNone(resp.operation_id, resp)
        self.assertIsNone(resp.header("Location"), resp)
        self.assertIsNone(resp.header("PAYMENT-RESPONSE"), resp)
        self.assertNotIn(op_id, resp.body.decode() if isinstance(resp.body, bytes) else resp.body)
        self.assertNotIn("operation_id", resp.json())
        self.assertNotIn(paid_body, resp.body if isinstance(resp.body, bytes) else resp.body.encode())

    def test_calldata_replay_without_the_key_yields_nothing(self):
        paid = self.honest()  # no Idempotency-Key, no payment-identifier: the bare default key
        op_id = paid["headers"]["agentpay-operation-id"]
        paid_body = paid["body"].encode()
        before = self.books()
        header = self.rebuilt_header(paid["payment_response"]["transaction"])
        for body in (BODY, '{"task":"something else"}'):
            resp = self.gw.pay("/resource", "POST", body.encode(), v2=header)
            self.assertNothingGiven(resp, op_id, paid_body)
        # A key of the attacker's own: a new action whose authorization is spent: 402, no id.
        resp = self.gw.pay("/resource", "POST", BODY.encode(), v2=header, key="attacker-key")
        self.assertEqual(resp.status, 402, resp)
        self.assertIsNone(resp.operation_id, resp)
        # The id (say it leaked from a log) opens no view without credentials.
        for suffix in ("", "/trace"):
            for headers in ({}, {"Idempotency-Key": "attacker-key"}, {"Authorization": "Bearer nope"}):
                r = self.gw.request("GET", "/v1/operations/%s%s" % (op_id, suffix), headers=headers)
                self.assertEqual(r.status, 404, r)
                self.assertNotIn(op_id, r.body.decode())
        self.assertEqual(self.books(), before)

    def test_calldata_replay_with_a_leaked_key_and_another_authorization_yields_nothing(self):
        first = self.honest(key="order-1")
        second = self.honest(key="order-2")
        op_id = first["headers"]["agentpay-operation-id"]
        before = self.books()
        # The attacker holds order-1's key (suppose it leaked) and order-2's public authorization.
        header = self.rebuilt_header(second["payment_response"]["transaction"])
        for body in (BODY, '{"task":"something else"}'):
            resp = self.gw.pay("/resource", "POST", body.encode(), v2=header, key="order-1")
            self.assertNothingGiven(resp, op_id, first["body"].encode())
        self.assertEqual(self.books(), before)

    def test_the_honest_payers_retry_with_its_key_gets_its_body_and_pays_once(self):
        first = self.honest(key="lost-response-1")
        transfers = len(self.chain.transfers_to_pay_to())
        executed = self.seller.executed()
        # The response was lost; @x402/fetch repeats the call with the same key: it gets the 402,
        # signs a fresh authorization, and the gateway answers the stored result.
        again = self.honest(key="lost-response-1")
        self.assertEqual(again["headers"].get("idempotent-replayed"), "true", again)
        self.assertEqual(again["body"], first["body"])
        self.assertEqual(again["payment_response"]["transaction"], first["payment_response"]["transaction"])
        fresh = again["payment_payload"]["payload"]["authorization"]
        self.assertNotEqual(fresh["nonce"], first["payment_payload"]["payload"]["authorization"]["nonce"])
        self.assertFalse(self.chain.used(fresh["from"], fresh["nonce"]), "the fresh authorization was used")
        self.assertEqual(len(self.chain.transfers_to_pay_to()), transfers)
        self.assertEqual(self.seller.executed(), executed)
        # The payer (and only it) reads its operation with its key.
        op_id = first["headers"]["agentpay-operation-id"]
        view = self.gw.request("GET", "/v1/operations/" + op_id,
                               headers={"AgentPay-Payer": BUYER.address, "Idempotency-Key": "lost-response-1"})
        self.assertEqual(view.status, 200, view)
        self.assertEqual(view.json()["settlement"], "settled")
        self.assertTrue(view.json()["idempotency_key"].startswith("payer-sha256:"), view)
        self.assertNotIn("lost-response-1", view.body.decode())

    def test_another_payer_with_the_same_key_string_reads_nothing(self):
        """T25 (issue 36 item 6): two payers pick the docs' own key `order-42`. Bob, holding the same
        string and Alice's operation id (say it leaked from a log), reads neither her operation nor its
        trace, whatever payer he names; Alice reads hers by naming herself."""
        alice = self.honest(key="order-42")
        bob = self.honest(key="order-42", payer=X.BUYER2)
        alice_id = alice["headers"]["agentpay-operation-id"]
        bob_id = bob["headers"]["agentpay-operation-id"]
        self.assertNotEqual(alice_id, bob_id)
        unknown = self.gw.request("GET", "/v1/operations/op_" + "0" * 32)
        self.assertEqual(unknown.status, 404, unknown)
        for suffix in ("", "/trace"):
            path = "/v1/operations/%s%s" % (alice_id, suffix)
            for headers in ({"Idempotency-Key": "order-42"},
                            {"AgentPay-Payer": X.BUYER2.address, "Idempotency-Key": "order-42"},
                            {"AgentPay-Payer": "not-an-address", "Idempotency-Key": "order-42"}):
                r = self.gw.request("GET", path, headers=headers)
                self.assertEqual((r.status, r.body), (unknown.status, unknown.body), (path, headers, r))
            mine = self.gw.request("GET", path, headers={"AgentPay-Payer": BUYER.address.lower(),
                                                         "Idempotency-Key": "order-42"})
            self.assertEqual(mine.status, 200, (path, mine))
        # Equal strings of two payers do not even look alike.
        self.assertNotEqual(self.gw.operation(alice_id)["idempotency_key"],
                            self.gw.operation(bob_id)["idempotency_key"])

    def test_a_weak_key_with_the_public_authorization_yields_nothing(self):
        """T25 (issue 36 item 6): `order-43` is no secret. An attacker who guesses it and rebuilds the
        payment from the relayer's calldata gets no paid body and no operation id, with the same body
        or another; the payer's own retry (@x402/fetch signs a fresh authorization) still gets its
        stored answer for free."""
        paid = self.honest(key="order-43")
        op_id = paid["headers"]["agentpay-operation-id"]
        paid_body = paid["body"].encode()
        before = self.books()
        header = self.rebuilt_header(paid["payment_response"]["transaction"])
        for body in (BODY, '{"task":"something else"}'):
            resp = self.gw.pay("/resource", "POST", body.encode(), v2=header, key="order-43")
            self.assertNothingGiven(resp, op_id, paid_body)
        self.assertEqual(self.books(), before)
        transfers = len(self.chain.transfers_to_pay_to())
        again = self.honest(key="order-43")
        self.assertEqual(again["headers"].get("idempotent-replayed"), "true", again)
        self.assertEqual(again["body"], paid["body"])
        self.assertEqual(again["headers"]["agentpay-operation-id"], op_id)
        fresh = again["payment_payload"]["payload"]["authorization"]
        self.assertFalse(self.chain.used(fresh["from"], fresh["nonce"]), "the fresh authorization was used")
        self.assertEqual(len(self.chain.transfers_to_pay_to()), transfers)
        self.assertEqual(self.books(), before)

    def test_a_mempool_watcher_cannot_attach_to_the_call_in_flight(self):
        """settle=before: the transaction is mined before the (slow) upstream answers; the watcher's
        copy of the authorization gets 409 at once, never the paid answer."""
        before_tx = self.chain.relayer_nonce()
        result = {}
        payer = threading.Thread(target=lambda: result.update(out=self.honest(fault="slow:3000")))
        payer.start()
        deadline = time.time() + 20
        while self.chain.relayer_nonce() == before_tx and time.time() < deadline:
            time.sleep(0.02)
        self.assertGreater(self.chain.relayer_nonce(), before_tx, "the relayer never broadcast")
        tx_hash = None
        while tx_hash is None and time.time() < deadline:
            block = self.chain.rpc.call("eth_getBlockByNumber", "latest", True)
            for tx in block["transactions"]:
                if eq_addr(tx["from"], X.RELAYER.address):
                    tx_hash = tx["hash"]
            time.sleep(0.02)
        self.assertIsNotNone(tx_hash)
        started = time.time()
        resp = self.gw.pay("/resource", "POST", BODY.encode(), v2=self.rebuilt_header(tx_hash),
                           headers={"X-Seller-Fault": "slow:3000"})
        waited = time.time() - started
        self.assertTrue(payer.is_alive(), "the paid call ended before the watcher tried: the test proves nothing")
        self.assertEqual(resp.status, 409, resp)
        self.assertIsNone(resp.operation_id, resp)
        self.assertLess(waited, 2.5, "the watcher's request waited for the call in flight")
        payer.join(60)
        self.assertEqual(result["out"]["status"], 200)


if __name__ == "__main__":
    X.main(sys.argv)
