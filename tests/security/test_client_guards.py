#!/usr/bin/env python3
"""Issue 13, item 8: the agent client refuses a challenge outside its allowed networks, assets, payees
and maximum amount, and a budget file counts in one asset.

Real processes only: a fresh Anvil with TestUSDC (tests/chain_env), the demo seller, `agentpay serve`
on that chain (x402_harness.X402Gateway): an honest gateway (payTo = the seller's address, TestUSDC, a
cheap route and a dear one), a rogue one that names another payee, and one that asks for another token.
A second gateway on the built-in devnet (chain 1337) serves a wallet route and the devnet's JSON-RPC,
i.e. a `--chain-rpc` of another chain. `agentpay pay` runs as a separate process each time.

Every refusal must come before anything is reserved, signed or sent: exit 2, outcome "refused", the
client's reason code, one line naming what was offered and what is allowed; no paid request reached
the gateway (its operations unchanged), nothing moved on chain (x402_harness Chain.state, and the
money check after every test), and the budget file is byte for byte what it was. Each refused step
then pays once the controls allow it, so a guard that refused everything would fail too.

Run:  python3 tests/security/test_client_guards.py --agentpay build/agentpay [unittest args]
Needs tests/chain_env installed (bash tests/chain_env/install.sh). AGENTPAY_IT_KEEP=1 keeps temp dirs.
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_harness import BUYER, PAY_TO, PRICE, STRANGER, X402TestCase  # noqa: E402

PAY_TIMEOUT_S = 90
DEAR_PRICE = 2_000_000       # above the client's default --max-amount (1000000)
DEFAULT_MAX_AMOUNT = 1_000_000
OTHER_TOKEN = "0x000000000000000000000000000000000000dEaD"  # no such token: never reached
ROUTES = ({"prefix": "/", "price": PRICE, "settle": "before"},
          {"prefix": "/dear", "price": DEAR_PRICE, "settle": "before"})


class PayRun:
    def __init__(self, argv, rc, stdout, stderr):
        self.argv, self.rc, self.stderr = argv, rc, stderr
        lines = stdout.strip().splitlines()
        self.out = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None

    def __repr__(self):
        return "<agentpay pay rc=%s out=%s stderr=%s>" % (self.rc, json.dumps(self.out)[:1500],
                                                          self.stderr[-2000:])


def run_pay(url, budget_db, *extra):
    argv = [harness.binary(), "pay", url, "--budget-db", budget_db, "--json"] + [str(a) for a in extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=PAY_TIMEOUT_S, check=False)
    return PayRun(argv, p.returncode, p.stdout, p.stderr)


def budget_json(budget_db):
    p = subprocess.run([harness.binary(), "pay", "budget", "--budget-db", budget_db, "--json"],
                       capture_output=True, text=True, timeout=60, check=False)
    if p.returncode != 0:
        raise AssertionError("agentpay pay budget failed (%d): %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout)


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def replace_flag(argv, flag, value):
    i = argv.index(flag)
    argv[i + 1] = value


class ClientGuardsTest(X402TestCase):
    routes = ROUTES

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            cls.rogue_payee = cls.variant("rogue-payee", "--pay-to", STRANGER.address)
            cls.other_asset = cls.variant("other-asset", "--asset", OTHER_TOKEN)
            devnet_dir = os.path.join(cls.workdir, "devnet")
            os.makedirs(devnet_dir)
            cls.devnet = harness.Gateway(devnet_dir, cls.seller.url, price=DEAR_PRICE)
            cls.devnet.start()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.key_file = os.path.join(cls.workdir, "buyer.key")
        with open(cls.key_file, "w") as f:
            f.write(BUYER.private_key + "\n")
        os.chmod(cls.key_file, 0o600)

    @classmethod
    def variant(cls, name, flag, value):
        """A gateway like the honest one on the same chain and seller, but for `flag value`."""
        gw = X.X402Gateway(cls.workdir, cls.chain, cls.seller.url, routes=ROUTES, name=name)
        replace_flag(gw.argv, flag, value)
        gw.start()
        cls.gateways.append(gw)
        return gw

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "devnet", None):
            cls.devnet.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.db = os.path.join(self.workdir, "budget-%s.db" % self._testMethodName)

    def x402(self, url, step, *extra):
        return run_pay(url, self.db, "--buyer-key-file", self.key_file, "--budget", 10 * DEAR_PRICE,
                       "--task", self._testMethodName, "--step", step, *extra)

    # -- the refusal and what it must leave alone

    def snapshot(self, gateway):
        return {"chain": self.chain.state(), "operations": len(gateway.operations()),
                "budget": file_bytes(self.db) if os.path.exists(self.db) else None}

    def assertRefused(self, run, reason, before, gateway, *in_message):
        self.assertEqual(run.rc, 2, run)
        self.assertIsNotNone(run.out, run)
        self.assertEqual((run.out["outcome"], run.out["reason"]), ("refused", reason), run)
        self.assertEqual((run.out["attempts"], run.out["reservation_state"], run.out["amount"]),
                         (0, "", "0"), run)
        self.assertEqual(run.out["evidence"]["nonce"], "", "nothing was signed: %r" % run)
        message = run.out["message"]
        self.assertNotIn("\n", message)
        self.assertIn("nothing was reserved, signed or sent", message)
        self.assertIn(message, run.stderr, "the same line on stderr")
        for text in in_message:
            self.assertIn(text.lower(), message.lower(), run)
        after = self.snapshot(gateway)
        self.assertEqual(after["chain"], before["chain"], "nothing moved on chain")
        self.assertEqual(after["operations"], before["operations"], "no paid request reached it")
        if before["budget"] is None:
            self.assertEqual(budget_json(self.db)["reservations"], [])
        else:
            self.assertEqual(after["budget"], before["budget"], "the budget file is unchanged")

    def assertPaid(self, run, amount):
        self.assertEqual(run.rc, 0, run)
        self.assertEqual((run.out["outcome"], run.out["amount"]), ("paid", str(amount)), run)

    # -- the tests

    def test_a_payee_other_than_the_allowed_one_is_refused(self):
        """A seller (or anyone rewriting its plain-HTTP 402) naming another payTo gets nothing."""
        url = self.rogue_payee.url("/")
        before = self.snapshot(self.rogue_payee)
        run = self.x402(url, 1, "--payee", PAY_TO.address)
        self.assertRefused(run, "payee_not_allowed", before, self.rogue_payee,
                           "to " + STRANGER.address, "payee %s (--payee)" % PAY_TO.address)
        self.assertEqual([t for t in self.chain.transfers(from_=BUYER.address)
                          if X.eq_addr(t["to"], STRANGER.address)], [])
        # The same step pays the allowed payee at the honest gateway: the refusal left nothing behind.
        paid = self.x402(self.gw.url("/"), 1, "--payee", PAY_TO.address.lower())
        self.assertPaid(paid, PRICE)

    def test_a_price_above_the_maximum_is_refused(self):
        """The route asks 2.00 USDC: above the default cap of 1000000 atomic units, and above an
        explicit --max-amount; the budget (20.00) alone would have let it through."""
        url = self.gw.url("/dear")
        before = self.snapshot(self.gw)
        run = self.x402(url, 1)
        self.assertRefused(run, "amount_above_max", before, self.gw, "for %d" % DEAR_PRICE,
                           "at most %d (--max-amount)" % DEFAULT_MAX_AMOUNT)
        run = self.x402(url, 1, "--max-amount", DEAR_PRICE - 1)
        self.assertRefused(run, "amount_above_max", before, self.gw,
                           "at most %d (--max-amount)" % (DEAR_PRICE - 1))
        paid = self.x402(url, 1, "--max-amount", DEAR_PRICE)
        self.assertPaid(paid, DEAR_PRICE)

    def test_a_network_outside_the_allowance_or_the_chain_rpc_is_refused(self):
        url = self.gw.url("/")
        before = self.snapshot(self.gw)
        run = self.x402(url, 1, "--network", "eip155:8453")
        self.assertRefused(run, "network_not_allowed", before, self.gw, "network eip155:8453 (--network)")
        # --chain-rpc names the chain the client reads evidence from: the devnet (1337), not Anvil.
        run = self.x402(url, 1, "--chain-rpc", self.devnet_rpc())
        self.assertRefused(run, "chain_rpc_mismatch", before, self.gw,
                           "the chain of --chain-rpc (eip155:1337)")
        paid = self.x402(url, 1, "--network", X.NETWORK, "--chain-rpc", self.chain.url)
        self.assertPaid(paid, PRICE)
        asset = budget_json(self.db)["asset"]
        self.assertEqual(asset, {"state": "bound", "network": X.NETWORK, "address": self.chain.token.lower(),
                                 "name": X.TOKEN_NAME, "decimals": 6},
                         "bound by the first payment; decimals asked of --chain-rpc")

    def test_an_asset_outside_the_allowance_is_refused(self):
        url = self.other_asset.url("/")
        before = self.snapshot(self.other_asset)
        run = self.x402(url, 1, "--asset", self.chain.token)
        self.assertRefused(run, "asset_not_allowed", before, self.other_asset,
                           "in " + OTHER_TOKEN, "asset %s (--asset)" % self.chain.token)

    def test_a_budget_counts_in_the_asset_of_its_first_payment(self):
        paid = self.x402(self.gw.url("/"), 1)
        self.assertPaid(paid, PRICE)
        b = budget_json(self.db)
        self.assertEqual((b["asset"]["state"], b["asset"]["address"], b["asset"]["network"]),
                         ("bound", self.chain.token.lower(), X.NETWORK), b)
        self.assertIsNone(b["asset"]["decimals"], "no --chain-rpc: decimals unknown")
        # A gateway pricing in another token: refused without any spend-control flag.
        before = self.snapshot(self.other_asset)
        run = self.x402(self.other_asset.url("/"), 2)
        self.assertRefused(run, "budget_asset_mismatch", before, self.other_asset,
                           "the budget file's asset: %s on %s" % (self.chain.token, X.NETWORK))
        # The budget's own asset still pays the same step.
        self.assertPaid(self.x402(self.gw.url("/"), 2), PRICE)
        self.assertEqual(int(budget_json(self.db)["committed"]), 2 * PRICE)

    def test_the_wallet_path_is_held_to_the_maximum_amount(self):
        """The wallet pays the gateway's account, not payTo, so --payee does not apply; the price
        does: a dear route is refused before any hold is taken."""
        acct = self.devnet.create_account("guarded", deposit=3 * DEAR_PRICE)
        url = "http://127.0.0.1:%d/" % self.devnet.port
        account_before = self.devnet.account(acct)
        operations_before = len(self.devnet.admin_operations(limit=1000))
        run = run_pay(url, self.db, "--api-key", acct.api_key, "--budget", 10 * DEAR_PRICE,
                      "--task", "wallet", "--step", 1)
        self.assertEqual(run.rc, 2, run)
        self.assertEqual((run.out["outcome"], run.out["reason"]), ("refused", "amount_above_max"), run)
        self.assertEqual(self.devnet.account(acct), account_before, "no hold, no charge")
        self.assertEqual(len(self.devnet.admin_operations(limit=1000)), operations_before)
        self.assertEqual(budget_json(self.db)["reservations"], [])
        paid = run_pay(url, self.db, "--api-key", acct.api_key, "--task", "wallet", "--step", 1,
                       "--max-amount", DEAR_PRICE, "--payee", STRANGER.address)
        self.assertPaid(paid, DEAR_PRICE)
        self.assertEqual(int(self.devnet.account(acct)["captured"]), DEAR_PRICE)

    def devnet_rpc(self):
        return "http://127.0.0.1:%d/devnet/rpc" % self.devnet.port


if __name__ == "__main__":
    X.main(sys.argv)
