#!/usr/bin/env python3
"""HTTPS end to end (issue 14, item 1 and 2): real TLS everywhere a URL is accepted, with a throwaway CA.

Real processes only: Anvil with TestUSDC behind nginx terminating TLS (an HTTPS JSON-RPC endpoint), the demo
seller behind nginx (an HTTPS upstream), and `agentpay serve` serving HTTPS itself (--tls-cert) on both its
listeners, trusting the test CA through --ca-file. The payers are `agentpay pay https://...` (--ca-file) and
the official x402 client (@x402/fetch, trusting the CA through NODE_EXTRA_CA_CERTS); `agentpay admin` talks
to the admin listener over HTTPS. Three more nginx fronts present certificates that must not verify: one
expired, one for another host name, one from a CA nobody trusts. Against each, every client stops with an
error naming the origin and the reason, and nothing is reserved, held or moved on chain.

Run:  python3 tests/integration/test_tls.py --agentpay build/agentpay
"""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tls"))

import harness  # noqa: E402
import tls_harness as T  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import BUYER, PAY_TO, PRICE  # noqa: E402

PAY_TIMEOUT_S = 90
SELLER_KEY = "tls-seller-" + "k" * 32


def agentpay(*args, timeout=PAY_TIMEOUT_S):
    p = subprocess.run([harness.binary()] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def last_json(text):
    lines = text.strip().splitlines()
    return json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None


class TlsTest(unittest.TestCase):
    """One Anvil, seller, nginx (with the good and the bad fronts) and HTTPS gateway for the class."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="agentpay-tls-")
        harness._workdirs.add(cls.workdir)
        cls.processes = []
        try:
            cls.ca = T.make_ca(cls.workdir)
            cls.context = T.client_context(cls.ca["ca.pem"])
            os.environ["NODE_EXTRA_CA_CERTS"] = cls.ca["ca.pem"]  # for the official client (node)
            cls.chain = X.Chain()
            cls.seller = harness.Seller(cls.workdir).start()
            cls.processes.append(cls.seller)
            cls.rpc_port, cls.seller_port = harness.free_port(), harness.free_port()
            cls.bad = {name: harness.free_port() for name in ("expired", "wrong-host", "other")}
            cls.buyer_key = os.path.join(cls.workdir, "buyer.key")
            harness.write_secret(cls.buyer_key, BUYER.private_key + "\n")
            cls.facilitator_port = harness.free_port()
            sellers = os.path.join(cls.workdir, "sellers")
            harness.write_secret(sellers, "shop %s %s\n" % (SELLER_KEY, PAY_TO.address))
            cls.gw = X.X402Gateway(
                cls.workdir, cls.chain, "https://localhost:%d" % cls.seller_port,
                chain_url="https://localhost:%d" % cls.rpc_port, tls=cls.context,
                extra_args=["--ca-file", cls.ca["ca.pem"], "--tls-cert", cls.ca["localhost.pem"],
                            "--tls-key", cls.ca["localhost.key"],
                            "--facilitator-listen", "127.0.0.1:%d" % cls.facilitator_port,
                            "--facilitator-sellers-file", sellers])
            fronts = [T.Front(cls.rpc_port, "localhost", cls.chain.url),
                      T.Front(cls.seller_port, "localhost", cls.seller.url)]
            # The bad fronts lead to the gateway: whoever got through them could pay.
            fronts += [T.Front(port, name, "https://127.0.0.1:%d" % cls.gw.port) for name, port in cls.bad.items()]
            cls.nginx = T.Nginx(cls.workdir, cls.ca, fronts).start()
            cls.processes.append(cls.nginx)
            cls.gw.start()
            cls.processes.append(cls.gw)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for process in reversed(getattr(cls, "processes", [])):
            process.stop()
        if getattr(cls, "chain", None):
            cls.chain.stop()
        if not os.environ.get("AGENTPAY_IT_KEEP"):
            shutil.rmtree(cls.workdir, ignore_errors=True)

    def setUp(self):
        self.transfers_before = len(self.chain.transfers(from_=BUYER.address))
        self.operations_before = len(self.gw.operations())

    def budget_db(self):
        return os.path.join(self.workdir, "budget-%s.db" % self._testMethodName)

    def pay(self, url, *extra):
        rc, out, err = agentpay("pay", url, "--budget-db", self.budget_db(), "--budget", 100 * PRICE,
                                "--max-attempts", 2, "--json", *extra)
        return rc, last_json(out), err

    def assertNothingPaid(self, budget_db=None):
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), self.transfers_before)
        self.assertEqual(len(self.gw.operations()), self.operations_before)
        if budget_db and os.path.exists(budget_db):
            rc, out, err = agentpay("pay", "budget", "--budget-db", budget_db, "--json")
            self.assertEqual(rc, 0, err)
            budget = json.loads(out)
            self.assertEqual((int(budget["committed"]), budget["reservations"]), (0, []), budget)

    # ------------------------------------------------------------------------------------------- paid

    def test_agentpay_pay_pays_x402_over_https_and_the_gateway_settles_over_https(self):
        rc, out, err = self.pay(self.gw.url("/report"), "--buyer-key-file", self.buyer_key,
                                "--ca-file", self.ca["ca.pem"],
                                "--chain-rpc", "https://localhost:%d" % self.rpc_port)
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual((out["outcome"], out["amount"]), ("paid", str(PRICE)), out)
        self.assertEqual(json.loads(out["body"]).get("ok"), True, out)  # the seller, through nginx
        new = self.chain.transfers(from_=BUYER.address)[self.transfers_before:]
        self.assertEqual(len(new), 1, new)
        self.assertEqual((X.eq_addr(new[0]["to"], PAY_TO.address), int(new[0]["value"])), (True, PRICE))
        self.assertEqual(new[0]["tx"].lower(), out["evidence"]["transaction"].lower())
        self.assertEqual(X.money_violations(self.chain, [self.gw]), [])

    def test_the_official_client_pays_over_https(self):
        for version in (2, 1):
            out = X.run_client(self.chain, version, self.gw.url("/official-%d" % version))
            self.assertEqual(out["status"], 200, out)
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), self.transfers_before + 2)
        self.assertEqual(X.money_violations(self.chain, [self.gw]), [])

    def test_a_seller_settles_through_the_facilitator_over_https(self):
        """examples/facilitator/seller.mjs with its HTTPFacilitatorClient on https://, trusting the
        test CA (NODE_EXTRA_CA_CERTS), paid by the official client; the facilitator speaks no
        plain HTTP."""
        seller = X.ExampleSeller(self.workdir, self.chain, "https://localhost:%d" % self.facilitator_port,
                                 "tls-seller", SELLER_KEY)
        try:
            out = X.run_client(self.chain, 2, seller.url + "/report")
            self.assertEqual(out["status"], 200, out)
            self.assertTrue(out["payment_response"]["success"], out)
        finally:
            seller.stop()
        self.assertEqual(len(self.chain.transfers(from_=BUYER.address)), self.transfers_before + 1)
        conn = http.client.HTTPConnection("127.0.0.1", self.facilitator_port, timeout=10)
        with self.assertRaises((OSError, http.client.HTTPException)):
            conn.request("GET", "/supported")
            conn.getresponse().read()
        conn.close()
        self.assertEqual(X.money_violations(self.chain, [self.gw]), [])

    def test_the_wallet_pays_over_https_and_admin_speaks_https(self):
        admin = ["admin", "--url", "https://localhost:%d" % self.gw.admin_port, "--token-file", self.gw.token_file,
                 "--ca-file", self.ca["ca.pem"]]
        rc, out, err = agentpay(*admin, "create-account", "tls-agent")
        self.assertEqual(rc, 0, err)
        account = json.loads(out)
        rc, out, err = agentpay(*admin, "deposit", account["account_id"], 10 * PRICE, "--reference", "tls-1")
        self.assertEqual(rc, 0, err)
        rc, out, err = self.pay(self.gw.url("/wallet"), "--api-key", account["api_key"], "--ca-file",
                                self.ca["ca.pem"])
        self.assertEqual(rc, 0, (out, err))
        self.assertEqual(out["outcome"], "paid", out)
        rc, out, err = agentpay(*admin, "account", account["account_id"])
        self.assertEqual(rc, 0, err)
        shown = json.loads(out)
        self.assertEqual((int(shown["balance"]), int(shown["held"])), (9 * PRICE, 0), shown)
        # The books audit over HTTPS, its chain check through the HTTPS RPC front (one --ca-file for both).
        rc, out, err = agentpay(*admin, "audit", "--chain-rpc", "https://localhost:%d" % self.rpc_port)
        self.assertEqual(rc, 0, (out, err))
        self.assertIn("OK: the books hold", out)
        self.assertRegex(out, r"chain_transfers +\d+ +0\n")
        # Without --ca-file the admin CLI does not trust the gateway: an error naming it, nothing done.
        rc, out, err = agentpay("admin", "--url", "https://localhost:%d" % self.gw.admin_port, "--token-file",
                                self.gw.token_file, "create-account", "never")
        self.assertEqual(rc, 1, (out, err))
        self.assertIn("https://localhost:%d" % self.gw.admin_port, err)
        self.assertIn("unable to get local issuer certificate", err)

    # ---------------------------------------------------------------------------------------- refused

    def test_certificates_that_do_not_verify_pay_nothing(self):
        cases = [(self.bad["expired"], ["--ca-file", self.ca["ca.pem"]], "certificate has expired"),
                 (self.bad["wrong-host"], ["--ca-file", self.ca["ca.pem"]], "hostname mismatch"),
                 (self.bad["other"], ["--ca-file", self.ca["ca.pem"]], "unable to get local issuer certificate"),
                 (self.gw.port, [], "unable to get local issuer certificate")]  # good, but CA not given
        for port, trust, reason in cases:
            with self.subTest(port=port, reason=reason):
                db = self.budget_db() + "-%d" % port
                rc, out, err = agentpay("pay", "https://localhost:%d/report" % port, "--budget-db", db,
                                        "--budget", 100 * PRICE, "--json", "--buyer-key-file", self.buyer_key,
                                        *trust)
                self.assertEqual(rc, 1, (out, err))
                out = last_json(out)
                self.assertEqual(out["outcome"], "error", out)
                self.assertIn("TLS handshake with https://localhost:%d failed" % port, out["message"])
                self.assertIn(reason, out["message"])
                self.assertIn("nothing was paid or reserved", out["message"])
                self.assertNothingPaid(db)
        for name in ("expired", "wrong-host", "other"):
            with self.subTest(client="official", front=name):
                p = subprocess.run(X.client_argv(self.chain, 2, "https://localhost:%d/report" % self.bad[name]),
                                   cwd=X.CHAIN_ENV, capture_output=True, text=True, timeout=90, check=False)
                out = last_json(p.stdout)
                self.assertIn("error", out or {}, (p.stdout, p.stderr))
                self.assertNothingPaid()

    def test_an_upstream_whose_certificate_fails_is_never_called_and_charges_nothing(self):
        workdir = os.path.join(self.workdir, "wallet-upstream")
        os.makedirs(workdir)
        gw = harness.Gateway(workdir, "https://localhost:%d" % self.bad["expired"],
                             extra_args=["--ca-file", self.ca["ca.pem"]])
        self.addCleanup(gw.stop)
        gw.start()
        account = gw.create_account("agent", deposit=10 * PRICE)
        r = gw.pay(account, "upstream-tls-1")
        self.assertEqual(r.status, 502, r)
        # Nothing captured. As for any upstream failure, the hold stays for a free retry with the same
        # key until its TTL (the sweeper releases it): the request was never sent, so no work was done.
        self.assertEqual(gw.account(account)["balance"], 10 * PRICE)
        self.assertEqual(gw.account(account)["held"], PRICE)
        trace = gw.trace(r.operation_id, headers={"Authorization": "Bearer " + account.api_key})
        self.assertIn("certificate has expired", json.dumps(trace), trace)
        harness.assert_invariants(self, gw)

    def test_a_chain_rpc_whose_certificate_fails_stops_the_gateway_at_start(self):
        for name, reason in (("expired", "certificate has expired"), ("wrong-host", "hostname mismatch")):
            with self.subTest(front=name):
                gw = X.X402Gateway(self.workdir, self.chain, self.seller.url, name="gw-rpc-" + name,
                                   chain_url="https://localhost:%d" % self.bad[name],
                                   extra_args=["--ca-file", self.ca["ca.pem"]])
                with self.assertRaises(harness.ProcessError) as raised:
                    gw.start()
                self.assertIn("https://localhost:%d" % self.bad[name], str(raised.exception))
                self.assertIn(reason, str(raised.exception))
                self.assertNotEqual(gw.popen.returncode, 0)

    # ---------------------------------------------------------------------------------------- reload

    def test_sighup_reloads_the_certificate_and_keeps_open_connections(self):
        workdir = os.path.join(self.workdir, "reload")
        os.makedirs(workdir)
        cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
        shutil.copy(self.ca["localhost.pem"], cert)
        shutil.copy(self.ca["localhost.key"], key)
        gw = harness.Gateway(workdir, self.seller.url, extra_args=["--tls-cert", cert, "--tls-key", key])
        self.addCleanup(gw.stop)
        gw.start()
        kept = http.client.HTTPSConnection("localhost", gw.port, timeout=10, context=self.context)
        self.addCleanup(kept.close)
        kept.request("GET", "/healthz")
        self.assertEqual(kept.getresponse().read() and 200, 200)
        shutil.copy(self.ca["other.pem"], cert)
        shutil.copy(self.ca["other.key"], key)
        gw.popen.send_signal(signal.SIGHUP)
        X.deadline_poll(lambda: "reloaded" in gw.output(), 10, what="the reload's log line")
        # The connection opened before the reload carries on.
        kept.request("GET", "/healthz")
        response = kept.getresponse()
        response.read()
        self.assertEqual(response.status, 200)
        # A new connection gets the new certificate: the old CA refuses it, the new one accepts it.
        with self.assertRaises(ssl.SSLCertVerificationError):
            harness.http_request(gw.port, "GET", "/healthz", tls=self.context)
        other = T.client_context(self.ca["other-ca.pem"])
        self.assertEqual(harness.http_request(gw.port, "GET", "/healthz", tls=other).status, 200)
        # A broken file on the next SIGHUP: the error is logged, the certificate in use stays.
        with open(cert, "w") as f:
            f.write("not a certificate\n")
        gw.popen.send_signal(signal.SIGHUP)
        X.deadline_poll(lambda: "the certificate in use stays" in gw.output(), 10, what="the failed reload")
        self.assertEqual(harness.http_request(gw.port, "GET", "/healthz", tls=other).status, 200)
        self.assertTrue(gw.alive())


if __name__ == "__main__":
    X.main(sys.argv)
