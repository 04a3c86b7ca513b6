#!/usr/bin/env python3
"""Issue 13, item 8: secrets and files, against real `agentpay serve`, `agentpay pay` and `agentpay admin`.

- A token or key file that group or others can read: the process refuses to start, naming the file,
  its mode and the fix (chmod 600 FILE), as ssh does.
- Every secret file the program creates (the demo's admin token and account/API-key file) and every
  database file (SQLite db, -wal, -shm, the devnet's file, the instance locks, the budget file of
  `agentpay pay`) is 0600; the demo's directory 0700.
- A symbolic link planted at a secret file's path is never followed: the demo refuses to start and
  the link's target is untouched.
- --demo refuses a non-loopback --listen or --admin-listen.
"""

import os
import stat
import subprocess
import sys
import tempfile
import shutil
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402

DEVNET_KEY = "0x" + "11" * 32


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def run(args, cwd=None, timeout=30):
    return subprocess.run([harness.binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


class ScratchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-sec-files-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def secret(self, name, content, file_mode):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content + "\n")
        os.chmod(path, file_mode)
        return path

    def assertRefusedFor(self, done, path, file_mode):
        self.assertNotEqual(done.returncode, 0, done.stdout + done.stderr)
        text = done.stderr + done.stdout
        self.assertIn(path, text)
        self.assertIn("mode %04o" % file_mode, text)
        self.assertIn("chmod 600 " + path, text)


class ReadableSecretFilesTest(ScratchTest):
    SERVE = ["serve", "--upstream", "http://127.0.0.1:9", "--price", "1"]

    def serve_args(self):
        return ["--listen", "127.0.0.1:%d" % harness.free_port(),
                "--admin-listen", "127.0.0.1:%d" % harness.free_port(),
                "--db", "sqlite:%s/g.db" % self.dir]

    def test_serve_refuses_an_admin_token_file_others_can_read(self):
        for file_mode in (0o644, 0o640, 0o604, 0o660, 0o620, 0o666):
            path = self.secret("admin-token", "adm_secret", file_mode)
            done = run(self.SERVE + self.serve_args() + ["--admin-token-file", path])
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertRefusedFor(done, path, file_mode)
            self.assertIn("--admin-token-file", done.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.dir, "g.db")), "refused before anything is made")

    def test_serve_refuses_a_relayer_key_file_others_can_read(self):
        path = self.secret("relayer-key", DEVNET_KEY, 0o644)
        done = run(["serve", "--upstream", "http://127.0.0.1:9", "--price", "1"] + self.serve_args() +
                   ["--chain-rpc", "http://127.0.0.1:9", "--chain-id", "84532",
                    "--asset", "0x" + "ab" * 20, "--asset-name", "USDC", "--asset-version", "2",
                    "--pay-to", "0x" + "cd" * 20, "--relayer-key-file", path])
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertRefusedFor(done, path, 0o644)
        self.assertIn("--relayer-key-file", done.stderr)

    def test_pay_refuses_a_buyer_key_or_api_key_file_others_can_read(self):
        for flag in ("--buyer-key-file", "--api-key-file"):
            path = self.secret("k" + flag, DEVNET_KEY if "buyer" in flag else "ak_x", 0o644)
            done = run(["pay", "http://127.0.0.1:9/x", flag, path, "--budget-db",
                        os.path.join(self.dir, "budget.db"), "--budget", "100"])
            self.assertRefusedFor(done, path, 0o644)
            self.assertFalse(os.path.exists(os.path.join(self.dir, "budget.db")))

    def test_admin_refuses_a_token_file_others_can_read(self):
        path = self.secret("token", "adm_x", 0o644)
        done = run(["admin", "--url", "http://127.0.0.1:9", "--token-file", path, "alerts"])
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertRefusedFor(done, path, 0o644)

    def test_a_private_file_is_accepted(self):
        gw_dir = self.dir
        seller = harness.Seller(gw_dir)
        self.addCleanup(seller.kill9)
        seller.start()
        gw = harness.Gateway(gw_dir, seller.url)  # its token file is written 0600
        self.addCleanup(gw.stop)
        gw.start()
        self.assertEqual(mode(gw.token_file), 0o600)
        self.assertEqual(gw.admin("GET", "/admin/v1/alerts").status, 200)
        # The database files are the owner's only, although this test's umask may be looser.
        gw.create_account("a", deposit=10)
        for suffix in ("", "-wal", "-shm"):
            path = gw.db_path + suffix
            self.assertTrue(os.path.exists(path), path)
            self.assertEqual(mode(path), 0o600, path)
        locks = os.path.join(gw.db_path + ".instances")
        for name in os.listdir(locks):
            self.assertEqual(mode(os.path.join(locks, name)), 0o600, name)
        self.assertEqual(mode(locks), 0o700)

    def test_an_existing_database_readable_by_others_is_narrowed(self):
        seller = harness.Seller(self.dir)
        self.addCleanup(seller.kill9)
        seller.start()
        gw = harness.Gateway(self.dir, seller.url)
        gw.start()
        gw.stop()
        os.chmod(gw.db_path, 0o644)
        self.addCleanup(gw.stop)
        gw.restart_after_crash()
        self.assertEqual(mode(gw.db_path), 0o600)


class DemoFilesTest(ScratchTest):
    def start_demo(self, *extra):
        return harness.DemoServer(self.dir, extra_args=extra)

    def test_demo_files_are_private(self):
        old = os.umask(0o022)  # a usual login umask: the files must not depend on it
        try:
            demo = self.start_demo()
        finally:
            os.umask(old)
        self.addCleanup(demo.stop)
        data = os.path.join(self.dir, "agentpay-data")
        self.assertEqual(mode(data), 0o700)
        for name in ("admin-token", "demo-account.json", "agentpay.db", "agentpay.db-wal", "agentpay.db-shm",
                     "agentpay.db.devnet"):
            path = os.path.join(data, name)
            self.assertTrue(os.path.isfile(path), name)
            self.assertEqual(mode(path), 0o600, name)
        # The budget file of `agentpay pay`, and the files SQLite keeps beside it.
        key = os.path.join(self.dir, "buyer.key")
        harness.write_secret(key, demo.buyer_key + "\n")
        budget = os.path.join(self.dir, "budget.db")
        done = run(["pay", demo.base + "/hello", "--buyer-key-file", key, "--budget-db", budget, "--budget",
                    "100000", "--task", "t", "--step", "1"], timeout=60)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(budget + suffix):
                self.assertEqual(mode(budget + suffix), 0o600, budget + suffix)

    def plant_link(self, name):
        data = os.path.join(self.dir, "agentpay-data")
        os.makedirs(data, mode=0o700, exist_ok=True)
        victim = os.path.join(self.dir, "victim")
        with open(victim, "w") as f:
            f.write("the attacker's file\n")
        os.chmod(victim, 0o600)
        os.symlink(victim, os.path.join(data, name))
        return victim

    def test_a_link_planted_at_the_demo_admin_token_is_not_followed(self):
        victim = self.plant_link("admin-token")
        done = run(["serve", "--demo", "--listen", "127.0.0.1:%d" % harness.free_port(),
                    "--admin-listen", "127.0.0.1:%d" % harness.free_port()], cwd=self.dir)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("admin-token is a symbolic link", done.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "the attacker's file\n")

    def test_a_link_planted_at_the_demo_account_file_is_not_followed(self):
        victim = self.plant_link("demo-account.json")
        done = run(["serve", "--demo", "--listen", "127.0.0.1:%d" % harness.free_port(),
                    "--admin-listen", "127.0.0.1:%d" % harness.free_port()], cwd=self.dir)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("demo-account.json is a symbolic link", done.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "the attacker's file\n")

    def test_demo_refuses_a_non_loopback_address(self):
        port = harness.free_port()
        sellers = os.path.join(self.dir, "sellers")
        harness.write_secret(sellers, "shop %s 0x5e11e50000000000000000000000000000000001\n" % ("k" * 40))
        for args, flag in ((["--listen", "0.0.0.0:%d" % port], "--listen 0.0.0.0"),
                           (["--listen", "127.0.0.1:%d" % port, "--admin-listen", "0.0.0.0:%d" % port],
                            "--admin-listen 0.0.0.0"),
                           (["--listen", "127.0.0.1:%d" % port, "--facilitator-listen", "0.0.0.0:%d" % port,
                             "--facilitator-sellers-file", sellers], "--facilitator-listen 0.0.0.0"),
                           (["--listen", "[::]:%d" % port], "--listen [::]")):
            done = run(["serve", "--demo", *args], cwd=self.dir)
            self.assertEqual(done.returncode, 2, (args, done.stdout, done.stderr))
            self.assertIn("--demo serves only loopback: " + flag, done.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.dir, "agentpay-data")), "nothing made")


if __name__ == "__main__":
    harness.main(sys.argv)
