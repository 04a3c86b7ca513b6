#!/usr/bin/env python3
"""`agentpay serve --demo` pays x402 on the built-in devnet: the official v2 client pays with the
printed demo buyer key; the devnet admin controls (/admin/v1/devnet) hold a settlement back so the
gateway answers 202 settlement_unknown, and the reconciler settles it once a block is mined; after
a restart on the same directory the devnet's balances and the operations are still there.
The devnet's JSON-RPC endpoint (/devnet/rpc) answers viem's public client, and `agentpay pay
reconcile --chain-rpc` settles or releases, through it, what `agentpay pay` left unknown; `agentpay
admin` drives the devnet controls, names the URL it could not reach and says when a call replayed.

usage: test_demo_devnet.py [--agentpay PATH] [unittest args]"""
import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

AGENTPAY = os.path.join(HERE, "..", "..", "build", "agentpay")
CHAIN_ENV = os.path.join(HERE, "..", "chain_env")
CLIENT = os.path.join(CHAIN_ENV, "x402_client.mjs")
DEMO_PRICE = 10000
DEMO_FUNDING = 10_000_000


class Demo(harness.DemoServer):
    """The demo, with what these tests do to it over HTTP and with the official x402 client."""

    def admin_request(self, method, path, body=None, headers=None):
        """A request to the admin listener (--admin-listen): the admin API and devnet controls."""
        return self.request(method, path, body, headers, base=self.admin_base)

    def request(self, method, path, body=None, headers=None, base=None):
        if body is None:
            data = None
        else:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request((base or self.base) + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode()

    def devnet(self, body=None):
        auth = {"Authorization": "Bearer " + self.admin_token, "Content-Type": "application/json"}
        status, _, text = self.admin_request("POST" if body else "GET", "/admin/v1/devnet", body, auth)
        if status != 200:
            raise AssertionError("devnet admin: %d %s" % (status, text))
        return json.loads(text)

    def pay(self, extra_args=()):
        out = subprocess.run(["node", CLIENT, "--version", "2", "--url", self.base + "/hello",
                              "--private-key", self.buyer_key, "--network", self.network,
                              "--asset", self.asset, "--method", "POST", "--body", '{"q":1}',
                              "--header", "Content-Type: application/json", *extra_args],
                             capture_output=True, text=True, timeout=60)
        self_result = json.loads(out.stdout)
        if "error" in self_result:
            raise AssertionError("client got no answer: %s" % self_result)
        return self_result

    def operation(self, op_id):
        status, _, text = self.request("GET", "/v1/operations/" + op_id,
                                       headers={"Authorization": "Bearer " + self.admin_token})
        if status != 200:
            raise AssertionError("operation %s: %d %s" % (op_id, status, text))
        return json.loads(text)

    def resend(self, header_value, key):
        """The client's very bytes again, with the key it paid with (docs/protocol.md 5a)."""
        return self.request("POST", "/hello", '{"q":1}',
                            {"PAYMENT-SIGNATURE": header_value, "Content-Type": "application/json",
                             "Idempotency-Key": key})


def settled_count(demo_dir):
    """Operations settled in the demo's database (read-only)."""
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(demo_dir, "agentpay-data", "agentpay.db"),
                         uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM operations WHERE settlement = 'settled'").fetchone()[0]
    finally:
        db.close()


class DemoDevnetTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-demo-")
        self.demo = Demo(self.dir)

    def tearDown(self):
        self.demo.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_official_client_pays_then_unknown_then_reconciled_then_restart(self):
        demo = self.demo
        paid = demo.pay()
        self.assertEqual(paid["status"], 200, paid)
        self.assertTrue(paid["payment_response"]["success"], paid)
        self.assertEqual(paid["attempts"], 2, "one 402, one paid request")

        # Hold settlements back: the gateway waits --receipt-timeout-ms (5 s), then answers 202.
        demo.devnet({"automine": False})
        # A key of 128 random bits: with the identical authorization it proves the payer even once
        # the transaction is public (a guessable key would get 409 there, threat model T25).
        key = "held-" + secrets.token_hex(16)
        held = demo.pay(["--header", "Idempotency-Key: " + key])
        self.assertEqual(held["status"], 202, held)
        self.assertEqual(json.loads(held["body"])["code"], "settlement_unknown")
        self.assertEqual(held["attempts"], 2, "the client must not sign a second authorization")
        op_id = held["headers"]["agentpay-operation-id"]
        self.assertEqual(held["headers"]["location"], "/v1/operations/" + op_id)
        self.assertEqual(demo.operation(op_id)["settlement"], "unknown")
        # Resending the same signature while unknown: 202 again, nothing new submitted.
        status, _, body = demo.resend(held["payment_header"], key)
        self.assertEqual(status, 202, body)

        before = demo.devnet()["block_number"]
        mined = demo.devnet({"mine": True, "automine": True})
        self.assertGreater(mined["block_number"], before)
        deadline = time.monotonic() + 10
        while demo.operation(op_id)["settlement"] != "settled":
            self.assertLess(time.monotonic(), deadline, "the reconciler did not settle it")
            time.sleep(0.2)
        status, headers, body = demo.resend(held["payment_header"], key)
        self.assertEqual(status, 200, body)
        response = json.loads(base64.b64decode(headers["PAYMENT-RESPONSE"]))
        self.assertTrue(response["success"])
        self.assertEqual(response["transaction"], demo.operation(op_id)["tx_hash"])
        self.assertEqual(settled_count(self.dir), 2)

        # Restart on the same directory: the devnet kept the buyer's spending, the store the ops.
        demo.stop()
        self.demo = demo = Demo(self.dir)
        self.assertEqual(demo.operation(op_id)["settlement"], "settled")
        again = demo.pay()
        self.assertEqual(again["status"], 200, again)
        self.assertEqual(settled_count(self.dir), 3)
        self.assertIn("balance %d atomic units" % DEMO_FUNDING, demo.banner)

    def test_devnet_admin_needs_the_admin_token_and_checks_its_input(self):
        status, _, _ = self.demo.admin_request("GET", "/admin/v1/devnet")
        self.assertEqual(status, 401)
        auth = {"Authorization": "Bearer " + self.demo.admin_token}
        for body in ({"mine_delay_ms": -1}, {"automine": "yes"}, {"drop": "0x12"}):
            status, _, text = self.demo.admin_request("POST", "/admin/v1/devnet", body, auth)
            self.assertEqual(status, 400, (body, text))
        status, _, text = self.demo.admin_request("POST", "/admin/v1/devnet", {"drop": "0x" + "ab" * 32}, auth)
        self.assertEqual(status, 200, text)
        self.assertIn("nothing dropped", text)



def rpc(url, method, params=()):
    """One JSON-RPC call; returns the whole answer object."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read().decode())


def token_balance(demo, owner):
    """balanceOf(owner) of the demo token, read through the devnet's JSON-RPC endpoint."""
    data = "0x70a08231" + "0" * 24 + owner[2:].lower()
    answer = rpc(demo.rpc_url, "eth_call", [{"to": demo.asset, "data": data}, "latest"])
    return int(answer["result"], 16)


VIEM_READS = r"""
import { createPublicClient, http, erc20Abi, parseAbiItem } from "viem";
const [url, asset, owner, tx] = process.argv.slice(1);
const client = createPublicClient({ transport: http(url) });
const out = {
  chainId: await client.getChainId(),
  balance: (await client.readContract({ address: asset, abi: erc20Abi, functionName: "balanceOf",
                                        args: [owner] })).toString(),
  blockNumber: (await client.getBlockNumber()).toString(),
  blockTimestamp: (await client.getBlock()).timestamp.toString(),
};
if (tx) {
  const receipt = await client.getTransactionReceipt({ hash: tx });
  out.receiptStatus = receipt.status;
  out.receiptLogs = receipt.logs.length;
  const transfers = await client.getLogs({
    address: asset, fromBlock: 0n, toBlock: "latest",
    event: parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)"),
    args: { from: owner } });
  out.transfers = transfers.map((log) => ({ tx: log.transactionHash, value: log.args.value.toString() }));
}
console.log(JSON.stringify(out));
"""


def viem_reads(demo, tx=None):
    argv = ["node", "--input-type=module", "-e", VIEM_READS, demo.rpc_url, demo.asset, demo.buyer]
    done = subprocess.run(argv + ([tx] if tx else []), cwd=CHAIN_ENV, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise AssertionError("viem failed: %s %s" % (done.stdout, done.stderr))
    return json.loads(done.stdout)


class DevnetRpcTest(unittest.TestCase):
    """viem's public client reads the demo chain from /devnet/rpc, and it agrees with the gateway."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-demo-rpc-")
        self.demo = Demo(self.dir)

    def tearDown(self):
        self.demo.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_viem_reads_chain_id_balance_receipt_and_logs(self):
        demo = self.demo
        self.assertEqual(demo.rpc_url, demo.base + "/devnet/rpc")
        first_block = demo.devnet()["block_number"]
        before = viem_reads(demo)
        self.assertEqual("eip155:%d" % before["chainId"], demo.network)
        self.assertIn("balance %d atomic units" % DEMO_FUNDING, demo.banner)
        self.assertEqual(int(before["balance"]), DEMO_FUNDING)
        # An idle devnet stamps an empty block every 2 s: the number viem saw lies between the two.
        self.assertLessEqual(first_block, int(before["blockNumber"]))
        self.assertLessEqual(int(before["blockNumber"]), demo.devnet()["block_number"])

        paid = demo.pay()
        self.assertEqual(paid["status"], 200, paid)
        tx = paid["payment_response"]["transaction"]
        after = viem_reads(demo, tx)
        self.assertEqual(int(after["balance"]), DEMO_FUNDING - DEMO_PRICE)
        self.assertEqual(after["receiptStatus"], "success")
        self.assertEqual(after["receiptLogs"], 2)  # AuthorizationUsed, Transfer
        self.assertEqual(after["transfers"], [{"tx": tx, "value": str(DEMO_PRICE)}])
        op_id = paid["headers"]["agentpay-operation-id"]
        self.assertEqual(demo.operation(op_id)["tx_hash"], tx)

    def test_endpoint_is_public_read_only_and_speaks_json_rpc_errors(self):
        demo = self.demo
        self.assertEqual(rpc(demo.rpc_url, "eth_chainId")["result"], hex(int(demo.network.split(":")[1])))
        sent = rpc(demo.rpc_url, "eth_sendRawTransaction", ["0x02"])
        self.assertEqual(sent["error"]["code"], -32004, sent)
        unknown = rpc(demo.rpc_url, "eth_nope")
        self.assertEqual(unknown["error"]["code"], -32601, unknown)
        self.assertIn("eth_nope", unknown["error"]["message"])
        status, _, text = demo.request("POST", "/devnet/rpc", "{not json")
        self.assertEqual((status, json.loads(text)["error"]["code"]), (200, -32700), text)
        status, _, _ = demo.request("GET", "/devnet/rpc")
        self.assertEqual(status, 405)
        status, _, text = demo.request("POST", "/devnet/rpc", " " * (128 * 1024 + 1))
        self.assertEqual(status, 413, text)


def reconcile_buffer_flag():
    """`pay reconcile`'s expiry-buffer option under the name this binary has (it is being renamed)."""
    out = subprocess.run([AGENTPAY, "pay", "reconcile", "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    return "--expiry-buffer-seconds" if "--expiry-buffer-seconds" in out else "--expiry-buffer-s"


class PayReconcileOnDevnetTest(unittest.TestCase):
    """`agentpay pay` leaves a payment held back on the devnet unknown (exit 3); `pay reconcile
    --chain-rpc <devnet>` then marks it spent once mined, or releases it once expired and unused."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="agentpay-demo-reconcile-")
        # validBefore = signing + 20 s: `pay` gives up 7 s after it starts, which leaves the test
        # about 13 s to see reconcile keep the reservation and mine before validBefore + the 1 s
        # buffer (5 s were too few once ctest -j4 shared a busy machine: mined after validBefore).
        self.demo = Demo(self.dir, ["--max-timeout-seconds", "20"])
        self.key_file = os.path.join(self.dir, "buyer-key")
        harness.write_secret(self.key_file, self.demo.buyer_key + "\n")
        self.budget_db = os.path.join(self.dir, "budget.db")

    def tearDown(self):
        self.demo.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def admin(self, *args):
        done = subprocess.run([AGENTPAY, "admin", "--url", self.demo.admin_base, "--token-file",
                               self.demo.token_file, *args], capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, (args, done.stdout, done.stderr))
        return json.loads(done.stdout)

    def pay_held_back(self):
        """One x402 payment by `agentpay pay` while the devnet mines nothing: exit 3, state kept."""
        self.assertFalse(self.admin("devnet", "automine", "off")["automine"])
        done = subprocess.run([AGENTPAY, "pay", self.demo.base + "/hello", "--buyer-key-file", self.key_file,
                               "--budget-db", self.budget_db, "--budget", "1000000", "--task", "t",
                               "--step", "1", "--timeout-ms", "7000", "--json"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 3, (done.stdout, done.stderr))
        self.assertEqual(self.reservation()["state"], "unknown")
        ops = self.admin("operations", "--settlement", "unknown")["operations"]
        self.assertEqual(len(ops), 1, ops)
        status, _, text = self.demo.request("GET", "/v1/operations/" + ops[0]["id"],
                                            headers={"Authorization": "Bearer " + self.demo.admin_token})
        self.assertEqual(status, 200, text)
        op = json.loads(text)
        self.assertEqual(op["settlement"], "unknown", op)
        self.assertRegex(op.get("tx_hash", ""), "^0x[0-9a-f]{64}$", op)
        return op

    def reservation(self):
        done = subprocess.run([AGENTPAY, "pay", "budget", "--budget-db", self.budget_db, "--json"],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = json.loads(done.stdout)["reservations"]
        self.assertEqual(len(rows), 1, rows)
        return rows[0]

    def reconcile(self, still_open):
        """`pay reconcile` through the devnet's RPC; exit 0 when nothing is left open, else 3."""
        done = subprocess.run([AGENTPAY, "pay", "reconcile", "--budget-db", self.budget_db, "--chain-rpc",
                               self.demo.rpc_url, reconcile_buffer_flag(), "1", "--json"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 3 if still_open else 0, (done.stdout, done.stderr))
        return json.loads(done.stdout)

    def test_mined_payment_is_reconciled_as_spent_and_charged_once(self):
        op = self.pay_held_back()
        self.assertEqual(token_balance(self.demo, self.demo.buyer), DEMO_FUNDING)
        kept = self.reconcile(still_open=True)  # not mined, not expired: nothing can be decided
        self.assertIn("not expired yet", kept["kept"][0]["why"], kept)
        self.assertEqual(self.reservation()["state"], "unknown", kept)

        mined = self.admin("devnet", "mine")
        self.assertEqual(mined["pending_transactions"], 0, mined)
        report = self.reconcile(still_open=False)
        self.assertEqual([(c["from"], c["to"]) for c in report["changes"]], [("unknown", "spent")], report)
        self.assertIn(op["tx_hash"], report["changes"][0]["why"], report)
        self.assertEqual(self.reservation()["state"], "spent", report)
        self.assertEqual(token_balance(self.demo, self.demo.buyer), DEMO_FUNDING - DEMO_PRICE)
        receipt = rpc(self.demo.rpc_url, "eth_getTransactionReceipt", [op["tx_hash"]])["result"]
        self.assertEqual(receipt["status"], "0x1")
        self.assertEqual(self.reconcile(still_open=False)["changes"], [])  # again: nothing changes
        self.assertEqual(self.reservation()["state"], "spent")
        self.assertEqual(token_balance(self.demo, self.demo.buyer), DEMO_FUNDING - DEMO_PRICE)
        self.assertEqual(token_balance(self.demo, self.demo.pay_to), DEMO_PRICE)
        deadline = time.monotonic() + 10  # the gateway's own reconciler sees the same receipt
        while self.demo.operation(op["id"])["settlement"] != "settled":
            self.assertLess(time.monotonic(), deadline, "the gateway did not settle it")
            time.sleep(0.2)

    def test_dropped_payment_is_released_only_after_expiry(self):
        op = self.pay_held_back()
        # Dropped and a block mined in one control request (the devnet runs drop before mine): as
        # two commands, the gateway's reconciler could re-send the transaction in between, and the
        # block would then settle it. Chain time moves on; the payment is not in the block.
        dropped = self.demo.devnet({"drop": op["tx_hash"], "mine": True})
        self.assertEqual(dropped["done"][0], "dropped", dropped)
        self.reconcile(still_open=True)
        self.assertEqual(self.reservation()["state"], "unknown", "released before validBefore + buffer")

        valid_before = int(self.reservation()["valid_before_s"])
        while time.time() < valid_before + 2:
            time.sleep(0.25)
        # The gateway may have re-broadcast the same transaction meanwhile: drop it again; mined
        # now it would revert as expired anyway.
        block = self.demo.devnet({"drop": op["tx_hash"], "mine": True})
        self.assertGreater(block["latest_block_timestamp"], valid_before + 1)
        report = self.reconcile(still_open=False)
        self.assertEqual([(c["from"], c["to"]) for c in report["changes"]], [("unknown", "released")], report)
        self.assertEqual(self.reservation()["state"], "released", report)
        self.assertEqual(token_balance(self.demo, self.demo.buyer), DEMO_FUNDING)
        self.assertEqual(token_balance(self.demo, self.demo.pay_to), 0)
        used = rpc(self.demo.rpc_url, "eth_call", [{"to": self.demo.asset, "data": authorization_state_call(
            self.demo.buyer, self.reservation()["nonce"])}, "latest"])["result"]
        self.assertEqual(int(used, 16), 0)


def authorization_state_call(payer, nonce):
    return "0xe94a0102" + "0" * 24 + payer[2:].lower() + nonce[2:]


class AdminCliTest(unittest.TestCase):
    """`agentpay admin`: the devnet subcommands, errors that name the URL and the token file,
    replays said as such, and create-account --env for `eval`."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="agentpay-demo-admin-")
        cls.demo = Demo(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.demo.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def cli(self, *args, url=None, token_file=None, cwd=None):
        argv = [AGENTPAY, "admin", "--url", url or self.demo.admin_base,
                "--token-file", token_file or self.demo.token_file, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=cwd)

    def test_devnet_subcommands(self):
        shown = self.cli("devnet")
        self.assertEqual(shown.returncode, 0, shown.stderr)
        state = json.loads(shown.stdout)
        # The devnet mines an empty block every 2 s: `show` is the same state, maybe one block on.
        self.assertIn(json.loads(self.cli("devnet", "show").stdout)["block_number"] - state["block_number"], (0, 1))
        self.assertEqual(json.loads(self.cli("devnet", "mine-delay", "250").stdout)["mine_delay_ms"], 250)
        self.assertFalse(json.loads(self.cli("devnet", "automine", "off").stdout)["automine"])
        mined = json.loads(self.cli("devnet", "mine").stdout)
        self.assertGreater(mined["block_number"], state["block_number"])
        self.assertEqual(mined["done"], ["mined block %d" % mined["block_number"]])
        self.assertTrue(json.loads(self.cli("devnet", "automine", "on").stdout)["automine"])
        bad = self.cli("devnet", "automine", "maybe")
        self.assertNotEqual(bad.returncode, 0)
        bad = self.cli("devnet", "drop", "0x12")
        self.assertEqual(bad.returncode, 1)
        self.assertIn("400 invalid_request", bad.stderr)
        self.assertIn("/admin/v1/devnet", bad.stderr)

    def test_devnet_controls_refuse_unknown_fields_and_strangers(self):
        auth = {"Authorization": "Bearer " + self.demo.admin_token, "Content-Type": "application/json"}
        status, _, text = self.demo.admin_request("POST", "/admin/v1/devnet", {"automine": False, "mine_dealy_ms": 5}, auth)
        self.assertEqual(status, 400, text)
        self.assertEqual(json.loads(text)["code"], "invalid_request")
        self.assertIn("mine_dealy_ms", json.loads(text)["detail"])
        self.assertTrue(self.demo.devnet()["automine"], "a refused body must change nothing")
        status, _, text = self.demo.admin_request("POST", "/admin/v1/devnet", "not json", auth)
        self.assertEqual((status, json.loads(text)["code"]), (400, "invalid_request"), text)
        status, _, _ = self.demo.admin_request("POST", "/admin/v1/devnet", {"mine": True},
                                         {"Authorization": "Bearer adm_not_the_token"})
        self.assertEqual(status, 401)

    def test_unreachable_gateway_is_named(self):
        port = harness.free_port()
        done = self.cli("create-account", "x", url="http://127.0.0.1:%d" % port)
        self.assertEqual(done.returncode, 1)
        self.assertIn("agentpay admin: cannot reach http://127.0.0.1:%d/admin/v1/accounts: connection refused"
                      % port, done.stderr)

    def test_missing_token_file_names_the_path_and_the_demo_file(self):
        empty = tempfile.mkdtemp(prefix="agentpay-admin-cwd-")
        try:
            done = subprocess.run([AGENTPAY, "admin", "--url", self.demo.admin_base, "devnet"],
                                  capture_output=True, text=True, timeout=30, cwd=empty)
        finally:
            shutil.rmtree(empty, ignore_errors=True)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("cannot read the admin token from ./agentpay-data/admin-token", done.stderr)
        self.assertIn("`agentpay serve --demo` writes one at ./agentpay-data/admin-token", done.stderr)
        done = self.cli("devnet", token_file=os.path.join(self.dir, "no-such-file"))
        self.assertEqual(done.returncode, 2)
        self.assertIn(os.path.join(self.dir, "no-such-file"), done.stderr)

    def test_create_account_env_evals_and_deposit_replay_is_said(self):
        script = ('eval "$(%s admin --url %s --token-file %s create-account "bob o\'neil" --env)" && '
                  'printf "%%s\\n%%s\\n" "$ACCOUNT_ID" "$API_KEY"') % (
                      AGENTPAY, self.demo.admin_base, self.demo.token_file)
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        account_id, api_key = done.stdout.split()
        self.assertTrue(account_id.startswith("acct_"), account_id)
        status, _, text = self.demo.request("GET", "/v1/account", headers={"Authorization": "Bearer " + api_key})
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["account_id"], account_id)

        first = self.cli("deposit", account_id, "5000", "--reference", "topup-1")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertNotIn("replayed", first.stderr)
        again = self.cli("deposit", account_id, "5000", "--reference", "topup-1")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("agentpay admin: replayed", again.stderr)
        self.assertEqual(json.loads(again.stdout)["deposited"], "5000")
        other = self.cli("deposit", account_id, "6000", "--reference", "topup-1")
        self.assertEqual(other.returncode, 1)
        self.assertIn("422 deposit_reference_mismatch", other.stderr)
        self.assertEqual(json.loads(self.cli("account", account_id).stdout)["deposited"], "5000")

    def test_create_account_env_prints_nothing_eval_could_run(self):
        """--env output goes to `eval`: an error answer, or an answer whose id or key is not a plain
        token (from a hostile gateway or whatever stands in between), prints nothing on stdout."""
        wrong = self.cli("create-account", "mallory", "--env",
                         token_file=self.write_token("adm_wrong_token"))
        self.assertEqual(wrong.returncode, 1)
        self.assertEqual(wrong.stdout, "")
        self.assertIn("401 unauthorized", wrong.stderr)
        for answer in ({"account_id": "acct_x\u0000", "api_key": "; touch pwned; #"},
                       {"account_id": "acct_1", "api_key": "ak_1'$(touch pwned)'"},
                       {"account_id": "acct_1"}):
            with FakeGateway(201, answer) as fake:
                done = self.cli("create-account", "bob", "--env", url=fake.url)
            self.assertEqual(done.returncode, 1, answer)
            self.assertEqual(done.stdout, "", answer)
            self.assertIn("nothing printed for the shell", done.stderr)
        with FakeGateway(400, {"code": "invalid_request", "detail": "$(touch pwned)"}) as fake:
            done = self.cli("create-account", "bob", "--env", url=fake.url)
        self.assertEqual((done.returncode, done.stdout), (1, ""))

    def test_arguments_that_are_not_ids_or_utf8_are_refused_before_sending(self):
        done = self.cli("account", "acct_1/../../accounts?x=1")
        self.assertEqual(done.returncode, 2)
        self.assertIn("ACCOUNT takes letters, digits, _ and - only", done.stderr)
        done = subprocess.run([AGENTPAY, "admin", "--url", self.demo.admin_base, "--token-file",
                               self.demo.token_file, "create-account", b"bad\xff"],
                              capture_output=True, timeout=30)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(b"not valid UTF-8", done.stderr)

    def write_token(self, token):
        path = os.path.join(self.dir, "other-token")
        harness.write_secret(path, token + "\n")  # 0600: agentpay admin refuses a looser token file
        return path


class FakeGateway:
    """A loopback HTTP server that answers every request with one fixed status and JSON body."""

    def __init__(self, status, body):
        import http.server
        import threading
        payload = json.dumps(body).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "--agentpay":
        AGENTPAY = os.path.abspath(args[1])
        args = args[2:]
    harness.set_binary(AGENTPAY)
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)
