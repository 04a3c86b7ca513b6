#!/usr/bin/env python3
"""Confirmations on a real chain (issue 14, item 3): with `--confirmations 3` a settlement counts, and
the paid response is released, only once its receipt is three blocks deep. A reorganisation that
removes the block before then (`anvil_reorg`) sends the operation back to waiting; the same signed
transaction is mined again (the node's copy or the reconciler's re-broadcast of the stored bytes,
same hash), and it settles once: one authorization, one Transfer, one upstream call, and the same
answer to every retry. With one confirmation, a reorganisation after the paid answer went out: the
reconciler's watch sends the operation back to unknown and the same transaction settles it again.

Anvil mines one block per transaction (automine); the test mines the blocks after it with evm_mine.
The money check (x402_harness.money_violations) runs after every test.

Run:  python3 tests/integration/test_confirmations.py --agentpay build/agentpay
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import x402_harness as X  # noqa: E402
from x402_harness import BUYER, X402TestCase  # noqa: E402

CONFIRMATIONS = 3
RECEIPT_TIMEOUT_MS = 4000


class PayInBackground:
    """One paid request on a thread, so that the test can mine blocks while it waits."""

    def __init__(self, gw, path, header, key):
        self.response = None
        self.thread = threading.Thread(target=self.run, args=(gw, path, header, key), daemon=True)
        self.thread.start()

    def run(self, gw, path, header, key):
        self.response = gw.pay(path, v2=header, key=key, timeout=30)

    def done(self):
        return not self.thread.is_alive()

    def wait(self, timeout):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the paid request did not finish within %.0f s" % timeout)
        return self.response


class ConfirmationsTest(X402TestCase):
    gateway_args = ("--confirmations", str(CONFIRMATIONS), "--receipt-timeout-ms", str(RECEIPT_TIMEOUT_MS),
                    "--sweep-interval-ms", "200")

    def sign(self, path):
        _, required, _, _ = self.gw.challenge(path)
        return X.official_sign_v2(self.chain, required)

    def mined_transfer(self, since, timeout=10):
        """The one new Transfer from the buyer (its settlement is mined); returns its log."""
        X.deadline_poll(lambda: len(self.chain.transfers(from_=BUYER.address)) > since, timeout,
                        what="the settlement mined")
        new = self.chain.transfers(from_=BUYER.address)[since:]
        self.assertEqual(len(new), 1, new)
        return new[0]

    def test_no_paid_response_before_the_third_block(self):
        since = len(self.chain.transfers(from_=BUYER.address))
        executed = self.seller.executed()
        signed = self.sign("/report")
        request = PayInBackground(self.gw, "/report", signed["value"], "deep-1")
        transfer = self.mined_transfer(since)
        block = transfer["block"]
        for depth in (1, 2):
            time.sleep(0.6)
            self.assertFalse(request.done(), "answered at %d of %d confirmations: %r" % (
                depth, CONFIRMATIONS, request.response))
            self.assertEqual(self.seller.executed(), executed, "the upstream was called before the third block")
            self.chain.rpc.mine()
        self.assertEqual(self.chain.rpc.block_number(), block + CONFIRMATIONS - 1)
        paid = request.wait(10)
        _, settle = self.assertPaidResponse(paid)
        self.assertTrue(X.eq_addr(settle["transaction"], transfer["tx"]), settle)
        self.assertEqual(self.seller.executed(), executed + 1)
        replay = self.gw.pay("/report", v2=signed["value"], key="deep-1")
        self.assertPaidResponse(replay, replayed="true")
        self.assertEqual(replay.body, paid.body)

    def test_a_reorganised_settlement_is_mined_again_with_the_same_bytes_and_settles_once(self):
        since = len(self.chain.transfers(from_=BUYER.address))
        executed = self.seller.executed()
        signed = self.sign("/report")
        nonce = signed["payload"]["payload"]["authorization"]["nonce"]
        request = PayInBackground(self.gw, "/report", signed["value"], "reorg-1")
        tx_hash = self.mined_transfer(since)["tx"]
        # The block goes: replaced by an empty one. The authorization is unused again.
        self.chain.rpc.reorg(1)
        self.assertIsNone(self.chain.rpc.receipt(tx_hash), "anvil_reorg left the receipt")
        self.assertFalse(self.chain.used(BUYER.address, nonce))
        first = request.wait(RECEIPT_TIMEOUT_MS / 1000 + 10)
        self.assertEqual(first.status, 202, first)
        self.assertEqual(first.json().get("code"), "settlement_unknown", first)
        self.assertEqual(self.seller.executed(), executed, "nothing released for a forgotten block")

        # The same transaction comes back (Anvil's pool or the reconciler's re-broadcast) and is
        # mined; a fresh block with it, then two more.
        def mined_again():
            receipt = self.chain.rpc.receipt(tx_hash)
            if receipt is None and self.chain.tx(tx_hash) is not None:
                self.chain.rpc.mine()  # back in the pool: include it
            return receipt
        receipt = X.deadline_poll(mined_again, 15, interval=0.2, what="the same transaction mined again")
        self.chain.rpc.mine(CONFIRMATIONS - 1)
        op = self.gw.wait_settlement(first.operation_id, "settled", timeout=15)
        self.assertTrue(X.eq_addr(op["tx_hash"], tx_hash), op)
        paid = self.gw.pay("/report", v2=signed["value"], key="reorg-1")
        _, settle = self.assertPaidResponse(paid)
        self.assertTrue(X.eq_addr(settle["transaction"], tx_hash), settle)
        self.assertEqual(self.seller.executed(), executed + 1)
        self.assertTrue(self.chain.used(BUYER.address, nonce))
        transfers = self.chain.transfers(from_=BUYER.address)[since:]
        self.assertEqual([t["tx"] for t in transfers], [receipt["transactionHash"]],
                         "one Transfer on the chain as it is now")


class ReorgAfterSettledTest(X402TestCase):
    """One confirmation (the default): the paid answer goes out as soon as the block holding the
    settlement is mined. A deeper reorganisation than that then removes the block: the reconciler's
    watch sends the operation back to unknown, the same transaction settles it again, and the answer
    already given stays the answer."""
    gateway_args = ("--sweep-interval-ms", "200")

    def test_a_settled_payments_block_reorganised_away_settles_again_with_the_same_bytes(self):
        self.settle_then_lose_the_block(lambda: self.chain.rpc.reorg(1), "late-reorg")

    def test_a_settled_payments_block_rolled_back_settles_again_with_the_same_bytes(self):
        # anvil_rollback: the chain gets shorter, the block's number is past the head for a while.
        self.settle_then_lose_the_block(lambda: self.chain.rpc.call("anvil_rollback", 1), "late-rollback")

    def settle_then_lose_the_block(self, lose_it, key):
        since = len(self.chain.transfers(from_=BUYER.address))
        executed = self.seller.executed()
        _, required, _, _ = self.gw.challenge("/report")
        signed = X.official_sign_v2(self.chain, required)
        nonce = signed["payload"]["payload"]["authorization"]["nonce"]
        paid = self.gw.pay("/report", v2=signed["value"], key=key)
        _, settle = self.assertPaidResponse(paid)
        tx_hash = settle["transaction"]
        op_id = paid.operation_id
        self.assertEqual(self.gw.operation(op_id)["settlement"], "settled")
        self.assertEqual(self.seller.executed(), executed + 1)
        block = int(self.chain.rpc.receipt(tx_hash)["blockNumber"], 16)
        self.assertEqual(self.chain.rpc.block_number(), block, "the settlement is in the latest block")

        reorganised = self.metric("reorganised")
        lose_it()
        self.assertIsNone(self.chain.rpc.receipt(tx_hash), "the receipt is still there")
        self.assertFalse(self.chain.used(BUYER.address, nonce))
        # The watch sees the block go and sends the operation back; its answer stays the one given.
        X.deadline_poll(lambda: [e for e in self.gw.trace(op_id)["events"]
                                 if e["kind"] == "settlement_reorganised"], 10, what="the reorganisation seen")
        op = self.gw.operation(op_id)
        self.assertIn(op["settlement"], ("unknown", "settled"), op)
        self.assertEqual(op["fulfillment"], "succeeded", op)
        again = self.gw.pay("/report", v2=signed["value"], key=key)
        self.assertEqual((again.status, again.body), (200, paid.body), again)

        def mined_again():
            receipt = self.chain.rpc.receipt(tx_hash)
            if receipt is None and self.chain.tx(tx_hash) is not None:
                self.chain.rpc.mine()  # back in the pool (Anvil's copy or the re-broadcast): include it
            return receipt
        receipt = X.deadline_poll(mined_again, 15, interval=0.2, what="the same transaction mined again")
        op = self.gw.wait_settlement(op_id, "settled", timeout=15)
        self.assertTrue(X.eq_addr(op["tx_hash"], tx_hash), op)
        self.assertTrue(self.chain.used(BUYER.address, nonce))
        transfers = self.chain.transfers(from_=BUYER.address)[since:]
        self.assertEqual([t["tx"] for t in transfers], [receipt["transactionHash"]],
                         "one Transfer on the chain as it is now")
        kinds = [e["kind"] for e in self.gw.trace(op_id)["events"]]
        self.assertEqual(kinds.count("settlement_reorganised"), 1, kinds)
        self.assertEqual(self.seller.executed(), executed + 1, "the upstream was called once")
        replay = self.gw.pay("/report", v2=signed["value"], key=key)
        self.assertEqual((replay.status, replay.body), (200, paid.body), replay)
        self.assertEqual(self.metric("reorganised"), reorganised + 1)

    def metric(self, event):
        for line in self.gw.admin("GET", "/metrics").body.decode().splitlines():
            if line.startswith("agentpay_x402_settlement_events_total") and 'event="%s"' % event in line:
                return int(float(line.rsplit(" ", 1)[1]))
        return 0


if __name__ == "__main__":
    X.main(sys.argv)
