#!/usr/bin/env python3
"""Threat model T4 (docs/threat-model.md): an operation id is not a credential. Against a real
`agentpay serve` and `agentpay seller`: another account, a wrong key or no credentials reading a wallet
operation or its trace get exactly the 404 of an id that does not exist; the 422 of a mismatch and the
202 of a call in flight go only to the account that owns the key.

Run:  python3 tests/security/test_views.py --agentpay build/agentpay
"""

import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402

PRICE = 1000


class OperationViewsTest(harness.GatewayTestCase):
    gateway_args = ("--attach-wait-ms", "200")

    def test_only_the_owner_or_the_admin_reads_an_operation(self):
        alice = self.gw.create_account("alice", deposit=10 * PRICE)
        mallory = self.gw.create_account("mallory", deposit=10 * PRICE)
        paid = self.gw.pay(alice, "order-1")
        self.assertEqual(paid.status, 200, paid)
        op_id = paid.operation_id
        unknown = self.gw.request("GET", "/v1/operations/op_" + "0" * 32)
        self.assertEqual(unknown.status, 404, unknown)
        for suffix in ("", "/trace"):
            path = "/v1/operations/%s%s" % (op_id, suffix)
            for headers in ({}, {"Authorization": "Bearer " + mallory.api_key},
                            {"Authorization": "Bearer " + alice.api_key + "x"},
                            {"Idempotency-Key": "order-1"}):
                r = self.gw.request("GET", path, headers=headers)
                self.assertEqual((r.status, r.body), (unknown.status, unknown.body), (path, headers, r))
            self.assertEqual(self.gw.request("GET", path, headers={"Authorization": "Bearer " + alice.api_key}).status,
                             200, path)
            self.assertEqual(self.gw.operation(op_id)["id"], op_id)  # the admin token

    def test_another_account_using_the_same_key_learns_nothing(self):
        alice = self.gw.create_account("alice", deposit=10 * PRICE)
        mallory = self.gw.create_account("mallory", deposit=10 * PRICE)
        slow = {}
        payer = threading.Thread(target=lambda: slow.update(r=self.gw.pay(alice, "shared", fault="slow:1500")))
        payer.start()
        time.sleep(0.3)  # alice's call is with the (slow) seller
        # Mallory's same key is Mallory's own action: a new operation, never alice's 202 or 422.
        mine = self.gw.pay(mallory, "shared", body=b'{"other":true}')
        self.assertEqual(mine.status, 200, mine)
        payer.join(30)
        self.assertEqual(slow["r"].status, 200, slow)
        self.assertNotEqual(mine.operation_id, slow["r"].operation_id)
        self.assertEqual(self.gw.account(alice)["captured"], PRICE)
        self.assertEqual(self.gw.account(mallory)["captured"], PRICE)


if __name__ == "__main__":
    harness.main(sys.argv)
