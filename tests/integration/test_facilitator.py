"""AgentPay as the x402 facilitator of a seller who runs the official middleware (issue 38).

A fresh Anvil with TestUSDC, `agentpay serve --facilitator-listen`, and the seller of
examples/facilitator/seller.mjs run as written: @x402/express with @x402/core's
HTTPFacilitatorClient pointed at AgentPay, its key from the sellers file. The buyer is the official
@x402/fetch client. After every test the harness's money check reads the chain: every settled
operation (the facilitator's included) names one mined Transfer of its amount to payTo, no
authorization is used twice, and payTo's and the buyers' balances match those Transfers to the unit.

  - a paid request through the official middleware is served, settled once by AgentPay; the same
    with x402-express 1.x (examples/facilitator/seller-v1.mjs) paid by x402-fetch;
  - the settle answer lost on the way back to the seller (a proxy that drops it) is asked again by
    the seller, and the payment still makes one Transfer;
  - one payment sent to two replicas of the seller at once: one Transfer; a replica that verifies
    after the other's settlement landed refuses it (402), so it is not served twice; four settles
    of one payment at once: one transaction, every answer the same settlement;
  - automine off: the settle answers settlement_pending with its transaction, the reconciler
    settles it once mined, and the status query (GET /settlements/{payer}/{nonce}) says so;
  - kill -9 of AgentPay between its broadcast and its answer: started again, the seller's retried
    settle returns the same transaction, and it settles once;
  - a stranger (no key, or another seller's key) can neither settle, verify nor query;
  - with batched settlement (--settle-batch-max), settles at once share one transaction and each
    is paid once.
"""

import concurrent.futures
import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import x402_harness as X
from x402_harness import BUYER, PAY_TO, PRICE, STRANGER

SELLER_KEY = "shop-" + "k" * 40
OTHER_KEY = "other-" + "o" * 40


class DroppingProxy:
    """An HTTP proxy in front of the facilitator that forwards every request and answer, except the
    answers of the first `drop` POST /settle: those are read from the facilitator (so it acted on
    them) and the seller's connection is closed without them."""

    def __init__(self, upstream, drop=1):
        self.upstream = upstream
        self.dropped = 0
        self.settles = 0
        self.drop = drop
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def relay(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization")}
                req = urllib.request.Request(proxy.upstream + self.path, data=body, headers=headers,
                                             method=method)
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, answer = resp.status, resp.read()
                except urllib.error.HTTPError as e:
                    status, answer = e.code, e.read()
                if method == "POST" and self.path == "/settle":
                    with proxy.lock:
                        proxy.settles += 1
                        lose = proxy.dropped < proxy.drop
                        if lose:
                            proxy.dropped += 1
                    if lose:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self):
                self.relay("GET")

            def do_POST(self):
                self.relay("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class FacilitatorCase(X.X402TestCase):
    """An Anvil, AgentPay with its facilitator listener, and the example seller; no tests."""

    @classmethod
    def start_gateway(cls, **kw):
        cls.facilitator_port = X.harness.free_port()
        sellers = os.path.join(cls.workdir, "sellers")
        X.harness.write_secret(sellers, "# name key payees\nshop %s %s\nother %s %s\n" % (
            SELLER_KEY, PAY_TO.address, OTHER_KEY, STRANGER.address))
        kw["extra_args"] = tuple(cls.gateway_args) + (
            "--facilitator-listen", "127.0.0.1:%d" % cls.facilitator_port,
            "--facilitator-sellers-file", sellers)
        gw = super().start_gateway(**kw)
        cls.facilitator_url = "http://127.0.0.1:%d" % cls.facilitator_port
        X.harness.wait_port(cls.facilitator_port, 30)
        return gw

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shop = cls.start_seller(cls.facilitator_url)

    @classmethod
    def start_seller(cls, facilitator_url, name="example-seller", script="seller.mjs",
                     network=X.NETWORK):
        seller = X.ExampleSeller(cls.workdir, cls.chain, facilitator_url, name, SELLER_KEY, script=script,
                               network=network)
        cls.sellers = getattr(cls, "sellers", []) + [seller]
        return seller

    @classmethod
    def tearDownClass(cls):
        for seller in getattr(cls, "sellers", []):
            seller.stop()
        super().tearDownClass()

    def post(self, path, body, key=SELLER_KEY, url=None):
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        req = urllib.request.Request((url or self.facilitator_url) + path, data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def challenge(self):
        try:
            urllib.request.urlopen(self.shop.url + "/report", timeout=30)
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 402)
            return e.headers["PAYMENT-REQUIRED"]
        raise AssertionError("the shop served /report unpaid")

    def payment_body(self):
        required = self.challenge()
        signed = X.official_sign_v2(self.chain, required)
        payload = signed["payload"]
        return {"x402Version": 2, "paymentPayload": payload, "paymentRequirements": payload["accepted"]}

    def facilitator_ops(self):
        return [op for op in self.gw.operations() if op.get("route") == "facilitator"]

    def status(self, body, key=SELLER_KEY):
        auth = body["paymentPayload"]["payload"]["authorization"]
        req = urllib.request.Request("%s/settlements/%s/%s" % (self.facilitator_url, auth["from"], auth["nonce"]),
                                     headers={"Authorization": "Bearer " + key} if key else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


class FacilitatorTest(FacilitatorCase):

    def test_supported_is_what_the_middleware_reads(self):
        with urllib.request.urlopen(self.facilitator_url + "/supported", timeout=30) as resp:
            supported = json.loads(resp.read())
        self.assertIn({"x402Version": 2, "scheme": "exact", "network": X.NETWORK}, supported["kinds"])
        self.assertIn({"x402Version": 1, "scheme": "exact", "network": X.V1_NETWORK}, supported["kinds"])
        self.assertTrue(X.eq_addr(supported["signers"]["eip155:*"][0], X.RELAYER.address))

    def test_paid_through_the_official_middleware_settles_once(self):
        before = len(self.chain.transfers_to_pay_to())
        out = X.run_client(self.chain, 2, self.shop.url + "/report")
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(json.loads(out["body"]), {"report": "paid content"})
        settled = out["payment_response"]
        self.assertTrue(settled["success"], settled)
        self.assertRegex(settled["transaction"], X.TX_HASH)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)
        nonce = out["payment_payload"]["payload"]["authorization"]["nonce"]
        ops = [op for op in self.facilitator_ops() if op["idempotency_key"] == "facilitator:" + nonce]
        self.assertEqual(len(ops), 1, self.facilitator_ops())
        self.assertEqual(ops[0]["settlement"], "settled")
        self.assertEqual(self.gw.operation(ops[0]["id"])["tx_hash"], settled["transaction"])

    def test_a_lost_settle_answer_is_asked_again_and_settles_once(self):
        proxy = DroppingProxy(self.facilitator_url, drop=1)
        try:
            seller = self.start_seller(proxy.url, name="seller-behind-a-lossy-link")
            relayer_before = self.chain.relayer_nonce()
            before = len(self.chain.transfers_to_pay_to())
            out = X.run_client(self.chain, 2, seller.url + "/report")
            self.assertEqual(out["status"], 200, out)
            self.assertTrue(out["payment_response"]["success"], out)
            self.assertEqual(proxy.dropped, 1)
            self.assertEqual(proxy.settles, 2)  # the lost one, and the seller's retry
            self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)
            self.assertEqual(self.chain.relayer_nonce(), relayer_before + 1)
        finally:
            proxy.stop()

    def test_two_seller_processes_given_one_payment_at_once_settle_it_once(self):
        """A buyer's paid request sent to two replicas of the shop at once (both run the example):
        they verify and settle the same authorization through AgentPay; one Transfer, and every
        replica that serves it names the same transaction."""
        replica = self.start_seller(self.facilitator_url, name="shop-replica")
        signed = X.official_sign_v2(self.chain, self.challenge())
        before = len(self.chain.transfers_to_pay_to())

        def buy(url):
            req = urllib.request.Request(url + "/report", headers={signed["header"]: signed["value"]})
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return resp.status, resp.headers.get("PAYMENT-RESPONSE")
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("PAYMENT-RESPONSE")

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(buy, (self.shop.url, replica.url)))
        settled = [X.unb64json(header) for status, header in answers if status == 200 and header]
        # A replica that verifies after the other one's settlement landed hears the truth (the
        # authorization is used) and refuses with 402: the same payment is not served twice for
        # one Transfer. One that verified before it settles and gets the one settlement's answer.
        self.assertGreaterEqual(len(settled), 1, answers)
        for status, header in answers:
            self.assertIn(status, (200, 402), answers)
        for answer in settled:
            self.assertTrue(answer["success"], answer)
        self.assertEqual(len({answer["transaction"] for answer in settled}), 1, settled)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)

    def test_two_sellers_settle_one_payment_at_once(self):
        body = self.payment_body()
        before = len(self.chain.transfers_to_pay_to())
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: self.post("/settle", body), range(4)))
        for status, answer in answers:
            self.assertEqual(status, 200, answer)
            self.assertTrue(answer["success"], answer)
        self.assertEqual(len({answer["transaction"] for _, answer in answers}), 1, answers)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)
        nonce = body["paymentPayload"]["payload"]["authorization"]["nonce"]
        self.assertTrue(self.chain.used(BUYER.address, nonce))

    def test_strangers_can_neither_settle_nor_verify(self):
        body = self.payment_body()
        state = self.chain.state()
        for key in (None, "x" * 40):
            for path in ("/settle", "/verify"):
                status, problem = self.post(path, body, key=key)
                self.assertEqual(status, 401, problem)
                self.assertEqual(problem["code"], "unauthorized")
        status, problem = self.post("/settle", body, key=OTHER_KEY)
        self.assertEqual(status, 403, problem)
        self.assertEqual(problem["code"], "payee_not_allowed")
        self.assertEqual(self.chain.state(), state)
        # The shop's own verify says it is valid; nothing moved.
        status, verified = self.post("/verify", body)
        self.assertEqual(status, 200, verified)
        self.assertTrue(verified["isValid"], verified)
        self.assertEqual(self.chain.state(), state)

    def test_a_v1_seller_on_x402_express_1_is_paid_by_x402_fetch(self):
        seller = self.start_seller(self.facilitator_url, name="seller-v1", script="seller-v1.mjs",
                                   network=X.V1_NETWORK)
        before = len(self.chain.transfers_to_pay_to())
        out = X.run_client(self.chain, 1, seller.url + "/report")
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(json.loads(out["body"]), {"report": "paid content"})
        self.assertTrue(out["payment_response"]["success"], out)
        self.assertEqual(out["payment_response"]["network"], X.V1_NETWORK)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)

    def test_the_status_query_answers_the_payee_only(self):
        body = self.payment_body()
        status, answer = self.status(body)
        self.assertEqual(status, 404, answer)  # nothing settled yet
        status, settled = self.post("/settle", body)
        self.assertTrue(settled["success"], settled)
        status, answer = self.status(body)
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer, settled)
        self.assertEqual(self.status(body, key=OTHER_KEY)[0], 404)
        self.assertEqual(self.status(body, key=None)[0], 401)


class FacilitatorPendingTest(FacilitatorCase):
    """Automine off: a settle outlives its receipt wait; the gateway is killed between its broadcast
    and its answer."""

    automine = False
    gateway_args = ("--receipt-timeout-ms", "1000")

    def test_pending_then_settled_and_the_status_query_says_so(self):
        body = self.payment_body()
        status, pending = self.post("/settle", body)
        self.assertEqual(status, 200, pending)
        self.assertFalse(pending["success"])
        self.assertEqual(pending["errorReason"], "settlement_pending")
        self.assertRegex(pending["transaction"], X.TX_HASH)
        self.assertEqual(self.status(body)[1]["errorReason"], "settlement_pending")
        before = len(self.chain.transfers_to_pay_to())
        self.chain.rpc.mine()
        settled = X.deadline_poll(lambda: self.status(body)[1].get("success"), 15,
                                  what="the reconciler settles it")
        self.assertTrue(settled)
        status, answer = self.post("/settle", body)
        self.assertTrue(answer["success"], answer)
        self.assertEqual(answer["transaction"], pending["transaction"])
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)

    def test_the_seller_waits_out_a_pending_settle_and_serves_once_it_settles(self):
        """The settle outlives AgentPay's receipt wait (1 s); the example seller asks the status
        query until the block comes (mined 2 s after the transaction reached the node) and serves
        the buyer, who pays once."""
        before = len(self.chain.transfers_to_pay_to())
        relayer_before = self.chain.relayer_nonce()
        done = threading.Event()

        def mine_once_sent():
            # However slow the machine, the block comes after the broadcast and after the receipt
            # wait: the settle has answered settlement_pending by then.
            while not done.is_set() and self.chain.relayer_nonce() == relayer_before:
                time.sleep(0.05)
            if not done.wait(2.0):
                self.chain.rpc.mine()
        miner = threading.Thread(target=mine_once_sent)
        miner.start()
        try:
            out = X.run_client(self.chain, 2, self.shop.url + "/report")
        finally:
            done.set()
            miner.join()
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(json.loads(out["body"]), {"report": "paid content"})
        self.assertTrue(out["payment_response"]["success"], out)
        self.assertEqual(out["attempts"], 2, out)  # the 402, then one paid request: signed once
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 1)
        self.assertEqual(self.chain.relayer_nonce(), relayer_before + 1)

    def test_killed_between_broadcast_and_answer_the_retry_returns_the_same_transaction(self):
        body = self.payment_body()
        answers = []

        def ask():
            try:
                answers.append(self.post("/settle", body))
            except (OSError, http.client.HTTPException):
                pass  # the connection went with the gateway

        asking = threading.Thread(target=ask, daemon=True)
        relayer_before = self.chain.relayer_nonce()
        asking.start()
        X.deadline_poll(lambda: self.chain.relayer_nonce() > relayer_before, 15,
                        what="the settlement in the node's pool")
        sent = self.chain.pending_relayer_txs()
        self.assertEqual(len(sent), 1, sent)
        self.gw.kill9()
        asking.join(30)
        self.assertEqual(answers, [], "the killed gateway answered")  # the connection dropped
        start_again(self.gw)
        X.harness.wait_port(self.facilitator_port, 30)
        status, retried = self.post("/settle", body)
        self.assertEqual(status, 200, retried)
        self.assertEqual(retried["transaction"], sent[0]["hash"])
        self.chain.rpc.mine()
        settled = X.deadline_poll(lambda: self.post("/settle", body)[1].get("success"), 15,
                                  what="the same settle answers settled")
        self.assertTrue(settled)
        self.assertEqual(self.post("/settle", body)[1]["transaction"], sent[0]["hash"])
        self.assertEqual(self.chain.relayer_nonce(), relayer_before + 1)


@unittest.skipUnless(os.environ.get("AGENTPAY_IT_DB") == "postgres",
                     "two gateways share a database on PostgreSQL only (AGENTPAY_IT_DB=postgres)")
class FacilitatorTwoGatewaysTest(FacilitatorCase):
    """Two gateways on one PostgreSQL database, each with its facilitator listener, one relayer."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        first_port, first_url = cls.facilitator_port, cls.facilitator_url
        try:
            cls.second = cls.start_gateway(name="gateway-2", db=(cls.gw.db_url, cls.gw.db_path))
            cls.second_url = cls.facilitator_url
        except BaseException:
            cls.tearDownClass()
            raise
        finally:
            cls.facilitator_port, cls.facilitator_url = first_port, first_url
        cls.gateways.remove(cls.second)  # the money check reads the shared books once

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "second", None):
            cls.second.stop()
        super().tearDownClass()

    def test_one_payment_settled_through_both_gateways_at_once_settles_once(self):
        before = len(self.chain.transfers_to_pay_to())
        bodies = [self.payment_body() for _ in range(8)]
        jobs = [(body, url) for body in bodies for url in (self.facilitator_url, self.second_url)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda job: self.post("/settle", job[0], url=job[1]), jobs))
        for status, answer in answers:
            self.assertEqual(status, 200, answer)
            self.assertTrue(answer["success"], answer)
        for i in range(len(bodies)):
            pair = {answers[2 * i][1]["transaction"], answers[2 * i + 1][1]["transaction"]}
            self.assertEqual(len(pair), 1, pair)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + len(bodies))


class FacilitatorBatchedTest(FacilitatorCase):
    """Batched settlement (--settle-batch-max 8): the settles that arrive within the window share
    one relayer transaction (Multicall3 aggregate3), and each is still its own settlement."""
    gateway_args = ("--settle-batch-max", "8", "--settle-batch-window-ms", "300")

    def test_settles_at_once_share_a_transaction_and_each_pays_once(self):
        before = len(self.chain.transfers_to_pay_to())
        relayer_before = self.chain.relayer_nonce()
        bodies = [self.payment_body() for _ in range(8)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda body: self.post("/settle", body), bodies))
        for status, answer in answers:
            self.assertEqual(status, 200, answer)
            self.assertTrue(answer["success"], answer)
        transactions = {answer["transaction"] for _, answer in answers}
        self.assertLess(len(transactions), len(bodies), answers)
        self.assertEqual(self.chain.relayer_nonce(), relayer_before + len(transactions))
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + len(bodies))
        for body in bodies:
            auth = body["paymentPayload"]["payload"]["authorization"]
            self.assertTrue(self.chain.used(BUYER.address, auth["nonce"]))
        # Asked again, each answers its own settlement, nothing sent.
        again = [self.post("/settle", body)[1]["transaction"] for body in bodies]
        self.assertEqual(again, [answer["transaction"] for _, answer in answers])
        self.assertEqual(self.chain.relayer_nonce(), relayer_before + len(transactions))

    def test_a_node_without_multicall3_is_refused_at_start(self):
        code = self.chain.rpc.call("eth_getCode", X.A.MULTICALL3_ADDRESS, "latest")
        self.chain.rpc.call("anvil_setCode", X.A.MULTICALL3_ADDRESS, "0x")
        try:
            with self.assertRaises(X.harness.ProcessError) as refused:
                X.X402Gateway(self.workdir, self.chain, self.seller.url, name="no-multicall3",
                              extra_args=("--settle-batch-max", "4")).start()
            self.assertIn("needs Multicall3 at 0xcA11bde05977b3631167028862bE2a173976CA11", str(refused.exception))
        finally:
            self.chain.rpc.call("anvil_setCode", X.A.MULTICALL3_ADDRESS, code)

    def test_the_official_middleware_is_paid_through_a_batch(self):
        before = len(self.chain.transfers_to_pay_to())
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda _: X.run_client(self.chain, 2, self.shop.url + "/report"), range(4)))
        for out in outs:
            self.assertEqual(out["status"], 200, out)
            self.assertTrue(out["payment_response"]["success"], out)
        self.assertEqual(len(self.chain.transfers_to_pay_to()), before + 4)


def start_again(gw):
    """The gateway, killed, started again on the same database and ports."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return gw.start()
        except X.harness.ProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    X.main(sys.argv)
