#!/usr/bin/env python3
"""A settlement transaction stuck in the mempool (issue 14, item 4): Anvil with automine off, the base fee
raised above the transaction's max fee, so blocks are mined without it (and Anvil evicts it). The reconciler replaces it once,
with the same relayer nonce, the same calldata and a higher fee within --max-fee-per-gas, never with a
second authorization; the replacement is mined and the payment settles once. A batch's stuck
transaction (--settle-batch-max) is replaced the same way, once, for every payment it settles. And a cap too low for any
replacement the node would take: nothing is replaced, and the transaction waits for the base fee.

The money check (x402_harness.money_violations) runs after every test.

Run:  python3 tests/integration/test_stuck_tx.py --agentpay build/agentpay
"""

import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import x402_harness as X  # noqa: E402
from x402_harness import BUYER, X402TestCase, eq_addr  # noqa: E402

GWEI = 10 ** 9
CAP = 50 * GWEI
FEE_REFRESH_S = 1.1  # the gateway reads fees at most once a second
REPLACE_AFTER_MS = 2000


class StuckBase(X402TestCase):
    """Automine off; blocks are mined by the tests."""
    automine = False
    gateway_args = ("--max-fee-per-gas", str(CAP), "--receipt-timeout-ms", "1000",
                    "--replace-after-ms", str(REPLACE_AFTER_MS), "--sweep-interval-ms", "200")

    def set_base_fee(self, wei):
        """The next block's base fee, then that block (mined without what it cannot pay for)."""
        self.chain.rpc.call("anvil_setNextBlockBaseFeePerGas", hex(wei))
        self.chain.rpc.mine()
        self.assertEqual(int(self.chain.rpc.block()["baseFeePerGas"], 16), wei)

    def tearDown(self):
        self.set_base_fee(GWEI // 10)
        super().tearDown()

    def replaced_events(self, op_id):
        return [e for e in self.gw.trace(op_id)["events"] if e["kind"] == "tx_replaced"]

    def pay_and_strand(self, key):
        """A payment whose transaction then sits under the base fee: (op id, its tx, the signed payment)."""
        self.set_base_fee(GWEI // 10)
        time.sleep(FEE_REFRESH_S)
        _, required, _, _ = self.gw.challenge("/report")
        signed = X.official_sign_v2(self.chain, required)
        r = self.gw.pay("/report", v2=signed["value"], key=key)
        self.assertProblem(r, 202, "settlement_unknown")
        first = self.gw.operation(r.operation_id)["tx_hash"]
        tx = self.chain.tx(first)
        self.assertIsNone(tx["blockNumber"], tx)
        max_fee = int(tx["maxFeePerGas"], 16)
        # The base fee jumps above what the transaction may pay: the next block leaves it out (Anvil
        # then evicts it from its pool; the reconciler finds it gone, and sends it again, or its
        # replacement).
        self.set_base_fee(2 * max_fee)
        self.assertIsNone(self.chain.rpc.call("eth_getTransactionReceipt", first), "not mined")
        return r.operation_id, tx, signed



class StuckTransactionTest(StuckBase):
    def test_a_stuck_transaction_is_replaced_once_at_its_nonce_and_settles_once(self):
        relayer_mined = self.chain.relayer_nonce("latest")
        transfers = len(self.chain.transfers(from_=BUYER.address))
        executed = self.seller.executed()
        op_id, first, signed = self.pay_and_strand("stuck-1")
        nonce = signed["payload"]["payload"]["authorization"]["nonce"]

        op = X.deadline_poll(lambda: (lambda o: o if o["tx_hash"] != first["hash"] else None)(
            self.gw.operation(op_id)), 20, what="the reconciler's replacement")
        second = self.chain.tx(op["tx_hash"])
        self.assertIsNotNone(second, op)
        self.assertIsNone(second["blockNumber"], second)
        # Same relayer, nonce and calldata (the payer's one authorization); a higher fee, within the cap.
        self.assertTrue(eq_addr(second["from"], first["from"]))
        self.assertEqual(second["nonce"], first["nonce"])
        self.assertEqual(second["input"], first["input"])
        self.assertEqual(second["to"], first["to"])
        self.assertGreater(int(second["maxFeePerGas"], 16), int(first["maxFeePerGas"], 16) * 9 // 8)
        self.assertGreaterEqual(int(second["maxPriorityFeePerGas"], 16),
                                int(first["maxPriorityFeePerGas"], 16) * 9 // 8)
        self.assertLessEqual(int(second["maxFeePerGas"], 16), CAP)
        # The node holds the replacement only; nothing else was signed, nothing is used yet.
        self.assertEqual([t["hash"] for t in self.chain.pending_relayer_txs()], [op["tx_hash"]])
        self.assertFalse(self.chain.used(BUYER.address, nonce))
        events = self.replaced_events(op_id)
        self.assertEqual(len(events), 1, events)
        self.assertIn(first["hash"] + " replaced by " + op["tx_hash"], events[0]["detail"])

        self.chain.rpc.mine()
        receipt = self.chain.rpc.call("eth_getTransactionReceipt", op["tx_hash"])
        self.assertEqual(int(receipt["status"], 16), 1, receipt)
        self.gw.wait_settlement(op_id, "settled")
        self.assertEqual(self.chain.relayer_nonce("latest"), relayer_mined + 1, "one relayer nonce used")
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1, "one Transfer")
        self.assertTrue(self.chain.used(BUYER.address, nonce))

        # The client's retry with the same key and signature is served without paying again.
        r = self.gw.pay("/report", v2=signed["value"], key="stuck-1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.seller.executed(), executed + 1)
        again = self.gw.pay("/report", v2=signed["value"], key="stuck-1")
        self.assertEqual((again.status, again.replayed), (200, "true"), again)
        # Replaced once: mined, nothing more to replace.
        time.sleep(REPLACE_AFTER_MS / 1000 + 0.5)
        self.assertEqual(len(self.replaced_events(op_id)), 1)
        self.assertEqual(self.gw.operation(op_id)["tx_hash"], op["tx_hash"])
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1)



class BatchedStuckTransactionTest(StuckBase):
    gateway_args = StuckBase.gateway_args + ("--settle-batch-max", "8", "--settle-batch-window-ms", "300")

    def test_a_stuck_batch_is_replaced_once_for_every_member_and_each_settles_once(self):
        relayer_mined = self.chain.relayer_nonce("latest")
        transfers = len(self.chain.transfers(from_=BUYER.address))
        self.set_base_fee(GWEI // 10)
        time.sleep(FEE_REFRESH_S)
        _, required, _, _ = self.gw.challenge("/report")
        signed = [X.official_sign_v2(self.chain, required) for _ in range(2)]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(
                lambda i: self.gw.pay("/report", v2=signed[i]["value"], key="stuck-batch-%d" % i), range(2)))
        for r in answers:
            self.assertProblem(r, 202, "settlement_unknown")
        ops = [r.operation_id for r in answers]
        first_hash = self.gw.operation(ops[0])["tx_hash"]
        self.assertEqual(self.gw.operation(ops[1])["tx_hash"], first_hash, "one transaction for both")
        first = self.chain.tx(first_hash)
        self.assertIsNone(first["blockNumber"], first)
        self.assertTrue(eq_addr(first["to"], X.A.MULTICALL3_ADDRESS), first)
        self.set_base_fee(2 * int(first["maxFeePerGas"], 16))

        def replaced():
            hashes = {self.gw.operation(op_id)["tx_hash"] for op_id in ops}
            return hashes if first_hash not in hashes else None
        hashes = X.deadline_poll(replaced, 20, what="the reconciler's replacement of the batch")
        self.assertEqual(len(hashes), 1, "every member took the one replacement")
        second = self.chain.tx(hashes.pop())
        self.assertEqual((second["nonce"], second["input"], second["to"]),
                         (first["nonce"], first["input"], first["to"]))
        self.assertGreater(int(second["maxFeePerGas"], 16), int(first["maxFeePerGas"], 16))
        for op_id in ops:
            self.assertEqual(len(self.replaced_events(op_id)), 1, self.gw.trace(op_id))

        self.chain.rpc.mine()
        for op_id in ops:
            self.gw.wait_settlement(op_id, "settled")
        self.assertEqual(self.chain.relayer_nonce("latest"), relayer_mined + 1, "one relayer nonce used")
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 2, "two Transfers")
        for payment in signed:
            self.assertTrue(self.chain.used(BUYER.address, payment["payload"]["payload"]["authorization"]["nonce"]))


class CappedStuckTransactionTest(StuckBase):
    """The tip capped at what the stuck transaction already tips: a replacement the node would take
    (an eighth more on both fees) is above the cap, so none is sent."""
    gateway_args = StuckBase.gateway_args + ("--max-priority-fee-per-gas", str(GWEI))

    def test_a_cap_below_any_replacement_leaves_the_transaction_waiting(self):
        relayer_mined = self.chain.relayer_nonce("latest")
        transfers = len(self.chain.transfers(from_=BUYER.address))
        op_id, first, _ = self.pay_and_strand("stuck-capped")
        self.assertEqual(int(first["maxPriorityFeePerGas"], 16), GWEI, "signed at the tip cap")
        time.sleep(2 * REPLACE_AFTER_MS / 1000 + 1)
        op = self.gw.operation(op_id)
        self.assertEqual(op["tx_hash"], first["hash"], "not replaced above the cap")
        self.assertEqual(op["settlement"], "unknown", op)
        # Only the first transaction was ever sent (Anvil evicts it each block and the reconciler sends
        # the same bytes again).
        self.assertIn([t["hash"] for t in self.chain.pending_relayer_txs()], ([], [first["hash"]]))
        self.assertEqual(self.replaced_events(op_id), [])
        # The base fee comes back down: the transaction first signed is mined, and settles once.
        self.set_base_fee(GWEI // 10)

        def settled():
            self.chain.rpc.mine()
            return self.gw.operation(op_id)["settlement"] == "settled"
        X.deadline_poll(settled, 20, interval=0.5, what="the first transaction mined and settled")
        self.assertEqual(self.gw.operation(op_id)["tx_hash"], first["hash"])
        self.assertEqual(self.chain.relayer_nonce("latest"), relayer_mined + 1)
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), transfers + 1)


if __name__ == "__main__":
    X.main(sys.argv)
