#!/usr/bin/env python3
"""`agentpay pay` against a real `agentpay serve --demo` (the built-in devnet, chain 1337), and the
help texts of `pay`, `pay budget` and `pay reconcile`.

The demo's chain has no x402 v1 network name, so `pay --x402-version 1` must refuse before it reserves
or signs anything (exit 2, outcome "refused", the budget file and the gateway's books unchanged, no
paid request), while x402 v2, the default, pays. `--network` outside the offer is refused the same way.

Run:  python3 tests/integration/test_agent_client_demo.py --agentpay build/agentpay [unittest args]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

DEMO_PRICE = 10000
PAY_TIMEOUT_S = 60


def agentpay(*args, cwd=None, timeout=PAY_TIMEOUT_S):
    p = subprocess.run([harness.binary()] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, check=False, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


class PayAgainstTheDemoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="agentpay-pay-demo-")
        cls.demo = harness.DemoServer(cls.dir)
        cls.key_file = os.path.join(cls.dir, "buyer.key")
        harness.write_secret(cls.key_file, cls.demo.buyer_key + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.demo.stop()
        if not os.environ.get("AGENTPAY_IT_KEEP"):
            shutil.rmtree(cls.dir, ignore_errors=True)

    def pay(self, budget_db, step, *extra):
        rc, out, err = agentpay("pay", self.demo.base + "/hello", "--buyer-key-file", self.key_file,
                                "--budget-db", budget_db, "--budget", 100000, "--task", "demo",
                                "--step", step, "--json", *extra, cwd=self.dir)
        lines = out.strip().splitlines()
        self.assertTrue(lines and lines[-1].startswith("{"), (rc, out, err))
        return rc, json.loads(lines[-1]), err

    def budget(self, budget_db):
        rc, out, err = agentpay("pay", "budget", "--budget-db", budget_db, "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def file_bytes(self, budget_db):
        with open(budget_db, "rb") as f:
            return f.read()

    def test_v1_is_refused_before_anything_is_reserved_and_v2_pays(self):
        self.assertEqual(self.demo.network, "eip155:1337")
        budget_db = os.path.join(self.dir, "v1.db")
        rc, paid, err = self.pay(budget_db, 1)
        self.assertEqual(rc, 0, err)
        self.assertEqual(paid["outcome"], "paid", paid)
        self.assertEqual(paid["amount"], str(DEMO_PRICE))
        self.assertTrue(paid["evidence"]["transaction"].startswith("0x"), paid)
        before = self.budget(budget_db)
        self.assertEqual(before["committed"], str(DEMO_PRICE))
        raw_before = self.file_bytes(budget_db)
        operations_before = self.demo.count_operations()

        rc, refused, err = self.pay(budget_db, 2, "--x402-version", 1)
        self.assertEqual(rc, 2, (refused, err))
        self.assertEqual(refused["outcome"], "refused", refused)
        self.assertEqual(refused["reason"], "x402_version_not_usable", refused)
        self.assertEqual(refused["attempts"], 0)
        self.assertEqual(refused["reservation_state"], "")
        self.assertEqual(refused["evidence"]["nonce"], "", "nothing was signed")
        message = refused["message"]
        self.assertNotIn("\n", message)
        self.assertIn("x402 v2 on eip155:1337", message)
        self.assertIn("allowed: x402 v1", message)
        self.assertIn("x402 v1 has no network name for chain 1337", message)
        self.assertIn(message, err, "the same line on stderr")
        self.assertEqual(self.budget(budget_db), before, "the budget file is unchanged")
        self.assertEqual(self.file_bytes(budget_db), raw_before)
        self.assertEqual(self.demo.count_operations(), operations_before, "no paid request reached it")

        # The refused step left nothing behind: the same step pays with v2.
        rc, paid, err = self.pay(budget_db, 2, "--x402-version", 2)
        self.assertEqual(rc, 0, err)
        self.assertEqual(paid["outcome"], "paid", paid)
        self.assertEqual(self.budget(budget_db)["committed"], str(2 * DEMO_PRICE))

    def test_a_network_outside_the_allowance_is_refused(self):
        budget_db = os.path.join(self.dir, "network.db")
        operations_before = self.demo.count_operations()
        rc, refused, err = self.pay(budget_db, 1, "--network", "eip155:84532")
        self.assertEqual(rc, 2, (refused, err))
        self.assertEqual(refused["reason"], "network_not_allowed", refused)
        self.assertIn("network eip155:84532 (--network)", refused["message"])
        self.assertEqual(self.budget(budget_db)["reservations"], [])
        self.assertEqual(self.budget(budget_db)["committed"], "0")
        self.assertEqual(self.demo.count_operations(), operations_before)
        rc, paid, err = self.pay(budget_db, 1, "--network", "eip155:84532", "--network", "eip155:1337")
        self.assertEqual(rc, 0, err)
        self.assertEqual(paid["outcome"], "paid", paid)


class PayHelpTest(unittest.TestCase):
    """Each help shows only the flags that apply to it, and points at nothing a user does not have."""

    def help(self, *words):
        rc, out, err = agentpay(*words, "--help")
        self.assertEqual(rc, 0, err)
        return out

    def test_subcommand_help_shows_only_its_own_flags(self):
        parent_only = ("--buyer-key-file", "--api-key", "--x402-version", "--network", "--payee",
                       "--max-amount", "--task",
                       "--max-attempts", "--data", "url")
        budget = self.help("pay", "budget")
        reconcile = self.help("pay", "reconcile")
        for flag in parent_only:
            self.assertIsNone(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), budget),
                              "%s in `pay budget --help`:\n%s" % (flag, budget))
        for flag in parent_only:
            if flag == "--api-key":
                continue  # reconcile has its own: wallet operations are shown to their account only
            self.assertIsNone(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), reconcile),
                              "%s in `pay reconcile --help`:\n%s" % (flag, reconcile))
        for flag in ("--budget-db", "--json"):
            self.assertIn(flag, budget)
        for flag in ("--budget-db", "--chain-rpc", "--api-key", "--expiry-buffer-seconds", "--json"):
            self.assertIn(flag, reconcile)
        pay = self.help("pay")
        for flag in ("--buyer-key-file", "--x402-version", "--network", "--asset", "--payee",
                     "--max-amount", "budget", "reconcile"):
            self.assertIn(flag, pay)

    def test_one_spelling_per_flag(self):
        reconcile = self.help("pay", "reconcile")
        self.assertIsNone(re.search(r"--expiry-buffer-s(?![\w-])", reconcile), reconcile)
        rc, _, err = agentpay("pay", "reconcile", "--expiry-buffer-s", "30",
                              "--budget-db", os.path.join(tempfile.gettempdir(), "absent.db"))
        self.assertEqual(rc, 2, "the old spelling is a usage error: " + err)

    def test_help_points_at_nothing_users_lack(self):
        for words in (("pay",), ("pay", "budget"), ("pay", "reconcile")):
            text = self.help(*words)
            for word in ("CONTRACT", "MODEL", "NOTES", "DESIGN", "§", "issue"):
                self.assertNotIn(word, text, "%s in `%s --help`" % (word, " ".join(words)))

    def test_bad_spend_controls_are_usage_errors(self):
        for flag, value in (("--network", "mainnet-ish"), ("--asset", "0x12"), ("--payee", "0x12"),
                            ("--max-amount", "0"), ("--max-amount", "1.5")):
            rc, _, err = agentpay("pay", "http://127.0.0.1:9/x", "--buyer-key-file", "/nonexistent",
                                  flag, value)
            self.assertEqual(rc, 2, err)
            self.assertIn(flag, err)


if __name__ == "__main__":
    harness.main(sys.argv)
