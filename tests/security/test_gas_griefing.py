#!/usr/bin/env python3
"""Gas griefing by a payer funded for one price (issue 13 item 4), on a real Anvil.

The attack of issue 13: a payer holding one price sends 20 concurrent authorizations with distinct
nonces. Before the fix the relayer broadcast up to 16 of them (15 reverted, gas paid by the relayer)
and left 15 operations `unknown` forever, because a validBefore of 2^48 was accepted.

  - far-future validBefore: all 20 refused (402 invalid_exact_evm_payload_authorization_valid_before),
    nothing broadcast, nothing stored;
  - in window: the payer's balance is reserved before anything is broadcast, so exactly one is paid and
    the other 19 get 402 invalid_exact_evm_insufficient_balance; one relayer transaction, successful;
    and after validBefore + the expiry buffer no operation is left submitted/unknown;
  - a settlement that reverts anyway (the payer moves its money away while our transaction waits in the
    pool): decided `void` by the reconciler once validBefore + the buffer passed, not `unknown` forever,
    and the payer's reservation is released with it;
  - the per-payer cap on payments in flight: 429 limit_exceeded + Retry-After past it, nothing sent.

Signed with viem (tests/chain_env/sign_auth.mjs), the gateway `agentpay serve` on Anvil through the
x402_harness. Run:  python3 tests/security/test_gas_griefing.py --agentpay build/agentpay
"""

import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import A, BUYER, PRICE, X402TestCase, auth_message, b64json, deadline_poll, v2_payload  # noqa: E402

ONE_PRICE = A.ACCOUNTS[8]   # funded for exactly one price
SECOND = A.ACCOUNTS[9]      # funded for one price, moves it away mid-settlement
ATTEMPTS = 20
MAX_TIMEOUT_S = 25          # --max-timeout-seconds: validBefore = now + 25 (signing 20 under load takes seconds)
BUFFER_S = 2                # --expiry-buffer-seconds
VALID_BEFORE_CODE = "invalid_exact_evm_payload_authorization_valid_before"
BALANCE_CODE = "invalid_exact_evm_insufficient_balance"


def fund(chain, account, amount):
    A.mint(chain.rpc, chain.token, account.address, amount)
    chain.minted[account.address.lower()] = chain.minted.get(account.address.lower(), 0) + amount


def concurrently(fns, timeout=120):
    """Runs every fn at once (a barrier), returns their results (or exceptions) in order."""
    results = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def run(i):
        try:
            barrier.wait(timeout=30)
            results[i] = fns[i]()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return results


def relayer_receipts(chain):
    """Every transaction the relayer sent that is mined, with its receipt status."""
    out = []
    for n in range(chain.rpc.block_number() + 1):
        for tx in chain.rpc.call("eth_getBlockByNumber", hex(n), True)["transactions"]:
            if X.eq_addr(tx["from"], X.RELAYER.address):
                out.append((tx["hash"], int(chain.rpc.receipt(tx["hash"])["status"], 16)))
    return out


class GasGriefingTest(X402TestCase):
    gateway_args = ("--max-timeout-seconds", str(MAX_TIMEOUT_S), "--expiry-buffer-seconds", str(BUFFER_S),
                    "--sweep-interval-ms", "200", "--receipt-timeout-ms", "3000")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        fund(cls.chain, ONE_PRICE, PRICE)

    def challenge(self):
        _, _, pr, _ = self.gw.challenge("/jobs")
        self.assertEqual(pr["accepts"][0]["maxTimeoutSeconds"], MAX_TIMEOUT_S)
        return pr["accepts"][0], pr.get("resource")

    def burst(self, valid_before, tag):
        accepted, resource = self.challenge()
        signed = self.chain.sign([{"key": ONE_PRICE,
                                   "message": auth_message(self.chain, valid_before=valid_before)}
                                  for _ in range(ATTEMPTS)])
        self.assertEqual(len({s["message"]["nonce"] for s in signed}), ATTEMPTS)
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        results = concurrently([
            (lambda i=i: self.gw.pay("/jobs", v2=headers[i], key="%s-%d" % (tag, i), timeout=60))
            for i in range(ATTEMPTS)])
        errors = [r for r in results if not isinstance(r, harness.Response)]
        self.assertEqual(errors, [], "transport errors")
        return signed, results

    def test_a_far_future_valid_before_is_refused_and_nothing_is_broadcast(self):
        chain, gw = self.chain, self.gw
        before = chain.state()
        ops_before = len(gw.operations())
        signed, results = self.burst(2 ** 48, "far")
        for r in results:
            self.assertProblem(r, 402, VALID_BEFORE_CODE)
            self.assertIsNotNone(r.header("PAYMENT-REQUIRED"), r)
        # Also just past the cap (maxTimeoutSeconds + the 30 s skew allowance + a margin of 10 s).
        # Signing runs node, which a busy machine can hold up for seconds, each of them eaten from
        # the margin: signed again until at least 5 s of it are left when the request goes out.
        accepted, resource = self.challenge()
        for _ in range(5):
            signed_at = chain.now()
            late = chain.sign([{"key": ONE_PRICE, "message": auth_message(
                chain, valid_before=signed_at + MAX_TIMEOUT_S + 30 + 10)}])[0]
            if chain.now() - signed_at <= 5:
                break
        else:
            self.fail("signing took more than 5 s five times in a row")
        self.assertProblem(gw.pay("/jobs", v2=v2_payload(accepted, late, resource), key="late"), 402,
                           VALID_BEFORE_CODE)
        self.assertEqual(chain.state(), before, "a refused payment changed the chain")
        self.assertEqual(chain.pending_relayer_txs(), [])
        self.assertEqual(len(gw.operations()), ops_before, "a refused payment was stored")
        for s in signed[:3]:
            self.assertFalse(chain.used(ONE_PRICE.address, s["message"]["nonce"]))

    def test_b_c_in_window_one_broadcast_no_revert_nothing_left_unresolved(self):
        chain, gw = self.chain, self.gw
        nonce_before = chain.relayer_nonce()
        pay_to_before = chain.balance(X.PAY_TO.address)
        valid_before = chain.now() + MAX_TIMEOUT_S
        signed, results = self.burst(valid_before, "window")
        summary = sorted((r.status, (r.json() or {}).get("code") if r.status != 200 else "paid") for r in results)
        paid = [r for r in results if r.status == 200]
        self.assertEqual(len(paid), 1, summary)
        self.assertPaidResponse(paid[0], payer=ONE_PRICE)
        for r in results:
            if r.status != 200:
                self.assertProblem(r, 402, BALANCE_CODE)
        # Exactly one relayer transaction, and it moved the money.
        self.assertEqual(chain.relayer_nonce() - nonce_before, 1, summary)
        self.assertEqual(chain.relayer_nonce("latest"), chain.relayer_nonce())
        self.assertEqual([status for _, status in relayer_receipts(chain)].count(0), 0,
                         "a relayer transaction reverted")
        self.assertEqual(chain.balance(ONE_PRICE.address), 0)
        self.assertEqual(chain.balance(X.PAY_TO.address) - pay_to_before, PRICE)
        # (c) After validBefore + the buffer nothing of this payer is left submitted or unknown.
        while chain.now() < valid_before + BUFFER_S + 1:
            time.sleep(0.2)
        self.assertEqual(gw.in_flight(), [])
        unused = [s for s in signed if not chain.used(ONE_PRICE.address, s["message"]["nonce"])]
        self.assertEqual(len(unused), ATTEMPTS - 1)


class RevertedSettlementTest(X402TestCase):
    """The payer empties its account while our transaction waits in the pool: it reverts. The
    reconciler decides it void once validBefore + the buffer passed, and the reservation goes."""

    gateway_args = ("--max-timeout-seconds", str(MAX_TIMEOUT_S), "--expiry-buffer-seconds", str(BUFFER_S),
                    "--sweep-interval-ms", "200", "--receipt-timeout-ms", "1000")

    def tearDown(self):
        # The money check of X402TestCase counts every reverted relayer transaction as a violation; this
        # test makes one on purpose (and checks it below), so only the liveness part is kept here.
        self.chain.rpc.set_automine(True)

    def test_reverted_settlement_is_void_after_valid_before_plus_buffer(self):
        chain, gw = self.chain, self.gw
        fund(chain, SECOND, PRICE)
        _, _, pr, _ = gw.challenge("/jobs")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        valid_before = chain.now() + MAX_TIMEOUT_S
        signed = chain.sign([{"key": SECOND, "message": auth_message(chain, valid_before=valid_before)}])[0]
        chain.rpc.set_automine(False)
        answer = {}
        t = threading.Thread(target=lambda: answer.setdefault(
            "r", gw.pay("/jobs", v2=v2_payload(accepted, signed, resource), key="revert-1", timeout=60)))
        t.start()
        ours = deadline_poll(lambda: chain.pending_relayer_txs(), 20, what="our transaction in the pool")[0]
        # The payer moves its price away, paying a much higher tip so it is mined first.
        moved = chain.rpc.call("eth_sendTransaction", {
            "from": SECOND.address, "to": chain.token,
            "data": A.calldata("transfer(address,uint256)", X.DEPLOYER.address, PRICE),
            "maxPriorityFeePerGas": hex(50 * 10 ** 9), "maxFeePerGas": hex(100 * 10 ** 9)})
        chain.direct.append((SECOND.address.lower(), X.DEPLOYER.address.lower(), PRICE))
        chain.rpc.mine()
        self.assertEqual(int(chain.rpc.receipt(moved)["status"], 16), 1)
        receipt = chain.rpc.receipt(ours["hash"])
        self.assertIsNotNone(receipt)
        self.assertEqual(int(receipt["status"], 16), 0, "our transaction should have reverted")
        t.join(timeout=60)
        r = answer.get("r")
        self.assertIsInstance(r, harness.Response)
        self.assertEqual(r.status, 202, r)  # mined without paying us: unknown, never 402
        op_id = r.operation_id
        self.assertIn(op_id, [op["id"] for op in gw.operations("unknown")])
        # A live chain makes blocks (their time is what "expired" is judged by): one per 200 ms here.
        chain.rpc.set_automine(True)
        deadline = valid_before + BUFFER_S + 8

        def voided():
            chain.rpc.mine()
            return op_id in [op["id"] for op in gw.operations("void")]
        deadline_poll(voided, max(1, deadline - time.time()), interval=0.2,
                      what="the reverted settlement decided void by validBefore + buffer + 8 s")
        self.assertGreaterEqual(chain.now(), valid_before + BUFFER_S)
        self.assertEqual(gw.in_flight(), [])
        self.assertFalse(chain.used(SECOND.address, signed["message"]["nonce"]))
        # The reservation went with it: funded again, the payer pays at once.
        fund(chain, SECOND, PRICE)
        again = chain.sign([{"key": SECOND,
                             "message": auth_message(chain, valid_before=chain.now() + MAX_TIMEOUT_S)}])[0]
        self.assertPaidResponse(gw.pay("/jobs", v2=v2_payload(accepted, again, resource), key="revert-2"),
                                payer=SECOND)


class InFlightCapTest(X402TestCase):
    """--max-in-flight-per-payer 3: a well-funded payer's fourth concurrent payment is 429."""

    automine = False
    gateway_args = ("--max-in-flight-per-payer", "3", "--receipt-timeout-ms", "60000")

    def test_payer_in_flight_cap_is_429_with_retry_after(self):
        chain, gw = self.chain, self.gw
        _, _, pr, _ = gw.challenge("/jobs")
        accepted, resource = pr["accepts"][0], pr.get("resource")
        signed = chain.sign([{"key": BUYER, "message": auth_message(chain)} for _ in range(10)])
        headers = [b64json(v2_payload(accepted, s, resource)) for s in signed]
        results = [None] * 10
        threads = []
        for i in range(10):
            th = threading.Thread(target=lambda i=i: results.__setitem__(
                i, gw.pay("/jobs", v2=headers[i], key="cap-%d" % i, timeout=90)), daemon=True)
            th.start()
            threads.append(th)
        # Three broadcast and waiting for a block; the other seven answered 429 meanwhile.
        deadline_poll(lambda: sum(1 for r in results if r is not None) >= 7, 30, what="7 answers")
        time.sleep(0.5)
        self.assertEqual(len(chain.pending_relayer_txs()), 3)
        refused = [r for r in results if r is not None]
        self.assertEqual(len(refused), 7)
        for r in refused:
            self.assertProblem(r, 429, "limit_exceeded")
            self.assertTrue(r.header("Retry-After"), r)
        chain.rpc.mine()
        for th in threads:
            th.join(timeout=60)
        self.assertEqual(sorted(r.status for r in results), [200] * 3 + [429] * 7)
        # Nothing of the refused ones was used; retried now, one of them is paid.
        i = next(i for i, r in enumerate(results) if r.status == 429)
        self.assertFalse(chain.used(BUYER.address, signed[i]["message"]["nonce"]))
        chain.rpc.set_automine(True)
        self.assertPaidResponse(gw.pay("/jobs", v2=headers[i], key="cap-%d" % i))


if __name__ == "__main__":
    X.main(sys.argv)
