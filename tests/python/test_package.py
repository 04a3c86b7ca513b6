"""The agentpay Python package on a real Anvil (issue 39): it pays AgentPay's gateway (x402 and
wallet) and the official @x402/express server; Python and CLI processes share one budget file;
a lost answer is retried with the same signature (one Transfer); each CLI exit code is an
exception. After every test the harness's money check reads the chain."""

import json
import os
import subprocess
import sys
import textwrap

import httpx
import requests

import agentpay
import harness
import x402_harness as X
from fault_proxy import FaultProxy
from x402_harness import BUYER, BUYER2, PRICE, STRANGER, eq_addr

PY = sys.executable


def write_key(workdir, name, account):
    path = os.path.join(workdir, name)
    harness.write_secret(path, account.private_key + "\n")
    return path


def transfers(chain, buyer, to=X.PAY_TO):
    return {t["tx"].lower() for t in chain.transfers(from_=buyer.address) if eq_addr(t["to"], to.address)}


class PackageCase(X.X402TestCase):
    gateway_args = ("--sweep-interval-ms", "200")

    def setUp(self):
        super().setUp()
        n = getattr(type(self), "_n", 0) + 1
        type(self)._n = n
        self.db = os.path.join(self.workdir, "budget-%d.db" % n)
        self.buyer_key = write_key(self.workdir, "buyer.key", BUYER)
        self.buyer2_key = write_key(self.workdir, "buyer2.key", BUYER2)

    def proxy(self, port, mode, count):
        proxy = FaultProxy(("127.0.0.1", port)).start()
        self.addCleanup(proxy.stop)
        proxy.set_mode(mode, count=count, paid_only=True)
        return proxy


class PackageTest(PackageCase):

    def test_an_httpx_client_pays_the_x402_gateway_once_per_step(self):
        before = transfers(self.chain, BUYER)
        transport = agentpay.Transport(budget_db=self.db, budget=10 * PRICE, task="httpx-report",
                                       buyer_key_file=self.buyer_key)
        with httpx.Client(transport=transport) as client:
            first = client.get(self.gw.url("/report"))
            self.assertEqual(first.status_code, 200, first.text)
            self.assertEqual(first.json().get("ok"), True)
            result = first.extensions["agentpay"]
            self.assertEqual((result.outcome, result.amount, result.attempts),
                             (agentpay.Outcome.PAID, PRICE, 1))
            self.assertEqual(result.key, agentpay.derive_key(BUYER.private_key, "httpx-report", 0))
        # The same task and step from another transport (a restarted agent): the stored answer, not
        # a second payment.
        again = agentpay.Transport(budget_db=self.db, task="httpx-report", buyer_key_file=self.buyer_key)
        with httpx.Client(transport=again) as client:
            replay = client.get(self.gw.url("/report"))
        self.assertEqual(replay.status_code, 200, replay.text)
        self.assertEqual(len(transfers(self.chain, BUYER) - before), 1)
        report = agentpay.budget(self.db)
        self.assertEqual((report.total, report.spent, report.committed), (10 * PRICE, PRICE, PRICE))
        self.assertEqual([r.state for r in report.reservations], ["spent"])
        cli = json.loads(subprocess.run([harness.binary(), "pay", "budget", "--budget-db", self.db, "--json"],
                                        capture_output=True, text=True, check=True).stdout)
        self.assertEqual(int(cli["spent"]), report.spent)

    def test_a_requests_session_pays_a_wallet_gateway(self):
        workdir = os.path.join(self.workdir, "wallet")
        os.makedirs(workdir, exist_ok=True)
        gw = harness.Gateway(workdir, self.seller.url, price=PRICE)
        self.addCleanup(gw.stop)
        gw.start()
        account = gw.create_account("agent", deposit=10 * PRICE)
        session = requests.Session()
        session.mount("http://", agentpay.RequestsAdapter(budget_db=self.db, budget=3 * PRICE, task="wallet",
                                                          api_key=account.api_key))
        url = "http://127.0.0.1:%d/wallet-work" % gw.port
        for i in range(2):
            r = session.post(url, json={"n": i})
            self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(gw.account(account)["captured"], 2 * PRICE)
        with self.assertRaises(agentpay.BudgetExceeded) as refused:
            session.post(url, json={"n": 2})
            session.post(url, json={"n": 3})
        self.assertEqual(refused.exception.result.attempts, 0)
        self.assertEqual(gw.account(account)["captured"], 3 * PRICE)

    def test_eight_python_and_eight_cli_processes_share_a_budget_of_five(self):
        before = transfers(self.chain, BUYER)
        url = self.gw.url("/report")
        script = textwrap.dedent("""
            import json, sys, agentpay
            r = agentpay.pay(sys.argv[1], budget_db=sys.argv[2], budget=int(sys.argv[3]),
                             buyer_key_file=sys.argv[4], task="shared", step=int(sys.argv[5]), check=False)
            print(json.dumps({"exit_code": int(r.exit_code), "outcome": r.outcome.value,
                              "attempts": r.attempts}))
        """)
        procs = []
        for i in range(8):
            procs.append(subprocess.Popen([PY, "-c", script, url, self.db, str(5 * PRICE), self.buyer_key, str(i)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            procs.append(subprocess.Popen([harness.binary(), "pay", url, "--budget-db", self.db, "--budget",
                                           str(5 * PRICE), "--buyer-key-file", self.buyer_key, "--task", "shared",
                                           "--step", str(100 + i), "--json"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        codes = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            codes.append(p.returncode if p.args[0] != PY else json.loads(out.strip().splitlines()[-1])["exit_code"])
            self.assertIn(codes[-1], (0, 4), (p.args, out, err))
        self.assertEqual(sorted(codes), [0] * 5 + [4] * 11)
        self.assertEqual(len(transfers(self.chain, BUYER) - before), 5, "exactly five payments on chain")
        report = agentpay.budget(self.db)
        self.assertEqual((report.committed, report.spent), (5 * PRICE, 5 * PRICE))
        self.assertEqual(len(report.reservations), 5, "the refused ones reserved nothing")

    def test_a_lost_answer_is_retried_with_the_same_signature_and_pays_once(self):
        proxy = self.proxy(self.gw.port, "drop_response", 1)
        before = transfers(self.chain, BUYER)
        result = agentpay.pay("http://127.0.0.1:%d/lost" % proxy.port, budget_db=self.db, budget=5 * PRICE,
                              buyer_key_file=self.buyer_key, task="lost", step=1, max_attempts=4)
        self.assertEqual((result.outcome, result.attempts, result.replayed), (agentpay.Outcome.PAID, 2, True))
        paid = [e for e in proxy.log() if e["paid"]]
        self.assertEqual([e["mode"] for e in paid], ["drop_response", "pass"])
        self.assertEqual(paid[0]["payment_sha256"], paid[1]["payment_sha256"], "the same signed payment")
        new = transfers(self.chain, BUYER) - before
        self.assertEqual(len(new), 1, "one Transfer")
        self.assertEqual({result.evidence.transaction.lower()}, new)

    def test_each_exit_code_is_an_exception(self):
        url = self.gw.url("/report")
        # 1: could not run (nothing listens there): nothing reserved.
        with self.assertRaises(agentpay.ClientError) as error:
            agentpay.pay("http://127.0.0.1:9/none", budget_db=self.db, budget=5 * PRICE,
                         buyer_key_file=self.buyer_key, timeout_ms=3000)
        self.assertEqual(error.exception.result.exit_code, agentpay.ExitCode.ERROR)
        # 2: the offer is above the spend control: refused before anything is signed.
        with self.assertRaises(agentpay.PaymentRejected) as rejected:
            agentpay.pay(url, budget_db=self.db, budget=5 * PRICE, buyer_key_file=self.buyer_key,
                         max_amount=PRICE - 1)
        self.assertEqual((rejected.exception.result.outcome, rejected.exception.result.reason),
                         (agentpay.Outcome.REFUSED, "amount_above_max"))
        # 4: the budget cannot cover the price.
        with self.assertRaises(agentpay.BudgetExceeded):
            agentpay.pay(url, budget_db=self.db + ".small", budget=PRICE - 1, buyer_key_file=self.buyer_key)
        # 3: every answer lost: whether it was paid is not known; the evidence to reconcile it.
        proxy = self.proxy(self.gw.port, "drop_response", 10)
        with self.assertRaises(agentpay.ResultUnknown) as unknown:
            agentpay.pay("http://127.0.0.1:%d/unknown" % proxy.port, budget_db=self.db, budget=5 * PRICE,
                         buyer_key_file=self.buyer_key, task="unknown", step=1, max_attempts=2,
                         chain_rpc=self.chain.url)
        result = unknown.exception.result
        self.assertEqual(result.exit_code, agentpay.ExitCode.UNKNOWN)
        self.assertTrue(eq_addr(result.evidence.payer, BUYER.address), result.evidence)
        self.assertTrue(result.evidence.nonce)
        # Its reservation is kept (spent once the chain shows it: reconcile settles it).
        reconciled = agentpay.reconcile(self.db, chain_rpc=self.chain.url)
        states = {r.key: r.state for r in agentpay.budget(self.db).reservations}
        self.assertIn(states[result.key], ("spent", "unknown"), (states, reconciled))
        # Every kind answered with the exit code's exception carries it, and they share a base.
        for kind in (agentpay.ClientError, agentpay.PaymentRejected, agentpay.ResultUnknown,
                     agentpay.BudgetExceeded):
            self.assertTrue(issubclass(kind, agentpay.AgentPayError))

    def test_the_official_x402_express_server_is_paid(self):
        port = X.start_reference_server(self, STRANGER.address)
        before = transfers(self.chain, BUYER2, to=STRANGER)
        with httpx.Client(transport=agentpay.Transport(budget_db=self.db, budget=3 * PRICE, task="express",
                                                       buyer_key_file=self.buyer2_key)) as client:
            r = client.get("http://127.0.0.1:%d/paid" % port)
        new = transfers(self.chain, BUYER2, to=STRANGER) - before
        for _ in new:  # the reference server settled it: accounted for in the money check
            self.chain.direct.append((BUYER2.address.lower(), STRANGER.address.lower(), PRICE))
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(len(new), 1)
        self.assertEqual(r.extensions["agentpay"].outcome, agentpay.Outcome.PAID)
